// plan.c — the memory plan (plan.h): model_init on a backend whose buf_alloc only counts. A
// model's allocations are its own code's (model.c, the family's init, lora.c), so the plan is
// exact for the buffers the model makes; what a backend adds at run time (WebGPU's scratch slots
// for split GEMMs, the readback slots) is not in it (docs/memory.md: measured at a few MiB).
#include <stdlib.h>
#include <string.h>
#include "model/plan.h"

typedef struct { size_t n; } count_buf;   // the counting backend's buffer: its size alone
typedef struct { model_plan *p; } count_impl;

static const char *const kind_names[PLAN_KINDS] = {"weights", "gradients", "optimizer", "activations kept",
                                                   "workspace", "logits"};
const char *plan_kind_name(plan_kind k) { return k >= 0 && k < PLAN_KINDS ? kind_names[k] : "?"; }

// The kind of a buffer by the label the model gave it.
static plan_kind kind_of(const char *label) {
    static const char *const weights[] = {"params", "params_f16", "frozen_base", "frozen_base_packed",
                                          "frozen_base_absmax", "frozen_base_marker", NULL};
    static const char *const grads[] = {"grads", "frozen_grad_marker", "frozen_grad_sink", NULL};
    static const char *const opt[] = {"adam_m", "adam_v", "optimizer_status", NULL};
    // scratch of either pass (model.c, gpt2.c, llama.c, lora.c), the token buffers and tables
    static const char *const work[] = {"tokens", "targets", "losses", "x_c", "x_f", "x_q", "scratch_c", "dres",
                                       "dtmp", "dqkv", "dhid", "dgate", "dup", "df1", "df2", "zero_pos", "dpos",
                                       "rope_cos", "rope_sin", "lora_x", "lora_dx", "lora_u", "lora_du", "lora_y", "lora_x32",
                                       NULL};
    const char *const *lists[] = {weights, grads, opt, work};
    const plan_kind kinds[] = {PLAN_WEIGHTS, PLAN_GRADIENTS, PLAN_OPTIMIZER, PLAN_WORKSPACE};
    for (int k = 0; k < 4; k++)
        for (int i = 0; lists[k][i]; i++)
            if (!strcmp(label, lists[k][i])) return kinds[k];
    if (!strcmp(label, "logits")) return PLAN_LOGITS;
    return PLAN_ACTIVATIONS;  // every other buffer is a saved activation (res, ln1, qkv, ...)
}

static wgt_status c_alloc(wgt_backend *be, wgt_buf **out, size_t n, const char *label) {
    model_plan *p = ((count_impl *)be->impl)->p;
    count_buf *b = malloc(sizeof *b);
    WGT_ASSERT(b, "out of host memory");
    b->n = n;
    // as the backends round: whole 4-byte elements (WebGPU pads a buffer to 4 bytes, which they are)
    p->bytes[kind_of(label)] += (uint64_t)n * 4;
    p->total += (uint64_t)n * 4;
    p->buffers++;
    *out = (wgt_buf *)b;
    return WGT_OK;
}
static void c_free(wgt_backend *be, wgt_buf *b) { free(b); }
static size_t c_elems(const wgt_buf *b) { return ((const count_buf *)b)->n; }
static wgt_status c_upload(wgt_backend *be, wgt_view d, const void *s, size_t n) { return WGT_OK; }
static wgt_status c_sync(wgt_backend *be) { return WGT_OK; }
static void c_fill(wgt_backend *be, wgt_view d, size_t n) {}

wgt_status model_plan_make(model_plan *p, wgt_backend *be, const model_config *c, int B, int T, const model_opts *o) {
    memset(p, 0, sizeof *p);
    count_impl impl = {p};
    wgt_backend cb;
    memset(&cb, 0, sizeof cb);  // no ops: model_init runs none (a call would stop at a NULL pointer)
    cb.name = be->name;
    cb.impl = &impl;
    cb.buf_alloc = c_alloc;
    cb.buf_free = c_free;
    cb.buf_elems = c_elems;
    cb.upload = c_upload;
    cb.sync = c_sync;
    cb.fill_zero = c_fill;
    cb.max_binding_elems = be->max_binding_elems;
    wgt_model *m = NULL;
    wgt_status st = model_init_opts(&m, &cb, c, B, T, o);
    model_free(m);
    return st;
}

const char *plan_bytes_str(char buf[32], uint64_t b) {
    if (b >= 1073741824ull) snprintf(buf, 32, "%.3f GiB", b / 1073741824.0);
    else snprintf(buf, 32, "%.2f MiB", b / 1048576.0);
    return buf;
}

void model_plan_print(FILE *f, const char *prefix, const model_plan *p) {
    char s[32];
    for (int k = 0; k < PLAN_KINDS; k++) fprintf(f, "%s  %-17s %14s\n", prefix, kind_names[k], plan_bytes_str(s, p->bytes[k]));
    fprintf(f, "%s  %-17s %14s in %d buffers\n", prefix, "total", plan_bytes_str(s, p->total), p->buffers);
}

int model_plan_largest_batch(wgt_backend *be, const model_config *c, int T, const model_opts *o, uint64_t limit,
                             int max_b, model_plan *plan_out) {
    int lo = 0, hi = max_b;  // the plan grows with B: the largest B whose plan fits, by bisection
    model_plan p;
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (model_plan_make(&p, be, c, mid, T, o) == WGT_OK && p.total <= limit) lo = mid;
        else hi = mid - 1;
    }
    if (plan_out && lo > 0) model_plan_make(plan_out, be, c, lo, T, o);
    return lo;
}
