// train_config.c — presets, the field table behind flags / JSON / resume checks, and the
// learning-rate schedule. Keeping one table means a new hyper-parameter is one line here and
// automatically gets a flag, a place in config.json and in checkpoints, and a resume check.
#include "train/train_config.h"
#include "core/token_id.h"
#include <cjson/cJSON.h>
#include "core/fileutil.h"
#include "core/json_strict.h"
#include "model/lora.h"
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define JSON_SAFE_INT 9007199254740991.0  // 2^53 - 1: larger integers do not survive a JSON double

typedef enum { FT_INT, FT_LONG, FT_DOUBLE, FT_STR } field_type;

typedef struct {
    const char *section;  // JSON object holding the key (NULL: top level)
    const char *key;
    const char *flag;     // command-line flag, or NULL when the value comes from elsewhere
    field_type type;
    size_t off, size;     // size: only for strings
    double lo, hi;        // accepted range of numbers, inclusive
    int resume_mutable;   // may differ from the checkpoint on --resume
    int model;            // a model_config field: its JSON and comparison are model.c's (model_config_*)
    const char *arg, *help;
} field;

#define OFF(f) offsetof(train_config, f)
static const field fields[] = {
    {NULL, "preset", "--preset", FT_STR, OFF(preset), sizeof(((train_config *)0)->preset), 0, 0, 0, 0, "NAME",
     "tiny (default), small, gpt2-124m, llama-tiny (default with --arch llama) or llama-124m: the defaults of "
     "everything below"},
    {"model", "arch", "--arch", FT_STR, OFF(model.arch), sizeof(((train_config *)0)->model.arch), 0, 0, 0, 1, "NAME",
     "model family: gpt2 or llama (default: the preset's)"},
    {"model", "n_layer", "--layers", FT_INT, OFF(model.n_layer), 0, 1, 256, 0, 1, "L", "transformer blocks"},
    {"model", "n_head", "--heads", FT_INT, OFF(model.n_head), 0, 1, 4096, 0, 1, "NH", "attention heads"},
    {"model", "d_model", "--d-model", FT_INT, OFF(model.d_model), 0, 1, 65536, 0, 1, "C", "embedding width"},
    {"model", "d_ff", "--d-ff", FT_INT, OFF(model.d_ff), 0, 1, 262144, 0, 1, "F", "MLP hidden width"},
    {"model", "vocab", "--vocab", FT_INT, OFF(model.vocab), 0, 1, TOKEN_MAX_VOCAB, 0, 1, "V",
     "vocabulary size, only for data without a tokenizer (llm.c shards)"},
    {"model", "max_seq", "--max-seq", FT_INT, OFF(model.max_seq), 0, 1, 1 << 20, 0, 1, "T",
     "the model's maximum sequence length (rows of wpe; default --seq)"},
    {"model", "n_kv_heads", "--kv-heads", FT_INT, OFF(model.n_kv_heads), 0, 1, 4096, 0, 1, "NKV",
     "llama: key/value heads, dividing --heads (grouped-query attention; default: the preset's, else --heads)"},
    {"model", "rope_theta", "--rope-theta", FT_DOUBLE, OFF(model.rope_theta), 0, 1e-30, 1e12, 0, 1, "X",
     "llama: RoPE base (default 10000)"},
    {"model", "rms_eps", "--rms-eps", FT_DOUBLE, OFF(model.rms_eps), 0, 1e-30, 0.5, 0, 1, "E",
     "llama: RMSNorm epsilon (default 1e-5)"},
    {"model", "tie_embeddings", "--tie-embeddings", FT_INT, OFF(model.tie_embeddings), 0, 0, 1, 0, 1, "0|1",
     "llama: 1 makes the token embedding the lm_head (default: the preset's, else 0)"},
    {"train", "batch", "--batch", FT_INT, OFF(batch), 0, 1, 1 << 20, 0, 0, "B", "sequences per micro-batch"},
    {"train", "seq", "--seq", FT_INT, OFF(seq), 0, 1, 1 << 20, 0, 0, "T", "tokens per sequence"},
    {"train", "grad_accum", "--grad-accum", FT_INT, OFF(grad_accum), 0, 1, 1 << 20, 0, 0, "K",
     "micro-batches per update (gradient accumulation)"},
    {"train", "steps", "--steps", FT_LONG, OFF(steps), 0, 0, 1e12, 1, 0, "N",
     "optimizer updates in all (the cosine decay ends there; may be raised on --resume; 0 only with --init)"},
    {"train", "warmup", "--warmup", FT_LONG, OFF(warmup), 0, 0, 1e12, 1, 0, "N",
     "updates of linear LR warmup (may change on --resume)"},
    {"train", "lr", "--lr", FT_DOUBLE, OFF(lr), 0, 0, 10, 1, 0, "X",
     "peak learning rate (may change on --resume, e.g. lower after a divergence; --min-lr follows it)"},
    {"train", "min_lr", "--min-lr", FT_DOUBLE, OFF(min_lr), 0, 0, 10, 1, 0, "X",
     "learning rate at the end of the cosine decay (default lr/10)"},
    {"train", "weight_decay", "--weight-decay", FT_DOUBLE, OFF(weight_decay), 0, 0, 10, 1, 0, "W",
     "AdamW decoupled weight decay of matrices and embeddings (default 0.1)"},
    {"train", "clip", "--clip", FT_DOUBLE, OFF(clip), 0, 0, 1e30, 1, 0, "C",
     "clip the global gradient norm to C; 0 turns clipping off (default 1.0; may change on --resume)"},
    {"train", "beta1", "--beta1", FT_DOUBLE, OFF(beta1), 0, 0, 0.999999, 0, 0, "B1", "AdamW beta1 (default 0.9)"},
    {"train", "beta2", "--beta2", FT_DOUBLE, OFF(beta2), 0, 0, 0.999999, 0, 0, "B2", "AdamW beta2 (default 0.95)"},
    {"train", "eps", "--eps", FT_DOUBLE, OFF(eps), 0, 1e-30, 1, 0, 0, "E", "AdamW epsilon (default 1e-8)"},
    {"train", "label_smoothing", "--label-smoothing", FT_DOUBLE, OFF(label_smoothing), 0, 0, 1, 0, 0, "A",
     "label smoothing alpha (default 0)"},
    {"train", "z_loss", "--z-loss", FT_DOUBLE, OFF(z_loss), 0, 0, 10, 0, 0, "B",
     "z-loss beta: adds B*lse^2 to keep logits from drifting (default 1e-4)"},
    {"train", "dropout", "--dropout", FT_DOUBLE, OFF(dropout), 0, 0, 0.9, 0, 0, "P",
     "dropout probability on attention probabilities and residual branches (default 0; masks from --seed)"},
    {"train", "loss_scale", "--loss-scale", FT_STR, OFF(loss_scale), sizeof(((train_config *)0)->loss_scale), 0, 0, 1,
     0, "off|dynamic|auto|N",
     "loss scaling: off, dynamic (starts at --loss-scale-init, halves on an overflow, doubles after "
     "--loss-scale-window clean updates), a fixed scale N, or auto (default: the precision's choice; off in f32)"},
    {"train", "loss_scale_init", "--loss-scale-init", FT_DOUBLE, OFF(loss_scale_init), 0, 1.1754943508222875e-38,
     3.4028234663852886e38, 1, 0, "S", "the first scale of --loss-scale dynamic (default 65536)"},
    {"train", "loss_scale_window", "--loss-scale-window", FT_LONG, OFF(loss_scale_window), 0, 1, 4294967295.0, 1, 0,
     "N", "clean updates in a row after which a dynamic loss scale doubles (default 2000)"},
    {"train", "precision", "--precision", FT_STR, OFF(precision), sizeof(((train_config *)0)->precision), 0, 0, 1, 0,
     "f32|f16", "f32 (default), or f16: mixed precision, f32 master weights, f16 GEMM operands and saved activations "
     "(may change on --resume)"},
    {"train", "recompute", "--recompute", FT_STR, OFF(recompute), sizeof(((train_config *)0)->recompute), 0, 0, 1, 0,
     "none|attention|block|auto", "activation recomputation: keep every activation (none), recompute each "
     "block's attention (attention) or the whole block from its input (block) in the backward; the same "
     "gradients, less memory, more compute; auto (default): none, or with --memory-limit the least recomputation "
     "whose plan fits (may change on --resume)"},
    {"lora", "base_precision", "--base-precision", FT_STR, OFF(base_precision),
     sizeof(((train_config *)0)->base_precision), 0, 0, 0, 0, "f32|f16|bf16|nf4",
     "LoRA: the frozen base's projection weights stored in f32 (default), f16, bf16 or nf4 (QLoRA's 4-bit "
     "NormalFloat, blocks of 64); computed in f32; embeddings, lm_head and norms stay f32"},
    {"train", "memory_limit", "--memory-limit", FT_DOUBLE, OFF(memory_limit), 0, 0, 1e6, 1, 0, "GIB",
     "refuse before allocating anything a run whose device buffers (the plan printed before step 1) exceed GIB "
     "GiB, naming what to change (default 0: no limit)"},
    {"train", "seed", "--seed", FT_LONG, OFF(seed), 0, 0, JSON_SAFE_INT, 0, 0, "S",
     "seed of the initialisation and of the data order (default 1)"},
    {"log", "val_every", "--val-every", FT_LONG, OFF(val_every), 0, 0, 1e12, 1, 0, "N",
     "measure the validation loss every N updates (0: only at the end)"},
    {"log", "val_batches", "--val-batches", FT_LONG, OFF(val_batches), 0, 1, 1e9, 1, 0, "M",
     "validation batches per measurement, spread over the set (always the same ones)"},
    {"log", "ckpt_every", "--ckpt-every", FT_LONG, OFF(ckpt_every), 0, 0, 1e12, 1, 0, "N",
     "write a checkpoint every N updates (0: only at the end)"},
    {"log", "log_every", "--log-every", FT_LONG, OFF(log_every), 0, 1, 1e12, 1, 0, "N",
     "print a progress line every N updates when stdout is not a terminal"},
    {NULL, "data", "--data", FT_STR, OFF(data_dir), TRAIN_PATH_MAX, 0, 0, 1, 0, "DATA_DIR",
     "directory written by `wgtrain prepare` (or llm.c .bin shards)"},
    {NULL, "init", "--init", FT_STR, OFF(init), TRAIN_PATH_MAX, 0, 0, 0, 0, "PATH",
     "start from a Hugging Face model: a directory with config.json and model.safetensors, or the .safetensors "
     "file (GPT-2, with --heads); its config sets the model, the optimizer starts fresh at step 0"},
    {"lora", "r", "--lora", FT_INT, OFF(lora_r), 0, 0, 4096, 0, 0, "R",
     "LoRA: freeze the model (of --init) and train rank-R adapters on its projections (default 0: train every "
     "weight; docs/lora.md)"},
    {"lora", "alpha", "--lora-alpha", FT_DOUBLE, OFF(lora_alpha), 0, 1e-6, 1e6, 0, 0, "A",
     "LoRA: the adapters add (A/R) B A x (default 8, as PEFT)"},
    {"lora", "dropout", "--lora-dropout", FT_DOUBLE, OFF(lora_dropout), 0, 0, 0.9, 0, 0, "P",
     "LoRA: dropout on the adapters' input (default 0)"},
    {"lora", "targets", "--lora-targets", FT_STR, OFF(lora_targets), sizeof(((train_config *)0)->lora_targets), 0, 0,
     0, 0, "LIST", "LoRA: the projections with adapters, some of q,k,v,o,gate,up,down (GPT-2: qkv,o,up,down) or "
     "all-linear (default)"},
    {"lora", "rslora", "--lora-rslora", FT_INT, OFF(lora_rslora), 0, 0, 1, 0, 0, "",
     "LoRA: scale by A/sqrt(R) (rank-stabilised LoRA; a switch, no value)"},
    {"lora", "base_fnv1a64", NULL, FT_STR, OFF(lora_base_hash), sizeof(((train_config *)0)->lora_base_hash), 0, 0, 0,
     0, "", ""},
    // no flag: taken from the data's tokenizer when the run starts
    {NULL, "tokenizer_fnv1a64", NULL, FT_STR, OFF(tokenizer_hash), sizeof(((train_config *)0)->tokenizer_hash), 0, 0, 0, 0,
     "", ""},
};
#define N_FIELDS (int)(sizeof fields / sizeof fields[0])
_Static_assert(sizeof fields / sizeof fields[0] <= sizeof(((train_flags *)0)->given), "train_flags too small");

