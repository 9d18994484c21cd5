// data_meta.h — the one reader of a data directory's meta.json (written by `wgtrain prepare`,
// format in docs/tokenizer-format.md): the tokenizer's kind, files and fingerprint, the
// vocabulary, and the shard lists with their token counts and CRC-32s. Both the trainer's data
// loader (train/dataset.c) and the tokenizer lookup (text_tokenizer_open_dir) read it here, with
// one set of rules: strict JSON, version PREPARE_META_VERSION, every number range-checked.
#ifndef WGT_DATA_META_H
#define WGT_DATA_META_H
#include <stddef.h>
#include <stdint.h>
#include "core/error.h"
#include "data/text_tokenizer.h"

typedef struct {
    char *file;      // a plain file name in the directory
    int64_t tokens;  // 0..SHARD_MAX_TOKENS
    uint32_t crc32;
} data_meta_shard;

typedef struct data_meta {
    const text_tok_kind *kind;               // the tokenizer's kind ("tokenizer_kind"; absent: wgtrain-bpe)
    char *tok_files[TEXT_TOK_MAX_FILES];     // its files, plain names, one per kind->files entry
    uint64_t tok_fp;                         // "tokenizer_fnv1a64"
    int vocab;                               // 2..TOKEN_MAX_VOCAB
    int eot;                                 // 0..vocab-1
    double entropy;                          // nats/token of the train tokens, 0..log(vocab)
    int64_t train_tokens, val_tokens;
    data_meta_shard *train, *val;
    size_t n_train, n_val;
} data_meta;

// Reads and checks meta_path (dir's meta.json); on failure *m is left empty and the error
// names the file and the fix (re-run `wgtrain prepare`).
wgt_status data_meta_read(data_meta *m, const char *meta_path);
void data_meta_free(data_meta *m);
#endif
