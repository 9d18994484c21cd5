// dist.c — the MPI side of data-parallel training (dist.h): start-up only under a launcher,
// rank and host-local rank, sums and gathers on host memory, non-blocking bucket sums, and
// ending the whole job when one rank fails. The one file of the program that includes mpi.h.
#include "train/dist.h"
#include <limits.h>
#ifdef WGT_NO_MPI
#include "train/dist_nompi.h"  // a build of one process
#else
#include <mpi.h>
#endif
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int g_on;                  // MPI initialised by dist_init
static int g_rank, g_size = 1, g_local_rank, g_local_size = 1;
// how the last failure ends the job: FAIL_ABORT (this rank alone knows), FAIL_ALIKE (every rank
// found the same: rank 0 tells), FAIL_AGREED (all know some failed: the failed ones tell)
enum { FAIL_ABORT, FAIL_ALIKE, FAIL_AGREED };
static int g_fail_mode = FAIL_ABORT;
static int g_failed_here;

static int launched_by_mpirun(void) {
#ifdef WGT_NO_MPI
    return 0;
#endif
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK");
}

wgt_status dist_init(void) {
    if (g_on || !launched_by_mpirun()) return WGT_OK;
    int argc = 0;
    char **argv = NULL;
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS)
        return wgt_fail(WGT_ERR_CONFIG, "MPI_Init failed: this process was started by mpirun but cannot join the job");
    g_on = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    MPI_Comm local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_rank, MPI_INFO_NULL, &local);
    MPI_Comm_rank(local, &g_local_rank);
    MPI_Comm_size(local, &g_local_size);
    MPI_Comm_free(&local);
    // rank 0 speaks for the job; the others write only errors (stderr)
    if (g_rank != 0 && !freopen("/dev/null", "w", stdout))
        return wgt_fail(WGT_ERR_IO, "rank %d cannot silence its standard output", g_rank);
    return WGT_OK;
}

void dist_finalize(void) {
    if (!g_on) return;
    MPI_Finalize();
    g_on = 0;
}

int dist_rank(void) { return g_rank; }
int dist_size(void) { return g_size; }
int dist_local_rank(void) { return g_local_rank; }
int dist_local_size(void) { return g_local_size; }

wgt_status dist_sum_f64(double *v, int n) {
    if (g_size > 1) MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return WGT_OK;
}

wgt_status dist_sum_f32(float *v, size_t n) {
    for (size_t o = 0, k; g_size > 1 && o < n; o += k) {
        k = n - o < DIST_BUCKET_ELEMS ? n - o : DIST_BUCKET_ELEMS;
        MPI_Allreduce(MPI_IN_PLACE, v + o, (int)k, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
    return WGT_OK;
}

wgt_status dist_allgather(const void *mine, void *all, size_t bytes) {
    WGT_ASSERT(bytes <= INT_MAX, "dist_allgather is for small records");
    if (g_size == 1) {
        memmove(all, mine, bytes);
        return WGT_OK;
    }
    MPI_Allgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, MPI_COMM_WORLD);
    return WGT_OK;
}

wgt_status dist_bcast(void *buf, size_t bytes) {
    WGT_ASSERT(bytes <= INT_MAX, "dist_bcast is for small records");
    if (g_size > 1) MPI_Bcast(buf, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
    return WGT_OK;
}

struct dist_reqs {
    MPI_Request *r;
    int n, cap;
};

dist_reqs *dist_reqs_new(int cap) {
    WGT_ASSERT(cap > 0, "a request list holds at least one request");
    dist_reqs *r = wgt_calloc(1, sizeof *r);
    r->r = wgt_calloc((size_t)cap, sizeof *r->r);
    r->cap = cap;
    return r;
}

void dist_reqs_free(dist_reqs *r) {
    if (!r) return;
    free(r->r);
    free(r);
}

wgt_status dist_isum_f32(dist_reqs *r, float *v, size_t n) {
    WGT_ASSERT(n <= DIST_BUCKET_ELEMS, "a bucket is at most DIST_BUCKET_ELEMS floats");
    if (g_size == 1) return WGT_OK;
    WGT_ASSERT(r->n < r->cap, "more buckets in flight than the request list holds");
    MPI_Iallreduce(MPI_IN_PLACE, v, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &r->r[r->n++]);
    return WGT_OK;
}

void dist_progress(dist_reqs *r) {
    if (g_size == 1 || !r->n) return;
    int done;
    MPI_Testall(r->n, r->r, &done, MPI_STATUSES_IGNORE);
}

wgt_status dist_wait_all(dist_reqs *r) {
    if (g_size > 1 && r->n) MPI_Waitall(r->n, r->r, MPI_STATUSES_IGNORE);
    r->n = 0;
    return WGT_OK;
}

wgt_status dist_fail_all(wgt_status st, const char *fmt, ...) {
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    g_fail_mode = FAIL_ALIKE;
    return wgt_fail(st, "%s", msg);
}

wgt_status dist_check_all(wgt_status st) {
    if (g_size == 1) return st;
    struct { int st; uint64_t msg; } mine = {(int)st, 0}, *all = wgt_malloc((size_t)g_size * sizeof *all);
    if (st != WGT_OK) mine.msg = dist_hash(wgt_last_error(), strlen(wgt_last_error()), DIST_HASH_SEED);
    MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, MPI_COMM_WORLD);
    int failed = 0, alike = 1, first = -1;
    for (int r = 0; r < g_size; r++) {
        if (all[r].st == WGT_OK) {
            alike = 0;
            continue;
        }
        failed++;
        if (first < 0) first = r;
        if (all[r].st != all[0].st || all[r].msg != all[0].msg) alike = 0;
    }
    free(all);
    if (!failed) return WGT_OK;
    if (alike) {
        g_fail_mode = FAIL_ALIKE;
        return st;
    }
    g_fail_mode = FAIL_AGREED;
    g_failed_here = st != WGT_OK;
    if (st != WGT_OK) return st;
    return wgt_fail(WGT_ERR_CONFIG, "%d rank%s failed (rank %d first)", failed, failed > 1 ? "s" : "", first);
}

int dist_fail(const char *cmd, wgt_status st) {
    if (!g_on) {
        fprintf(stderr, "wgtrain %s: %s: %s\n", cmd, wgt_status_name(st), wgt_last_error());
        return 1;
    }
    if (g_fail_mode != FAIL_ABORT) {
        if (g_fail_mode == FAIL_ALIKE && g_rank == 0)
            fprintf(stderr, "wgtrain %s: %s: %s\n", cmd, wgt_status_name(st), wgt_last_error());
        else if (g_fail_mode == FAIL_AGREED && g_failed_here)
            fprintf(stderr, "wgtrain %s: rank %d: %s: %s\n", cmd, g_rank, wgt_status_name(st), wgt_last_error());
        fflush(stderr);
        dist_finalize();
        return 1;
    }
    fprintf(stderr, "wgtrain %s: rank %d: %s: %s\n", cmd, g_rank, wgt_status_name(st), wgt_last_error());
    fflush(stdout);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;  // not reached: MPI_Abort ends this process too
}

uint64_t dist_hash(const void *p, size_t n, uint64_t h) {
    const unsigned char *b = p;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {  // a word at a time: the state is hundreds of MB
        uint64_t w;
        memcpy(&w, b + i, 8);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
    }
    for (; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}
