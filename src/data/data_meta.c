// data_meta.c — reads a data directory's meta.json (see data_meta.h).
#include "data/data_meta.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/fileutil.h"
#include "core/json_strict.h"
#include "core/token_id.h"
#include "data/prepare.h"
#include "data/shard.h"

#define META_MAX_BYTES (16u << 20)
static const char *const FIX = "re-run `wgtrain prepare`";

// A name meta.json may give for a file of the directory: a plain file name, nothing that
// leads elsewhere.
static int plain_name(const char *s) {
    size_t n = strlen(s);
    return n > 0 && n < 256 && !strchr(s, '/') && strcmp(s, ".") && strcmp(s, "..");
}

static int parse_hex(const char *s, int digits, uint64_t *out) {
    if ((int)strlen(s) != digits) return 0;
    uint64_t v = 0;
    for (int i = 0; i < digits; i++) {
        char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (uint64_t)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (uint64_t)(c - 'a' + 10);
        else return 0;
    }
    *out = v;
    return 1;
}

// A list of shards: objects {"file", "tokens", "crc32"} and nothing else.
static wgt_status read_shards(data_meta_shard **out, size_t *n_out, const cJSON *arr, const char *path, const char *key) {
    if (!cJSON_IsArray(arr)) return wgt_fail(WGT_ERR_FORMAT, "%s lacks the list \"%s\"; %s", path, key, FIX);
    size_t n = (size_t)cJSON_GetArraySize(arr);
    data_meta_shard *v = wgt_calloc(n ? n : 1, sizeof *v);
    size_t k = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, arr) {
        const cJSON *file = NULL, *tokens = NULL, *crc = NULL;
        int unknown = 0;
        if (cJSON_IsObject(it))
            for (const cJSON *c = it->child; c; c = c->next) {
                if (!strcmp(c->string, "file")) file = c;
                else if (!strcmp(c->string, "tokens")) tokens = c;
                else if (!strcmp(c->string, "crc32")) crc = c;
                else unknown = 1;
            }
        uint64_t want_crc;
        if (unknown || !cJSON_IsString(file) || !plain_name(file->valuestring) ||
            !json_int_in(tokens, 0, SHARD_MAX_TOKENS, &v[k].tokens) || !cJSON_IsString(crc) ||
            !parse_hex(crc->valuestring, 8, &want_crc)) {
            for (size_t i = 0; i < k; i++) free(v[i].file);
            free(v);
            return wgt_fail(WGT_ERR_FORMAT, "%s: each entry of \"%s\" must be {\"file\": NAME, \"tokens\": N, \"crc32\": "
                            "\"8 hex digits\"} with a plain file name; %s", path, key, FIX);
        }
        v[k].file = wgt_strdup(file->valuestring);
        v[k].crc32 = (uint32_t)want_crc;
        k++;
    }
    *out = v;
    *n_out = k;
    return WGT_OK;
}

// The tokenizer's kind and file names: "tokenizer_kind" (absent: wgtrain's BPE), then
// "tokenizer" (a kind of one file) or "tokenizer_files" (any kind; absent: the standard names).
static wgt_status read_tokenizer(data_meta *m, const cJSON *root, const char *path) {
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(root, "tokenizer_kind");
    const cJSON *file = cJSON_GetObjectItemCaseSensitive(root, "tokenizer");
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(root, "tokenizer_files");
    if (kind && !cJSON_IsString(kind))
        return wgt_fail(WGT_ERR_FORMAT, "%s: \"tokenizer_kind\" must be a string; %s", path, FIX);
    const char *name = kind ? kind->valuestring : TEXT_TOK_BPE_NAME;
    m->kind = text_tok_kind_find(name);
    char known[256];
    if (!m->kind)
        return wgt_fail(WGT_ERR_FORMAT, "%s: the tokenizer kind \"%s\" is unknown to this wgtrain (it knows %s); was the "
                        "data made by a newer version?", path, name, text_tok_kind_names(known, sizeof known));
    int nf = 0;
    while (m->kind->files[nf]) nf++;
    const char *names[TEXT_TOK_MAX_FILES] = {0};
    for (int i = 0; i < nf; i++) names[i] = m->kind->files[i];
    if (file && files)
        return wgt_fail(WGT_ERR_FORMAT, "%s gives both \"tokenizer\" and \"tokenizer_files\"; %s", path, FIX);
    if (file) {
        if (nf != 1 || !cJSON_IsString(file))
            return wgt_fail(WGT_ERR_FORMAT, "%s: \"tokenizer\" must be the one file of a %s tokenizer; %s", path, name, FIX);
        names[0] = file->valuestring;
    } else if (files) {
        if (!cJSON_IsArray(files) || cJSON_GetArraySize(files) != nf)
            return wgt_fail(WGT_ERR_FORMAT, "%s: \"tokenizer_files\" must list the %d file(s) of a %s tokenizer; %s", path,
                            nf, name, FIX);
        for (int i = 0; i < nf; i++) {
            const cJSON *f = cJSON_GetArrayItem(files, i);
            if (!cJSON_IsString(f))
                return wgt_fail(WGT_ERR_FORMAT, "%s: \"tokenizer_files\" must hold strings; %s", path, FIX);
            names[i] = f->valuestring;
        }
    } else if (!kind) {
        return wgt_fail(WGT_ERR_FORMAT, "%s names no tokenizer (\"tokenizer_kind\" and \"tokenizer\" are absent); %s",
                        path, FIX);
    }
    for (int i = 0; i < nf; i++) {
        if (!plain_name(names[i]))
            return wgt_fail(WGT_ERR_FORMAT, "%s: the tokenizer's files must be plain names in the directory, not \"%s\"; %s",
                            path, names[i], FIX);
        m->tok_files[i] = wgt_strdup(names[i]);
    }
    return WGT_OK;
}

