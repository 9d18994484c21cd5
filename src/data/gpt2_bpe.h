// gpt2_bpe.h — GPT-2's tokenizer, exactly: byte-level BPE read from GPT-2's own encoder.json
// and vocab.bpe, with GPT-2's pre-tokenization, giving the ids of tiktoken's "gpt2" encoding
// (encode_ordinary) for every text. Behaviour, including invalid UTF-8: docs/tokenizer-format.md.
#ifndef WGT_GPT2_BPE_H
#define WGT_GPT2_BPE_H
#include <stddef.h>
#include <stdint.h>
#include "core/error.h"

#define GPT2_VOCAB 50257       // 256 byte tokens + 50000 merges + <|endoftext|>
#define GPT2_EOT 50256         // <|endoftext|>
#define GPT2_ENCODER_FILE "encoder.json"
#define GPT2_MERGES_FILE "vocab.bpe"

typedef struct gpt2_bpe gpt2_bpe;

// Reads and checks the two files: 50257 entries with ids 0..50256 once each, every byte's
// token present with GPT-2's id, <|endoftext|> = 50256, and vocab.bpe's 50000 merges, merge i
// making token 256 + i (the check tiktoken makes). Errors name the file and the entry or line.
wgt_status gpt2_bpe_load(gpt2_bpe **out, const char *encoder_json, const char *vocab_bpe);
// The same from DIR/encoder.json and DIR/vocab.bpe.
wgt_status gpt2_bpe_load_dir(gpt2_bpe **out, const char *dir);
void gpt2_bpe_free(gpt2_bpe *g);

// Encodes bytes (any bytes: invalid UTF-8 included) into a malloc'd id array (free() it), as
// tiktoken's encode_ordinary: "<|endoftext|>" in the text is plain text, never id 50256.
// Thread-safe: g is only read; each call keeps its own cache of repeated pre-tokens.
wgt_status gpt2_bpe_encode(const gpt2_bpe *g, const uint8_t *bytes, size_t n, uint32_t **ids, size_t *n_ids);
// Decodes ids into a malloc'd byte array (free() it); 50256 decodes to "<|endoftext|>". An id
// >= 50257 is an error naming it and its position.
wgt_status gpt2_bpe_decode(const gpt2_bpe *g, const uint32_t *ids, size_t n, uint8_t **bytes, size_t *n_bytes);
// The bytes of one token (not NUL-terminated), or NULL for an id out of range.
const uint8_t *gpt2_bpe_token_bytes(const gpt2_bpe *g, int id, size_t *len);

// The pre-tokenization alone: the end offsets of the pieces BPE runs on, in a malloc'd array.
wgt_status gpt2_bpe_pretokenize(const gpt2_bpe *g, const uint8_t *bytes, size_t n, size_t **ends, size_t *n_pieces);

// Writes the two files, byte for byte as loaded, into dir (atomically).
wgt_status gpt2_bpe_save_dir(const gpt2_bpe *g, const char *dir);
// The Unicode version of the character tables in use (PCRE2's), e.g. "14.0.0".
const char *gpt2_bpe_unicode_version(void);
#endif
