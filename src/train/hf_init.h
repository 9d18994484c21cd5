// hf_init.h — `wgtrain train --init PATH`: where a Hugging Face model's config and weights are
// (a directory with config.json and model.safetensors or a sharded checkpoint's
// model.safetensors.index.json, or the .safetensors file alone) and the model config they describe.
#ifndef WGT_HF_INIT_H
#define WGT_HF_INIT_H
#include <stddef.h>
#include "model/model.h"

// path: the --init value. arch: --arch when given (NULL: not given), heads: --heads when given
// (0: not). A directory needs config.json (which decides the family and every size) and
// model.safetensors or model.safetensors.index.json (then *weights is the index); a file alone is read as GPT-2 (the only family whose tensors show every
// size but the number of heads, which then comes from --heads). *c receives the config and
// weights (n bytes) the safetensors file to load.
wgt_status hf_init_resolve(const char *path, const char *arch, int heads, model_config *c, char *weights, size_t n);
#endif
