// hf_tokenizer_kind.c — a Hugging Face tokenizer.json as a tokenizer kind of the registry
// (text_tokenizer.h), so that `prepare`, `train`, `sample` and the data loader use it like the
// others. The kind keeps tokenizer.json (its one registered file) and, when one lies beside it,
// tokenizer_config.json (read and copied by the kind itself, so that a directory without one
// still opens): the config names the end-of-text id (its eos_token), else the post-processor's.
// Saving copies both files byte for byte; the fingerprint hashes their bytes.
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "core/fileutil.h"
#include "core/json_strict.h"
#include "data/hf_tokenizer.h"
#include "data/hf_tokenizer_impl.h"
#include "data/hf_tokenizer_kind.h"
#include "data/text_tokenizer.h"

#define HF_CONFIG_MAX_BYTES (64u << 20)  // real tokenizer_config.json files: < 1 MB

typedef struct hf_kind {
    hf_tokenizer *tok;
    char *json, *config;  // the files' bytes (config: NULL when there was none)
    size_t json_n, config_n;
    int64_t eot;          // -1: neither the config nor the post-processor names one
    // token_bytes, built on first use: id -> bytes in pool
    uint8_t *pool;
    uint32_t *off, *len;
} hf_kind;

static char *config_path_of(const char *json_path) {
    char *copy = wgt_strdup(json_path);
    const char *dir = dirname(copy);
    size_t l = strlen(dir) + strlen(HF_CONFIG_FILE) + 2;
    char *p = wgt_malloc(l);
    snprintf(p, l, "%s/%s", dir, HF_CONFIG_FILE);
    free(copy);
    return p;
}

// eos_token of a parsed tokenizer_config.json: a string or {"content": string}; NULL if absent.
static const char *config_eos(const cJSON *cfg) {
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(cfg, "eos_token");
    if (cJSON_IsObject(e)) e = cJSON_GetObjectItemCaseSensitive(e, "content");
    return cJSON_IsString(e) ? e->valuestring : NULL;
}

static void kind_free(void *impl) {
    hf_kind *k = impl;
    if (!k) return;
    hf_tokenizer_free(k->tok);
    free(k->json);
    free(k->config);
    free(k->pool);
    free(k->off);
    free(k->len);
    free(k);
}

wgt_status hf_kind_config_eot(const hf_tokenizer *tok, const char *config, size_t n, const char *what, int64_t *eot) {
    *eot = hf_tokenizer_eos_id(tok);
    if (!config) return WGT_OK;
    cJSON *cfg = NULL;
    WGT_TRY(json_parse_strict(&cfg, config, n, 0, what));
    const char *eos = config_eos(cfg);
    wgt_status st = WGT_OK;
    if (eos) {
        int64_t id = hf_tokenizer_token_id(tok, eos);
        if (id < 0)
            st = wgt_fail(WGT_ERR_FORMAT, "%s names eos_token \"%.80s\", which is no token of the tokenizer.json beside "
                          "it; fix eos_token or use the matching tokenizer.json", what, eos);
        *eot = id;
    }
    cJSON_Delete(cfg);
    return st;
}

static wgt_status kind_open(void **impl, const char *const *paths) {
    *impl = NULL;
    hf_kind *k = wgt_calloc(1, sizeof *k);
    char *cpath = config_path_of(paths[0]);
    struct stat sb;
    wgt_status st = file_read_all(paths[0], "Hugging Face tokenizer", "pass the tokenizer.json of a model",
                                  HF_MAX_FILE_BYTES, &k->json, &k->json_n);
    if (st == WGT_OK) st = hf_tokenizer_load_text(&k->tok, k->json, k->json_n, paths[0]);
    if (st == WGT_OK && stat(cpath, &sb) == 0)
        st = file_read_all(cpath, "Hugging Face tokenizer config", "remove it or use the model's own",
                           HF_CONFIG_MAX_BYTES, &k->config, &k->config_n);
    if (st == WGT_OK) st = hf_kind_config_eot(k->tok, k->config, k->config_n, cpath, &k->eot);
    free(cpath);
    if (st != WGT_OK) {
        kind_free(k);
        return st;
    }
    *impl = k;
    return WGT_OK;
}

static wgt_status kind_save(const void *impl, const char *const *paths) {
    const hf_kind *k = impl;
    WGT_TRY(atomic_write_file(paths[0], k->json, k->json_n));
    char *cpath = config_path_of(paths[0]);
    wgt_status st = WGT_OK;
    if (k->config) st = atomic_write_file(cpath, k->config, k->config_n);
    else if (unlink(cpath) != 0 && errno != ENOENT)  // a stale config would name another end-of-text
        st = wgt_fail(WGT_ERR_IO, "cannot remove the old %s: %s", cpath, strerror(errno));
    free(cpath);
    return st;
}

// A renamed tokenizer.json: a JSON object whose first member is "version" (as every
// tokenizer.json the `tokenizers` library writes).
static int kind_sniff(const uint8_t *head, size_t n) {
    size_t i = 0;
    while (i < n && (head[i] == ' ' || head[i] == '\n' || head[i] == '\r' || head[i] == '\t')) i++;
    if (i >= n || head[i++] != '{') return 0;
    while (i < n && (head[i] == ' ' || head[i] == '\n' || head[i] == '\r' || head[i] == '\t')) i++;
    return n - i >= 9 && !memcmp(head + i, "\"version\"", 9);
}

static int kind_vocab_size(const void *impl) { return (int)hf_tokenizer_vocab_size(((const hf_kind *)impl)->tok); }
static int kind_eot(const void *impl) { return (int)((const hf_kind *)impl)->eot; }

