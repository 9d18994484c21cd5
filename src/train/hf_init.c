// hf_init.c — finds the config and the weights (one file, or a sharded checkpoint's index) of a
// Hugging Face model for `train --init`
// (see hf_init.h); the tensors themselves are checked by model_check_safetensors (the header,
// before the model is made) and model_load_safetensors.
#include "train/hf_init.h"
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static int is_file(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

wgt_status hf_init_resolve(const char *path, const char *arch, int heads, model_config *c, char *weights, size_t n) {
    struct stat sb;
    if (stat(path, &sb) != 0)
        return wgt_fail(WGT_ERR_IO, "--init %s: not found (give a directory with config.json and model.safetensors, "
                        "or a .safetensors file)", path);
    if (S_ISDIR(sb.st_mode)) {
        char cfg[4096];
        if ((size_t)snprintf(cfg, sizeof cfg, "%s/config.json", path) >= sizeof cfg ||
            (size_t)snprintf(weights, n, "%s/model.safetensors", path) >= n)
            return wgt_fail(WGT_ERR_ARG, "--init %s: path too long", path);
        if (!is_file(weights)) {
            char alt[4200];
            // a sharded checkpoint: its index, which names the shards (transformers' order: a
            // model.safetensors first, then the index)
            if ((size_t)snprintf(alt, sizeof alt, "%s/model.safetensors.index.json", path) < n && is_file(alt)) {
                snprintf(weights, n, "%s", alt);
                if (!is_file(cfg))
                    return wgt_fail(WGT_ERR_IO, "--init %s has no config.json; give it the model's Hugging Face "
                                    "config.json", path);
                return model_config_from_hf_file(c, cfg);
            }
            snprintf(alt, sizeof alt, "%s/pytorch_model.bin", path);
            if (is_file(alt))
                return wgt_fail(WGT_ERR_FORMAT, "--init %s has pytorch_model.bin but no model.safetensors; wgtrain reads "
                                "safetensors (save with save_pretrained(..., safe_serialization=True))", path);
            return wgt_fail(WGT_ERR_IO, "--init %s has no model.safetensors", path);
        }
        if (!is_file(cfg))
            return wgt_fail(WGT_ERR_IO, "--init %s has no config.json; give it the model's Hugging Face config.json, or "
                            "pass the .safetensors file itself (GPT-2, with --heads)", path);
        WGT_TRY(model_config_from_hf_file(c, cfg));
        return WGT_OK;
    }
    if (!S_ISREG(sb.st_mode)) return wgt_fail(WGT_ERR_IO, "--init %s is neither a directory nor a file", path);
    if ((size_t)snprintf(weights, n, "%s", path) >= n) return wgt_fail(WGT_ERR_ARG, "--init %s: path too long", path);
    const char *family = arch ? arch : MODEL_ARCH_DEFAULT;
    if (strcmp(family, "gpt2"))
        return wgt_fail(WGT_ERR_ARG, "--init %s: a %s safetensors file does not record its heads, RoPE base or norm "
                        "epsilon; give the directory holding it and its Hugging Face config.json", path, family);
    if (!heads)
        return wgt_fail(WGT_ERR_ARG, "--init %s: a safetensors file does not record the number of attention heads; "
                        "pass --heads (12 for GPT-2 124M: head size 64), or give the directory with its config.json", path);
    return model_config_from_safetensors(c, family, path, heads);
}
