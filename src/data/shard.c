// shard.c — llm.c-compatible token shards, 16-bit and 32-bit (see shard.h).
#include "data/shard.h"
#include "core/fileutil.h"
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

// The shard format is little-endian and tokens are copied as they are.
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "shards are little-endian; add byte swapping for this host");

struct shard {
    int fd;
    int bytes;  // per token: 2 or 4
    int flags;  // a flag byte per token after the tokens
    size_t n;
    char *path;
};

int shard_token_bytes(int vocab) { return vocab <= SHARD_U16_MAX_VOCAB ? 2 : 4; }

static void shard_header(int32_t header[SHARD_HEADER_INTS], size_t n, int bytes, int flags) {
    memset(header, 0, SHARD_HEADER_INTS * sizeof *header);
    header[0] = bytes == 2 ? SHARD_MAGIC : SHARD_MAGIC_U32;
    header[1] = bytes == 2 ? (flags ? SHARD_VERSION_FLAGS : SHARD_VERSION) : (flags ? SHARD_VERSION_U32_FLAGS : SHARD_VERSION_U32);
    header[2] = (int32_t)n;
}

// k tokens (each < 65536) as the 16-bit format stores them: uint16 little-endian.
static void pack_u16(uint8_t *dst, const uint32_t *toks, size_t k) {
    for (size_t i = 0; i < k; i++) {
        uint16_t v = (uint16_t)toks[i];
        memcpy(dst + 2 * i, &v, 2);
    }
}

enum { PACK_CHUNK = 1 << 18 };  // tokens per conversion buffer (1 MiB at 4 bytes)

static wgt_status shard_write_impl(const char *path, const uint32_t *toks, const uint8_t *flags, size_t n, int vocab);

wgt_status shard_write(const char *path, const uint32_t *toks, size_t n, int vocab) {
    return shard_write_impl(path, toks, NULL, n, vocab);
}

wgt_status shard_write_flags(const char *path, const uint32_t *toks, const uint8_t *flags, size_t n, int vocab) {
    for (size_t i = 0; i < n; i++)
        if (flags[i] & ~(SHARD_FLAG_TRAIN | SHARD_FLAG_START))
            return wgt_fail(WGT_ERR_ARG, "cannot write %s: token %zu has flags 0x%02x, beyond the defined ones", path, i,
                            flags[i]);
    return shard_write_impl(path, toks, flags, n, vocab);
}

static wgt_status shard_write_impl(const char *path, const uint32_t *toks, const uint8_t *flags, size_t n, int vocab) {
    if (vocab < 1 || vocab > TOKEN_MAX_VOCAB)
        return wgt_fail(WGT_ERR_ARG, "cannot write %s: vocabulary size %d is outside 1..%d", path, vocab, TOKEN_MAX_VOCAB);
    if (n > SHARD_MAX_TOKENS)
        return wgt_fail(WGT_ERR_ARG, "cannot write %s: %zu tokens exceed the shard format's limit of %u; "
                        "split the tokens over several shards", path, n, SHARD_MAX_TOKENS);
    WGT_TRY(shard_check_vocab(toks, n, vocab, path));
    const int bytes = shard_token_bytes(vocab);
    int32_t header[SHARD_HEADER_INTS];
    shard_header(header, n, bytes, flags != NULL);
    atomic_file af;
    WGT_TRY(atomic_file_open(&af, path));
    atomic_file_write(&af, header, sizeof header);
    if (bytes == 4) {
        atomic_file_write(&af, toks, n * 4);
    } else {
        uint8_t *buf = wgt_malloc((size_t)PACK_CHUNK * 2);
        for (size_t off = 0; off < n; off += PACK_CHUNK) {
            size_t k = n - off < PACK_CHUNK ? n - off : PACK_CHUNK;
            pack_u16(buf, toks + off, k);
            atomic_file_write(&af, buf, k * 2);
        }
        free(buf);
    }
    if (flags) atomic_file_write(&af, flags, n);
    return atomic_file_commit(&af);
}

