// sampler.h — picking the next token from a row of logits for `wgtrain sample` and `wgtrain chat`:
// a repetition penalty, temperature, top-k, top-p (nucleus) and min-p filtering, with a seeded
// RNG so a sample can be reproduced. The order is Hugging Face generate's: the penalty on the
// raw logits (so it also steers greedy decoding), then the temperature, top-k, top-p, min-p.
#ifndef WGT_SAMPLER_H
#define WGT_SAMPLER_H
#include <stddef.h>
#include <stdint.h>

typedef struct {
    double temperature;  // <= 0: always the most likely token (greedy)
    int top_k;           // 0: no limit
    double top_p;        // >= 1: no limit; else the smallest set of likeliest tokens with mass >= top_p
    double min_p;        // 0: off; else drop tokens whose probability is below min_p x the top one's
    double rep_penalty;  // 1: off; else the logit l of every token already seen becomes l / penalty
                         // (l > 0) or l * penalty (l <= 0), as HF's RepetitionPenaltyLogitsProcessor
    uint64_t rng;        // state of the random stream
    int vocab;
    void *scratch;       // V (logit, id) pairs, allocated by sampler_init
    float *pen;          // V penalised logits
    unsigned char *seen; // V flags
} sampler;

void sampler_init(sampler *s, int vocab, double temperature, int top_k, double top_p, uint64_t seed);
void sampler_free(sampler *s);
int sampler_pick(sampler *s, const float *logits);
// min-p (0 <= min_p <= 1) and the repetition penalty (> 0), both off after sampler_init.
void sampler_set_min_p(sampler *s, double min_p);
void sampler_set_repetition_penalty(sampler *s, double penalty);
// sampler_pick with the repetition penalty over the n ids of seen (the prompt and what was
// generated; each must be < vocab).
int sampler_pick_seen(sampler *s, const float *logits, const int32_t *seen, size_t n);
#endif
