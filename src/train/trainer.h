// trainer.h — the training loop behind `wgtrain train`, and the pieces `eval` and `sample`
// share with it: the run directory's file names, building a model from a checkpoint, and the
// validation loss. Split into init (config, data, checkpoint: everything a user can get
// wrong, checked before any device is opened) and run (the loop on a backend).
#ifndef WGT_TRAINER_H
#define WGT_TRAINER_H
#include "backend/backend.h"
#include "model/model.h"
#include "train/checkpoint.h"
#include "train/dataset.h"
#include "train/train_config.h"

#define RUN_CKPT_FILE "ckpt.bin"
#define RUN_CONFIG_FILE "config.json"
#define RUN_METRICS_FILE "metrics.jsonl"
#define RUN_PLOT_FILE "loss.svg"
#define RUN_MODEL_FILE "model.safetensors"
#define RUN_TOKENIZER_FILE "tokenizer.bin"

// dst = run_dir/name; fails if the result does not fit.
wgt_status run_path(char *dst, size_t n, const char *run_dir, const char *name);

// Reads RUN_DIR/ckpt.bin, refusing a missing or damaged file with a message saying so.
wgt_status run_checkpoint_read(checkpoint *ck, const char *run_dir);
// A model of the checkpoint's config for batches of B x T, holding the checkpoint's state.
// prec: the precision to run at; the checkpoint's f32 master weights load into either.
wgt_status run_model_open(wgt_model **out, wgt_backend *be, const checkpoint *ck, int B, int T, const char *run_dir,
                          model_precision prec);
// The same, inference-only (model_opts.inference: no gradients, no AdamW moments; the checkpoint's
// moments are not loaded): for sample, chat and generation.
wgt_status run_model_open_inference(wgt_model **out, wgt_backend *be, const checkpoint *ck, int B, int T,
                                    const char *run_dir, model_precision prec);

// Mean cross-entropy (no label smoothing, no z-loss: comparable to the entropy) over
// max_batches validation batches spread evenly over the set (0: all of them), always the same
// ones. The model must be built for B x T.
wgt_status train_evaluate(wgt_model *m, const dataset *ds, int B, int T, long max_batches, double *loss, size_t *targets);
// The same, calling progress(ctx, batches done, batches in all, targets scored) after each batch.
typedef void (*train_eval_progress_fn)(void *ctx, size_t done, size_t total, size_t targets);
wgt_status train_evaluate_progress(wgt_model *m, const dataset *ds, int B, int T, long max_batches, double *loss,
                                   size_t *targets, train_eval_progress_fn progress, void *ctx);
// The number of batches train_evaluate scores.
size_t train_eval_batches(const dataset *ds, int B, int T, long max_batches);

typedef struct {
    const char *run_dir;
    int resume;
    long stop_at;    // > 0: stop after this step with a checkpoint, as if interrupted
} trainer_opts;

typedef struct trainer trainer;

// flags: the values of the flags given on the command line (the others are ignored), given:
// which ones. Resolves the config (preset + flags, or the checkpoint's + allowed flags),
// opens and checks the data, prepares RUN_DIR. Prints what the run will do.
wgt_status trainer_init(trainer **out, const train_config *flags, const train_flags *given, const trainer_opts *o);
// Trains to the configured number of steps (or until SIGINT/SIGTERM or stop_at), writing
// metrics, plot and checkpoints. *interrupted is set when stopped early by a signal.
wgt_status trainer_run(trainer *t, wgt_backend *be, int *interrupted);
void trainer_free(trainer *t);
// Stops the running trainer_run after its current step, as SIGINT does (a checkpoint follows):
// for a host without signals (the browser page's Stop button, docs/web.md).
void trainer_request_stop(void);
#endif