uint32_t shard_file_crc(const uint32_t *toks, size_t n, int vocab) { return shard_file_crc_flags(toks, NULL, n, vocab); }

uint32_t shard_file_crc_flags(const uint32_t *toks, const uint8_t *flags, size_t n, int vocab) {
    const int bytes = shard_token_bytes(vocab);
    int32_t header[SHARD_HEADER_INTS];
    shard_header(header, n, bytes, flags != NULL);
    uint32_t crc = (uint32_t)crc32_z(0, (const Bytef *)header, sizeof header);
    if (bytes == 4) {
        crc = (uint32_t)crc32_z(crc, (const Bytef *)toks, n * 4);
        return flags ? (uint32_t)crc32_z(crc, flags, n) : crc;
    }
    uint8_t *buf = wgt_malloc((size_t)PACK_CHUNK * 2);
    for (size_t off = 0; off < n; off += PACK_CHUNK) {
        size_t k = n - off < PACK_CHUNK ? n - off : PACK_CHUNK;
        pack_u16(buf, toks + off, k);
        crc = (uint32_t)crc32_z(crc, buf, k * 2);
    }
    free(buf);
    return flags ? (uint32_t)crc32_z(crc, flags, n) : crc;
}

// Checks a shard's header against the file's length (`len` bytes); sets *bytes per token.
static wgt_status shard_validate(const char *path, const int32_t *header, uint64_t len, int *bytes, int *flags) {
    if (header[0] != SHARD_MAGIC && header[0] != SHARD_MAGIC_U32)
        return wgt_fail(WGT_ERR_FORMAT, "%s is not a token shard: magic number %d, expected %d (16-bit tokens) or %d "
                        "(32-bit tokens); pass a .bin file written by `wgtrain prepare` (or llm.c's data scripts)",
                        path, header[0], SHARD_MAGIC, SHARD_MAGIC_U32);
    const int u32 = header[0] == SHARD_MAGIC_U32, want_ver = u32 ? SHARD_VERSION_U32 : SHARD_VERSION;
    const int flag_ver = u32 ? SHARD_VERSION_U32_FLAGS : SHARD_VERSION_FLAGS;
    if (header[1] != want_ver && header[1] != flag_ver)
        return wgt_fail(WGT_ERR_FORMAT, "%s has magic %d with version %d; this build reads magic %d with version %d or %d "
                        "(uint16 tokens, the second with loss flags) and magic %d with version %d or %d (uint32 tokens): "
                        "the header is corrupted or from another tool; re-create it with `wgtrain prepare`", path,
                        header[0], header[1], SHARD_MAGIC, SHARD_VERSION, SHARD_VERSION_FLAGS, SHARD_MAGIC_U32,
                        SHARD_VERSION_U32, SHARD_VERSION_U32_FLAGS);
    *flags = header[1] == flag_ver;
    if (header[2] < 0)
        return wgt_fail(WGT_ERR_FORMAT, "%s declares a negative token count (%d): the header is corrupted; "
                        "re-create the shard", path, header[2]);
    *bytes = u32 ? 4 : 2;
    uint64_t want = SHARD_HEADER_INTS * 4 + (uint64_t)header[2] * (uint64_t)(*bytes + *flags);
    if (len < want)
        return wgt_fail(WGT_ERR_FORMAT, "%s is truncated: its header declares %d tokens of %d bytes (%llu bytes in all) "
                        "but the file has %llu bytes; re-create it (an interrupted copy or download?)",
                        path, header[2], *bytes + *flags, (unsigned long long)want, (unsigned long long)len);
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
    int bytes = 0, flags = 0;
    wgt_status st = file_pread_exact(fd, header, sizeof header, 0, path);
    if (st == WGT_OK) st = shard_validate(path, header, len, &bytes, &flags);
    if (st != WGT_OK) {
        close(fd);
        return st;
    }
    shard *s = wgt_calloc(1, sizeof *s);
    s->fd = fd;
    s->bytes = bytes;
    s->flags = flags;
    s->n = (size_t)header[2];
    s->path = wgt_strdup(path);
    *out = s;
    return WGT_OK;
}

