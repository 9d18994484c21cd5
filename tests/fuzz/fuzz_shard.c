// fuzz_shard.c — mutation fuzzer for token shards of both formats (shard_open, shard_scan,
// shard_read): shards from shard_write (16-bit, 32-bit, empty), mutated mostly in their
// header; an accepted shard's size must match its header and format, every token read must be
// the file's, and the scan must either pass (ids below TOKEN_MAX_VOCAB, the CRC of the file) or
// refuse an id beyond it.
#include <zlib.h>
#include "fuzzlib.h"
#include "data/shard.h"

int main(int argc, char **argv) {
    long iters, accepted = 0;
    fz_setup(argc, argv, &iters);
    uint32_t toks[300];
    for (int i = 0; i < 300; i++) toks[i] = (uint32_t)(i * 37 % 1000);
    uint32_t wide[300];
    for (int i = 0; i < 300; i++) wide[i] = (uint32_t)(i * 7919 % 262144);
    enum { N_SEEDS = 4 };
    fz_buf seeds[N_SEEDS] = {{0}}, b = {0};
    if (shard_write(fz_path("s.bin"), toks, 300, 1000) != WGT_OK || !fz_read(fz_path("s.bin"), &seeds[0])) return 2;
    if (shard_write(fz_path("s.bin"), NULL, 0, 1000) != WGT_OK || !fz_read(fz_path("s.bin"), &seeds[1])) return 2;
    if (shard_write(fz_path("s.bin"), wide, 300, 262144) != WGT_OK || !fz_read(fz_path("s.bin"), &seeds[2])) return 2;
    if (shard_write(fz_path("s.bin"), NULL, 0, 262144) != WGT_OK || !fz_read(fz_path("s.bin"), &seeds[3])) return 2;
    const char *p = fz_path("in.bin");
    uint32_t buf[64];
    for (long it = 0; it < iters; it++) {
        size_t s = fz_below(N_SEEDS);
        fz_set(&b, seeds[s].p, seeds[s].n);
        fz_mutate(&b, 0);
        fz_write(p, &b);
        shard *sh = NULL;
        if (shard_open(&sh, p) != WGT_OK) {
            FZ_CHECK(sh == NULL, "refused open returned a shard");
            continue;
        }
        accepted++;
        size_t n = shard_count(sh), w = (size_t)shard_bytes_per_token(sh);
        int32_t magic;
        memcpy(&magic, b.p, 4);
        FZ_CHECK(w == (magic == SHARD_MAGIC ? 2u : 4u), "%zu bytes per token for magic %d", w, magic);
        FZ_CHECK(1024 + w * n == b.n, "%zu tokens of %zu bytes in a file of %zu bytes", n, w, b.n);
        uint32_t crc, mx;
        wgt_status st = shard_scan(sh, &crc, &mx, NULL, NULL);
        int beyond = 0;
        for (size_t i = 0; i < n && w == 4; i++) {
            uint32_t v;
            memcpy(&v, b.p + 1024 + 4 * i, 4);
            beyond |= v >= (uint32_t)TOKEN_MAX_VOCAB;
        }
        if (beyond) FZ_CHECK(st == WGT_ERR_FORMAT, "an id beyond TOKEN_MAX_VOCAB passed the scan");
        else FZ_CHECK(st == WGT_OK && crc == (uint32_t)crc32_z(0, b.p, b.n), "scan: %s", wgt_last_error());
        if (n) {
            size_t off = fz_below(n), k = 1 + fz_below(n - off < 64 ? n - off : 64);
            FZ_CHECK(shard_read(sh, off, k, buf) == WGT_OK, "read: %s", wgt_last_error());
            for (size_t i = 0; i < k; i++) {
                uint32_t v = 0;
                memcpy(&v, b.p + 1024 + w * (off + i), w);
                FZ_CHECK(buf[i] == v, "token %zu reads %u, the file holds %u", off + i, buf[i], v);
                if (!beyond) FZ_CHECK(buf[i] <= mx, "token %u above the scanned maximum %u", buf[i], mx);
            }
        }
        shard_close(sh);
    }
    for (int i = 0; i < N_SEEDS; i++) free(seeds[i].p);
    free(b.p);
    return fz_finish("fuzz_shard", iters, accepted);
}