const char *const train_preset_names[] = {"tiny", "small", "gpt2-124m", "llama-tiny", "llama-124m", "micro", NULL};

wgt_status train_config_preset(train_config *c, const char *name) {
    memset(c, 0, sizeof *c);
    // shared defaults (GPT-2 / llm.c practice); z-loss beta 1e-4 (docs/kernels.md#cross_entropy)
    c->grad_accum = 1;
    c->min_lr = -1;
    c->weight_decay = 0.1;
    c->clip = 1.0;
    c->beta1 = 0.9;
    c->beta2 = 0.95;
    c->eps = 1e-8;
    c->label_smoothing = 0;
    c->z_loss = 1e-4;
    c->dropout = 0;
    snprintf(c->loss_scale, sizeof c->loss_scale, "auto");
    c->loss_scale_init = 65536;   // PyTorch GradScaler's defaults: 2^16, x2 every 2000 clean steps, x0.5
    c->loss_scale_window = 2000;
    snprintf(c->precision, sizeof c->precision, "f32");
    snprintf(c->recompute, sizeof c->recompute, "auto");
    c->seed = 1;
    c->lora_alpha = 8;  // PEFT's LoraConfig default
    snprintf(c->base_precision, sizeof c->base_precision, "f32");
    snprintf(c->lora_targets, sizeof c->lora_targets, "all-linear");
    c->val_batches = 8;
    c->log_every = 10;
    model_config *m = &c->model;
    if (!strcmp(name, "micro")) {
        // A smoke-test size: trains in seconds on a software GPU (lavapipe, or SwiftShader in a
        // browser, docs/web.md) and still shows the loss falling within its 60 updates.
        *m = (model_config){.arch = "gpt2", .n_layer = 2, .n_head = 2, .d_model = 64, .d_ff = 256, .max_seq = 32};
        c->batch = 4, c->seq = 32, c->steps = 60, c->warmup = 5, c->lr = 3e-3;
        c->val_every = 20, c->val_batches = 4, c->ckpt_every = 0;
    } else if (!strcmp(name, "tiny")) {
        // Sized for a 2-core CPU (measured on the Brown corpus, vocabulary 16384): about 2.7 K
        // tokens/s, so 600 updates of 8 x 64 tokens take 2-3 minutes and bring the validation
        // loss from 9.7 to about 6.3, a nat below the unigram entropy (7.26). Sequences of 64
        // beat 128 at equal time: twice the updates, and this model uses little context.
        *m = (model_config){.arch = "gpt2", .n_layer = 4, .n_head = 4, .d_model = 128, .d_ff = 512, .max_seq = 64};
        c->batch = 8, c->seq = 64, c->steps = 600, c->warmup = 40, c->lr = 2e-3;
        c->val_every = 50, c->val_batches = 16, c->ckpt_every = 200;
    } else if (!strcmp(name, "small")) {
        // ~10 M parameters besides the embeddings: minutes on a GPU, hours on a CPU.
        *m = (model_config){.arch = "gpt2", .n_layer = 6, .n_head = 6, .d_model = 384, .d_ff = 1536, .max_seq = 256};
        c->batch = 16, c->seq = 256, c->steps = 3000, c->warmup = 100, c->lr = 1e-3;
        c->val_every = 100, c->val_batches = 16, c->ckpt_every = 500;
    } else if (!strcmp(name, "gpt2-124m")) {
        *m = (model_config){.arch = "gpt2", .n_layer = 12, .n_head = 12, .d_model = 768, .d_ff = 3072, .max_seq = 1024};
        c->batch = 8, c->seq = 1024, c->steps = 10000, c->warmup = 700, c->lr = 6e-4;
        c->val_every = 250, c->val_batches = 16, c->ckpt_every = 1000;
    } else if (!strcmp(name, "llama-tiny")) {
        // tiny's budget in LLaMA's form: 2 KV heads, each shared by 2 of the 4 query heads, a SwiGLU
        // MLP of 3 x 352 (about tiny's 2 x 512 matrix elements), the lm_head tied as in tiny
        *m = (model_config){.arch = "llama", .n_layer = 4, .n_head = 4, .d_model = 128, .d_ff = 352, .max_seq = 64,
                            .n_kv_heads = 2, .rope_theta = 10000, .rms_eps = 1e-5, .tie_embeddings = 1};
        c->batch = 8, c->seq = 64, c->steps = 600, c->warmup = 40, c->lr = 2e-3;
        c->val_every = 50, c->val_batches = 16, c->ckpt_every = 200;
    } else if (!strcmp(name, "llama-124m")) {
        // gpt2-124m's depth and width with grouped-query attention (3 query heads per KV head) and
        // a SwiGLU MLP of 3 x 2048 (about GPT-2's 2 x 3072)
        *m = (model_config){.arch = "llama", .n_layer = 12, .n_head = 12, .d_model = 768, .d_ff = 2048, .max_seq = 1024,
                            .n_kv_heads = 4, .rope_theta = 10000, .rms_eps = 1e-5, .tie_embeddings = 1};
        c->batch = 8, c->seq = 1024, c->steps = 10000, c->warmup = 700, c->lr = 6e-4;
        c->val_every = 250, c->val_batches = 16, c->ckpt_every = 1000;
    } else {
        return wgt_fail(WGT_ERR_ARG, "unknown preset '%s'; use tiny, small, gpt2-124m, llama-tiny, llama-124m or micro", name);
    }
    snprintf(c->preset, sizeof c->preset, "%s", name);
    return WGT_OK;
}