size_t shard_count(const shard *s) { return s->n; }
const char *shard_path(const shard *s) { return s->path; }
int shard_bytes_per_token(const shard *s) { return s->bytes; }
int shard_has_flags(const shard *s) { return s->flags; }

wgt_status shard_read_flags(const shard *s, size_t off, size_t n, uint8_t *dst) {
    WGT_ASSERT(off <= s->n && n <= s->n - off, "shard_read_flags beyond the shard's declared tokens");
    if (!s->flags) {
        memset(dst, SHARD_FLAG_TRAIN, n);
        return WGT_OK;
    }
    WGT_TRY(file_pread_exact(s->fd, dst, n, SHARD_HEADER_INTS * 4 + (uint64_t)s->n * (uint64_t)s->bytes + off, s->path));
    for (size_t i = 0; i < n; i++)
        if (dst[i] & ~(SHARD_FLAG_TRAIN | SHARD_FLAG_START))
            return wgt_fail(WGT_ERR_FORMAT, "%s: token %zu has flag byte 0x%02x, beyond the defined ones: the shard is "
                            "corrupted; re-create it with `wgtrain prepare`", s->path, off + i, dst[i]);
    return WGT_OK;
}

wgt_status shard_read(const shard *s, size_t off, size_t n, uint32_t *dst) {
    WGT_ASSERT(off <= s->n && n <= s->n - off, "shard_read beyond the shard's declared tokens");
    const uint64_t at = SHARD_HEADER_INTS * 4 + (uint64_t)off * (uint64_t)s->bytes;
    if (s->bytes == 4) return file_pread_exact(s->fd, dst, n * 4, at, s->path);
    // 16-bit: read into the upper half of dst and widen front to back; element i is written
    // over bytes [4i, 4i+4), below the unread 16-bit element i+1 at 2n + 2(i+1)
    uint8_t *raw = (uint8_t *)dst + 2 * n;
    WGT_TRY(file_pread_exact(s->fd, raw, n * 2, at, s->path));
    for (size_t i = 0; i < n; i++) {
        uint16_t v;
        memcpy(&v, raw + 2 * i, 2);
        dst[i] = v;
    }
    return WGT_OK;
}

