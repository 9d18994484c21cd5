// checkpoint.c — writing and verifying ckpt.bin (layout in docs/checkpoint-format.md).
// The payload is streamed in both directions, so a checkpoint costs no second copy of the
// state in memory (1.5 GB for GPT-2 124M with its moments).
#include "train/checkpoint.h"
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>
#include "core/fileutil.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "checkpoints are little-endian; add byte swapping for this host");

#define PROGRESS_BYTES 40  // 4 x u64 + f64

static uint32_t crc_update(uint32_t crc, const void *p, size_t n) { return (uint32_t)crc32_z(crc, p, n); }

static void put_u32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put_u64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static uint32_t get_u32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t get_u64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }

static void progress_pack(uint8_t *b, const ckpt_progress *pr) {
    put_u64(b, pr->step);
    put_u64(b + 8, pr->updates);
    put_u64(b + 16, pr->data_rng);
    put_u64(b + 24, pr->tokens);
    memcpy(b + 32, &pr->elapsed_s, 8);
}

static void progress_unpack(ckpt_progress *pr, const uint8_t *b) {
    pr->step = get_u64(b);
    pr->updates = get_u64(b + 8);
    pr->data_rng = get_u64(b + 16);
    pr->tokens = get_u64(b + 24);
    memcpy(&pr->elapsed_s, b + 32, 8);
}

wgt_status checkpoint_write(const char *path, const train_config *cfg, const ckpt_progress *pr, const float *params,
                            const float *m, const float *v, size_t n) {
    char *json = train_config_to_json(cfg);
    uint32_t jlen = (uint32_t)strlen(json);
    uint8_t jl[4], prog[PROGRESS_BYTES], nb[8];
    put_u32(jl, jlen);
    progress_pack(prog, pr);
    put_u64(nb, n);
    const void *parts[] = {jl, json, prog, nb, params, m, v};
    size_t sizes[] = {4, jlen, PROGRESS_BYTES, 8, n * 4, n * 4, n * 4};
    enum { NPARTS = sizeof sizes / sizeof sizes[0] };
    uint64_t payload = 0;
    uint32_t crc = crc_update(0, NULL, 0);
    for (int i = 0; i < NPARTS; i++) {
        payload += sizes[i];
        crc = crc_update(crc, parts[i], sizes[i]);
    }
    uint8_t h[CKPT_HEADER_BYTES] = {0};
    memcpy(h, CKPT_MAGIC, 8);
    put_u32(h + 8, CKPT_VERSION);
    put_u32(h + 12, CKPT_HEADER_BYTES);
    put_u64(h + 16, payload);
    put_u32(h + 24, crc);
    put_u32(h + 60, crc_update(crc_update(0, NULL, 0), h, 60));
    atomic_file af;
    wgt_status st = atomic_file_open(&af, path);
    if (st == WGT_OK) {
        atomic_file_write(&af, h, sizeof h);
        for (int i = 0; i < NPARTS; i++) atomic_file_write(&af, parts[i], sizes[i]);
        st = atomic_file_commit(&af);
    }
    free(json);
    return st;
}

void checkpoint_free(checkpoint *ck) {
    free(ck->params);
    free(ck->m);
    free(ck->v);
    memset(ck, 0, sizeof *ck);
}

// Reads n bytes into p, folding them into *crc; fails only on an I/O error (sizes were checked).
static wgt_status read_part(FILE *f, void *p, size_t n, uint32_t *crc, const char *path) {
    if (fread(p, 1, n, f) != n)
        return wgt_fail(WGT_ERR_IO, "error reading checkpoint %s: %s", path, ferror(f) ? strerror(errno) : "unexpected end");
    *crc = crc_update(*crc, p, n);
    return WGT_OK;
}

