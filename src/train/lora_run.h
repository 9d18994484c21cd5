// lora_run.h — a LoRA run's frozen base (model/lora.h, docs/lora.md): its options from the run
// configuration, the base's fingerprint recorded when the run starts, and the base of a resumed
// (or exported, sampled, evaluated) run loaded again and checked against that fingerprint.
#ifndef WGT_LORA_RUN_H
#define WGT_LORA_RUN_H
#include "model/lora.h"
#include "train/train_config.h"

// The adapters of run config c (r 0: none).
void lora_run_opts(const train_config *c, model_lora_opts *o);
// --init naming a PEFT adapter directory (adapter_config.json): c->init becomes its base model's
// directory (base_model_name_or_path, which must be a local directory) and *adapter (n bytes) the
// adapter's; "" when --init is no adapter directory.
wgt_status lora_run_init_adapter(train_config *c, char *adapter, size_t n);
// After the base's config is known (c->model): the LoRA settings from the adapter's config; given
// flags that contradict it (--lora, --lora-alpha, --lora-targets, --lora-rslora) are refused.
wgt_status lora_run_adapter_settings(train_config *c, const train_flags *given, const char *adapter);
// A new run, base loaded: records its fingerprint in c and in RUN_DIR/config.json (rank 0 writes).
wgt_status lora_run_start(wgt_model *m, train_config *c, const char *run_dir);
// The base of a recorded run into m: the weights of c->init (or, for a run on a random base, the
// seed's initialisation), refused when their fingerprint is not the recorded one.
wgt_status lora_run_base(wgt_model *m, const train_config *c);
#endif