// ------------------------------------------------------------------ field access

static void *fptr(train_config *c, const field *f) { return (char *)c + f->off; }
static const void *fcptr(const train_config *c, const field *f) { return (const char *)c + f->off; }

static double field_num(const train_config *c, const field *f) {
    switch (f->type) {
    case FT_INT: return *(const int *)fcptr(c, f);
    case FT_LONG: return (double)*(const long *)fcptr(c, f);
    case FT_DOUBLE: return *(const double *)fcptr(c, f);
    case FT_STR: break;
    }
    WGT_ASSERT(0, "field_num on a string field");
    return 0;
}

static void field_set_num(train_config *c, const field *f, double v) {
    switch (f->type) {
    case FT_INT: *(int *)fptr(c, f) = (int)v; return;
    case FT_LONG: *(long *)fptr(c, f) = (long)v; return;
    case FT_DOUBLE: *(double *)fptr(c, f) = v; return;
    case FT_STR: break;
    }
    WGT_ASSERT(0, "field_set_num on a string field");
}

static int field_equal(const train_config *a, const train_config *b, const field *f) {
    if (f->type == FT_STR) return !strcmp(fcptr(a, f), fcptr(b, f));
    return field_num(a, f) == field_num(b, f);
}

static void field_format(const train_config *c, const field *f, char *buf, size_t n) {
    if (f->type == FT_STR) snprintf(buf, n, "'%s'", (const char *)fcptr(c, f));
    else if (f->type == FT_DOUBLE) snprintf(buf, n, "%.17g", field_num(c, f));
    else snprintf(buf, n, "%.0f", field_num(c, f));
}

