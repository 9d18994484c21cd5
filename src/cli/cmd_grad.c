// cmd_grad.c — `wgtrain grad`: loss and every parameter's gradient of a Hugging Face checkpoint
// (of any model family: its config.json, --config, or --arch and --heads for a GPT-2 file) on
// one batch, on either backend; with --steps N it also runs N AdamW steps on that batch and
// prints each step's loss (used to compare training against PyTorch).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/cli.h"
#include "core/npy.h"
#include "model/lora.h"

static void usage(void) {
    printf("usage: wgtrain grad --model M.safetensors (--config config.json | --heads NH [--arch NAME]) --tokens T.npy\n"
           "                    [--backend cpu|webgpu] [--adapter A] [--out G.safetensors] [--alpha A] [--beta B]\n"
           "                    [--steps N --lr X --weight-decay W --beta1 B1 --beta2 B2 --eps E --clip C] [--logits L.npy]\n"
           "                    [--precision f32|f16] [--lora-adapter DIR]\n"
           "  M: a .safetensors file, or a sharded checkpoint's model.safetensors.index.json (its shards beside it).\n"
           "  --config: M's Hugging Face config.json (its model_type, e.g. \"llama\", \"qwen3\" or \"gemma3_text\", is the\n"
           "  family): the family and every size; the tensors must match it (names, shapes, none missing or extra).\n"
           "  --heads NH [--arch NAME]: without a config, for a GPT-2 file (the default family, " MODEL_ARCH_DEFAULT "):\n"
           "  the sizes come from the tensors, the number of heads from NH.\n"
           "  tokens: int32 or uint32 [B, T+1]; inputs are [:, :-1], targets [:, 1:] (a negative int32 target is\n"
           "  ignored; a uint32 holds no negative value, so each of its tokens must be a vocabulary id).\n"
           "  Prints `loss <value>`: the mean cross-entropy over the targets (plus label smoothing / z-loss\n"
           "  terms when --alpha / --beta are given; both default to 0 here). --out writes each parameter's\n"
           "  gradient under its Hugging Face name and shape. --steps N then runs N AdamW steps on the batch\n"
           "  and prints `step i loss <value>` before each update. --precision f16 computes in mixed precision\n"
           "  (f16 GEMM operands and saved activations; the gradients and the weights stay f32).\n"
           "  --lora-adapter DIR: a PEFT LoRA adapter (adapter_config.json, adapter_model.safetensors) on the frozen\n"
           "  model: --out then holds the adapters' gradients under the adapter file's names, and --steps trains\n"
           "  the adapters alone.\n");
}

static const char *const grad_flags[] = {"--model=", "--tokens=", "--out=", "--logits=", "--backend=", "--device=",
                                         "--adapter=", "--arch=", "--config=", "--heads=", "--steps=", "--alpha=",
                                         "--beta=", "--lr=", "--weight-decay=", "--beta1=", "--beta2=", "--eps=",
                                         "--clip=", "--precision=", "--lora-adapter=", "--help", NULL};

