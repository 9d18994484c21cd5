// sampler.c — repetition penalty, temperature, top-k / top-p / min-p sampling (see sampler.h). Candidates are sorted by
// logit only when a filter needs the order, with ties broken by id so a seed gives the same
// text on every machine.
#include "train/sampler.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "core/error.h"
#include "train/rng.h"

typedef struct {
    float logit;
    int id;
} cand;

static int cand_cmp(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->logit != y->logit) return x->logit > y->logit ? -1 : 1;
    return x->id - y->id;
}

void sampler_init(sampler *s, int vocab, double temperature, int top_k, double top_p, uint64_t seed) {
    WGT_ASSERT(vocab > 0, "sampler needs a vocabulary");
    s->temperature = temperature;
    s->top_k = top_k > 0 && top_k < vocab ? top_k : 0;
    s->top_p = top_p;
    s->rng = rng_seed_stream(seed, 3);
    s->vocab = vocab;
    s->scratch = wgt_malloc((size_t)vocab * sizeof(cand));
    s->min_p = 0;
    s->rep_penalty = 1;
    s->pen = NULL;
    s->seen = NULL;
}

void sampler_set_min_p(sampler *s, double min_p) {
    WGT_ASSERT(min_p >= 0 && min_p <= 1, "min-p outside [0, 1]");
    s->min_p = min_p;
}

void sampler_set_repetition_penalty(sampler *s, double penalty) {
    WGT_ASSERT(penalty > 0, "a repetition penalty must be above 0");
    s->rep_penalty = penalty;
}

void sampler_free(sampler *s) {
    free(s->scratch);
    free(s->pen);
    free(s->seen);
    s->scratch = NULL;
    s->pen = NULL;
    s->seen = NULL;
}

int sampler_pick_seen(sampler *s, const float *logits, const int32_t *seen, size_t n) {
    if (s->rep_penalty == 1 || n == 0) return sampler_pick(s, logits);
    const int V = s->vocab;
    if (!s->pen) {
        s->pen = wgt_malloc((size_t)V * sizeof *s->pen);
        s->seen = wgt_malloc((size_t)V);
    }
    memcpy(s->pen, logits, (size_t)V * sizeof *s->pen);
    memset(s->seen, 0, (size_t)V);
    for (size_t i = 0; i < n; i++) {
        WGT_ASSERT(seen[i] >= 0 && seen[i] < V, "a seen token outside the vocabulary");
        if (s->seen[seen[i]]) continue;  // once per token, as the processor's gather / scatter
        s->seen[seen[i]] = 1;
        float l = s->pen[seen[i]];
        s->pen[seen[i]] = l > 0 ? (float)(l / s->rep_penalty) : (float)(l * s->rep_penalty);
    }
    return sampler_pick(s, s->pen);
}

int sampler_pick(sampler *s, const float *logits) {
    const int V = s->vocab;
    cand *c = s->scratch;
    int best = 0;
    for (int i = 1; i < V; i++)
        if (logits[i] > logits[best]) best = i;
    if (s->temperature <= 0) return best;
    for (int i = 0; i < V; i++) c[i] = (cand){logits[i], i};
    int n = V;
    if (s->top_k || s->top_p < 1) {
        qsort(c, (size_t)V, sizeof *c, cand_cmp);
        if (s->top_k) n = s->top_k;
    }
    // probabilities (unnormalised) at the temperature, relative to the largest logit
    double total = 0, mx = logits[best];
    double *w = wgt_malloc((size_t)n * sizeof *w);
    for (int i = 0; i < n; i++) total += w[i] = exp(((double)c[i].logit - mx) / s->temperature);
    if (s->top_p < 1) {
        double cum = 0;
        int keep = 0;
        while (keep < n && cum < s->top_p * total) cum += w[keep++];
        n = keep > 0 ? keep : 1;
        total = cum > 0 ? cum : w[0];
    }
    if (s->min_p > 0) {  // w is relative to the largest (w = 1 for it): keep w >= min_p
        if (!(s->top_k || s->top_p < 1)) {  // not sorted yet: keep the candidates in id order
            int k = 0;
            double t = 0;
            for (int i = 0; i < n; i++)
                if (w[i] >= s->min_p) c[k] = c[i], t += w[k] = w[i], k++;
            n = k, total = t;
        } else {
            int keep = 1;
            double t = w[0];
            while (keep < n && w[keep] >= s->min_p) t += w[keep++];
            n = keep, total = t;
        }
    }
    double r = rng_next_double(&s->rng) * total;
    int pick = c[n - 1].id;
    for (int i = 0; i < n; i++) {
        if (r < w[i]) {
            pick = c[i].id;
            break;
        }
        r -= w[i];
    }
    free(w);
    return pick;
}