// As field_format, with a number in its shortest exact form (0.003, not 0.0030000000000000001).
static void field_format_short(const train_config *c, const field *f, char *buf, size_t n) {
    if (f->type != FT_DOUBLE) {
        field_format(c, f, buf, n);
        return;
    }
    double v = field_num(c, f);
    for (int prec = 6; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) break;
    }
}

// Parses s as the field's value, checking the range; names the flag when it fails.
static wgt_status field_parse(train_config *c, const field *f, const char *s) {
    if (f->type == FT_STR) {
        if (strlen(s) >= f->size) return wgt_fail(WGT_ERR_ARG, "%s value is too long (%zu characters at most)", f->flag, f->size - 1);
        snprintf(fptr(c, f), f->size, "%s", s);
        return WGT_OK;
    }
    char *end;
    errno = 0;
    double v;
    if (f->type == FT_DOUBLE) {
        v = strtod(s, &end);
    } else {
        long long k = strtoll(s, &end, 10);
        v = (double)k;
    }
    if (end != s && !*end && errno == ERANGE)
        return wgt_fail(WGT_ERR_ARG, "%s %s is out of range (its magnitude is too %s for a %s)", f->flag, s,
                        fabs(v) > 1 ? "large" : "small", f->type == FT_DOUBLE ? "double" : "64-bit integer");
    if (end == s || *end || errno == ERANGE || !isfinite(v))
        return wgt_fail(WGT_ERR_ARG, "%s expects %s, got '%s'", f->flag, f->type == FT_DOUBLE ? "a number" : "an integer", s);
    if (v < f->lo || v > f->hi) {
        if (f->type != FT_DOUBLE)  // integer bounds in full ("4294967295", not "4.29497e+09")
            return wgt_fail(WGT_ERR_ARG, "%s must be between %.0f and %.0f, got %s", f->flag, f->lo, f->hi, s);
        return wgt_fail(WGT_ERR_ARG, "%s must be between %g and %g, got %s", f->flag, f->lo, f->hi, s);
    }
    field_set_num(c, f, v);
    return WGT_OK;
}

wgt_status train_config_start(train_config *c, const train_config *flags, const train_flags *fl) {
    int arch_given = 0;
    for (int k = 0; k < N_FIELDS; k++) arch_given |= fl->given[k] && fields[k].off == OFF(model.arch);
    // no --preset: the first preset of the --arch family (llama-tiny for llama), else tiny
    const char *preset = flags->preset;
    for (int k = 0; !preset[0] && arch_given && train_preset_names[k]; k++)
        if (train_config_preset(c, train_preset_names[k]) == WGT_OK && !strcmp(c->model.arch, flags->model.arch))
            preset = train_preset_names[k];
    if (!preset[0]) preset = "tiny";
    WGT_TRY(train_config_preset(c, preset));
    c->model.max_seq = 0, c->model.vocab = 0;
    // another family than the preset's: the preset's sizes stay, its family's own settings go
    if (arch_given && strcmp(flags->model.arch, c->model.arch)) model_config_set_arch(&c->model, flags->model.arch);
    train_config_apply_flags(c, flags, fl);
    return WGT_OK;
}

int train_config_parse_flag(train_config *c, train_flags *fl, int argc, char **argv, int *i, wgt_status *st) {
    for (int k = 0; k < N_FIELDS; k++) {
        const field *f = &fields[k];
        if (!f->flag || strcmp(argv[*i], f->flag)) continue;
        if (!f->arg[0]) {  // a switch: present means 1
            field_set_num(c, f, 1);
            fl->given[k] = 1;
            *st = WGT_OK;
            return 1;
        }
        if (*i + 1 >= argc) {
            *st = wgt_fail(WGT_ERR_ARG, "%s needs a value (%s); see --help", f->flag, f->arg);
            return 1;
        }
        *st = field_parse(c, f, argv[++*i]);
        if (*st == WGT_OK) fl->given[k] = 1;
        return 1;
    }
    return 0;
}

