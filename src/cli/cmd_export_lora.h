// cmd_export_lora.h — `wgtrain export` of a LoRA run as a PEFT adapter directory (cmd_export_lora.c).
#ifndef WGT_CMD_EXPORT_LORA_H
#define WGT_CMD_EXPORT_LORA_H
#include "train/checkpoint.h"

// Writes out/adapter_config.json and out/adapter_model.safetensors of run `run` (checkpoint ck);
// existing ones are refused unless force.
wgt_status export_lora_adapter(const checkpoint *ck, const char *run, const char *out, int force);
#endif
