// run_tokenizer.h — the tokenizer a run was trained with, found and checked: the copy in the
// run directory, else the one of its data directory, whichever carries the fingerprint recorded
// in the run's configuration. A tokenizer of the right vocabulary size but another fingerprint
// (a replaced tokenizer.bin) would turn the model's ids into other text without any error, so it
// is refused by name.
#ifndef WGT_RUN_TOKENIZER_H
#define WGT_RUN_TOKENIZER_H
#include "core/error.h"
#include "data/text_tokenizer.h"
#include "train/checkpoint.h"

// *tok: the run's tokenizer (free with text_tokenizer_free), or NULL when neither directory
// holds one. Fails when one is found but none matches the recorded fingerprint (runs that
// recorded none take the first found).
wgt_status run_tokenizer_open(text_tokenizer **tok, const checkpoint *ck, const char *run_dir);
#endif
