// fuzz_shard.c — mutation fuzzer for token shards (shard_open, shard_scan, shard_read): a
// shard from shard_write, mutated mostly in its header; an accepted shard's size must match
// its header and every token read must be the file's.
#include <zlib.h>
#include "fuzzlib.h"
#include "data/shard.h"

int main(int argc, char **argv) {
    long iters, accepted = 0;
    fz_setup(argc, argv, &iters);
    uint16_t toks[300];
    for (int i = 0; i < 300; i++) toks[i] = (uint16_t)(i * 37 % 1000);
    fz_buf seeds[2] = {{0}}, b = {0};
    if (shard_write(fz_path("s.bin"), toks, 300) != WGT_OK || !fz_read(fz_path("s.bin"), &seeds[0])) return 2;
    if (shard_write(fz_path("s.bin"), NULL, 0) != WGT_OK || !fz_read(fz_path("s.bin"), &seeds[1])) return 2;
    const char *p = fz_path("in.bin");
    uint16_t buf[64];
    for (long it = 0; it < iters; it++) {
        size_t s = fz_below(2);
        fz_set(&b, seeds[s].p, seeds[s].n);
        fz_mutate(&b, 0);
        fz_write(p, &b);
        shard *sh = NULL;
        if (shard_open(&sh, p) != WGT_OK) {
            FZ_CHECK(sh == NULL, "refused open returned a shard");
            continue;
        }
        accepted++;
        size_t n = shard_count(sh);
        FZ_CHECK(1024 + 2 * n == b.n, "%zu tokens in a file of %zu bytes", n, b.n);
        uint32_t crc;
        unsigned mx;
        FZ_CHECK(shard_scan(sh, &crc, &mx, NULL) == WGT_OK && crc == (uint32_t)crc32_z(0, b.p, b.n),
                 "scan: %s", wgt_last_error());
        if (n) {
            size_t off = fz_below(n), k = 1 + fz_below(n - off < 64 ? n - off : 64);
            FZ_CHECK(shard_read(sh, off, k, buf) == WGT_OK && !memcmp(buf, b.p + 1024 + 2 * off, 2 * k), "read differs");
            for (size_t i = 0; i < k; i++) FZ_CHECK(buf[i] <= mx, "token %u above the scanned maximum %u", buf[i], mx);
        }
        shard_close(sh);
    }
    free(seeds[0].p);
    free(seeds[1].p);
    free(b.p);
    return fz_finish("fuzz_shard", iters, accepted);
}