// The progress counters must be ones a run can reach: step <= the largest --steps, updates <=
// step, tokens = step x tokens per update x ranks (1 to CKPT_MAX_RANKS), a finite non-negative
// elapsed time.
static wgt_status progress_check(const ckpt_progress *pr, const train_config *cfg, const char *path) {
    const char *corrupt = "the file is corrupted; resume from another checkpoint or start the run again";
    uint64_t per_update = (uint64_t)cfg->batch * (uint64_t)cfg->seq * (uint64_t)cfg->grad_accum;
    if (pr->step > CKPT_MAX_STEP)
        return wgt_fail(WGT_ERR_FORMAT, "checkpoint %s: step %llu is beyond the %llu steps a run can have; %s", path,
                        (unsigned long long)pr->step, (unsigned long long)CKPT_MAX_STEP, corrupt);
    if (pr->updates > pr->step)
        return wgt_fail(WGT_ERR_FORMAT, "checkpoint %s: %llu updates applied in %llu steps; %s", path,
                        (unsigned long long)pr->updates, (unsigned long long)pr->step, corrupt);
    // a data-parallel run counts every rank's tokens: step x per-rank tokens x a rank count
    uint64_t per_step = pr->step && per_update && pr->step <= UINT64_MAX / per_update ? pr->step * per_update : 0;
    if (per_update == 0 || (pr->step && !per_step) || (!pr->step && pr->tokens) ||
        (per_step && (pr->tokens % per_step || pr->tokens / per_step < 1 || pr->tokens / per_step > CKPT_MAX_RANKS)))
        return wgt_fail(WGT_ERR_FORMAT, "checkpoint %s: %llu tokens consumed in %llu steps of %llu tokens; %s", path,
                        (unsigned long long)pr->tokens, (unsigned long long)pr->step, (unsigned long long)per_update,
                        corrupt);
    if (!isfinite(pr->elapsed_s) || pr->elapsed_s < 0)
        return wgt_fail(WGT_ERR_FORMAT, "checkpoint %s: elapsed time %g s; %s", path, pr->elapsed_s, corrupt);
    return WGT_OK;
}

static wgt_status read_body(checkpoint *ck, FILE *f, const char *path, uint64_t payload, uint32_t want_crc) {
    uint32_t crc = crc_update(0, NULL, 0);
    uint8_t jl[4], prog[PROGRESS_BYTES], nb[8];
    const char *corrupt = "the file is corrupted; resume from another checkpoint or start the run again";
    if (payload < 4 + PROGRESS_BYTES + 8)
        return wgt_fail(WGT_ERR_FORMAT, "checkpoint %s: payload of %llu bytes is too small to hold a run; %s", path,
                        (unsigned long long)payload, corrupt);
    WGT_TRY(read_part(f, jl, 4, &crc, path));
    uint32_t jlen = get_u32(jl);
    if ((uint64_t)jlen > payload - 4 - PROGRESS_BYTES - 8)
        return wgt_fail(WGT_ERR_FORMAT, "checkpoint %s: its configuration length (%u bytes) exceeds the payload; %s", path,
                        jlen, corrupt);
    char *json = wgt_malloc((size_t)jlen + 1);
    wgt_status st = read_part(f, json, jlen, &crc, path);
    json[jlen] = 0;
    if (st == WGT_OK) st = read_part(f, prog, PROGRESS_BYTES, &crc, path);
    if (st == WGT_OK) st = read_part(f, nb, 8, &crc, path);
    uint64_t n = get_u64(nb), rest = payload - 4 - jlen - PROGRESS_BYTES - 8;
    if (st == WGT_OK && (n > rest / 12 || n * 12 != rest))
        st = wgt_fail(WGT_ERR_FORMAT, "checkpoint %s: %llu state elements do not fill the %llu remaining bytes; %s", path,
                      (unsigned long long)n, (unsigned long long)rest, corrupt);
    if (st == WGT_OK) {
        ck->n = (size_t)n;
        ck->params = wgt_malloc(ck->n * 4);
        ck->m = wgt_malloc(ck->n * 4);
        ck->v = wgt_malloc(ck->n * 4);
        st = read_part(f, ck->params, ck->n * 4, &crc, path);
        if (st == WGT_OK) st = read_part(f, ck->m, ck->n * 4, &crc, path);
        if (st == WGT_OK) st = read_part(f, ck->v, ck->n * 4, &crc, path);
    }
    // the checksum is checked before anything in the payload is trusted further
    if (st == WGT_OK && crc != want_crc)
        st = wgt_fail(WGT_ERR_FORMAT, "checkpoint %s fails its checksum (CRC-32 %08x, header says %08x): %s", path, crc,
                      want_crc, corrupt);
    // contents behind a valid checksum are still checked: a checksum only says the bytes are
    // the ones some writer produced, not that the writer was right
    if (st == WGT_OK && strlen(json) != jlen)
        st = wgt_fail(WGT_ERR_FORMAT, "checkpoint %s: its configuration text holds a NUL byte; %s", path, corrupt);
    if (st == WGT_OK) st = train_config_from_json(&ck->cfg, json, path);
    if (st == WGT_OK) {
        progress_unpack(&ck->pr, prog);
        st = progress_check(&ck->pr, &ck->cfg, path);
    }
    free(json);
    return st;
}

