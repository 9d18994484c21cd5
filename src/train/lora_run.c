// lora_run.c — a LoRA run's frozen base (lora_run.h): the base is not in the checkpoint (only the
// adapters and their optimizer state are), so every tool that opens the run loads it again from
// the run's --init and checks that it is the base the adapters were trained on.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "core/fileutil.h"
#include "train/dist.h"
#include "train/hf_init.h"
#include "train/lora_run.h"
#include "train/rng.h"
#include "train/trainer.h"

enum { STREAM_INIT = 1 };  // the initialisation's seed stream, as trainer.c

void lora_run_opts(const train_config *c, model_lora_opts *o) {
    memset(o, 0, sizeof *o);
    o->r = c->lora_r;
    o->alpha = c->lora_alpha;
    o->dropout = c->lora_dropout;
    o->rslora = c->lora_rslora;
    snprintf(o->targets, sizeof o->targets, "%s", c->lora_targets);
    o->base_prec = MODEL_BASE_F32;  // (train_config_finish checked the name; an empty one is f32)
    if (c->base_precision[0]) model_base_prec_parse(c->base_precision, "--base-precision", &o->base_prec);
}

wgt_status lora_run_start(wgt_model *m, train_config *c, const char *run_dir) {
    WGT_TRY(model_lora_base_fingerprint(m, c->lora_base_hash));
    printf("train: LoRA rank %d, alpha %g (scale %g), dropout %g, %d adapters on %s: %zu trained parameters beside "
           "%.2f M frozen (base %s, fingerprint %s)\n", c->lora_r, c->lora_alpha, (double)model_lora_scale(m),
           c->lora_dropout, model_lora_count(m), c->lora_targets, model_state_elems(m), model_num_params(m) / 1e6,
           c->base_precision[0] ? c->base_precision : "f32", c->lora_base_hash);
    if (dist_rank() != 0) return WGT_OK;
    char p[TRAIN_PATH_MAX];
    WGT_TRY(run_path(p, sizeof p, run_dir, RUN_CONFIG_FILE));
    char *json = train_config_to_json(c);
    wgt_status st = atomic_write_file(p, json, strlen(json));
    free(json);
    return st;
}

wgt_status lora_run_base(wgt_model *m, const train_config *c) {
    if (c->init[0]) {
        model_config mc;
        char weights[TRAIN_PATH_MAX];
        WGT_TRY(hf_init_resolve(c->init, c->model.arch, c->model.n_head, &mc, weights, sizeof weights));
        model_config_delta d;
        if (model_config_diff(&mc, &c->model, &d))
            return wgt_fail(WGT_ERR_CONFIG, "the base model %s has %s %s, but the run's adapters were trained on one with "
                            "%s: restore the base the run started from", c->init, d.key, d.a, d.b);
        WGT_TRY(model_load_safetensors(m, weights));
    } else {
        WGT_TRY(model_init_random(m, rng_seed_stream((uint64_t)c->seed, STREAM_INIT)));
    }
    char fp[17];
    WGT_TRY(model_lora_base_fingerprint(m, fp));
    if (c->lora_base_hash[0] && strcmp(fp, c->lora_base_hash))
        return wgt_fail(WGT_ERR_CONFIG, "the base model %s is not the one this run's adapters were trained on "
                        "(fingerprint %s, the run recorded %s): restore that base, or start a new run from this one",
                        c->init[0] ? c->init : "(the seed's random initialisation)", fp, c->lora_base_hash);
    return WGT_OK;
}

wgt_status lora_run_init_adapter(train_config *c, char *adapter, size_t n) {
    adapter[0] = 0;
    char p[TRAIN_PATH_MAX + 32];
    snprintf(p, sizeof p, "%s/adapter_config.json", c->init);
    struct stat sb;
    if (stat(p, &sb) != 0) return WGT_OK;  // a model, not an adapter
    if (strlen(c->init) >= n) return wgt_fail(WGT_ERR_ARG, "--init %s: path too long", c->init);
    snprintf(adapter, n, "%s", c->init);
    char base[TRAIN_PATH_MAX];
    WGT_TRY(model_lora_peft_base(adapter, base, sizeof base));
    if (stat(base, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return wgt_fail(WGT_ERR_ARG, "--init %s is a PEFT adapter whose base_model_name_or_path '%s' is not a local "
                        "directory; download the base model and set base_model_name_or_path to its directory", adapter,
                        base);
    snprintf(c->init, sizeof c->init, "%s", base);
    printf("train: --init %s is a LoRA adapter: its base %s, the adapters continue from it\n", adapter, base);
    return WGT_OK;
}

wgt_status lora_run_adapter_settings(train_config *c, const train_flags *given, const char *adapter) {
    model_lora_opts o;
    WGT_TRY(model_lora_peft_config(adapter, c->model.arch, &o));
    if (train_config_flag_given(given, "--lora") && c->lora_r != o.r)
        return wgt_fail(WGT_ERR_ARG, "--lora %d contradicts the adapter of --init (r %d); drop --lora", c->lora_r, o.r);
    if (train_config_flag_given(given, "--lora-alpha") && c->lora_alpha != o.alpha)
        return wgt_fail(WGT_ERR_ARG, "--lora-alpha %g contradicts the adapter of --init (lora_alpha %g); drop it",
                        c->lora_alpha, o.alpha);
    if (train_config_flag_given(given, "--lora-rslora") && c->lora_rslora != o.rslora)
        return wgt_fail(WGT_ERR_ARG, "--lora-rslora contradicts the adapter of --init (use_rslora false); drop it");
    if (train_config_flag_given(given, "--lora-targets") && strcmp(c->lora_targets, o.targets))
        return wgt_fail(WGT_ERR_ARG, "--lora-targets %s: the adapter of --init targets %s; drop --lora-targets",
                        c->lora_targets, o.targets);
    c->lora_r = o.r;
    c->lora_alpha = o.alpha;
    c->lora_rslora = o.rslora;
    snprintf(c->lora_targets, sizeof c->lora_targets, "%s", o.targets);
    if (!train_config_flag_given(given, "--lora-dropout")) c->lora_dropout = o.dropout;
    return WGT_OK;
}
