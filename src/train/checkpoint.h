// checkpoint.h — a training run's complete state in one file (RUN_DIR/ckpt.bin): the run
// configuration, the progress counters (step, data-loader RNG, ...), the parameters and both
// AdamW moments. Enough to continue bit for bit where the run stopped. A magic, a format
// version, a header checksum and a CRC-32 over the payload make any damage a clear refusal
// rather than a silently wrong model; files are written atomically, so a crash at any moment
// leaves the previous checkpoint intact. Format: docs/checkpoint-format.md.
#ifndef WGT_CHECKPOINT_H
#define WGT_CHECKPOINT_H
#include <stddef.h>
#include <stdint.h>
#include "core/error.h"
#include "train/train_config.h"

#define CKPT_MAGIC "WGTCKPT\n"
#define CKPT_VERSION 1
#define CKPT_HEADER_BYTES 64
#define CKPT_MAX_STEP 1000000000000ull  // the largest --steps (train_config's range)
#define CKPT_MAX_RANKS 65536ull  // the most ranks of a data-parallel run that tokens may count

typedef struct {
    uint64_t step;       // updates done: the next update has 0-based index `step`
    uint64_t updates;    // updates applied (step minus those skipped): AdamW's step count
    uint64_t data_rng;   // the data loader's RNG state after `step` updates
    uint64_t tokens;     // training tokens consumed, by all ranks of a data-parallel run
    double elapsed_s;    // training wall time so far (all sessions)
} ckpt_progress;

typedef struct {
    train_config cfg;
    ckpt_progress pr;
    size_t n;                // elements of each state array (model_state_elems)
    float *params, *m, *v;   // malloc'd by checkpoint_read
} checkpoint;

wgt_status checkpoint_write(const char *path, const train_config *cfg, const ckpt_progress *pr, const float *params,
                            const float *m, const float *v, size_t n);
// Reads and verifies a checkpoint; on failure nothing is left allocated and the message says
// what is wrong with the file (truncated, checksum, magic, version...).
wgt_status checkpoint_read(checkpoint *ck, const char *path);
void checkpoint_free(checkpoint *ck);
// Fails if the checkpoint is for another model than cfg (naming the first differing field)
// or its state size is not n_elems.
wgt_status checkpoint_check_model(const checkpoint *ck, const train_config *cfg, size_t n_elems, const char *path);
#endif