void train_config_apply_flags(train_config *dst, const train_config *src, const train_flags *fl) {
    for (int k = 0; k < N_FIELDS; k++) {
        if (!fl->given[k]) continue;
        const field *f = &fields[k];
        if (f->type == FT_STR) snprintf(fptr(dst, f), f->size, "%s", (const char *)fcptr(src, f));
        else field_set_num(dst, f, field_num(src, f));
    }
}

wgt_status train_config_check_resume(const train_config *ck, const train_config *fc, const train_flags *fl) {
    for (int k = 0; k < N_FIELDS; k++) {
        const field *f = &fields[k];
        if (!fl->given[k] || f->resume_mutable || field_equal(ck, fc, f)) continue;
        if (f->off == OFF(seq) && fc->seq > ck->model.max_seq)
            return wgt_fail(WGT_ERR_CONFIG, "--seq %d exceeds the model's maximum sequence length %d (fixed when the run "
                            "started); resume without --seq, or start a new run with --max-seq", fc->seq, ck->model.max_seq);
        char a[64], b[64];
        field_format(fc, f, a, sizeof a);
        field_format(ck, f, b, sizeof b);
        return wgt_fail(WGT_ERR_CONFIG, "%s %s differs from the checkpoint, which was trained with %s: a resumed run keeps "
                        "its configuration; drop %s to continue the run, or train into a new --out directory", f->flag, a,
                        b, f->flag);
    }
    return WGT_OK;
}

int train_config_resume_changes(const train_config *ck, const train_config *now, char *json, size_t json_n, char *said,
                                size_t said_n) {
    cJSON *o = cJSON_CreateObject();
    size_t k = 0;
    int n = 0;
    said[0] = 0;
    for (int i = 0; i < N_FIELDS; i++) {
        const field *f = &fields[i];
        // the data directory is compared by the dataset's own checks (a path may be spelled many ways)
        if (!f->resume_mutable || !f->flag || f->off == OFF(data_dir) || field_equal(ck, now, f)) continue;
        char a[64], b[64];
        field_format_short(now, f, a, sizeof a);
        field_format_short(ck, f, b, sizeof b);
        if (f->type == FT_STR) cJSON_AddStringToObject(o, f->key, (const char *)fcptr(now, f));
        else cJSON_AddNumberToObject(o, f->key, field_num(now, f));
        if (k < said_n) k += (size_t)snprintf(said + k, said_n - k, "%s%s %s (was %s)", n ? ", " : "", f->flag, a, b);
        n++;
    }
    char *text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    WGT_ASSERT(text, "out of memory");
    snprintf(json, json_n, "%s", n && strlen(text) < json_n ? text : "");
    free(text);
    return n;
}

wgt_status train_config_check_model(const train_config *want, const train_config *have, const char *what) {
    model_config_delta d;
    if (!model_config_diff(&have->model, &want->model, &d)) return WGT_OK;
    return wgt_fail(WGT_ERR_FORMAT, "%s has %s = %s but %s was expected: it belongs to a different model", what, d.key,
                    d.a, d.b);
}

int train_config_flag_given(const train_flags *fl, const char *flag) {
    for (int k = 0; k < N_FIELDS; k++)
        if (fields[k].flag && !strcmp(fields[k].flag, flag)) return fl->given[k];
    return 0;
}

wgt_status train_config_check_init(const train_config *flags, const train_flags *fl, const model_config *init,
                                   const char *what) {
    train_config have;
    memset(&have, 0, sizeof have);
    have.model = *init;
    for (int k = 0; k < N_FIELDS; k++) {
        const field *f = &fields[k];
        if (!fl->given[k] || !f->model || field_equal(flags, &have, f)) continue;
        char a[64], b[64];
        field_format(flags, f, a, sizeof a);
        field_format(&have, f, b, sizeof b);
        return wgt_fail(WGT_ERR_CONFIG, "%s %s contradicts the model of --init %s, which has %s = %s: its config sets "
                        "the model; drop %s", f->flag, a, what, f->key, b, f->flag);
    }
    return WGT_OK;
}

void train_config_print_flags(FILE *out) {
    for (int k = 0; k < N_FIELDS; k++) {
        const field *f = &fields[k];
        if (!f->flag) continue;
        char left[48];
        snprintf(left, sizeof left, "%s %s", f->flag, f->arg);
        fprintf(out, "  %-24s %s\n", left, f->help);
    }
}

int train_config_flag_names(const char **out, int cap) {
    int n = 0;
    for (int k = 0; k < N_FIELDS; k++)
        if (fields[k].flag && n < cap) out[n++] = fields[k].flag;
    return n;
}

// ------------------------------------------------------------------ --config FILE

// The field a key of a --config file names: its config.json key (in its section, or at the
// top level when unambiguous) or its flag without the dashes ("val-every").
static const field *config_key_field(const char *section, const char *key) {
    for (int k = 0; k < N_FIELDS; k++) {
        const field *f = &fields[k];
        if (!f->flag) continue;
        int in_section = section ? f->section && !strcmp(f->section, section) : 1;
        if (in_section && (!strcmp(f->key, key) || !strcmp(f->flag + 2, key))) return f;
    }
    return NULL;
}

