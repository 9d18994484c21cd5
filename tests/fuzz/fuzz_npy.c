// fuzz_npy.c — mutation fuzzer for the .npy reader (npy_load): seeds from npy_save in every
// dtype and a few shapes; an accepted file must describe itself consistently and survive a
// save / load round trip unchanged.
#include "fuzzlib.h"
#include "core/npy.h"

int main(int argc, char **argv) {
    long iters, accepted = 0;
    fz_setup(argc, argv, &iters);
    float f6[6] = {1, -2, 3.5f, 0, 1e-30f, 7};
    npy_array seeds_a[] = {
        {NPY_F32, 2, {2, 3}, 6, f6}, {NPY_I32, 1, {5}, 5, f6}, {NPY_U32, 0, {0}, 1, f6}, {NPY_F32, 2, {0, 4}, 0, f6},
        {NPY_F32, 4, {1, 1, 2, 3}, 6, f6}};
    enum { NS = sizeof seeds_a / sizeof seeds_a[0] };
    fz_buf seeds[NS] = {{0}}, b = {0};
    for (int i = 0; i < NS; i++) {
        if (npy_save(fz_path("seed.npy"), &seeds_a[i]) != WGT_OK || !fz_read(fz_path("seed.npy"), &seeds[i])) {
            fprintf(stderr, "seed %d: %s\n", i, wgt_last_error());
            return 2;
        }
    }
    const char *p = fz_path("in.npy"), *q = fz_path("back.npy");
    for (long it = 0; it < iters; it++) {
        if (it % 4 != 3 || !b.n) {  // mostly a fresh seed; every 4th input mutates the last one further
            size_t s = fz_below(NS);
            fz_set(&b, seeds[s].p, seeds[s].n);
        }
        fz_mutate(&b, 1);
        fz_write(p, &b);
        npy_array a;
        if (npy_load(&a, p) != WGT_OK) {
            FZ_CHECK(a.data == NULL, "refused load left data allocated");
            continue;
        }
        accepted++;
        size_t n = 1;
        for (int d = 0; d < a.ndim; d++) n *= a.shape[d];
        FZ_CHECK(a.ndim >= 0 && a.ndim <= NPY_MAX_DIMS && n == a.n, "ndim %d, n %zu vs product %zu", a.ndim, a.n, n);
        FZ_CHECK(a.dtype == NPY_F32 || a.dtype == NPY_I32 || a.dtype == NPY_U32, "dtype %d", (int)a.dtype);
        FZ_CHECK(b.n >= a.n * 4 && b.n - a.n * 4 <= 12 + 10000, "file of %zu bytes for %zu elements", b.n, a.n);
        FZ_CHECK(a.n == 0 || !memcmp(a.data, b.p + b.n - a.n * 4, a.n * 4), "data differs from the file's tail");
        npy_array c;
        if (npy_save(q, &a) == WGT_OK && npy_load(&c, q) == WGT_OK) {
            FZ_CHECK(c.dtype == a.dtype && c.ndim == a.ndim && c.n == a.n && !memcmp(c.shape, a.shape, sizeof a.shape) &&
                     (a.n == 0 || !memcmp(c.data, a.data, a.n * 4)), "round trip differs");
            npy_free(&c);
        } else {
            FZ_CHECK(0, "round trip failed: %s", wgt_last_error());
        }
        npy_free(&a);
    }
    for (int i = 0; i < NS; i++) free(seeds[i].p);
    free(b.p);
    return fz_finish("fuzz_npy", iters, accepted);
}
