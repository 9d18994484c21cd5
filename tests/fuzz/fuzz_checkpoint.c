// fuzz_checkpoint.c — mutation fuzzer for checkpoint_read: a valid ckpt.bin from
// checkpoint_write, mutated in the header, the configuration text and the state; most
// mutations break a CRC, so every 3rd input has its checksums recomputed after the mutation to
// reach the content checks behind them. An accepted checkpoint must hold counters a run can
// reach and be written back identically.
#include <zlib.h>
#include "fuzzlib.h"
#include "train/checkpoint.h"

// Recomputes the payload size, payload CRC and header CRC of a (mutated) checkpoint image.
static void fix_crcs(fz_buf *b) {
    if (b->n < CKPT_HEADER_BYTES) return;
    uint64_t payload = b->n - CKPT_HEADER_BYTES;
    memcpy(b->p + 16, &payload, 8);
    uint32_t crc = (uint32_t)crc32_z(crc32(0, NULL, 0), b->p + CKPT_HEADER_BYTES, payload);
    memcpy(b->p + 24, &crc, 4);
    uint32_t h = (uint32_t)crc32(crc32(0, NULL, 0), b->p, 60);
    memcpy(b->p + 60, &h, 4);
}

int main(int argc, char **argv) {
    long iters, accepted = 0;
    fz_setup(argc, argv, &iters);
    train_config c;
    train_config_preset(&c, "tiny");
    c.model.vocab = 300;
    snprintf(c.data_dir, sizeof c.data_dir, "/data/x");
    snprintf(c.tokenizer_hash, sizeof c.tokenizer_hash, "00112233445566ff");
    if (train_config_finish(&c) != WGT_OK) return 2;
    ckpt_progress pr = {.step = 12, .updates = 11, .data_rng = 99, .tokens = 12ull * c.batch * c.seq, .elapsed_s = 1.5,
                        .skips = 1, .loss_scale = 0, .scale_clean = 0};
    float st[32];
    for (int i = 0; i < 32; i++) st[i] = (float)i * 0.25f;
    fz_buf seed = {0}, b = {0}, back = {0};
    if (checkpoint_write(fz_path("seed.bin"), &c, &pr, st, st, st, 32) != WGT_OK || !fz_read(fz_path("seed.bin"), &seed))
        return 2;
    const char *p = fz_path("in.bin"), *q = fz_path("back.bin");
    for (long it = 0; it < iters; it++) {
        fz_set(&b, seed.p, seed.n);
        // aim at the configuration text (after the 64-byte header and its 4-byte length) half the time
        if (fz_next() & 1) {
            uint32_t jl;
            memcpy(&jl, b.p + 64, 4);
            fz_buf j = {0};
            fz_set(&j, b.p + 68, jl);
            fz_mutate(&j, 1);
            fz_erase(&b, 68, jl);
            fz_insert(&b, 68, j.p, j.n);
            uint32_t nl = (uint32_t)j.n;
            memcpy(b.p + 64, &nl, 4);
            free(j.p);
        } else {
            fz_mutate(&b, 0);
        }
        if (it % 3 == 0) fix_crcs(&b);
        fz_write(p, &b);
        checkpoint ck;
        if (checkpoint_read(&ck, p) != WGT_OK) {
            FZ_CHECK(!ck.params && !ck.m && !ck.v, "refused read left memory allocated");
            continue;
        }
        accepted++;
        FZ_CHECK(ck.pr.updates <= ck.pr.step && ck.pr.step <= CKPT_MAX_STEP, "counters %llu/%llu",
                 (unsigned long long)ck.pr.updates, (unsigned long long)ck.pr.step);
        double s = 0;
        for (size_t i = 0; i < ck.n; i++) s += ck.params[i] + ck.m[i] + ck.v[i];
        (void)s;
        if (checkpoint_write(q, &ck.cfg, &ck.pr, ck.params, ck.m, ck.v, ck.n) == WGT_OK && fz_read(q, &back)) {
            checkpoint ck2;
            FZ_CHECK(checkpoint_read(&ck2, q) == WGT_OK && ck2.n == ck.n && !memcmp(&ck2.pr, &ck.pr, sizeof ck.pr),
                     "rewritten checkpoint differs: %s", wgt_last_error());
            checkpoint_free(&ck2);
        } else {
            FZ_CHECK(0, "rewrite failed: %s", wgt_last_error());
        }
        checkpoint_free(&ck);
    }
    free(seed.p);
    free(b.p);
    free(back.p);
    return fz_finish("fuzz_checkpoint", iters, accepted);
}
