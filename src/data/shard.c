// shard.c — llm.c-compatible token shards (see shard.h).
#include "data/shard.h"
#include "core/fileutil.h"
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

// The shard format is little-endian and we use the mapped tokens in place.
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "shards are little-endian; add byte swapping for this host");

struct shard {
    void *map;
    size_t map_len;
    const uint16_t *toks;
    size_t n;
};

wgt_status shard_write(const char *path, const uint16_t *toks, size_t n) {
    if (n > SHARD_MAX_TOKENS)
        return wgt_fail(WGT_ERR_ARG, "cannot write %s: %zu tokens exceed the shard format's limit of %u; "
                        "split the tokens over several shards", path, n, SHARD_MAX_TOKENS);
    int32_t header[SHARD_HEADER_INTS] = {0};
    header[0] = SHARD_MAGIC;
    header[1] = SHARD_VERSION;
    header[2] = (int32_t)n;
    atomic_file af;
    WGT_TRY(atomic_file_open(&af, path));
    atomic_file_write(&af, header, sizeof header);
    atomic_file_write(&af, toks, n * sizeof *toks);
    return atomic_file_commit(&af);
}

// Checks a shard's header against the file's length; `len` is the file size in bytes.
static wgt_status shard_validate(const char *path, const int32_t *header, size_t len) {
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
    size_t want = SHARD_HEADER_INTS * 4 + (size_t)header[2] * 2;
    if (len < want)
        return wgt_fail(WGT_ERR_FORMAT, "%s is truncated: its header declares %d tokens (%zu bytes in all) but the "
                        "file has %zu bytes; re-create it (an interrupted copy or download?)",
                        path, header[2], want, len);
    if (len > want)
        return wgt_fail(WGT_ERR_FORMAT, "%s has %zu bytes after the %d tokens its header declares: the file is "
                        "corrupted or not a shard; re-create it", path, len - want, header[2]);
    return WGT_OK;
}

wgt_status shard_open(shard **out, const char *path) {
    *out = NULL;
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return wgt_fail(WGT_ERR_IO, "cannot open shard %s: %s; check the --data directory", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return wgt_fail(WGT_ERR_IO, "%s is not a regular file; pass a .bin token shard", path);
    }
    size_t len = (size_t)sb.st_size;
    if (len < SHARD_HEADER_INTS * 4) {
        close(fd);
        return wgt_fail(WGT_ERR_FORMAT, "%s is truncated: %zu bytes, shorter than the %d-byte shard header; "
                        "re-create it", path, len, SHARD_HEADER_INTS * 4);
    }
    void *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return wgt_fail(WGT_ERR_IO, "cannot map shard %s: %s", path, strerror(errno));
    wgt_status st = shard_validate(path, map, len);
    if (st != WGT_OK) {
        munmap(map, len);
        return st;
    }
    shard *s = wgt_calloc(1, sizeof *s);
    s->map = map;
    s->map_len = len;
    s->toks = (const uint16_t *)((const char *)map + SHARD_HEADER_INTS * 4);
    s->n = (size_t)((const int32_t *)map)[2];
    *out = s;
    return WGT_OK;
}

const uint16_t *shard_tokens(const shard *s) { return s->toks; }
size_t shard_count(const shard *s) { return s->n; }

void shard_close(shard *s) {
    if (!s) return;
    munmap(s->map, s->map_len);
    free(s);
}

wgt_status shard_read_all(const char *path, uint16_t **toks, size_t *n) {
    *toks = NULL;
    *n = 0;
    shard *s;
    WGT_TRY(shard_open(&s, path));
    uint16_t *t = wgt_malloc(s->n * sizeof *t);
    memcpy(t, s->toks, s->n * sizeof *t);
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
