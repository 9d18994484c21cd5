// shard.c — llm.c-compatible token shards (see shard.h).
#include "data/shard.h"
#include "core/fileutil.h"
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

// The shard format is little-endian and tokens are copied as they are.
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "shards are little-endian; add byte swapping for this host");

struct shard {
    int fd;
    size_t n;
    char *path;
};

static void shard_header(int32_t header[SHARD_HEADER_INTS], size_t n) {
    memset(header, 0, SHARD_HEADER_INTS * sizeof *header);
    header[0] = SHARD_MAGIC;
    header[1] = SHARD_VERSION;
    header[2] = (int32_t)n;
}

wgt_status shard_write(const char *path, const uint16_t *toks, size_t n) {
    if (n > SHARD_MAX_TOKENS)
        return wgt_fail(WGT_ERR_ARG, "cannot write %s: %zu tokens exceed the shard format's limit of %u; "
                        "split the tokens over several shards", path, n, SHARD_MAX_TOKENS);
    int32_t header[SHARD_HEADER_INTS];
    shard_header(header, n);
    atomic_file af;
    WGT_TRY(atomic_file_open(&af, path));
    atomic_file_write(&af, header, sizeof header);
    atomic_file_write(&af, toks, n * sizeof *toks);
    return atomic_file_commit(&af);
}

uint32_t shard_file_crc(const uint16_t *toks, size_t n) {
    int32_t header[SHARD_HEADER_INTS];
    shard_header(header, n);
    uint32_t crc = (uint32_t)crc32_z(0, (const Bytef *)header, sizeof header);
    return (uint32_t)crc32_z(crc, (const Bytef *)toks, n * sizeof *toks);
}

// Checks a shard's header against the file's length; `len` is the file size in bytes.
static wgt_status shard_validate(const char *path, const int32_t *header, uint64_t len) {
    if (header[0] != SHARD_MAGIC)
        return wgt_fail(WGT_ERR_FORMAT, "%s is not a token shard: magic number %d, expected %d; "
                        "pass a .bin file written by `wgtrain prepare` (or llm.c's data scripts)",
                        path, header[0], SHARD_MAGIC);
    if (header[1] == 2)
        return wgt_fail(WGT_ERR_FORMAT, "%s is a version 2 shard (uint32 tokens, as for Llama 3), which wgtrain "
                        "does not read; prepare the data with a vocabulary of at most 65535 (version 1)", path);
    if (header[1] != SHARD_VERSION)
        return wgt_fail(WGT_ERR_FORMAT, "%s has shard version %d; this build reads version %d; "
                        "re-create it with `wgtrain prepare`", path, header[1], SHARD_VERSION);
    if (header[2] < 0)
        return wgt_fail(WGT_ERR_FORMAT, "%s declares a negative token count (%d): the header is corrupted; "
                        "re-create the shard", path, header[2]);
    uint64_t want = SHARD_HEADER_INTS * 4 + (uint64_t)header[2] * 2;
    if (len < want)
        return wgt_fail(WGT_ERR_FORMAT, "%s is truncated: its header declares %d tokens (%llu bytes in all) but the "
                        "file has %llu bytes; re-create it (an interrupted copy or download?)",
                        path, header[2], (unsigned long long)want, (unsigned long long)len);
    if (len > want)
        return wgt_fail(WGT_ERR_FORMAT, "%s has %llu bytes after the %d tokens its header declares: the file is "
                        "corrupted or not a shard; re-create it", path, (unsigned long long)(len - want), header[2]);
    return WGT_OK;
}

