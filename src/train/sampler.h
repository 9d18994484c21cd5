// sampler.h — picking the next token from a row of logits for `wgtrain sample`: temperature,
// top-k and top-p (nucleus) filtering, with a seeded RNG so a sample can be reproduced.
#ifndef WGT_SAMPLER_H
#define WGT_SAMPLER_H
#include <stdint.h>

typedef struct {
    double temperature;  // <= 0: always the most likely token (greedy)
    int top_k;           // 0: no limit
    double top_p;        // >= 1: no limit; else the smallest set of likeliest tokens with mass >= top_p
    uint64_t rng;        // state of the random stream
    int vocab;
    void *scratch;       // V (logit, id) pairs, allocated by sampler_init
} sampler;

void sampler_init(sampler *s, int vocab, double temperature, int top_k, double top_p, uint64_t seed);
void sampler_free(sampler *s);
int sampler_pick(sampler *s, const float *logits);
#endif
