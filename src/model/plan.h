// plan.h — the memory plan of a model before anything is allocated: the device buffers a model of
// this config, batch, precision, LoRA and recomputation would allocate, by kind, found by making
// the model on a counting backend that allocates nothing (so the plan is the model's own
// allocation list, not a formula beside it). docs/memory.md.
#ifndef WGT_PLAN_H
#define WGT_PLAN_H
#include <stdint.h>
#include <stdio.h>
#include "model/lora.h"

typedef enum {
    PLAN_WEIGHTS,      // parameters (or the frozen base), their f16 copy
    PLAN_GRADIENTS,    // the trained tensors' gradients (LoRA: the adapters'; the frozen base's sink)
    PLAN_OPTIMIZER,    // AdamW's two moments and the optimizer status
    PLAN_ACTIVATIONS,  // what the forward keeps for the backward
    PLAN_WORKSPACE,    // scratch of the forward and backward, token buffers, RoPE tables
    PLAN_LOGITS,       // the logits (and dlogits in place)
    PLAN_KINDS
} plan_kind;
const char *plan_kind_name(plan_kind k);

typedef struct {
    uint64_t bytes[PLAN_KINDS];
    uint64_t total;
    int buffers;
} model_plan;

// The plan of model (c, B, T, *o) on a device like `be` (its binding limit decides what is refused
// as too large for one binding; nothing is allocated on it). Fails as model_init would.
wgt_status model_plan_make(model_plan *p, wgt_backend *be, const model_config *c, int B, int T, const model_opts *o);
// b as "1.234 GiB" (from 1 GiB on) or "12.34 MiB"; returns buf.
const char *plan_bytes_str(char buf[32], uint64_t b);
// The table, one line a kind and the total.
void model_plan_print(FILE *f, const char *prefix, const model_plan *p);
// The largest batch in 1..max_b whose plan fits `limit` bytes (0: none fits); *plan_out (may be
// NULL) its plan.
int model_plan_largest_batch(wgt_backend *be, const model_config *c, int T, const model_opts *o, uint64_t limit,
                             int max_b, model_plan *plan_out);
#endif
