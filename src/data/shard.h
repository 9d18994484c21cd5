// shard.h — token shards in llm.c's .bin formats, so that data prepared by llm.c's scripts
// trains here too: a header of 256 little-endian int32 ([0] magic, [1] version, [2] token
// count, the rest 0), then the tokens. Two formats: magic 20240520 version 1 with uint16
// tokens, written while the vocabulary fits 16 bits (<= 65536 ids), and magic 20240801
// version 7 with uint32 tokens (llm.c's format for larger vocabularies) beyond it. Readers give
// uint32 ids either way. Layout: docs/tokenizer-format.md.
//
// Instruction and chat data (`prepare` of JSONL) add one byte of flags per token after the
// tokens, under a version of its own (2 for 16-bit tokens, 8 for 32-bit; the token layout is
// unchanged, so only the version and the trailing bytes differ): SHARD_FLAG_TRAIN, the token is
// trained as a target (its prediction counts in the loss); SHARD_FLAG_START, it begins an
// example. A shard without flags reads as every token trained and no example starts.
#ifndef WGT_SHARD_H
#define WGT_SHARD_H
#include <stddef.h>
#include <stdint.h>
#include "core/error.h"
#include "core/token_id.h"

#define SHARD_MAGIC 20240520       // uint16 tokens
#define SHARD_VERSION 1
#define SHARD_MAGIC_U32 20240801   // uint32 tokens
#define SHARD_VERSION_U32 7
#define SHARD_VERSION_FLAGS 2      // uint16 tokens, then one flag byte a token
#define SHARD_VERSION_U32_FLAGS 8  // uint32 tokens, then one flag byte a token
#define SHARD_FLAG_TRAIN 1u
#define SHARD_FLAG_START 2u
#define SHARD_U16_MAX_VOCAB 65536  // the largest vocabulary written in the 16-bit format
#define SHARD_HEADER_INTS 256
#define SHARD_MAX_TOKENS 2147483647u  // the header's count is an int32

typedef struct shard shard;

// Bytes per token shard_write uses for a vocabulary: 2 up to SHARD_U16_MAX_VOCAB ids, else 4.
int shard_token_bytes(int vocab);

// Writes atomically (a temporary file in the same directory, fsync, then rename, so a crash
// never leaves a half-written shard under the final name), in the format the vocabulary
// (1..TOKEN_MAX_VOCAB) calls for. Every id must be < vocab: one that is not is an error naming
// it and its position, and nothing is written.
wgt_status shard_write(const char *path, const uint32_t *toks, size_t n, int vocab);
// The same with a flag byte per token (flags[i]: SHARD_FLAG_TRAIN | SHARD_FLAG_START; other bits
// refused), in the flagged versions.
wgt_status shard_write_flags(const char *path, const uint32_t *toks, const uint8_t *flags, size_t n, int vocab);
// The CRC-32 of that file, computed in memory.
uint32_t shard_file_crc_flags(const uint32_t *toks, const uint8_t *flags, size_t n, int vocab);

// Opens a shard of either format after validating magic, version and the file's size against
// the header. The file is kept open and read on demand (never memory-mapped), so a shard that
// someone truncates or rewrites in place while it is in use gives an error, not SIGBUS; one
// replaced by rename (as shard_write does) keeps being read from the version that was opened.
wgt_status shard_open(shard **out, const char *path);
size_t shard_count(const shard *s);
const char *shard_path(const shard *s);
int shard_bytes_per_token(const shard *s);  // 2 or 4
int shard_has_flags(const shard *s);        // 1 for the flagged versions
// Copies the flags of tokens [off, off + n) into dst (a shard without flags: SHARD_FLAG_TRAIN each).
wgt_status shard_read_flags(const shard *s, size_t off, size_t n, uint8_t *dst);
// Copies tokens [off, off + n) into dst as uint32; fails, naming the shard, if the file no
// longer holds them.
wgt_status shard_read(const shard *s, size_t off, size_t n, uint32_t *dst);
// Reads the whole shard once: *crc gets the CRC-32 (zlib) of the whole file, header included;
// *max_id the largest token id (0 for an empty shard). An id >= TOKEN_MAX_VOCAB (possible only
// in the 32-bit format) is an error naming the file, the token's position and byte offset.
// counts (may be NULL) is grown with realloc to max_id + 1 entries (*n_counts of them; new
// entries zero) and incremented for every token: sized by the data, never by 2^32.
wgt_status shard_scan(const shard *s, uint32_t *crc, uint32_t *max_id, uint64_t **counts, size_t *n_counts);
void shard_close(shard *s);

// The CRC-32 of the file shard_write(path, toks, n, vocab) writes, computed in memory.
uint32_t shard_file_crc(const uint32_t *toks, size_t n, int vocab);

// Reads a whole shard (validated as shard_open does) into a malloc'd array (free() it).
wgt_status shard_read_all(const char *path, uint32_t **toks, size_t *n);

// Fails, naming the first offending id and its position, if any token is >= vocab.
// `path` only names the data in the message (may be NULL).
wgt_status shard_check_vocab(const uint32_t *toks, size_t n, int vocab, const char *path);

// Entropy in nats/token of the tokens' unigram distribution (0 for n == 0): the loss a model
// that ignores context would reach, printed beside the training loss for comparison. Every id
// must be < vocab (the count array has vocab entries).
double shard_unigram_entropy(const uint32_t *toks, size_t n, int vocab);
// The same from counts[0..n_counts) of `total` tokens.
double shard_counts_entropy(const uint64_t *counts, size_t n_counts, size_t total);
#endif