static wgt_status grad_main(int argc, char **argv) {
    WGT_TRY(cli_args_split(&argc, &argv, grad_flags));
    const char *model = NULL, *tokens_path = NULL, *out = NULL, *backend = "cpu", *adapter = NULL, *logits_path = NULL,
               *arch = NULL, *config = NULL, *lora_dir = NULL;
    long heads = 0, steps = 0;
    double alpha = 0, beta = 0, lr = 1e-4, wd = 0.0, b1 = 0.9, b2 = 0.999, eps = 1e-8, clip = 0;
    model_precision prec = MODEL_PREC_F32;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help")) { usage(); exit(0); }
        if (!cli_flag_known(a, grad_flags)) return cli_unknown_flag("grad", a, grad_flags);
        if (i + 1 >= argc) return wgt_fail(WGT_ERR_ARG, "option '%s' needs a value (see --help)", a);
        const char *v = argv[++i];
        if (!strcmp(a, "--model")) model = v;
        else if (!strcmp(a, "--tokens")) tokens_path = v;
        else if (!strcmp(a, "--out")) out = v;
        else if (!strcmp(a, "--logits")) logits_path = v;
        else if (!strcmp(a, "--backend") || !strcmp(a, "--device")) backend = v;
        else if (!strcmp(a, "--adapter")) adapter = v;
        else if (!strcmp(a, "--arch")) arch = v;
        else if (!strcmp(a, "--config")) config = v;
        else if (!strcmp(a, "--lora-adapter")) lora_dir = v;
        else if (!strcmp(a, "--heads")) WGT_TRY(cli_parse_long(a, v, 1, 4096, &heads));
        else if (!strcmp(a, "--precision")) WGT_TRY(model_precision_parse(v, "--precision", &prec));
        else if (!strcmp(a, "--steps")) WGT_TRY(cli_parse_long(a, v, 0, 1000000, &steps));
        // the same ranges as `wgtrain train`'s flags: AdamW's betas below 1 (at 1 its bias
        // correction divides by zero), a learning rate that cannot overflow the weights at once
        else if (!strcmp(a, "--alpha")) WGT_TRY(cli_parse_double_range(a, v, 0, 1, 0, &alpha));
        else if (!strcmp(a, "--beta")) WGT_TRY(cli_parse_double_range(a, v, 0, 10, 0, &beta));
        else if (!strcmp(a, "--lr")) WGT_TRY(cli_parse_double_range(a, v, 0, 10, 0, &lr));
        else if (!strcmp(a, "--weight-decay")) WGT_TRY(cli_parse_double_range(a, v, 0, 10, 0, &wd));
        else if (!strcmp(a, "--beta1")) WGT_TRY(cli_parse_double_range(a, v, 0, 1, 1, &b1));
        else if (!strcmp(a, "--beta2")) WGT_TRY(cli_parse_double_range(a, v, 0, 1, 1, &b2));
        else if (!strcmp(a, "--eps")) WGT_TRY(cli_parse_double_range(a, v, 1e-30, 1, 0, &eps));
        else if (!strcmp(a, "--clip")) WGT_TRY(cli_parse_double_range(a, v, 0, 1e30, 0, &clip));
        else return cli_unknown_flag("grad", a, grad_flags);
    }
    if (!model || !tokens_path || (!heads && !config))
        return wgt_fail(WGT_ERR_ARG, "--model, --tokens and either --config or --heads are required (see --help)");
    if (alpha < 0 || alpha > 1) return wgt_fail(WGT_ERR_ARG, "--alpha must be in [0, 1], got %g", alpha);
    if (beta < 0) return wgt_fail(WGT_ERR_ARG, "--beta must be >= 0, got %g", beta);
    model_config cfg;
    if (config) {
        WGT_TRY(model_config_from_hf_file(&cfg, config));
        if (arch && strcmp(arch, cfg.arch))
            return wgt_fail(WGT_ERR_ARG, "--arch %s contradicts %s, which describes a %s model", arch, config, cfg.arch);
        if (heads && heads != cfg.n_head)
            return wgt_fail(WGT_ERR_ARG, "--heads %ld contradicts %s, which has %d heads", heads, config, cfg.n_head);
    } else {
        WGT_TRY(model_config_from_safetensors(&cfg, arch ? arch : MODEL_ARCH_DEFAULT, model, (int)heads));
    }
    // the file's tensors against the config from its header, before buffers of the config's size exist
    WGT_TRY(model_check_safetensors(&cfg, model));
    npy_array tk;
    WGT_TRY(npy_load(&tk, tokens_path));
    // the shape is checked before anything is derived from it ([B, 0] would make T = -1)
    if ((tk.dtype != NPY_I32 && tk.dtype != NPY_U32) || tk.ndim != 2 || tk.shape[1] < 2 || tk.shape[0] < 1 || tk.shape[0] > (1u << 20)) {
        char shape[NPY_MAX_DIMS * 24 + 4] = "[";
        for (int i = 0; i < tk.ndim; i++)
            snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%zu", i ? ", " : "", tk.shape[i]);
        strcat(shape, "]");
        wgt_status bad = wgt_fail(WGT_ERR_FORMAT, "'%s' is a %s array of shape %s; it must be an int32 or uint32 array of shape "
                                  "[B, T+1] with 1 <= B <= 1048576 and T >= 1", tokens_path, npy_dtype_name(tk.dtype), shape);
        npy_free(&tk);
        return bad;
    }
    wgt_status st = WGT_OK;
    size_t B = tk.shape[0], T1 = tk.shape[1], T = T1 - 1;
    if (T > (size_t)cfg.max_seq) {
        st = wgt_fail(WGT_ERR_FORMAT, "'%s' has sequences of %zu tokens (shape [%zu, %zu]) but the model's maximum "
                      "sequence length is %d", tokens_path, T, B, T1, cfg.max_seq);
        npy_free(&tk);
        return st;
    }
    int32_t *inp = wgt_malloc(B * T * 4), *tgt = wgt_malloc(B * T * 4);
    size_t valid = 0;
    if (st == WGT_OK) {
        // the values as stored: a uint32 is never negative (4294967295 is not -1), so only an
        // int32 target can be "ignore"
        const int is_u32 = tk.dtype == NPY_U32;
        const int32_t *d = tk.data;
        const uint32_t *du = tk.data;
        // every input must be a vocabulary id; a negative target (last column or not) is "ignore"
        for (size_t i = 0; i < B * T1; i++) {
            int64_t v = is_u32 ? (int64_t)du[i] : (int64_t)d[i];
            if (v >= cfg.vocab || (v < 0 && i % T1 < T)) {
                st = wgt_fail(WGT_ERR_FORMAT, "'%s': token %lld at index %zu is outside the vocabulary 0..%d%s",
                              tokens_path, (long long)v, i, cfg.vocab - 1,
                              is_u32 && i % T1 == T ? " (a target to ignore is -1 in an int32 array)" : "");
                break;
            }
        }
        // checked: every value fits an int32 as it is (ids below the vocabulary, negative int32 targets)
        for (size_t b = 0; b < B && st == WGT_OK; b++)
            for (size_t t = 0; t < T; t++) {
                inp[b * T + t] = d[b * T1 + t];
                tgt[b * T + t] = d[b * T1 + t + 1];
                valid += tgt[b * T + t] >= 0;
            }
        if (st == WGT_OK && !valid) st = wgt_fail(WGT_ERR_FORMAT, "'%s' has no valid target (all are ignored)", tokens_path);
    }
    wgt_backend *be = NULL;
    wgt_model *m = NULL;
    if (st == WGT_OK) st = cli_backend_open(&be, backend, adapter, 0);
    model_lora_opts lora = {0};
    if (st == WGT_OK && lora_dir) st = model_lora_peft_config(lora_dir, cfg.arch, &lora);
    if (st == WGT_OK) st = model_init_lora(&m, be, &cfg, (int)B, (int)T, prec, &lora);
    if (st == WGT_OK) st = model_load_safetensors(m, model);
    if (st == WGT_OK && lora_dir) st = model_lora_load_peft(m, lora_dir);
    model_loss_opts lo = {(float)alpha, (float)beta, 0.0f, 0, 0};
    if (st == WGT_OK && logits_path) {
        npy_array la = {NPY_F32, 3, {B, T, (size_t)cfg.vocab}, B * T * (size_t)cfg.vocab, NULL};
        la.data = wgt_malloc(la.n * 4);
        st = model_forward_logits(m, inp, la.data);
        if (st == WGT_OK) st = npy_save(logits_path, &la);
        npy_free(&la);
    }
    for (long s = 0; s <= steps && st == WGT_OK; s++) {
        model_zero_grad(m);
        st = model_forward(m, inp, tgt, lo, 1.0f / (float)valid);
        if (st != WGT_OK) break;
        model_backward(m);
        double sum;
        st = model_loss_sum(m, &sum);
        if (st != WGT_OK) break;
        if (s == 0) {
            printf("loss %.9g\n", sum / valid);
            if (out) st = lora_dir ? model_lora_save_grads(m, out) : model_save_safetensors(m, out, 1);
        }
        if (steps) {
            printf("step %ld loss %.9g\n", s, sum / valid);
            if (s < steps) model_update(m, (float)lr, (float)b1, (float)b2, (float)eps, (float)wd, (float)clip);
        }
    }
    if (st == WGT_OK) st = be->sync(be);
    model_free(m);
    if (be) be->free(be);
    free(inp);
    free(tgt);
    npy_free(&tk);
    return st;
}

int cmd_grad(int argc, char **argv) {
    wgt_status st = grad_main(argc, argv);
    return st == WGT_OK ? 0 : cli_fail("grad", st);
}