// Sets one field from a JSON value with the flag's range check, naming the key when it fails.
// seen[k]: the spelling that set field k already ("" when none), so that a file giving one
// setting twice ("steps" and "train.steps", or "val_every" and "val-every") is refused by name
// rather than read as whichever comes last.
static wgt_status config_set(train_config *c, train_flags *fl, const field *f, const cJSON *it, const char *key,
                             const char *path, char (*seen)[160]) {
    int k = (int)(f - fields);
    if (seen[k][0])
        return wgt_fail(WGT_ERR_CONFIG, "%s gives %s twice, as \"%s\" and as \"%s\"; keep one of them", path, f->flag,
                        seen[k], key);
    snprintf(seen[k], sizeof seen[k], "%s", key);
    if (f->type == FT_STR) {
        if (!cJSON_IsString(it))
            return wgt_fail(WGT_ERR_CONFIG, "%s: \"%s\" must be a string (%s %s)", path, key, f->flag, f->arg);
        WGT_TRY(field_parse(c, f, it->valuestring));
    } else {
        // min_lr -1: config.json's "lr / 10"
        int unset_min_lr = f->off == OFF(min_lr) && cJSON_IsNumber(it) && it->valuedouble == -1;
        if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble) ||
            (!unset_min_lr && (it->valuedouble < f->lo || it->valuedouble > f->hi)) ||
            (f->type != FT_DOUBLE && it->valuedouble != floor(it->valuedouble)))
            return wgt_fail(WGT_ERR_CONFIG, "%s: \"%s\" must be %s between %g and %g (%s)", path, key,
                            f->type == FT_DOUBLE ? "a number" : "an integer", f->lo, f->hi, f->flag);
        field_set_num(c, f, it->valuedouble);
    }
    fl->given[k] = 1;
    return WGT_OK;
}

wgt_status train_config_read_file(train_config *c, train_flags *fl, const char *path) {
    memset(c, 0, sizeof *c);
    memset(fl, 0, sizeof *fl);
    char *text;
    size_t n;
    WGT_TRY(file_read_all(path, "training configuration", "pass --config FILE.json", 1 << 20, &text, &n));
    cJSON *root;
    wgt_status st = json_parse_strict(&root, text, n, 0, path);
    free(text);
    WGT_TRY(st);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return wgt_fail(WGT_ERR_CONFIG, "%s is not a JSON object of settings (the keys of the flags or of a run's "
                        "config.json)", path);
    }
    char unknown[512] = "";
    size_t nu = 0;
    int n_unknown = 0;
    char seen[N_FIELDS][160];
    memset(seen, 0, sizeof seen);
    for (const cJSON *it = root->child; it && st == WGT_OK; it = it->next) {
        const char *key = it->string;
        if (!strcmp(key, "format")) {
            if (!cJSON_IsString(it) || strcmp(it->valuestring, "wgtrain-run"))
                st = wgt_fail(WGT_ERR_CONFIG, "%s: \"format\" is not \"wgtrain-run\"", path);
            continue;
        }
        if (!strcmp(key, "version")) {
            if (!cJSON_IsNumber(it) || it->valuedouble != 1)
                st = wgt_fail(WGT_ERR_CONFIG, "%s: run configuration version %g; this build reads version 1", path,
                              cJSON_IsNumber(it) ? it->valuedouble : -1.0);
            continue;
        }
        if (!strcmp(key, "tokenizer_fnv1a64")) continue;  // recorded from the data when the run starts
        int is_section = cJSON_IsObject(it);
        if (is_section) {
            int known_section = 0;
            for (int k = 0; k < N_FIELDS; k++) known_section |= fields[k].section && !strcmp(fields[k].section, key);
            if (!known_section) goto unknown_key;
            for (const cJSON *sub = it->child; sub && st == WGT_OK; sub = sub->next) {
                if (!strcmp(key, "lora") && !strcmp(sub->string, "base_fnv1a64")) continue;  // recorded at the start
                const field *f = config_key_field(key, sub->string);
                char full[160];
                snprintf(full, sizeof full, "%s.%s", key, sub->string);
                if (f) st = config_set(c, fl, f, sub, full, path, seen);
                else if (nu < sizeof unknown - 1) {
                    nu += (size_t)snprintf(unknown + nu, sizeof unknown - nu, "%s\"%s\"", n_unknown ? ", " : "", full);
                    n_unknown++;
                }
            }
            continue;
        }
        {
            const field *f = config_key_field(NULL, key);
            if (f) {
                st = config_set(c, fl, f, it, key, path, seen);
                continue;
            }
        }
    unknown_key:
        if (nu < sizeof unknown - 1) {
            nu += (size_t)snprintf(unknown + nu, sizeof unknown - nu, "%s\"%s\"", n_unknown ? ", " : "", key);
            n_unknown++;
        }
    }
    cJSON_Delete(root);
    WGT_TRY(st);
    if (n_unknown)
        return wgt_fail(WGT_ERR_CONFIG, "%s: unknown key%s %s; the keys are those of a run's config.json (\"train\": "
                        "{\"steps\": ...}) or the flags without their dashes (\"steps\", \"val-every\"); see "
                        "wgtrain train --help", path, n_unknown > 1 ? "s" : "", unknown);
    return WGT_OK;
}

// ------------------------------------------------------------------ validation

model_recompute train_config_recompute(const train_config *c) {
    model_recompute r = MODEL_RECOMPUTE_NONE;
    if (c->recompute[0] && strcmp(c->recompute, "auto"))  // (checked by train_config_finish; auto: resolved by the plan)
        model_recompute_parse(c->recompute, "--recompute", &r);
    return r;
}

model_precision train_config_precision(const train_config *c) {
    return !strcmp(c->precision, "f16") ? MODEL_PREC_F16 : MODEL_PREC_F32;
}

