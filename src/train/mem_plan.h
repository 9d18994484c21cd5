// mem_plan.h — a training run's memory plan (model/plan.h) before step 1: printed, --recompute auto
// resolved, and a run that exceeds --memory-limit refused with what to change. docs/memory.md.
#ifndef WGT_MEM_PLAN_H
#define WGT_MEM_PLAN_H
#include "model/plan.h"
#include "train/train_config.h"

// Fills *mo (precision, LoRA, recomputation: auto resolved) for run c on backend be, prints the plan
// and the largest batch that fits the limit, and refuses a plan above c->memory_limit.
// lora: storage for the options *mo points at.
wgt_status train_plan_check(const train_config *c, wgt_backend *be, model_opts *mo, model_lora_opts *lora);
#endif
