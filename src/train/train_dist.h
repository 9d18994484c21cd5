// train_dist.h — what the trainer does differently when it is one rank of a data-parallel run
// (dist.h): the agreement of all ranks before step 1, the per-step reduction of gradients,
// loss and stop requests, the weight check at checkpoints, the batch rule of --resume with
// another rank count, and a GPU per rank. Each function is the one-process case (nothing, or
// nearly) when dist_size() == 1, so the trainer calls them unconditionally. docs/distributed.md.
#ifndef WGT_TRAIN_DIST_H
#define WGT_TRAIN_DIST_H
#include "backend/backend.h"
#include "model/model.h"
#include "train/checkpoint.h"
#include "train/dataset.h"
#include "train/dist.h"
#include "train/train_config.h"

// --resume: --batch is per rank, and the checkpoint's global batch (sequences per micro-batch
// over all ranks, from its token count) must stay. A --batch that keeps it replaces the
// checkpoint's; no --batch keeps the checkpoint's per-rank batch if that keeps it; anything
// else is refused with the --batch to pass.
wgt_status train_dist_resume_batch(checkpoint *ck, const train_config *flags, const train_flags *given);

// --device webgpu|auto under mpirun without --adapter: gives this rank the GPU of index
// local rank modulo the host's GPUs, through the Vulkan device-select layer (DRI_PRIME with the
// PCI address), unless the user chose a device through the environment already. Call before the
// WebGPU backend opens. Returns a description for the start-up report ("" when nothing was done).
const char *train_dist_pick_gpu(const char *device, const char *adapter);

// Before step 1: every rank must hold the same configuration, data, progress and weights
// (host: model_state_elems floats of scratch). A difference stops every rank with one message
// naming what differs and on which rank. Rank 0 prints each rank's host and device.
wgt_status train_dist_agree(const train_config *c, const dataset *ds, const ckpt_progress *pr, wgt_model *m,
                            wgt_backend *be, float *host);

// After a step's backward: the gradients summed over all ranks through host (bucketed, in a
// fixed order; each rank's were scaled by 1/global tokens, so the sum is the mean), and
// *stop_all set when any rank was asked to stop (local_stop). The loss sums are added when the
// step's results are collected (trainer.c). test hook: WGTRAIN_TEST_KILL=R:S makes rank R kill
// itself (SIGKILL) at step S (1-based).
wgt_status train_dist_step(wgt_model *m, float *host, long step, int local_stop, int *stop_all);

// At a checkpoint: fails if any rank's weights differ from rank 0's (host: scratch as above).
wgt_status train_dist_check_weights(wgt_model *m, float *host);

// Rank 0 prints the mean time the reductions took per step (nothing with one rank).
void train_dist_report(void);
#endif