static wgt_status read_root(data_meta *m, const cJSON *root, const char *path) {
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(root, "version");
    int64_t version = 0, vocab = 0, eot = 0;
    if (!cJSON_IsObject(root) || !cJSON_IsString(fmt) || strcmp(fmt->valuestring, "wgtrain-data"))
        return wgt_fail(WGT_ERR_FORMAT, "%s is not a wgtrain data description (\"format\" is not \"wgtrain-data\"); %s",
                        path, FIX);
    if (!json_int_in(ver, 0, 1000000, &version))
        return wgt_fail(WGT_ERR_FORMAT, "%s has no integer \"version\"; %s", path, FIX);
    if (version == 1)
        return wgt_fail(WGT_ERR_FORMAT, "%s is version 1, written by an older wgtrain without checksums of the shards "
                        "and the tokenizer; %s to write version %d", path, FIX, PREPARE_META_VERSION);
    if (version != PREPARE_META_VERSION)
        return wgt_fail(WGT_ERR_FORMAT, "%s has version %lld; this build reads version %d; %s", path, (long long)version,
                        PREPARE_META_VERSION, FIX);
    WGT_TRY(read_tokenizer(m, root, path));
    const cJSON *th = cJSON_GetObjectItemCaseSensitive(root, "tokenizer_fnv1a64");
    if (!cJSON_IsString(th) || !parse_hex(th->valuestring, 16, &m->tok_fp))
        return wgt_fail(WGT_ERR_FORMAT, "%s must give its tokenizer's 16-hex-digit \"tokenizer_fnv1a64\"; %s", path, FIX);
    if (!json_int_in(cJSON_GetObjectItemCaseSensitive(root, "vocab_size"), 2, TOKEN_MAX_VOCAB, &vocab))
        return wgt_fail(WGT_ERR_FORMAT, "%s: \"vocab_size\" must be an integer from 2 to %d; %s", path, TOKEN_MAX_VOCAB,
                        FIX);
    if (!json_int_in(cJSON_GetObjectItemCaseSensitive(root, "eot_token"), 0, vocab - 1, &eot))
        return wgt_fail(WGT_ERR_FORMAT, "%s: \"eot_token\" must be an id of the vocabulary, 0..%lld; %s", path,
                        (long long)(vocab - 1), FIX);
    m->vocab = (int)vocab;
    m->eot = (int)eot;
    const cJSON *ent = cJSON_GetObjectItemCaseSensitive(root, "unigram_entropy_nats");
    // the entropy of a distribution over vocab ids is at most log(vocab); 1e-6 allows far more
    // than the rounding of the decimals it is written with
    if (!cJSON_IsNumber(ent) || !isfinite(ent->valuedouble) || ent->valuedouble < 0 ||
        ent->valuedouble > log((double)vocab) + 1e-6)
        return wgt_fail(WGT_ERR_FORMAT, "%s: \"unigram_entropy_nats\" must be a number from 0 to log(vocab_size) = %.4f; "
                        "%s", path, log((double)vocab), FIX);
    m->entropy = ent->valuedouble;
    if (!json_int_in(cJSON_GetObjectItemCaseSensitive(root, "train_tokens"), 0, JSON_MAX_SAFE_INT, &m->train_tokens) ||
        !json_int_in(cJSON_GetObjectItemCaseSensitive(root, "val_tokens"), 0, JSON_MAX_SAFE_INT, &m->val_tokens))
        return wgt_fail(WGT_ERR_FORMAT, "%s: \"train_tokens\" and \"val_tokens\" must be non-negative integers; %s", path,
                        FIX);
    WGT_TRY(read_shards(&m->train, &m->n_train, cJSON_GetObjectItemCaseSensitive(root, "train_shards"), path,
                        "train_shards"));
    return read_shards(&m->val, &m->n_val, cJSON_GetObjectItemCaseSensitive(root, "val_shards"), path, "val_shards");
}

wgt_status data_meta_read(data_meta *m, const char *meta_path) {
    memset(m, 0, sizeof *m);
    char *text;
    size_t len;
    WGT_TRY(file_read_all(meta_path, "data description", NULL, META_MAX_BYTES, &text, &len));
    cJSON *root;
    wgt_status st = json_parse_strict(&root, text, len, 0, meta_path);
    free(text);
    if (st != WGT_OK) {
        char msg[1200];
        snprintf(msg, sizeof msg, "%s", wgt_last_error());
        return wgt_fail(WGT_ERR_FORMAT, "%s; %s", msg, FIX);
    }
    st = read_root(m, root, meta_path);
    cJSON_Delete(root);
    if (st != WGT_OK) data_meta_free(m);
    return st;
}

void data_meta_free(data_meta *m) {
    for (int i = 0; i < TEXT_TOK_MAX_FILES; i++) free(m->tok_files[i]);
    for (size_t i = 0; i < m->n_train; i++) free(m->train[i].file);
    for (size_t i = 0; i < m->n_val; i++) free(m->val[i].file);
    free(m->train);
    free(m->val);
    memset(m, 0, sizeof *m);
}