wgt_status train_config_finish(train_config *c) {
    if (c->min_lr < 0) c->min_lr = c->lr / 10;
    model_precision prec;
    WGT_TRY(model_precision_parse(c->precision, "--precision", &prec));
    model_recompute rc;
    if (strcmp(c->recompute, "auto")) WGT_TRY(model_recompute_parse(c->recompute, "--recompute", &rc));
    if (c->model.vocab < 1)
        return wgt_fail(WGT_ERR_CONFIG, "the vocabulary size is unknown: the data directory has no tokenizer; pass --vocab");
    if (c->model.max_seq < 1) c->model.max_seq = c->seq;
    model_config_defaults(&c->model);
    if (c->model.d_model % c->model.n_head)
        return wgt_fail(WGT_ERR_CONFIG, "--d-model %d is not a multiple of --heads %d; pick sizes with d_model = heads x "
                        "head size (e.g. --d-model %d)", c->model.d_model, c->model.n_head,
                        (c->model.d_model / c->model.n_head + 1) * c->model.n_head);
    WGT_TRY(model_config_check(&c->model));
    if (c->seq > c->model.max_seq)
        return wgt_fail(WGT_ERR_CONFIG, "--seq %d exceeds the model's maximum sequence length %d; use --seq %d or less, "
                        "or a larger --max-seq", c->seq, c->model.max_seq, c->model.max_seq);
    // every size derived from these must fit the int32 token buffers and int arithmetic
    if ((int64_t)c->batch * c->seq * c->grad_accum > INT32_MAX)
        return wgt_fail(WGT_ERR_CONFIG, "--batch %d x --seq %d x --grad-accum %d = %lld tokens per update, more than the "
                        "%d wgtrain supports; lower one of them", c->batch, c->seq, c->grad_accum,
                        (long long)c->batch * c->seq * c->grad_accum, INT32_MAX);
    if (!(c->lr > 0)) return wgt_fail(WGT_ERR_CONFIG, "--lr must be above 0, got %g", c->lr);
    if (c->min_lr > c->lr)
        return wgt_fail(WGT_ERR_CONFIG, "--min-lr %g is above --lr %g; the decay goes from lr down to min-lr", c->min_lr, c->lr);
    if (!c->data_dir[0]) return wgt_fail(WGT_ERR_ARG, "no data directory; pass --data DATA_DIR (see `wgtrain prepare`)");
    {
        const char *ls = c->loss_scale;
        char *end;
        errno = 0;
        double v = strtod(ls, &end);
        int named = !strcmp(ls, "off") || !strcmp(ls, "dynamic") || !strcmp(ls, "auto");
        if (!named && (end == ls || *end || errno == ERANGE || !(v >= 1.1754943508222875e-38 && v <= 3.4028234663852886e38)))
            return wgt_fail(WGT_ERR_CONFIG, "--loss-scale '%s': use off, dynamic, auto or a fixed scale between 2^-126 and "
                            "2^128 (a power of two, e.g. 1024, keeps f32 results exact)", ls);
    }
    if (c->base_precision[0]) {
        model_base_prec bp;
        WGT_TRY(model_base_prec_parse(c->base_precision, "--base-precision", &bp));
        if (bp != MODEL_BASE_F32 && c->lora_r <= 0)
            return wgt_fail(WGT_ERR_CONFIG, "--base-precision %s stores a frozen base: it needs --lora R (and --init HF_DIR "
                            "for a pretrained base); without LoRA every weight trains in f32", c->base_precision);
    }
    if (c->lora_r > 0) {
        WGT_TRY(model_lora_targets_check(c->lora_targets, c->model.arch, "--lora-targets"));
    }
    if (c->steps < 1 && !c->init[0])
        return wgt_fail(WGT_ERR_CONFIG, "--steps must be at least 1 (0 only with --init: the model becomes a run "
                        "without training)");
    return WGT_OK;
}

// ------------------------------------------------------------------ JSON

char *train_config_to_json(const train_config *c) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "format", "wgtrain-run");
    cJSON_AddNumberToObject(root, "version", 1);
    for (int k = 0; k < N_FIELDS; k++) {
        const field *f = &fields[k];
        if (f->model) {  // the model's section is the model's own JSON, in the place of its first field
            if (!cJSON_GetObjectItemCaseSensitive(root, "model"))
                cJSON_AddItemToObject(root, "model", model_config_to_cjson(&c->model));
            continue;
        }
        cJSON *obj = root;
        if (f->section) {
            obj = cJSON_GetObjectItemCaseSensitive(root, f->section);
            if (!obj) obj = cJSON_AddObjectToObject(root, f->section);
        }
        if (f->type == FT_STR) {
            cJSON_AddStringToObject(obj, f->key, fcptr(c, f));
        } else {
            // cJSON's own number printing is only approximately reversible; a resumed run
            // needs its hyper-parameters back bit for bit, so print the shortest exact form
            char num[40];
            double v = field_num(c, f);
            for (int prec = 15; prec <= 17; prec++) {
                snprintf(num, sizeof num, "%.*g", prec, v);
                if (strtod(num, NULL) == v) break;
            }
            cJSON_AddRawToObject(obj, f->key, num);
        }
    }
    char *s = cJSON_Print(root);
    cJSON_Delete(root);
    WGT_ASSERT(s, "cJSON_Print failed (out of memory)");
    return s;
}

