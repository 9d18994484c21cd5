// cmd_export_lora.c — `wgtrain export` of a LoRA run (without --merge): the adapters as a PEFT
// adapter directory (adapter_config.json naming the run's --init model as the base,
// adapter_model.safetensors), which PeftModel.from_pretrained(base, dir) loads. The frozen base is
// not written: it is the run's --init, checked against the fingerprint the run recorded.
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include "cli/cli.h"
#include "core/fileutil.h"
#include "model/lora.h"
#include "cli/cmd_export_lora.h"
#include "core/dir_switch.h"
#include "train/trainer.h"

// The names an adapter export writes (any other entry of the directory is kept).
static int adapter_owns(const char *name) {
    return !strcmp(name, "adapter_config.json") || !strcmp(name, "adapter_model.safetensors") ||
           strstr(name, ".tmp.") != NULL;
}

wgt_status export_lora_adapter(const checkpoint *ck, const char *run, const char *out, int force) {
    struct stat sb;
    if (stat(out, &sb) == 0 && !S_ISDIR(sb.st_mode))
        return wgt_fail(WGT_ERR_ARG, "--out %s exists and is not a directory", out);
    WGT_TRY(dir_make(out));
    static const char *const files[] = {"adapter_config.json", "adapter_model.safetensors"};
    for (int i = 0; i < 2 && !force; i++) {
        char p[TRAIN_PATH_MAX + 64];
        if ((size_t)snprintf(p, sizeof p, "%s/%s", out, files[i]) >= sizeof p)
            return wgt_fail(WGT_ERR_ARG, "path too long: %s", out);
        if (stat(p, &sb) == 0)
            return wgt_fail(WGT_ERR_ARG, "%s already holds %s; pass --force to replace it, or choose another --out", out,
                            files[i]);
    }
    // both files go into a stage that replaces the directory's adapter files at once (as the
    // full export does, docs/files-and-safety.md#export): never a new config beside old weights
    dir_switch sw;
    memset(&sw, 0, sizeof sw);
    wgt_status st = dir_switch_begin(&sw, out, adapter_owns);
    const int staged = st == WGT_OK;
    wgt_backend *be = NULL;
    wgt_model *m = NULL;
    if (st == WGT_OK) st = cli_backend_open(&be, "cpu", NULL, 0);
    if (st == WGT_OK) st = run_model_open(&m, be, ck, 1, 1, run, MODEL_PREC_F32);
    if (st == WGT_OK) st = model_lora_save_peft(m, sw.stage, ck->cfg.init);
    if (st == WGT_OK) st = dir_switch_commit(&sw);
    else if (staged) dir_switch_abort(&sw);
    if (st == WGT_OK)
        printf("export: %s (step %llu): LoRA rank %d, %d adapters on %s -> %s (adapter_config.json, "
               "adapter_model.safetensors; the base is %s; --merge writes the merged model)\n", run,
               (unsigned long long)ck->pr.step, ck->cfg.lora_r, model_lora_count(m), ck->cfg.lora_targets, out,
               ck->cfg.init[0] ? ck->cfg.init : "a random initialisation, not a file");
    model_free(m);
    if (be) be->free(be);
    return st;
}