wgt_status shard_open(shard **out, const char *path) {
    *out = NULL;
    int fd;
    uint64_t len;
    WGT_TRY(file_open_read(path, "shard", "check the --data directory", &fd, &len));
    if (len < SHARD_HEADER_INTS * 4) {
        close(fd);
        return wgt_fail(WGT_ERR_FORMAT, "%s is truncated: %llu bytes, shorter than the %d-byte shard header; "
                        "re-create it", path, (unsigned long long)len, SHARD_HEADER_INTS * 4);
    }
    int32_t header[SHARD_HEADER_INTS];
    wgt_status st = file_pread_exact(fd, header, sizeof header, 0, path);
    if (st == WGT_OK) st = shard_validate(path, header, len);
    if (st != WGT_OK) {
        close(fd);
        return st;
    }
    shard *s = wgt_calloc(1, sizeof *s);
    s->fd = fd;
    s->n = (size_t)header[2];
    s->path = wgt_strdup(path);
    *out = s;
    return WGT_OK;
}

size_t shard_count(const shard *s) { return s->n; }
const char *shard_path(const shard *s) { return s->path; }

wgt_status shard_read(const shard *s, size_t off, size_t n, uint16_t *dst) {
    WGT_ASSERT(off <= s->n && n <= s->n - off, "shard_read beyond the shard's declared tokens");
    return file_pread_exact(s->fd, dst, n * sizeof *dst, SHARD_HEADER_INTS * 4 + (uint64_t)off * 2, s->path);
}

wgt_status shard_scan(const shard *s, uint32_t *crc_out, unsigned *max_out, uint64_t *counts) {
    enum { CHUNK = 1 << 19 };  // tokens per read (1 MiB)
    uint16_t *buf = wgt_malloc(CHUNK * sizeof *buf);
    int32_t header[SHARD_HEADER_INTS];
    wgt_status st = file_pread_exact(s->fd, header, sizeof header, 0, s->path);
    uint32_t crc = (uint32_t)crc32_z(0, (const Bytef *)header, sizeof header);
    unsigned mx = 0;
    for (size_t off = 0; off < s->n && st == WGT_OK; off += CHUNK) {
        size_t k = s->n - off < CHUNK ? s->n - off : CHUNK;
        st = shard_read(s, off, k, buf);
        if (st != WGT_OK) break;
        crc = (uint32_t)crc32_z(crc, (const Bytef *)buf, k * sizeof *buf);
        for (size_t i = 0; i < k; i++) {
            if (buf[i] > mx) mx = buf[i];
            if (counts) counts[buf[i]]++;
        }
    }
    free(buf);
    if (crc_out) *crc_out = crc;
    if (max_out) *max_out = mx;
    return st;
}

void shard_close(shard *s) {
    if (!s) return;
    close(s->fd);
    free(s->path);
    free(s);
}

wgt_status shard_read_all(const char *path, uint16_t **toks, size_t *n) {
    *toks = NULL;
    *n = 0;
    shard *s;
    WGT_TRY(shard_open(&s, path));
    uint16_t *t = wgt_malloc(s->n * sizeof *t);
    wgt_status st = shard_read(s, 0, s->n, t);
    if (st != WGT_OK) {
        free(t);
        shard_close(s);
        return st;
    }
    *toks = t;
    *n = s->n;
    shard_close(s);
    return WGT_OK;
}

wgt_status shard_check_vocab(const uint16_t *toks, size_t n, int vocab, const char *path) {
    for (size_t i = 0; i < n; i++)
        if ((int)toks[i] >= vocab)
            return wgt_fail(WGT_ERR_FORMAT, "%s: token id %u at position %zu is >= the vocabulary size %d: the data "
                            "was tokenized with a different tokenizer; re-run `wgtrain prepare` or use the "
                            "matching data directory", path ? path : "token data", toks[i], i, vocab);
    return WGT_OK;
}

double shard_unigram_entropy(const uint16_t *toks, size_t n) {
    if (n == 0) return 0.0;
    uint64_t *count = wgt_calloc(65536, sizeof *count);
    for (size_t i = 0; i < n; i++) count[toks[i]]++;
    double h = 0.0, inv = 1.0 / (double)n;
    for (int v = 0; v < 65536; v++)
        if (count[v]) {
            double p = (double)count[v] * inv;
            h -= p * log(p);
        }
    free(count);
    return h;
}
