// families.c — the registry of model families (model_arch_find, config JSON and Hugging Face
// model_type lookups go through it). A new family adds its descriptor here.
#include "model/model_impl.h"

const model_arch *const model_archs[] = {&model_arch_gpt2, &model_arch_llama, &model_arch_mistral, &model_arch_qwen2,
                                       &model_arch_qwen3, &model_arch_gemma3_text};
const int model_n_archs = (int)(sizeof model_archs / sizeof model_archs[0]);
