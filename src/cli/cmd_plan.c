// cmd_plan.c — `wgtrain plan`: the memory plan of a training run (model/plan.h) without starting
// it: the same flags as `train` (a preset, model flags, --init, --lora, --precision, --recompute,
// --batch, --seq, --memory-limit); the device buffers by kind for each recomputation mode, the
// largest batch that fits --memory-limit, and the refusal `train` would give. Nothing is allocated
// on the device and no run directory is written.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/cli.h"
#include "model/decode.h"
#include "model/plan.h"
#include "train/dataset.h"
#include "train/hf_init.h"
#include "train/lora_run.h"
#include "train/mem_plan.h"

static void usage(void) {
    printf("usage: wgtrain plan [train's flags] [--device auto|cpu|webgpu] [--adapter A]\n"
           "The device buffers a `wgtrain train` with these flags would allocate, by kind (weights, gradients,\n"
           "optimizer, activations kept, workspace, logits), for each --recompute mode, and with --memory-limit GIB\n"
           "the largest batch that fits and whether the run fits. The vocabulary comes from --init, --data or --vocab.\n"
           "Nothing is allocated on the device. Exit code 1 when the run does not fit --memory-limit.\n");
}

static wgt_status plan_main(int argc, char **argv) {
    static const char *known[128];
    static char names[64][40];
    int n = 0;
    known[n++] = "--device=";
    known[n++] = "--adapter=";
    known[n++] = "--help";
    const char *flags_list[64];
    int nf = train_config_flag_names(flags_list, 64);
    for (int k = 0; k < nf && n < 127; k++) {
        snprintf(names[k], sizeof names[k], "%s=", flags_list[k]);
        known[n++] = names[k];
    }
    known[n] = NULL;
    WGT_TRY(cli_args_split(&argc, &argv, known));
    train_config flags, c;
    train_flags given;
    memset(&flags, 0, sizeof flags);
    memset(&given, 0, sizeof given);
    const char *device = "auto", *adapter = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        wgt_status st = WGT_OK;
        if (!strcmp(a, "--help")) { usage(); exit(0); }
        if (train_config_parse_flag(&flags, &given, argc, argv, &i, &st)) {
            WGT_TRY(st);
            continue;
        }
        if (!cli_flag_known(a, known)) return cli_unknown_flag("plan", a, known);
        if (i + 1 >= argc) return wgt_fail(WGT_ERR_ARG, "option '%s' needs a value (see --help)", a);
        const char *v = argv[++i];
        if (!strcmp(a, "--device")) device = v;
        else adapter = v;
    }
    WGT_TRY(train_config_start(&c, &flags, &given));
    if (c.init[0]) {
        model_config mc;
        char weights[TRAIN_PATH_MAX];
        WGT_TRY(hf_init_resolve(c.init, train_config_flag_given(&given, "--arch") ? flags.model.arch : NULL,
                                train_config_flag_given(&given, "--heads") ? flags.model.n_head : 0, &mc, weights,
                                sizeof weights));
        WGT_TRY(train_config_check_init(&flags, &given, &mc, c.init));
        c.model = mc;
    } else if (c.data_dir[0] && !c.model.vocab) {
        dataset *ds;
        WGT_TRY(dataset_open(&ds, c.data_dir));
        c.model.vocab = dataset_vocab(ds);
        dataset_free(ds);
    }
    if (!c.model.vocab)
        return wgt_fail(WGT_ERR_ARG, "the vocabulary is unknown: pass --init HF_DIR, --data DATA_DIR or --vocab V");
    if (!c.model.max_seq) c.model.max_seq = c.seq;
    if (!c.data_dir[0]) snprintf(c.data_dir, sizeof c.data_dir, "(none)");  // (finish wants one; plan reads none)
    WGT_TRY(train_config_finish(&c));
    wgt_backend *be = NULL;
    WGT_TRY(cli_backend_open(&be, device, adapter, 0));
    printf("plan: %s on %s: %d layers, d_model %d, d_ff %d, vocabulary %d; batch %d x %d tokens, precision %s%s%s\n",
           c.model.arch, be->name, c.model.n_layer, c.model.d_model, c.model.d_ff, c.model.vocab, c.batch, c.seq,
           c.precision, c.lora_r ? ", LoRA, base " : "", c.lora_r ? (c.base_precision[0] ? c.base_precision : "f32") : "");
    model_lora_opts lora;
    lora_run_opts(&c, &lora);
    for (int r = MODEL_RECOMPUTE_NONE; r <= MODEL_RECOMPUTE_BLOCK; r++) {
        model_opts o = {train_config_precision(&c), &lora, (model_recompute)r, 0};
        model_plan p;
        char s[32], s2[32];
        wgt_status st = model_plan_make(&p, be, &c.model, c.batch, c.seq, &o);
        if (st != WGT_OK) {
            printf("plan: --recompute %-9s: %s\n", model_recompute_name((model_recompute)r), wgt_last_error());
            continue;
        }
        printf("plan: --recompute %-9s: total %s (activations kept %s)", model_recompute_name((model_recompute)r),
               plan_bytes_str(s, p.total), plan_bytes_str(s2, p.bytes[PLAN_ACTIVATIONS]));
        if (c.memory_limit > 0)
            printf(", largest batch within %g GiB: %d", c.memory_limit,
                   model_plan_largest_batch(be, &c.model, c.seq, &o, (uint64_t)(c.memory_limit * 1073741824.0),
                                            1 << 16, NULL));
        printf("\n");
    }
    // generation (sample, chat): an inference-only model (parameters alone) and the decoder's
    // key/value cache and activations for --batch sequences of --seq tokens
    model_opts io = {MODEL_PREC_F32, &lora, MODEL_RECOMPUTE_NONE, 1};
    model_plan ip;
    if (model_plan_make(&ip, be, &c.model, 1, 1, &io) == WGT_OK) {
        uint64_t cache, acts;
        char s1[32], s2[32], s3[32], s4[32];
        model_decoder_bytes(&c.model, c.batch, c.seq, &cache, &acts);
        printf("plan: generation, %d x %d tokens: total %s (weights %s, key/value cache %s, decoder activations %s; no "
               "gradients or optimizer state)\n", c.batch, c.seq, plan_bytes_str(s1, ip.total + cache + acts),
               plan_bytes_str(s2, ip.bytes[PLAN_WEIGHTS]), plan_bytes_str(s3, cache), plan_bytes_str(s4, acts));
    }
    // what train would do: its plan (auto resolved) and its refusal
    model_opts mo;
    wgt_status st = train_plan_check(&c, be, &mo, &lora);
    be->free(be);
    return st;
}

int cmd_plan(int argc, char **argv) {
    wgt_status st = plan_main(argc, argv);
    return st == WGT_OK ? 0 : cli_fail("plan", st);
}
