// mem_plan.c — the run's memory plan before anything is allocated (mem_plan.h): the table by kind,
// --recompute auto (the least recomputation that fits --memory-limit), and the refusal of a run
// that cannot fit, with the plans of what would (a smaller batch, recomputation, LoRA).
#include <stdio.h>
#include <string.h>
#include "train/lora_run.h"
#include "train/mem_plan.h"

#define GIB 1073741824.0

wgt_status train_plan_check(const train_config *c, wgt_backend *be, model_opts *mo, model_lora_opts *lora) {
    lora_run_opts(c, lora);
    memset(mo, 0, sizeof *mo);  // a training model: every option not set below is off (inference among them)
    mo->prec = train_config_precision(c);
    mo->lora = lora;
    mo->recompute = train_config_recompute(c);
    const uint64_t limit = c->memory_limit > 0 ? (uint64_t)(c->memory_limit * GIB) : 0;
    model_plan p;
    if (!strcmp(c->recompute, "auto") && limit) {  // the least recomputation that fits
        for (int r = MODEL_RECOMPUTE_NONE; r <= MODEL_RECOMPUTE_BLOCK; r++) {
            mo->recompute = (model_recompute)r;
            wgt_status st = model_plan_make(&p, be, &c->model, c->batch, c->seq, mo);
            if (st != WGT_OK && r > MODEL_RECOMPUTE_NONE) {  // a family without recomputation: the last that builds
                mo->recompute = (model_recompute)(r - 1);
                break;
            }
            WGT_TRY(st);
            if (p.total <= limit) break;
        }
    }
    WGT_TRY(model_plan_make(&p, be, &c->model, c->batch, c->seq, mo));
    printf("train: memory plan (device buffers; --recompute %s%s):\n", model_recompute_name(mo->recompute),
           !strcmp(c->recompute, "auto") ? ", chosen by auto" : "");
    model_plan_print(stdout, "train:", &p);
    if (!limit) return WGT_OK;
    model_plan fit;
    int bmax = model_plan_largest_batch(be, &c->model, c->seq, mo, limit, 1 << 16, &fit);
    printf("train: --memory-limit %g GiB: the largest batch that fits is %d\n", c->memory_limit, bmax);
    if (p.total <= limit) return WGT_OK;
    // what would fit: a smaller batch, block recomputation, LoRA on every projection (rank 16), an
    // nf4 frozen base
    char alt[1024] = "", s1[32], s2[32];
    if (bmax > 0)
        snprintf(alt + strlen(alt), sizeof alt - strlen(alt), "--batch %d (%s); ", bmax, plan_bytes_str(s1, fit.total));
    if (mo->recompute != MODEL_RECOMPUTE_BLOCK) {
        model_opts o2 = *mo;
        o2.recompute = MODEL_RECOMPUTE_BLOCK;
        model_plan q;
        if (model_plan_make(&q, be, &c->model, c->batch, c->seq, &o2) == WGT_OK)
            snprintf(alt + strlen(alt), sizeof alt - strlen(alt), "--recompute block (%s%s); ", plan_bytes_str(s1, q.total),
                     q.total <= limit ? ", fits" : "");
    }
    if (!lora->r) {
        model_lora_opts l2 = {16, 32, 0, 0, "all-linear", MODEL_BASE_F32};
        model_opts o2 = *mo;
        o2.lora = &l2;
        o2.prec = MODEL_PREC_F32;
        model_plan q;
        if (model_plan_make(&q, be, &c->model, c->batch, c->seq, &o2) == WGT_OK)
            snprintf(alt + strlen(alt), sizeof alt - strlen(alt), "--lora 16 with --init (%s%s); ", plan_bytes_str(s1, q.total),
                     q.total <= limit ? ", fits" : "");
    }
    if (lora->r && lora->base_prec != MODEL_BASE_NF4) {  // a packed frozen base
        model_lora_opts l2 = *lora;
        l2.base_prec = MODEL_BASE_NF4;
        model_opts o2 = *mo;
        o2.lora = &l2;
        model_plan q;
        if (model_plan_make(&q, be, &c->model, c->batch, c->seq, &o2) == WGT_OK)
            snprintf(alt + strlen(alt), sizeof alt - strlen(alt), "--base-precision nf4 (%s%s); ",
                     plan_bytes_str(s1, q.total), q.total <= limit ? ", fits" : "");
    }
    if (c->seq > 1) {
        model_plan q;
        if (model_plan_make(&q, be, &c->model, c->batch, c->seq / 2, mo) == WGT_OK)
            snprintf(alt + strlen(alt), sizeof alt - strlen(alt), "--seq %d (%s)", c->seq / 2, plan_bytes_str(s1, q.total));
    }
    return wgt_fail(WGT_ERR_CONFIG, "the run needs %s of device buffers (the plan above), more than --memory-limit "
                    "%g GiB; it was not started. What would fit better: %s", plan_bytes_str(s2, p.total), c->memory_limit,
                    alt);
}