wgt_status checkpoint_read(checkpoint *ck, const char *path) {
    memset(ck, 0, sizeof *ck);
    FILE *f;
    uint64_t size;
    WGT_TRY(file_fopen_read(path, "checkpoint", NULL, &f, &size));
    uint8_t h[CKPT_HEADER_BYTES];
    wgt_status st = WGT_OK;
    if (size < CKPT_HEADER_BYTES || fread(h, 1, sizeof h, f) != sizeof h)
        st = wgt_fail(WGT_ERR_FORMAT, "checkpoint %s is truncated: %llu bytes, less than its %d-byte header (an "
                      "interrupted copy?)", path, (unsigned long long)size, CKPT_HEADER_BYTES);
    else if (memcmp(h, CKPT_MAGIC, 8))
        st = wgt_fail(WGT_ERR_FORMAT, "%s is not a wgtrain checkpoint (wrong magic bytes); pass a RUN_DIR written by "
                      "`wgtrain train`", path);
    else if (get_u32(h + 60) != crc_update(crc_update(0, NULL, 0), h, 60))
        st = wgt_fail(WGT_ERR_FORMAT, "checkpoint %s has a corrupted header (header checksum mismatch); resume from another "
                      "checkpoint or start the run again", path);
    else if (get_u32(h + 8) != CKPT_VERSION)
        st = wgt_fail(WGT_ERR_FORMAT, "checkpoint %s has format version %u; this build reads version %d (written by a "
                      "different wgtrain?)", path, get_u32(h + 8), CKPT_VERSION);
    else if (get_u32(h + 12) != CKPT_HEADER_BYTES)
        st = wgt_fail(WGT_ERR_FORMAT, "checkpoint %s declares a %u-byte header; version %d has %d bytes", path,
                      get_u32(h + 12), CKPT_VERSION, CKPT_HEADER_BYTES);
    else {
        for (int i = 28; i < 60 && st == WGT_OK; i++)
            if (h[i])
                st = wgt_fail(WGT_ERR_FORMAT, "checkpoint %s: reserved header byte %d is %u, not 0 (written by a newer "
                              "wgtrain, or corrupted)", path, i, h[i]);
    }
    uint64_t payload = st == WGT_OK ? get_u64(h + 16) : 0;
    if (st == WGT_OK && size - CKPT_HEADER_BYTES < payload)
        st = wgt_fail(WGT_ERR_FORMAT, "checkpoint %s is truncated: the header declares %llu bytes in all but the file has "
                      "%llu (an interrupted copy?); resume from another checkpoint or start again", path,
                      (unsigned long long)(payload + CKPT_HEADER_BYTES), (unsigned long long)size);
    if (st == WGT_OK && size - CKPT_HEADER_BYTES > payload)
        st = wgt_fail(WGT_ERR_FORMAT, "checkpoint %s has %llu bytes after the payload its header declares: the file is "
                      "corrupted", path, (unsigned long long)(size - CKPT_HEADER_BYTES - payload));
    if (st == WGT_OK) st = read_body(ck, f, path, payload, get_u32(h + 24));
    fclose(f);
    if (st != WGT_OK) checkpoint_free(ck);
    return st;
}

wgt_status checkpoint_check_model(const checkpoint *ck, const train_config *cfg, size_t n_elems, const char *path) {
    char what[TRAIN_PATH_MAX + 32];
    snprintf(what, sizeof what, "checkpoint %s", path);
    WGT_TRY(train_config_check_model(cfg, &ck->cfg, what));
    if (ck->n != n_elems)
        return wgt_fail(WGT_ERR_FORMAT, "checkpoint %s holds %zu state elements but this model has %zu (written by a "
                        "wgtrain with another parameter layout?)", path, ck->n, n_elems);
    return WGT_OK;
}
