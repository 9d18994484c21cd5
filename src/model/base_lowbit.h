// base_lowbit.h — a LoRA model's frozen base with its projection weights packed in f16, bf16 or
// nf4 (--base-precision; docs/memory.md#low-precision-frozen-bases). For model.c and lora.c only.
//
// Layout: the packed tensors (every per-layer projection weight) lie in one span [p0, p1) of the
// parameter table's layout; the packed buffer mirrors that span, scaled: element p0 + e is at
// word e/2 (f16, bf16) or e/8 (nf4, with absmax e/64), so LLaMA's q | k | v rows stay one matrix.
// The f32 base holds the other tensors with the span cut out. The family's views of packed
// weights point into a marker buffer at their table offsets (no op binds it): the GEMM helpers
// see it and run matmul_lowbit / matmul_t_lowbit on the packed words instead, and LoRA's hooks
// find their adapters by those offsets as with an f32 base.
#ifndef WGT_BASE_LOWBIT_H
#define WGT_BASE_LOWBIT_H
#include "model/model_impl.h"

// Plans the packing of m's base (after layout; m->n_base set): nothing for MODEL_BASE_F32.
// Refuses a family or shape it cannot pack, naming --base-precision.
wgt_status base_lowbit_plan(wgt_model *m, model_base_prec prec);
// Allocates the base (f32 part, packed words, absmax, marker): what lora_alloc allocated as
// "frozen_base" before.
void base_lowbit_alloc(wgt_model *m);
// Points the family's parameter views at the base's tensors (packed ones at the marker).
void base_lowbit_bind(wgt_model *m);
// Tensor p of the base from / to the host in f32 (packed: quantised on the way in, decoded on
// the way out). Also for an unpacked base.
wgt_status base_tensor_put(wgt_model *m, const model_param_info *p, const float *src);
wgt_status base_tensor_get(wgt_model *m, const model_param_info *p, float *dst);
// Whether view w is a packed weight's (its buffer the marker).
static inline int base_lowbit_is(const wgt_model *m, wgt_view w) { return m->packed && w.buf == m->packed->marker.buf; }
// The GEMMs of a packed weight view w (base_lowbit_is).
void base_lowbit_matmul(wgt_model *m, wgt_view out, wgt_view inp, wgt_view w, wgt_view bias, uint32_t N, uint32_t C,
                        uint32_t OC);
void base_lowbit_matmul_t(wgt_model *m, wgt_view dinp, wgt_view dout, wgt_view w, uint32_t N, uint32_t C, uint32_t OC);
// Replaces the packed base by an f32 one holding the decoded values (the merge and the decoder
// write or read f32 weights); nothing for an f32 base.
wgt_status base_lowbit_unpack(wgt_model *m);
void base_lowbit_free(wgt_model *m);
#endif
