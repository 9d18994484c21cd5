// wg_ops_embedding.c — dispatch wrappers for kernels/01_embedding.wgsl (embedding_forward) and
// kernels/12_backward_embedding.wgsl (embedding_backward: dwte scatter-add, dwpe batch sum).
// wte / dwte are split into windows of vocabulary rows when V*C exceeds one storage binding
// (GPT-2's 50257 x 768 floats are 154 MB; some devices bind at most 128 MiB); the forward's
// output is split into windows of positions likewise. The tokens and wpe / dwpe are bound whole:
// each may be as large as one binding (the model allocates them up to the limit), so their guards
// check the window actually bound, from the view's aligned start.
#include "backend/webgpu/wg_ops.h"

// rows of length C per window: one binding less the alignment slack
static uint64_t rows_per_window(wgt_backend *be, uint32_t C) {
    uint64_t r = (wg_binding_limit(be) - WGT_VIEW_ALIGN) / (C ? C : 1);
    uint64_t cap = ((uint64_t)UINT32_MAX - 255) / (C ? C : 1);  // element indices are u32
    if (r > cap) r = cap;
    WGT_ASSERT(r >= 1, "one embedding row is larger than a storage binding");
    return r;
}

// Whether a tensor bound whole (the tokens, wpe, dwpe) fits one binding as bound, the alignment
// remainder included: the model's views start aligned, so one of exactly the limit does.
static int whole_fits(wgt_backend *be, wg_bind b) { return b.n <= wg_binding_limit(be) && b.n <= UINT32_MAX; }

typedef struct {
    uint32_t n, C, T, V, p0, v0, v1, flags;
    uint32_t tok_off, wte_off, wpe_off, out_off;
} ef_params;

void wg_embedding_forward(wgt_backend *be, wgt_view out, wgt_view tokens, wgt_view wte, wgt_view wpe, uint32_t B,
                          uint32_t T, uint32_t C, uint32_t V) {
    wg_ctx *ctx = wg_of(be);
    const uint64_t BT = (uint64_t)B * T;
    if (BT == 0 || C == 0) return;
    WGPUComputePipeline pipe = wg_pipeline(ctx, "01_embedding.wgsl", "embedding_forward", NULL);
    uint64_t rows = rows_per_window(be, C);
    for (uint64_t p0 = 0; p0 < BT; p0 += rows) {
        uint32_t np = (uint32_t)(BT - p0 < rows ? BT - p0 : rows);
        uint64_t v0 = 0;
        do {
            uint32_t nv = (uint32_t)(V - v0 < rows ? V - v0 : rows);
            ef_params p = {np * C, C, T, V, (uint32_t)p0, (uint32_t)v0, (uint32_t)(v0 + nv), v0 == 0 ? 1u : 0u, 0, 0, 0, 0};
            wg_bind b[] = {wg_binding_window(out, p0 * C, (uint64_t)np * C, &p.out_off), wg_binding_window(tokens, 0, BT, &p.tok_off),
                           wg_binding_window(wte, v0 * C, (uint64_t)nv * C, &p.wte_off),
                           wg_binding_window(wpe, 0, (uint64_t)T * C, &p.wpe_off)};
            WGT_ASSERT(whole_fits(be, b[1]) && whole_fits(be, b[3]),
                       "embedding_forward: the tokens or wpe exceed one storage binding; use a smaller batch or sequence");
            wg_dispatch(ctx, "embedding_forward", pipe, b, 4, &p, sizeof p, wg_groups((uint64_t)np * C, 256));
            v0 += nv;
        } while (v0 < V);
    }
}

typedef struct { uint32_t BT, C, v0, v1, tok_off, dout_off, dwte_off, p0, p1, pad0, pad1, pad2; } eb_params;
typedef struct { uint32_t T, C, B, n, dout_off, dwpe_off, p0, p1; } ebw_params;

void wg_embedding_backward(wgt_backend *be, wgt_view dwte, wgt_view dwpe, wgt_view dout, wgt_view tokens, uint32_t B,
                           uint32_t T, uint32_t C, uint32_t V) {
    wg_ctx *ctx = wg_of(be);
    const uint64_t BT = (uint64_t)B * T;
    if (BT == 0 || C == 0) return;
    uint32_t tok_off;
    WGT_ASSERT(whole_fits(be, wg_binding_window(tokens, 0, BT, &tok_off)),
               "embedding_backward: more tokens than one binding holds; use a smaller batch or sequence");
    WGPUComputePipeline pipe = wg_pipeline(ctx, "12_backward_embedding.wgsl", "embedding_backward", NULL);
    uint64_t rows = rows_per_window(be, C);
    // windows of positions (dout) outside, of vocabulary rows (dwte) inside; one workgroup per position
    for (uint64_t p0 = 0; p0 < BT; p0 += rows) {
        uint32_t np = (uint32_t)(BT - p0 < rows ? BT - p0 : rows);
        for (uint64_t v0 = 0; v0 < V; v0 += rows) {
            uint32_t nv = (uint32_t)(V - v0 < rows ? V - v0 : rows);
            eb_params p = {(uint32_t)BT, C, (uint32_t)v0, (uint32_t)(v0 + nv), 0, 0, 0, (uint32_t)p0, (uint32_t)(p0 + np), 0, 0, 0};
            wg_bind b[] = {wg_binding_window(dwte, v0 * C, (uint64_t)nv * C, &p.dwte_off),
                           wg_binding_window(dout, p0 * C, (uint64_t)np * C, &p.dout_off), wg_binding_window(tokens, 0, BT, &p.tok_off)};
            // workgroups at positions >= p0 + np own nothing in this window: the grid stops there
            wg_dispatch(ctx, "embedding_backward", pipe, b, 3, &p, sizeof p, p0 + np);
        }
    }
    // dwpe: one thread per (t, c), summing over b; windows of whole sequences of dout
    const uint64_t TC = (uint64_t)T * C;
    uint32_t dwpe_off;
    WGT_ASSERT(whole_fits(be, wg_binding_window(dwpe, 0, TC, &dwpe_off)),
               "embedding_backward: dwpe exceeds one storage binding; use a shorter sequence");
    WGPUComputePipeline pw = wg_pipeline(ctx, "12_backward_embedding.wgsl", "embedding_backward_wpe", NULL);
    // every window of dout starts at a whole sequence: aligned when dout's view is and a sequence
    // is a whole number of 64-element blocks (the model's case), else up to 63 elements early
    uint64_t slack = (dout.off % WGT_VIEW_ALIGN == 0 && TC % WGT_VIEW_ALIGN == 0) ? 0 : WGT_VIEW_ALIGN - 1;
    uint64_t lim = wg_binding_limit(be) < UINT32_MAX ? wg_binding_limit(be) : UINT32_MAX;
    uint64_t seqs = lim >= slack + TC ? (lim - slack) / TC : 0;
    WGT_ASSERT(seqs >= 1, "embedding_backward: one sequence of dout is larger than one binding");
    for (uint64_t b0 = 0; b0 < B; b0 += seqs) {
        uint32_t nb = (uint32_t)(B - b0 < seqs ? B - b0 : seqs);
        ebw_params q = {T, C, nb, T * C, 0, 0, 0, 0};
        wg_bind bw[] = {wg_binding_window(dwpe, 0, (uint64_t)T * C, &q.dwpe_off),
                        wg_binding_window(dout, b0 * T * C, (uint64_t)nb * T * C, &q.dout_off)};
        wg_dispatch(ctx, "embedding_backward_wpe", pw, bw, 2, &q, sizeof q, wg_groups((uint64_t)T * C, 256));
    }
}