static wgt_status kind_encode(const void *impl, const uint8_t *bytes, size_t n, uint32_t **ids, size_t *n_ids) {
    return hf_tokenizer_encode(((const hf_kind *)impl)->tok, bytes, n, 0, ids, n_ids);
}
static wgt_status kind_decode(const void *impl, const uint32_t *ids, size_t n, uint8_t **bytes, size_t *n_bytes) {
    return hf_tokenizer_decode(((const hf_kind *)impl)->tok, ids, n, bytes, n_bytes);
}

static int byte_token(const uint8_t *s, size_t l, uint8_t *b) {
    static const char hex[] = "0123456789ABCDEF";
    if (l != 6 || memcmp(s, "<0x", 3) || s[5] != '>') return 0;
    const char *h = strchr(hex, s[3]), *lo = strchr(hex, s[4]);
    if (!h || !lo || !s[3] || !s[4]) return 0;
    *b = (uint8_t)((h - hex) * 16 + (lo - hex));
    return 1;
}

// The bytes each id adds to a stream of decoded text: the token's string through the decoder's
// per-token steps (byte-level alphabet, a plain-text Replace such as "▁" -> " ", <0xNN> byte
// fallback); added tokens as written. Whole-text steps (Strip of the first space) do not apply.
static void build_token_bytes(hf_kind *k) {
    const hf_tokenizer *t = k->tok;
    sbuf pool = {0};
    k->off = wgt_calloc(t->size ? t->size : 1, sizeof *k->off);
    k->len = wgt_calloc(t->size ? t->size : 1, sizeof *k->len);
    int bytelevel = 0, fallback = 0;
    const step *rep = NULL;
    for (size_t d = 0; d < t->n_dec && t->has_decoder; d++) {
        if (t->dec[d].kind == DEC_BYTELEVEL) bytelevel = 1;
        if (t->dec[d].kind == DEC_BYTEFALLBACK) fallback = 1;
        if (t->dec[d].kind == DEC_REPLACE && !t->dec[d].re && t->dec[d].alen) rep = &t->dec[d];
    }
    for (uint32_t id = 0; id < t->size; id++) {
        size_t start = pool.n;
        const uint8_t *s = NULL;
        size_t l = 0;
        int added = t->added_by_id && t->added_by_id[id] >= 0;
        if (added) {
            s = (const uint8_t *)t->added[t->added_by_id[id]].content;
            l = t->added[t->added_by_id[id]].len;
        } else if (id < t->model_size && t->tok_len[id] != UINT32_MAX) {
            s = t->vocab.pool.p + t->tok_off[id];
            l = t->tok_len[id];
        }
        uint8_t b;
        if (!s) {
        } else if (added) {
            sb_add(&pool, s, l);
        } else if (fallback && byte_token(s, l, &b)) {
            sb_byte(&pool, b);
        } else if (bytelevel) {
            for (size_t j = 0; j < l;) {
                uint32_t cp = 0;
                size_t q = hf_utf8_valid_len(s + j, l - j, &cp);
                if (!q) q = 1, cp = UINT32_MAX;
                if (cp < 324 && t->char_byte[cp] >= 0) sb_byte(&pool, (uint8_t)t->char_byte[cp]);
                else sb_add(&pool, s + j, q);
                j += q;
            }
        } else if (rep) {
            for (size_t j = 0; j < l;) {
                if (l - j >= rep->alen && !memcmp(s + j, rep->a, rep->alen)) {
                    sb_add(&pool, rep->b, rep->blen);
                    j += rep->alen;
                } else sb_byte(&pool, s[j++]);
            }
        } else {
            sb_add(&pool, s, l);
        }
        WGT_ASSERT(pool.n <= UINT32_MAX, "token bytes exceed 4 GiB");
        k->off[id] = (uint32_t)start;
        k->len[id] = (uint32_t)(pool.n - start);
    }
    k->pool = pool.p ? pool.p : wgt_malloc(1);
}

static const uint8_t *kind_token_bytes(const void *impl, int id, size_t *len) {
    hf_kind *k = (hf_kind *)impl;  // the table is built once, on first use (sample's streaming)
    if (id < 0 || (uint32_t)id >= hf_tokenizer_vocab_size(k->tok)) return NULL;
    if (!k->off) build_token_bytes(k);
    *len = k->len[id];
    return k->pool + k->off[id];
}

static uint64_t kind_fingerprint(const void *impl) {
    const hf_kind *k = impl;
    uint64_t h = fnv1a64(FNV64_INIT, HF_KIND_NAME, strlen(HF_KIND_NAME) + 1);
    uint64_t n = k->json_n;
    h = fnv1a64(h, &n, sizeof n);
    h = fnv1a64(h, k->json, k->json_n);
    int64_t eot = k->eot;  // what the config decides for the data: its end-of-text id
    return fnv1a64(h, &eot, sizeof eot);
}

const hf_tokenizer *hf_kind_tokenizer(const void *impl) { return ((const hf_kind *)impl)->tok; }
const char *hf_kind_config(const void *impl, size_t *n) {
    *n = ((const hf_kind *)impl)->config_n;
    return ((const hf_kind *)impl)->config;
}

const text_tok_kind text_tok_kind_hf = {
    .name = HF_KIND_NAME,
    .files = {HF_TOKENIZER_FILE, NULL},
    .open = kind_open,
    .save = kind_save,
    .sniff = kind_sniff,
    .free = kind_free,
    .vocab_size = kind_vocab_size,
    .eot = kind_eot,
    .encode = kind_encode,
    .decode = kind_decode,
    .token_bytes = kind_token_bytes,
    .fingerprint = kind_fingerprint,
};
