// cmd_presets.c — `wgtrain presets`: every preset of `wgtrain train` with its sizes and
// schedule, read from train_config's presets so the table cannot drift from them.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/cli.h"
#include "train/train_config.h"

void cli_print_presets(FILE *f) {
    fprintf(f, "  %-11s %-5s %6s %5s %3s %7s %5s %5s %5s %6s %7s %6s %9s %11s %10s\n", "preset", "arch", "layers", "heads", "kv",
            "d_model", "d_ff", "seq", "batch", "steps", "lr", "warmup", "val_every", "val_batches", "ckpt_every");
    for (int i = 0; train_preset_names[i]; i++) {
        train_config c;
        if (train_config_preset(&c, train_preset_names[i]) != WGT_OK) continue;
        const model_config *m = &c.model;
        char kv[16];
        if (m->n_kv_heads) snprintf(kv, sizeof kv, "%d", m->n_kv_heads);
        else snprintf(kv, sizeof kv, "-");
        fprintf(f, "  %-11s %-5s %6d %5d %3s %7d %5d %5d %5d %6ld %7g %6ld %9ld %11ld %10ld\n", train_preset_names[i], m->arch,
                m->n_layer, m->n_head, kv, m->d_model, m->d_ff, c.seq, c.batch, c.steps, c.lr, c.warmup, c.val_every,
                c.val_batches, c.ckpt_every);
    }
    train_config d;
    if (train_config_preset(&d, "tiny") == WGT_OK)
        fprintf(f, "  every preset: min_lr lr/10, weight decay %g, clip %g, AdamW betas %g/%g, eps %g, z-loss %g, seed %ld,\n"
                   "  grad_accum %d, log_every %ld; any of these is a flag of `wgtrain train`\n",
                d.weight_decay, d.clip, d.beta1, d.beta2, d.eps, d.z_loss, d.seed, d.grad_accum, d.log_every);
}

int cmd_presets(int argc, char **argv) {
    static const char *const known[] = {"--help", "-h", NULL};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: wgtrain presets\n  Prints every preset of `wgtrain train --preset NAME` with its sizes and "
                   "schedule.\n");
            return 0;
        }
        return cli_fail("presets", cli_unknown_flag("presets", argv[i], known));
    }
    printf("presets of `wgtrain train --preset NAME` (the vocabulary comes from the data; flags override any value):\n");
    cli_print_presets(stdout);
    return 0;
}
