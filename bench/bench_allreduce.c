// bench_allreduce.c — the cost of data-parallel training's gradient sum: MPI_Allreduce of a
// GPT-2 124M gradient (124,439,808 floats, 498 MB) between the ranks of `mpirun -np N`, in the
// trainer's buckets (non-blocking, started in order, then waited for) and in other bucket sizes,
// and optionally the device <-> host round trip the trainer adds (--device webgpu). Prints the
// algorithm bandwidth (bytes / time) and the bus bandwidth (x 2(N-1)/N, what a ring moves per
// link), the figures of docs/distributed.md. Run: mpirun -np 2 build/bench/bench_allreduce.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend/backend.h"
#include "cli/cli.h"
#include "core/clock.h"
#include "train/dist.h"

static void die(const char *what) {
    fprintf(stderr, "bench_allreduce: rank %d: %s: %s\n", dist_rank(), what, wgt_last_error());
    exit(1);
}

static void usage(void) {
    printf("usage: mpirun -np N bench_allreduce [--elems N] [--iters K] [--device none|cpu|webgpu] [--adapter A]\n"
           "  --elems N    floats to sum (default 124439808, GPT-2 124M's parameters)\n"
           "  --iters K    timed repetitions per bucket size after one warm-up (default 5)\n"
           "  --device D   also time the download + upload of the gradient through a backend (default none)\n");
}

// One sum of v[0..n) over all ranks in buckets of `bucket` floats: all started, then waited for.
static double sum_buckets(float *v, size_t n, size_t bucket) {
    size_t nb = (n + bucket - 1) / bucket;
    dist_reqs *r = dist_reqs_new((int)nb);
    double t0 = wgt_now_s();
    for (size_t o = 0; o < n; o += bucket) {
        dist_isum_f32(r, v + o, n - o < bucket ? n - o : bucket);
        dist_progress(r);
    }
    dist_wait_all(r);
    double t = wgt_now_s() - t0;
    dist_reqs_free(r);
    return t;
}

int main(int argc, char **argv) {
    long elems = 124439808, iters = 5;
    const char *device = "none", *adapter = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help")) { usage(); return 0; }
        if (i + 1 >= argc) { usage(); return 2; }
        wgt_status st = WGT_OK;
        if (!strcmp(argv[i], "--elems")) st = cli_parse_long(argv[i], argv[i + 1], 1, 1L << 31, &elems), i++;
        else if (!strcmp(argv[i], "--iters")) st = cli_parse_long(argv[i], argv[i + 1], 1, 1000, &iters), i++;
        else if (!strcmp(argv[i], "--device")) device = argv[++i];
        else if (!strcmp(argv[i], "--adapter")) adapter = argv[++i];
        else { usage(); return 2; }
        if (st != WGT_OK) { fprintf(stderr, "bench_allreduce: %s\n", wgt_last_error()); return 2; }
    }
    if (strcmp(device, "none") && strcmp(device, "cpu") && strcmp(device, "webgpu")) {
        fprintf(stderr, "--device must be none, cpu or webgpu\n");
        return 2;
    }
    if (dist_init() != WGT_OK) die("dist_init");
    const int N = dist_size(), me = dist_rank();
    const size_t n = (size_t)elems;
    const double bytes = (double)n * 4, bus = N > 1 ? 2.0 * (N - 1) / N : 0;
    float *v = wgt_malloc(n * 4);
    for (size_t i = 0; i < n; i++) v[i] = (float)((i * 2654435761u + (size_t)me) % 1000) * 1e-3f;
    if (me == 0)
        printf("allreduce of %zu floats (%.1f MB) over %d rank%s, %ld timed repetitions each; GB/s = 1e9 bytes/s\n", n,
               bytes / 1e6, N, N > 1 ? "s" : "", iters);
    if (me == 0) printf("%-24s %10s %10s %12s %12s\n", "buckets", "best ms", "mean ms", "algbw GB/s", "busbw GB/s");
    const size_t sizes[] = {(size_t)1 << 18, (size_t)1 << 20, (size_t)1 << 22};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t b = sizes[s] < n ? sizes[s] : n;
        double best = 1e30, sum = 0;
        sum_buckets(v, n, b);  // warm-up: connections, pinned buffers
        for (long k = 0; k < iters; k++) {
            double t_all[1] = {sum_buckets(v, n, b)};
            dist_sum_f64(t_all, 1);
            double t = t_all[0] / N;  // the mean over the ranks, which finish together
            if (t < best) best = t;
            sum += t;
        }
        if (me == 0) {
            char name[64];
            snprintf(name, sizeof name, "%zu x %.2f MiB%s", (n + b - 1) / b, b * 4.0 / (1 << 20),
                     b == DIST_BUCKET_ELEMS ? " (trainer)" : "");
            printf("%-24s %10.1f %10.1f %12.2f %12.2f\n", name, best * 1e3, sum / iters * 1e3, bytes / best / 1e9,
                   bytes / best / 1e9 * bus);
        }
    }
    if (strcmp(device, "none")) {
        wgt_backend *be;
        if ((!strcmp(device, "cpu") ? backend_cpu_init(&be) : backend_webgpu_init_ex(&be, adapter, 0)) != WGT_OK)
            die("opening the backend");
        wgt_buf *g;
        if (be->buf_alloc(be, &g, n, "grads") != WGT_OK) die("allocating the gradient buffer");
        wgt_view gv = wgt_buf_view(be, g);
        double best_d = 1e30, best_u = 1e30;
        for (long k = 0; k <= iters; k++) {
            double t0 = wgt_now_s();
            if (be->download(be, v, gv, n) != WGT_OK) die("download");
            double t1 = wgt_now_s();
            if (be->upload(be, gv, v, n) != WGT_OK || be->sync(be) != WGT_OK) die("upload");
            double t2 = wgt_now_s();
            if (k && t1 - t0 < best_d) best_d = t1 - t0;
            if (k && t2 - t1 < best_u) best_u = t2 - t1;
        }
        if (me == 0)
            printf("device round trip on rank 0 (%s%s%s): download %.1f ms (%.2f GB/s), upload %.1f ms (%.2f GB/s)\n",
                   be->name, be->device_name ? ", " : "", be->device_name ? be->device_name(be) : "", best_d * 1e3,
                   bytes / best_d / 1e9, best_u * 1e3, bytes / best_u / 1e9);
        be->buf_free(be, g);
        be->free(be);
    }
    free(v);
    dist_finalize();
    return 0;
}