wgt_status train_config_from_json(train_config *c, const char *json, const char *what) {
    memset(c, 0, sizeof *c);
    cJSON *root;
    char label[TRAIN_PATH_MAX + 64];
    snprintf(label, sizeof label, "%s: the run configuration", what);
    WGT_TRY(json_parse_strict(&root, json, strlen(json), 0, label));
    wgt_status st = WGT_OK;
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format"), *ver = cJSON_GetObjectItemCaseSensitive(root, "version");
    if (!cJSON_IsObject(root))
        st = wgt_fail(WGT_ERR_FORMAT, "%s: the run configuration is not a JSON object", what);
    else if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "wgtrain-run"))
        st = wgt_fail(WGT_ERR_FORMAT, "%s: not a wgtrain run configuration (\"format\" is not \"wgtrain-run\")", what);
    else if (!cJSON_IsNumber(ver) || ver->valuedouble != 1)
        st = wgt_fail(WGT_ERR_FORMAT, "%s: run configuration version %g; this build reads version 1", what,
                      cJSON_IsNumber(ver) ? ver->valuedouble : -1.0);
    if (st == WGT_OK) st = model_config_from_cjson(&c->model, cJSON_GetObjectItemCaseSensitive(root, "model"), what);
    for (int k = 0; k < N_FIELDS && st == WGT_OK; k++) {
        const field *f = &fields[k];
        if (f->model) continue;  // read above
        const cJSON *obj = f->section ? cJSON_GetObjectItemCaseSensitive(root, f->section) : root;
        const cJSON *it = obj ? cJSON_GetObjectItemCaseSensitive(obj, f->key) : NULL;
        if (f->off == OFF(init)) {
            // optional (runs from before --init existed)
            if (it && (!cJSON_IsString(it) || strlen(it->valuestring) >= f->size))
                st = wgt_fail(WGT_ERR_FORMAT, "%s: the run configuration's %s is not a path", what, f->key);
            else if (it) snprintf(fptr(c, f), f->size, "%s", it->valuestring);
        } else if (f->off == OFF(tokenizer_hash)) {
            // optional (runs from before it was recorded): "" or 16 lowercase hex digits
            int ok = !it || (cJSON_IsString(it) && (!it->valuestring[0] || (strlen(it->valuestring) == 16 &&
                                                      strspn(it->valuestring, "0123456789abcdef") == 16)));
            if (!ok)
                st = wgt_fail(WGT_ERR_FORMAT, "%s: the run configuration's %s is not 16 hex digits", what, f->key);
            else if (it) snprintf(fptr(c, f), f->size, "%s", it->valuestring);
        } else if (!it && f->section && !strcmp(f->section, "lora")) {
            // runs from before LoRA had none (the defaults of train_config_preset)
            if (f->off == OFF(lora_alpha)) c->lora_alpha = 8;
            if (f->off == OFF(lora_targets)) snprintf(c->lora_targets, sizeof c->lora_targets, "all-linear");
            if (f->off == OFF(base_precision)) snprintf(c->base_precision, sizeof c->base_precision, "f32");
        } else if (f->off == OFF(lora_base_hash)) {
            int ok = cJSON_IsString(it) && (!it->valuestring[0] || (strlen(it->valuestring) == 16 &&
                                                                   strspn(it->valuestring, "0123456789abcdef") == 16));
            if (!ok) st = wgt_fail(WGT_ERR_FORMAT, "%s: the run configuration's lora.%s is not 16 hex digits", what, f->key);
            else snprintf(fptr(c, f), f->size, "%s", it->valuestring);
        } else if (f->off == OFF(dropout) && !it) {
            c->dropout = 0;  // runs from before dropout existed had none
        } else if (f->off == OFF(loss_scale) && !it) {
            snprintf(c->loss_scale, sizeof c->loss_scale, "off");  // runs from before loss scaling had none
        } else if (f->off == OFF(loss_scale_init) && !it) {
            c->loss_scale_init = 65536;
        } else if (f->off == OFF(loss_scale_window) && !it) {
            c->loss_scale_window = 2000;
        } else if (f->off == OFF(memory_limit) && !it) {
            c->memory_limit = 0;
        } else if (f->off == OFF(recompute) && !it) {
            snprintf(c->recompute, sizeof c->recompute, "none");  // runs from before recomputation
        } else if (f->off == OFF(precision) && !it) {
            snprintf(c->precision, sizeof c->precision, "f32");  // runs from before mixed precision
        } else if (f->off == OFF(precision) && !(cJSON_IsString(it) && (!strcmp(it->valuestring, "f32") ||
                                                                         !strcmp(it->valuestring, "f16")))) {
            st = wgt_fail(WGT_ERR_FORMAT, "%s: the run configuration's train.precision is not \"f32\" or \"f16\"", what);
        } else if (f->type == FT_STR) {
            if (!cJSON_IsString(it) || strlen(it->valuestring) >= f->size)
                st = wgt_fail(WGT_ERR_FORMAT, "%s: the run configuration lacks the string %s%s%s", what,
                              f->section ? f->section : "", f->section ? "." : "", f->key);
            else snprintf(fptr(c, f), f->size, "%s", it->valuestring);
        } else {
            // min_lr may hold its "unset" value -1 outside the flag's range
            int ok = cJSON_IsNumber(it) && isfinite(it->valuedouble) &&
                     ((it->valuedouble >= f->lo && it->valuedouble <= f->hi) || (f->off == OFF(min_lr) && it->valuedouble == -1));
            if (ok && f->type != FT_DOUBLE && it->valuedouble != floor(it->valuedouble)) ok = 0;
            if (!ok)
                st = wgt_fail(WGT_ERR_FORMAT, "%s: the run configuration lacks %s.%s or its value is out of range", what,
                              f->section ? f->section : "", f->key);
            else field_set_num(c, f, it->valuedouble);
        }
    }
    cJSON_Delete(root);
    return st;
}

// ------------------------------------------------------------------ loss scaling

void train_loss_scale_resolve(const train_config *c, float *scale, int *dynamic) {
    const char *ls = c->loss_scale;
    // "auto" is where the precision decides. Both are off: in f16 the weights and the kept
    // activations are f16 but every gradient stays f32 (docs/numerics.md#mixed-precision), so
    // there is no f16 gradient for a scale to keep from underflowing
    if (!strcmp(ls, "auto")) ls = "off";
    *dynamic = 0;
    *scale = 1.0f;
    if (!strcmp(ls, "off")) return;
    if (!strcmp(ls, "dynamic")) {
        *dynamic = 1;
        *scale = (float)c->loss_scale_init;
        return;
    }
    *scale = (float)strtod(ls, NULL);
}

int train_loss_scale_on(const train_config *c) {
    float s;
    int dyn;
    train_loss_scale_resolve(c, &s, &dyn);
    return dyn || s != 1.0f;
}

// ------------------------------------------------------------------ schedule

double train_lr_at(const train_config *c, long step) {
    if (step < c->warmup) return c->lr * (double)(step + 1) / (double)c->warmup;
    long span = c->steps - 1 - c->warmup;
    if (span <= 0) return c->lr;
    double p = (double)(step - c->warmup) / (double)span;
    if (p > 1) p = 1;  // steps raised on resume past the old end: keep the floor
    return c->min_lr + 0.5 * (c->lr - c->min_lr) * (1.0 + cos(M_PI * p));
}
