// train_config.h — everything that defines a training run: the model's shape, the optimizer
// and schedule hyper-parameters, the intervals, the data directory. One table of fields drives
// the command-line flags, config.json, the copy inside each checkpoint and the check that a
// resumed run was given no flag contradicting its checkpoint, so these can never disagree.
#ifndef WGT_TRAIN_CONFIG_H
#define WGT_TRAIN_CONFIG_H
#include <stdint.h>
#include <stdio.h>
#include "model/model.h"

#define TRAIN_PATH_MAX 4096

typedef struct {
    char preset[32];
    model_config model;        // the family and its sizes (JSON: model_config_to_cjson)
    int batch, seq, grad_accum;
    long steps, warmup;
    double lr, min_lr;         // min_lr < 0: lr / 10 (resolved by train_config_finish)
    double weight_decay, clip, beta1, beta2, eps;
    double label_smoothing, z_loss;
    double dropout;  // on attention probabilities and residual branches (0: none)
    // --loss-scale off|dynamic|auto|N (train_loss_scale_resolve), the dynamic scale's start and
    // growth window
    char loss_scale[24];
    double loss_scale_init;
    long loss_scale_window;
    // "f32" or "f16" (mixed precision, docs/numerics.md#mixed-precision); the checkpoint keeps f32
    // master weights either way, so a resumed run may change it
    char precision[8];
    // --recompute none|attention|block (model_recompute; docs/memory.md): what the backward
    // recomputes instead of keeping; the gradients do not change, so a resumed run may change it
    char recompute[12];
    // --memory-limit GIB: the device buffers a run may plan (model/plan.h); a run whose plan is larger
    // is refused before anything is allocated (0: no limit; WebGPU does not report a device's memory)
    double memory_limit;
    // --base-precision f32|f16|bf16|nf4: the storage of a LoRA run's frozen projection weights
    // (model_base_prec; docs/memory.md#low-precision-frozen-bases)
    char base_precision[8];
    long seed;                 // < 2^53 so that JSON numbers hold it exactly
    long val_every, val_batches, ckpt_every, log_every;
    char data_dir[TRAIN_PATH_MAX];
    // fingerprint of the data's tokenizer (16 hex digits, tokenizer_fingerprint), recorded when
    // the run starts so that resume and eval refuse data tokenized otherwise; "" for data
    // without a tokenizer (and runs written before it was recorded)
    char tokenizer_hash[17];
    // --init: the Hugging Face model the run started from (absolute path; "" for a random
    // initialisation); recorded for information
    char init[TRAIN_PATH_MAX];
    // LoRA (model/lora.h, docs/lora.md): rank (0: every weight trains), scale numerator, dropout
    // on the adapter input, targets, rsLoRA; and the fingerprint of the frozen base the adapters
    // were trained on (model_lora_base_fingerprint, 16 hex digits; recorded when the run starts,
    // so that a resumed run refuses another base)
    int lora_r;
    double lora_alpha, lora_dropout;
    char lora_targets[64];
    int lora_rslora;
    char lora_base_hash[17];
} train_config;

// Names of the presets, NULL-terminated, for --help and error messages.
extern const char *const train_preset_names[];

// Fills every field from a preset ("tiny", "small", "gpt2-124m", "llama-tiny", "llama-124m", "micro");
// vocab stays 0 (the data decides it) and data_dir empty.
wgt_status train_config_preset(train_config *c, const char *name);

// Per-flag bookkeeping of a command line: which table fields were given.
typedef struct {
    unsigned char given[64];
} train_flags;

// A new run's config: the preset (--preset; without it the first preset of the --arch family,
// llama-tiny for llama, else tiny)
// with vocab and max_seq left to the data and --seq, and the given flags on top. An --arch of
// another family than the preset's keeps the preset's sizes and drops its family's own settings.
wgt_status train_config_start(train_config *c, const train_config *flags, const train_flags *f);

