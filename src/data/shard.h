// shard.h — token shards in llm.c's .bin format, so that data prepared by llm.c's scripts
// trains here too: a header of 256 little-endian int32 ([0] magic 20240520, [1] version 1,
// [2] token count, the rest 0), then the tokens as uint16.
#ifndef WGT_SHARD_H
#define WGT_SHARD_H
#include <stddef.h>
#include <stdint.h>
#include "core/error.h"

#define SHARD_MAGIC 20240520
#define SHARD_VERSION 1
#define SHARD_HEADER_INTS 256
#define SHARD_MAX_TOKENS 2147483647u  // the header's count is an int32

typedef struct shard shard;

// Writes atomically: a temporary file in the same directory, fsync, then rename, so a crash
// never leaves a half-written shard under the final name.
wgt_status shard_write(const char *path, const uint16_t *toks, size_t n);

// Maps a shard read-only after validating magic, version and the size against the header;
// the tokens stay valid until shard_close.
wgt_status shard_open(shard **out, const char *path);
const uint16_t *shard_tokens(const shard *s);
size_t shard_count(const shard *s);
void shard_close(shard *s);

// Reads a whole shard (validated as shard_open does) into a malloc'd array (free() it).
wgt_status shard_read_all(const char *path, uint16_t **toks, size_t *n);

// Fails, naming the first offending id and its position, if any token is >= vocab.
// `path` only names the data in the message (may be NULL).
wgt_status shard_check_vocab(const uint16_t *toks, size_t n, int vocab, const char *path);

// Entropy in nats/token of the tokens' unigram distribution (0 for n == 0): the loss a model
// that ignores context would reach, printed beside the training loss for comparison.
double shard_unigram_entropy(const uint16_t *toks, size_t n);
#endif
