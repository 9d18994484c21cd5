// hf_tokenizer.h — Hugging Face `tokenizer.json` read and run in C, giving the ids of the Rust
// `tokenizers` library: the byte-level BPE family (GPT-2 style, Llama-3.x, Qwen2.5/3) and the
// SentencePiece-style BPE family (Llama-2, Mistral, Gemma-3). Added and special tokens are found
// in the raw text first, then each remaining piece is normalised, pre-tokenised and merged by
// rank; the post-processor adds BOS/EOS when asked. A file using a component this module does
// not implement is refused at load, naming the component. Supported set: docs/hf-tokenizers.md.
#ifndef WGT_HF_TOKENIZER_H
#define WGT_HF_TOKENIZER_H
#include <stddef.h>
#include <stdint.h>
#include "core/error.h"

#define HF_TOKENIZER_FILE "tokenizer.json"
#define HF_MAX_FILE_BYTES (256u << 20)  // larger than any real tokenizer.json (Gemma-3's: 33 MB)
#define HF_MAX_ID ((1u << 24) - 1)      // ids above this are refused (real vocabularies: < 2^18)

typedef struct hf_tokenizer hf_tokenizer;

// Reads PATH, a tokenizer.json file or a directory holding one. Errors name the file and the
// offending entry or component.
wgt_status hf_tokenizer_load(hf_tokenizer **out, const char *path);
// The same from the text of a tokenizer.json already in memory; `what` names it in messages.
wgt_status hf_tokenizer_load_text(hf_tokenizer **out, const char *text, size_t n, const char *what);
void hf_tokenizer_free(hf_tokenizer *t);

// encode(text, add_special_tokens) of `tokenizers`: UTF-8 text (invalid UTF-8 is an error naming
// the byte offset) to a malloc'd id array (free() it). Thread-safe: t is only read.
wgt_status hf_tokenizer_encode(const hf_tokenizer *t, const uint8_t *bytes, size_t n, int add_special,
                               uint32_t **ids, size_t *n_ids);
// decode(ids, skip_special_tokens=False): the bytes of the decoded text, malloc'd (free() it).
// An id that names no token is an error naming it and its position.
wgt_status hf_tokenizer_decode(const hf_tokenizer *t, const uint32_t *ids, size_t n, uint8_t **bytes, size_t *n_bytes);

// One more than the largest id of the model's vocabulary and the added tokens.
uint32_t hf_tokenizer_vocab_size(const hf_tokenizer *t);
// The id of a token string (added tokens first, then the model's vocabulary), or -1.
int64_t hf_tokenizer_token_id(const hf_tokenizer *t, const char *token);
// 1 when id is an added token marked "special".
int hf_tokenizer_is_special(const hf_tokenizer *t, uint32_t id);
// The id the post-processor puts before the text (e.g. <|begin_of_text|>, <s>, <bos>), and the
// one it puts after it, or -1 where it puts none.
int64_t hf_tokenizer_bos_id(const hf_tokenizer *t);
int64_t hf_tokenizer_eos_id(const hf_tokenizer *t);
#endif
