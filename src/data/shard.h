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

// Opens a shard after validating magic, version and the file's size against the header. The
// file is kept open and read on demand (never memory-mapped), so a shard that someone
// truncates or rewrites in place while it is in use gives an error, not SIGBUS; one replaced
// by rename (as shard_write does) keeps being read from the version that was opened.
wgt_status shard_open(shard **out, const char *path);
size_t shard_count(const shard *s);
const char *shard_path(const shard *s);
// Copies tokens [off, off + n) into dst; fails, naming the shard, if the file no longer holds them.
wgt_status shard_read(const shard *s, size_t off, size_t n, uint16_t *dst);
// Reads the whole shard once: *crc gets the CRC-32 (zlib) of the whole file, header included;
// *max_id the largest token id (0 for an empty shard); counts (65536 entries, may be NULL) is
// incremented for every token.
wgt_status shard_scan(const shard *s, uint32_t *crc, unsigned *max_id, uint64_t *counts);
void shard_close(shard *s);

// The CRC-32 of the file shard_write(path, toks, n) writes, computed in memory.
uint32_t shard_file_crc(const uint16_t *toks, size_t n);

// Reads a whole shard (validated as shard_open does) into a malloc'd array (free() it).
wgt_status shard_read_all(const char *path, uint16_t **toks, size_t *n);

// Fails, naming the first offending id and its position, if any token is >= vocab.
// `path` only names the data in the message (may be NULL).
wgt_status shard_check_vocab(const uint16_t *toks, size_t n, int vocab, const char *path);

// Entropy in nats/token of the tokens' unigram distribution (0 for n == 0): the loss a model
// that ignores context would reach, printed beside the training loss for comparison.
double shard_unigram_entropy(const uint16_t *toks, size_t n);
#endif
