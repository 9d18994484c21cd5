// tokenizer.h — byte-level BPE: 256 byte tokens, then learned merges, then one end-of-text
// token at the last id. Byte-level means every byte string encodes (invalid UTF-8 and NUL
// included) and decode(encode(x)) == x always. File format: docs/tokenizer-format.md.
#ifndef WGT_TOKENIZER_H
#define WGT_TOKENIZER_H
#include <stddef.h>
#include <stdint.h>
#include "core/error.h"

#define TOKENIZER_MIN_VOCAB 257    // 256 byte tokens + <|endoftext|>
#define TOKENIZER_MAX_VOCAB 65535  // this format stores merges as uint16 pairs (docs/tokenizer-format.md)
#define TOKENIZER_EOT_TEXT "<|endoftext|>"

typedef struct tokenizer tokenizer;

// Learns merges on `text` until the vocabulary (bytes + merges + end-of-text) has vocab_size
// ids. A corpus too small to supply that many pairs seen at least twice stops early: check
// tokenizer_vocab_size() for the size actually reached.
wgt_status tokenizer_train(tokenizer **out, const uint8_t *text, size_t n, int vocab_size);
void tokenizer_free(tokenizer *tok);

int tokenizer_vocab_size(const tokenizer *tok);  // includes the end-of-text token
int tokenizer_eot(const tokenizer *tok);         // == vocab_size - 1

// Encodes bytes into a malloc'd id array (free() it). Never emits the end-of-text id: the text
// "<|endoftext|>" inside `bytes` is encoded as ordinary bytes; callers add separators.
wgt_status tokenizer_encode(const tokenizer *tok, const uint8_t *bytes, size_t n,
                            uint32_t **ids, size_t *n_ids);
// Decodes ids into a malloc'd byte array (free() it); the end-of-text id decodes to
// "<|endoftext|>". An id >= vocab size is an error.
wgt_status tokenizer_decode(const tokenizer *tok, const uint32_t *ids, size_t n,
                            uint8_t **bytes, size_t *n_bytes);
// The bytes of one token (not NUL-terminated), or NULL for an id out of range.
const uint8_t *tokenizer_token_bytes(const tokenizer *tok, int id, size_t *len);

wgt_status tokenizer_save(const tokenizer *tok, const char *path);
// 64-bit FNV-1a of the tokenizer's file image (what tokenizer_save writes): equal fingerprints
// mean the same merges, so a run can tell whether a data directory uses its tokenizer.
uint64_t tokenizer_fingerprint(const tokenizer *tok);
wgt_status tokenizer_load(tokenizer **out, const char *path);
#endif
