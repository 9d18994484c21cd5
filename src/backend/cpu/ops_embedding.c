// ops_embedding.c — C reference of 01_embedding / 12_backward_embedding: token + position
// embedding and its scatter-add backward. Written so that the backward is deterministic
// (no atomics, fixed summation order) whatever the thread count.
#include "backend/cpu/ops.h"

// out[b,t,:] = wte[tokens[b,t], :] + wpe[t, :]
void cpu_embedding_forward(float *out, const int32_t *tokens, const float *wte, const float *wpe,
                           uint32_t B, uint32_t T, uint32_t C, uint32_t V) {
    size_t BT = (size_t)B * T;
    #pragma omp parallel for schedule(static)
    for (size_t bt = 0; bt < BT; bt++) {
        int32_t tok = tokens[bt];
        WGT_ASSERT(tok >= 0 && (uint32_t)tok < V, "token id outside the vocabulary reached the embedding");
        const float *e = wte + (size_t)tok * C, *p = wpe + (bt % T) * C;
        float *o = out + bt * C;
        for (uint32_t c = 0; c < C; c++) o[c] = e[c] + p[c];
    }
}

// dwte[tok,:] += dout[b,t,:];  dwpe[t,:] += Σ_b dout[b,t,:]
// Repeated tokens collide in dwte, so the parallel split is over channel blocks: each thread
// owns a column slice of every row and walks the tokens in order.
void cpu_embedding_backward(float *dwte, float *dwpe, const float *dout, const int32_t *tokens,
                            uint32_t B, uint32_t T, uint32_t C, uint32_t V) {
    size_t BT = (size_t)B * T;
    for (size_t bt = 0; bt < BT; bt++)
        WGT_ASSERT(tokens[bt] >= 0 && (uint32_t)tokens[bt] < V, "token id outside the vocabulary");
    const uint32_t CB = 64;  // columns per task: 256 contiguous bytes per row touched
    #pragma omp parallel for schedule(static)
    for (uint32_t c0 = 0; c0 < C; c0 += CB) {
        uint32_t c1 = c0 + CB < C ? c0 + CB : C;
        for (size_t bt = 0; bt < BT; bt++) {
            const float *g = dout + bt * C;
            float *w = dwte + (size_t)tokens[bt] * C;
            for (uint32_t c = c0; c < c1; c++) w[c] += g[c];
        }
        for (uint32_t t = 0; t < T; t++) {
            float *p = dwpe + (size_t)t * C;
            for (uint32_t c = c0; c < c1; c++) {
                double s = 0.0;
                for (uint32_t b = 0; b < B; b++) s += dout[((size_t)b * T + t) * C + c];
                p[c] += (float)s;
            }
        }
    }
}