// Tries argv[*i] as a config flag ("--layers 6", ...). Returns 1 and advances *i past the
// value when it is one (a bad value sets *st), 0 when it is not a config flag.
int train_config_parse_flag(train_config *c, train_flags *f, int argc, char **argv, int *i, wgt_status *st);
// Copies into dst the fields given on the command line (src holds their parsed values).
void train_config_apply_flags(train_config *dst, const train_config *src, const train_flags *f);
// The settings a --resume changed (resume_mutable fields other than the data directory): how
// many; *json gets them as a JSON object of the new values (config.json's keys; "" when none or
// too long) and *said as "--lr 1 (was 10), ..." for people.
int train_config_resume_changes(const train_config *ck, const train_config *now, char *json, size_t json_n, char *said,
                                size_t said_n);
// Fails, naming the flag and both values, if a given flag changes a field a resumed run must
// keep (the model, the batch, AdamW's betas and epsilon...). --steps, the intervals, --data,
// --precision and what recovering from a divergence needs (--lr, --min-lr, --warmup,
// --weight-decay, --clip and the loss scale settings) may change.
wgt_status train_config_check_resume(const train_config *ckpt, const train_config *flags, const train_flags *f);
// Fails, naming the first field that differs (model_config_diff), if two configs describe
// different models.
wgt_status train_config_check_model(const train_config *want, const train_config *have, const char *what);
// Whether the flag (e.g. "--heads") was given.
int train_config_flag_given(const train_flags *f, const char *flag);
// For --init: fails, naming the flag and the model's value, if a given model flag (--arch,
// --layers, ...) contradicts `init`, the config of the model in `what`.
wgt_status train_config_check_init(const train_config *flags, const train_flags *f, const model_config *init,
                                   const char *what);
// Prints the flags with their help text (for `wgtrain train --help`).
void train_config_print_flags(FILE *out);

// The flags of the table ("--layers", ...), at most cap of them; returns how many.
int train_config_flag_names(const char **out, int cap);
// Reads a training configuration file (`wgtrain train --config FILE`): a JSON object with the
// keys of a run's config.json ({"train": {"steps": 100}, "model": {"n_layer": 4}}, so a run's
// own config.json repeats it) or the flags' names without their dashes at the top level
// ({"steps": 100, "val-every": 10}). Sets *c's fields and marks them in *f, like flags; any
// subset may be given. Unknown keys are refused, all named at once.
wgt_status train_config_read_file(train_config *c, train_flags *f, const char *path);

// Resolves defaults that depend on other fields (min_lr) and validates every field with a
// message naming the flag to change.
wgt_status train_config_finish(train_config *c);
// The run's precision (c->precision, "f32" when empty).
model_precision train_config_precision(const train_config *c);
// The run's recomputation (c->recompute; none when empty).
model_recompute train_config_recompute(const train_config *c);

// JSON (config.json and the checkpoint's copy). to_json returns a malloc'd string. from_json
// is strict: the text must be exactly one JSON object (nothing after it, no duplicate key).
char *train_config_to_json(const train_config *c);
wgt_status train_config_from_json(train_config *c, const char *json, const char *what);

// What --loss-scale means for this run: *scale the scale of the first update, *dynamic whether
// it adapts (halved on a skipped update, doubled after loss_scale_window applied ones). "off":
// 1, static; "dynamic": loss_scale_init, dynamic; a number N: N, static; "auto" (the default):
// the choice of the run's precision, decided here alone (f32, the only precision so far: off).
// The string was checked by train_config_finish.
void train_loss_scale_resolve(const train_config *c, float *scale, int *dynamic);
// Nonzero when the run scales its loss (the progress line and metrics then show the scale).
int train_loss_scale_on(const train_config *c);

// Learning rate of the update with 0-based index `step`: linear warmup over `warmup` updates,
// then cosine decay from lr to min_lr at step == steps - 1.
double train_lr_at(const train_config *c, long step);
#endif
