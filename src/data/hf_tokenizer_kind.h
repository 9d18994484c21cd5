// hf_tokenizer_kind.h — the Hugging Face tokenizer.json kind of the tokenizer registry
// (hf_tokenizer_kind.c): what commands that need more than text_tokenizer.h gives (the chat
// template of tokenizer_config.json) reach through a text_tokenizer of this kind.
#ifndef WGT_HF_TOKENIZER_KIND_H
#define WGT_HF_TOKENIZER_KIND_H
#include <stddef.h>
#include <stdint.h>
#include "core/error.h"
#include "data/hf_tokenizer.h"

#define HF_KIND_NAME "hf"
#define HF_CONFIG_FILE "tokenizer_config.json"

// The kind's state (text_tokenizer's impl): its tokenizer, and tokenizer_config.json's bytes
// (NULL, *n = 0 when it had none).
const hf_tokenizer *hf_kind_tokenizer(const void *impl);
const char *hf_kind_config(const void *impl, size_t *n);
// The end-of-text id: config's eos_token (string or {"content": ...}) when config is not NULL and
// names one, else the post-processor's EOS, else -1. `what` names the config in messages.
wgt_status hf_kind_config_eot(const hf_tokenizer *tok, const char *config, size_t n, const char *what, int64_t *eot);
#endif
