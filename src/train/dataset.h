// dataset.h — what the trainer reads from a data directory: the train and validation shards,
// the tokenizer's path and size, the unigram entropy; and the two ways batches are cut from
// the shards: random training windows whose order depends only on a saved RNG state, and a
// fixed, sequential set of validation windows so every measurement sees the same tokens.
#ifndef WGT_TRAIN_DATASET_H
#define WGT_TRAIN_DATASET_H
#include <stddef.h>
#include <stdint.h>
#include "core/error.h"
#include "data/text_tokenizer.h"

typedef struct dataset dataset;

// Opens DATA_DIR: with meta.json (written by `wgtrain prepare`) its shard lists, vocabulary
// and entropy, after checking every shard's size and CRC-32 and the tokenizer's fingerprint
// against the ones meta.json records (docs/files-and-safety.md); without it (llm.c's
// scripts), every *train*.bin and *val*.bin in the directory. A tokenizer.bin without
// meta.json is an interrupted `prepare` and is refused. Every shard is read once here; later
// reads go through the open files (no memory mapping), so a shard truncated meanwhile gives an
// error from the batch functions instead of a crash.
wgt_status dataset_open(dataset **out, const char *dir);
void dataset_free(dataset *ds);

// Replaces the validation shards with the one at path (`wgtrain eval --shard`).
wgt_status dataset_use_val_shard(dataset *ds, const char *path);

int dataset_vocab(const dataset *ds);               // 0 when the directory has no tokenizer
const text_tokenizer *dataset_tokenizer(const dataset *ds);  // either kind; NULL when there is none
// The tokenizer's fingerprint (tokenizer_fingerprint) as 16 hex digits; "" when there is none.
const char *dataset_tokenizer_hash(const dataset *ds);
// For a run recorded with tokenizer hash run_hash ("" when the run has none recorded: data
// without a tokenizer, or a run from an older wgtrain): fails if this data's tokenizer is
// another one, or if the run had a tokenizer and the data has none. `data_dir` and `what`
// ("the run", "the model") only word the message.
wgt_status dataset_check_tokenizer(const dataset *ds, const char *run_hash, const char *data_dir, const char *what);
double dataset_unigram_entropy(dataset *ds);        // nats/token of the train tokens
size_t dataset_train_tokens(const dataset *ds);
size_t dataset_val_tokens(const dataset *ds);

// Fails, naming the shard, the first token id >= vocab and its position, if any shard holds one.
// Once it passes, the batch functions refuse (naming shard and position) any id >= vocab they
// read, so a shard rewritten in place meanwhile cannot hand a kernel an id beyond the model's.
wgt_status dataset_check_vocab(dataset *ds, int vocab);
// Fails with a clear message if no training shard holds a window of T+1 tokens.
wgt_status dataset_check_seq(const dataset *ds, int T);

// B windows of T+1 consecutive training tokens at uniformly random positions (over all train
// shards), drawn with *rng: inputs [B*T] and next-token targets [B*T]. Fails only if a shard
// can no longer be read (truncated or removed while training) or holds an id beyond the
// vocabulary (dataset_check_vocab; before it, the data's).
wgt_status dataset_train_batch(const dataset *ds, uint64_t *rng, int B, int T, int32_t *inputs, int32_t *targets);
// The part [first, first + B) of a batch of `total` windows: *rng advances over all `total`
// draws, but only the part is read, so that the ranks of a data-parallel run share one data
// stream (a 2-rank batch of 4 per rank is the 1-process batch of 8, cut in two).
//
// Packed data (dataset_packed: shards with loss flags, `prepare` of JSONL): each window is instead
// a row of whole examples, drawn as the example it starts with (uniformly over the examples), then
// the examples after it while they fit, then padding (ignored targets); an example longer than
// T + 1 tokens fills a row alone, cut. Targets are ignored where the next token is not trained or
// belongs to the next example. doc_start (may be NULL) receives, per position, the first position
// of its example: the attention mask and the positions restart there (docs/instruction-data.md).
wgt_status dataset_train_batch_part(const dataset *ds, uint64_t *rng, int total, int first, int B, int T,
                                    int32_t *inputs, int32_t *targets, uint32_t *doc_start);
int dataset_packed(const dataset *ds);
// Packed data: the training examples longer than T + 1 tokens (trained on their first T + 1 only);
// *n_examples (may be NULL) all of them. 0 for plain data.
size_t dataset_examples_longer(const dataset *ds, int T, size_t *n_examples);

// Validation windows: the val shards cut in order into windows of T+1 tokens overlapping by
// one; the last window of a shard is padded (ignored targets). Batch b holds windows
// b*B .. b*B+B-1 (rows past the end are all ignored). *valid receives the number of real
// targets. Packed data: rows of whole examples in order, packed as the training rows are;
// doc_start (may be NULL) as there (all 0 for plain data).
size_t dataset_val_windows(const dataset *ds, int T);
wgt_status dataset_val_batch(const dataset *ds, size_t b, int B, int T, int32_t *inputs, int32_t *targets,
                             uint32_t *doc_start, size_t *valid);
#endif