wgt_status shard_scan(const shard *s, uint32_t *crc_out, uint32_t *max_out, uint64_t **counts, size_t *n_counts) {
    enum { CHUNK = 1 << 18 };  // tokens per read
    uint8_t *raw = wgt_malloc(CHUNK * 4);
    int32_t header[SHARD_HEADER_INTS];
    wgt_status st = file_pread_exact(s->fd, header, sizeof header, 0, s->path);
    uint32_t crc = (uint32_t)crc32_z(0, (const Bytef *)header, sizeof header);
    uint32_t mx = 0;
    for (size_t off = 0; off < s->n && st == WGT_OK; off += CHUNK) {
        size_t k = s->n - off < CHUNK ? s->n - off : CHUNK;
        st = file_pread_exact(s->fd, raw, k * (size_t)s->bytes,
                              SHARD_HEADER_INTS * 4 + (uint64_t)off * (uint64_t)s->bytes, s->path);
        if (st != WGT_OK) break;
        crc = (uint32_t)crc32_z(crc, raw, k * (size_t)s->bytes);
        for (size_t i = 0; i < k; i++) {
            uint32_t v;
            if (s->bytes == 4) {
                memcpy(&v, raw + 4 * i, 4);
            } else {
                uint16_t h;
                memcpy(&h, raw + 2 * i, 2);
                v = h;
            }
            if (v >= (uint32_t)TOKEN_MAX_VOCAB) {
                st = wgt_fail(WGT_ERR_FORMAT, "%s: token id %" PRIu32 " at position %zu (byte offset %llu) is beyond any "
                              "vocabulary this build reads (at most %d ids): the shard is corrupted or not token data; "
                              "re-create it", s->path, v, off + i,
                              (unsigned long long)(SHARD_HEADER_INTS * 4 + (uint64_t)(off + i) * (uint64_t)s->bytes),
                              TOKEN_MAX_VOCAB);
                break;
            }
            if (v > mx) mx = v;
            if (counts) {
                if (v >= *n_counts) {
                    size_t nn = (size_t)v + 1;
                    uint64_t *c = realloc(*counts, nn * sizeof *c);
                    WGT_ASSERT(c, "out of host memory for token counts");
                    memset(c + *n_counts, 0, (nn - *n_counts) * sizeof *c);
                    *counts = c;
                    *n_counts = nn;
                }
                (*counts)[v]++;
            }
        }
    }
    // the flag bytes: part of the file's CRC, and each must be a defined combination
    const uint64_t fbase = SHARD_HEADER_INTS * 4 + (uint64_t)s->n * (uint64_t)s->bytes;
    for (size_t off = 0; s->flags && off < s->n && st == WGT_OK; off += CHUNK) {
        size_t k = s->n - off < CHUNK ? s->n - off : CHUNK;
        st = file_pread_exact(s->fd, raw, k, fbase + off, s->path);
        if (st != WGT_OK) break;
        crc = (uint32_t)crc32_z(crc, raw, k);
        for (size_t i = 0; i < k; i++)
            if (raw[i] & ~(SHARD_FLAG_TRAIN | SHARD_FLAG_START)) {
                st = wgt_fail(WGT_ERR_FORMAT, "%s: token %zu has flag byte 0x%02x, beyond the defined ones: the shard is "
                              "corrupted; re-create it with `wgtrain prepare`", s->path, off + i, raw[i]);
                break;
            }
    }
    free(raw);
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

wgt_status shard_read_all(const char *path, uint32_t **toks, size_t *n) {
    *toks = NULL;
    *n = 0;
    shard *s;
    WGT_TRY(shard_open(&s, path));
    uint32_t *t = wgt_malloc((s->n ? s->n : 1) * sizeof *t);
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

wgt_status shard_check_vocab(const uint32_t *toks, size_t n, int vocab, const char *path) {
    for (size_t i = 0; i < n; i++)
        if (toks[i] >= (uint32_t)vocab)
            return wgt_fail(WGT_ERR_FORMAT, "%s: token id %" PRIu32 " at position %zu is >= the vocabulary size %d: the "
                            "data was tokenized with a different tokenizer; re-run `wgtrain prepare` or use the "
                            "matching data directory", path ? path : "token data", toks[i], i, vocab);
    return WGT_OK;
}

double shard_counts_entropy(const uint64_t *counts, size_t n_counts, size_t total) {
    if (total == 0) return 0.0;
    double h = 0.0, inv = 1.0 / (double)total;
    for (size_t v = 0; v < n_counts; v++)
        if (counts[v]) {
            double p = (double)counts[v] * inv;
            h -= p * log(p);
        }
    return h;
}

double shard_unigram_entropy(const uint32_t *toks, size_t n, int vocab) {
    if (n == 0) return 0.0;
    WGT_ASSERT(vocab >= 1 && vocab <= TOKEN_MAX_VOCAB, "vocabulary size out of range");
    uint64_t *count = wgt_calloc((size_t)vocab, sizeof *count);
    for (size_t i = 0; i < n; i++) {
        WGT_ASSERT(toks[i] < (uint32_t)vocab, "token id beyond the vocabulary (check the ids first)");
        count[toks[i]]++;
    }
    double h = shard_counts_entropy(count, (size_t)vocab, n);
    free(count);
    return h;
}
