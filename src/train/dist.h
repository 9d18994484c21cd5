// dist.h — the processes of a data-parallel run and what they say to each other, through MPI
// (one process per GPU, started by mpirun). The only interface to MPI in the program: dist.c
// is the one file that includes mpi.h. Without a launcher (plain `wgtrain train`) MPI is never
// initialised and every call here is the trivial one-process case: rank 0 of 1, reductions
// leave their buffer as it is. Design: docs/distributed.md.
#ifndef WGT_DIST_H
#define WGT_DIST_H
#include <stddef.h>
#include <stdint.h>
#include "core/error.h"

// Gradient buckets: the reduction runs over consecutive slices of this many floats (1 MiB),
// started one after another in the order of the state layout; the gradients come down from the
// device in slices of DIST_DOWNLOAD_ELEMS (16 MiB: fewer, larger readbacks). On the H200's host
// 1 MiB buckets summed GPT-2 124M's 498 MB between 2 ranks in 284 ms, 16 MiB ones in 496 ms
// (bench_allreduce, docs/distributed.md).
#define DIST_BUCKET_ELEMS ((size_t)1 << 18)
#define DIST_DOWNLOAD_ELEMS ((size_t)1 << 22)

// Initialises MPI when the process was started by mpirun (OMPI_COMM_WORLD_SIZE, PMIX_RANK or
// PMI_RANK in the environment); otherwise does nothing. The ranks other than 0 send their
// stdout to /dev/null: rank 0 speaks for the job, the others only report errors (stderr).
wgt_status dist_init(void);
// MPI_Finalize when dist_init started MPI.
void dist_finalize(void);
int dist_rank(void);        // 0 without MPI
int dist_size(void);        // 1 without MPI
int dist_local_rank(void);  // the rank among the processes of this host
int dist_local_size(void);

// In-place sums over all ranks (nothing with one rank). Errors end the whole job (MPI's
// default handler), so these return only WGT_OK.
wgt_status dist_sum_f64(double *v, int n);
wgt_status dist_sum_f32(float *v, size_t n);
// all[r * bytes ...] = rank r's `mine`, on every rank.
wgt_status dist_allgather(const void *mine, void *all, size_t bytes);
// rank 0's buf to every rank.
wgt_status dist_bcast(void *buf, size_t bytes);

// Non-blocking sums of float buckets, completed in the order they were started.
typedef struct dist_reqs dist_reqs;
dist_reqs *dist_reqs_new(int cap);
void dist_reqs_free(dist_reqs *r);
// Starts the in-place sum of v[0..n) (n <= DIST_BUCKET_ELEMS).
wgt_status dist_isum_f32(dist_reqs *r, float *v, size_t n);
// Lets started sums advance without waiting (MPI progresses inside its calls).
void dist_progress(dist_reqs *r);
// Waits for every started sum; r is empty afterwards.
wgt_status dist_wait_all(dist_reqs *r);

// A rank's failure ends the job: prints "wgtrain CMD: rank R: STATUS: message" to stderr and
// calls MPI_Abort, so that mpirun stops every other rank. Without MPI it prints as the
// one-process command always has and returns 1. After dist_fail_all the failure is one that
// every rank found alike (a disagreement before step 1): only rank 0 prints it, and the ranks
// leave through MPI_Finalize with exit code 1 instead of aborting.
int dist_fail(const char *cmd, wgt_status st);
// wgt_fail, marked as found by every rank alike (see dist_fail).
wgt_status dist_fail_all(wgt_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// The outcome of a phase each rank went through on its own (start-up: config, data, device):
// when any rank failed, every rank returns a failure, and dist_fail then ends the job without
// MPI_Abort: one message when all failed alike (printed by rank 0), else each failed rank's own,
// naming it. A collective call: every rank must make it.
wgt_status dist_check_all(wgt_status st);

// A 64-bit FNV-style hash taken a word at a time, for the agreement checks (config, data,
// state); h: DIST_HASH_SEED or the hash so far.
uint64_t dist_hash(const void *p, size_t n, uint64_t h);
#define DIST_HASH_SEED 0xcbf29ce484222325ull
#endif
