// decode.h — generation with a key/value cache: a decoder over a model's parameters keeps, per
// layer, the rotated keys and the values of every token it has seen, for up to `batch` sequences
// of up to `max_len` tokens each. A prompt is prefilled (in chunks of many tokens), then each new
// token costs one row per sequence instead of a forward over the whole window. The logits equal
// those of model_forward_logits over the same tokens within float rounding (tests/test_decode.c).
// Families: gpt2, llama, mistral (its sliding window included), qwen2, qwen3, gemma3_text;
// docs/generation.md.
#ifndef WGT_DECODE_H
#define WGT_DECODE_H
#include <stddef.h>
#include <stdint.h>
#include "model/model.h"

typedef struct model_decoder model_decoder;

// A decoder for model m (an f32 model; it reads m's parameters, which must not change while it
// lives, and allocates its own caches and activations). max_len <= the model's max_seq.
wgt_status model_decoder_init(model_decoder **out, wgt_model *m, int batch, int max_len);
void model_decoder_free(model_decoder *d);
// The device bytes of the caches (2 · layers · batch · max_len · n_kv_heads · head size · 4) and
// of the decoder's activations, for a memory plan before making one.
void model_decoder_bytes(const model_config *c, int batch, int max_len, uint64_t *cache, uint64_t *acts);
int model_decoder_batch(const model_decoder *d);
int model_decoder_max_len(const model_decoder *d);
// Tokens cached for sequence b.
int model_decoder_len(const model_decoder *d, int b);
// Forgets the tokens of sequence b from position len on (len <= its length): a conversation
// whose new rendering shares only a prefix with what is cached keeps that prefix.
void model_decoder_truncate(model_decoder *d, int b, int len);
// Appends n >= 1 tokens (each < vocab) to sequence b; logits (may be NULL) receives the V logits
// after the last of them. Refuses (WGT_ERR_ARG) to run past max_len.
wgt_status model_decoder_prefill(model_decoder *d, int b, const int32_t *tokens, int n, float *logits);
// Appends one token to each of sequences 0 .. nb-1 (tokens[nb]); logits [nb, V] (may be NULL).
wgt_status model_decoder_step(model_decoder *d, int nb, const int32_t *tokens, float *logits);
#endif
