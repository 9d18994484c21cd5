// text_tokenizer.c — the tokenizer interface over the registered kinds (see text_tokenizer.h):
// finding a kind for a name, directory or file, and what all kinds share.
#include "data/text_tokenizer.h"
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "core/fileutil.h"
#include "data/data_meta.h"
#include "data/prepare.h"

struct text_tokenizer {
    const text_tok_kind *kind;
    void *impl;
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
static int n_files(const text_tok_kind *k) {
    int n = 0;
    while (k->files[n]) n++;
    return n;
}

text_tokenizer *text_tokenizer_wrap(const text_tok_kind *kind, void *impl, const char *source) {
    text_tokenizer *t = wgt_calloc(1, sizeof *t);
    t->kind = kind;
    t->impl = impl;
    t->source = wgt_strdup(source ? source : "(trained)");
    return t;
}

text_tokenizer *text_tokenizer_from_bpe(tokenizer *tok) {
    const text_tok_kind *k = text_tok_kind_find(TEXT_TOK_BPE_NAME);
    WGT_ASSERT(k, "wgtrain's BPE is not registered (tokenizer_kinds.c)");
    return text_tokenizer_wrap(k, tok, NULL);
}

void text_tokenizer_free(text_tokenizer *t) {
    if (!t) return;
    if (t->impl) t->kind->free(t->impl);
    free(t->source);
    free(t);
}

wgt_status text_tokenizer_open_kind(text_tokenizer **out, const text_tok_kind *kind, const char *const *paths,
                                    const char *source) {
    *out = NULL;
    void *impl = NULL;
    WGT_TRY(kind->open(&impl, paths));
    *out = text_tokenizer_wrap(kind, impl, source ? source : paths[0]);
    return WGT_OK;
}

// Opens kind from dir/names[i]; every file must be there. `why` says who named the files.
static wgt_status open_in_dir(text_tokenizer **out, const text_tok_kind *kind, const char *dir,
                              const char *const *names, const char *why) {
    int n = n_files(kind);
    char *paths[TEXT_TOK_MAX_FILES] = {0};
    wgt_status st = WGT_OK;
    for (int i = 0; i < n; i++) paths[i] = join(dir, names[i]);
    for (int i = 0; i < n && st == WGT_OK; i++)
        if (!is_file(paths[i]))
            st = wgt_fail(WGT_ERR_IO, "%s names the %s tokenizer file %s, which is missing; re-run `wgtrain prepare%s%s`",
                          why, kind->name, paths[i], kind->open_installed ? " --tokenizer " : "",
                          kind->open_installed ? kind->name : "");
    if (st == WGT_OK) st = text_tokenizer_open_kind(out, kind, (const char *const *)paths, n > 1 ? dir : paths[0]);
    for (int i = 0; i < n; i++) free(paths[i]);
    return st;
}

wgt_status text_tokenizer_open_gpt2(text_tokenizer **out) { return text_tokenizer_open(out, TEXT_TOK_GPT2_NAME); }

// ------------------------------------------------------------------ directories

wgt_status text_tokenizer_open_meta(text_tokenizer **out, const char *dir, const data_meta *m, const char *meta_path) {
    *out = NULL;
    return open_in_dir(out, m->kind, dir, (const char *const *)m->tok_files, meta_path);
}

// Whether dir holds every file of kind under its standard name.
static int kind_in_dir(const text_tok_kind *k, const char *dir) {
    for (int i = 0; k->files[i]; i++) {
        char *p = join(dir, k->files[i]);
        int r = is_file(p);
        free(p);
        if (!r) return 0;
    }
    return 1;
}

wgt_status text_tokenizer_open_dir(text_tokenizer **out, const char *dir) {
    *out = NULL;
    char *meta = join(dir, PREPARE_META_FILE);
    wgt_status st = WGT_OK;
    if (is_file(meta)) {
        data_meta m;
        st = data_meta_read(&m, meta);
        if (st == WGT_OK) st = text_tokenizer_open_meta(out, dir, &m, meta);
        data_meta_free(&m);
        free(meta);
        return st;
    }
    free(meta);
    // a run directory (or data without meta.json): the one kind whose files it holds
    const text_tok_kind *found = NULL;
    for (int i = 0; text_tok_kinds[i] && st == WGT_OK; i++) {
        if (!kind_in_dir(text_tok_kinds[i], dir)) continue;
        if (found)
            st = wgt_fail(WGT_ERR_FORMAT, "%s holds the files of two tokenizers, %s's and %s's; remove the one it was not "
                          "made with", dir, found->name, text_tok_kinds[i]->name);
        found = text_tok_kinds[i];
    }
    if (st == WGT_OK && found) st = open_in_dir(out, found, dir, found->files, dir);
    return st;
}

int text_tokenizer_dir_has(const char *dir) {
    for (int i = 0; text_tok_kinds[i]; i++)
        for (int j = 0; text_tok_kinds[i]->files[j]; j++) {
            char *p = join(dir, text_tok_kinds[i]->files[j]);
            int r = is_file(p);
            free(p);
            if (r) return 1;
        }
    return 0;
}

// ------------------------------------------------------------------ names and files

// A file given by path: the kind with a file of that name (its other files beside it), else
// the kind that recognizes the file's first bytes.
static wgt_status open_file(text_tokenizer **out, const char *spec) {
    char *copy = wgt_strdup(spec), *copy2 = wgt_strdup(spec);
    const char *base = basename(copy), *dir = dirname(copy2);
    wgt_status st = WGT_OK;
    const text_tok_kind *kind = NULL;
    for (int i = 0; text_tok_kinds[i] && !kind; i++)
        for (int j = 0; text_tok_kinds[i]->files[j]; j++)
            if (!strcmp(base, text_tok_kinds[i]->files[j])) kind = text_tok_kinds[i];
    if (kind && n_files(kind) > 1) {
        if (!kind_in_dir(kind, dir)) {
            char names[256] = "";
            for (int j = 0; kind->files[j]; j++)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", j ? " and " : "", kind->files[j]);
            st = wgt_fail(WGT_ERR_IO, "%s is one of the %s tokenizer's %d files; %s must be side by side in %s", spec,
                          kind->name, n_files(kind), names, dir);
        } else {
            st = open_in_dir(out, kind, dir, kind->files, dir);
        }
    } else if (kind) {
        const char *paths[1] = {spec};
        st = text_tokenizer_open_kind(out, kind, paths, spec);
    } else {
        uint8_t head[64];
        size_t k = 0;
        if (file_read_head(spec, "tokenizer", head, sizeof head, &k) != WGT_OK) k = 0;  // then no kind matches
        for (int i = 0; text_tok_kinds[i] && !kind; i++)
            if (text_tok_kinds[i]->sniff && text_tok_kinds[i]->sniff(head, k)) kind = text_tok_kinds[i];
        if (kind && n_files(kind) == 1) {
            const char *paths[1] = {spec};
            st = text_tokenizer_open_kind(out, kind, paths, spec);
        } else {
            char known[256];
            st = wgt_fail(WGT_ERR_FORMAT, "%s is not a tokenizer file of a kind this build knows (%s): pass a tokenizer "
                          "by its standard file name (such as %s), a data or run directory, or gpt2", spec,
                          text_tok_kind_names(known, sizeof known), text_tok_kinds[0]->files[0]);
        }
    }
    free(copy);
    free(copy2);
    return st;
}

wgt_status text_tokenizer_open(text_tokenizer **out, const char *spec) {
    *out = NULL;
    const text_tok_kind *named = text_tok_kind_find(spec);
    if (named && named->open_installed) {
        void *impl = NULL;
        char *source = NULL;
        WGT_TRY(named->open_installed(&impl, &source));
        *out = text_tokenizer_wrap(named, impl, source);
        free(source);
        return WGT_OK;
    }
    if (is_dir(spec)) {
        WGT_TRY(text_tokenizer_open_dir(out, spec));
        if (!*out)
            return wgt_fail(WGT_ERR_IO, "%s holds no tokenizer: a data directory (wgtrain prepare) or run directory "
                            "(wgtrain train) holds one kind's files, such as %s", spec, text_tok_kinds[0]->files[0]);
        return WGT_OK;
    }
    if (!is_file(spec))
        return wgt_fail(WGT_ERR_IO, "tokenizer %s not found; pass gpt2, a data or run directory, or a tokenizer file",
                        spec);
    return open_file(out, spec);
}

// ------------------------------------------------------------------ use

const text_tok_kind *text_tokenizer_kind(const text_tokenizer *t) { return t->kind; }
const char *text_tokenizer_kind_name(const text_tokenizer *t) { return t->kind->name; }
const char *text_tokenizer_source(const text_tokenizer *t) { return t->source; }
const void *text_tokenizer_impl(const text_tokenizer *t) { return t->impl; }
int text_tokenizer_vocab_size(const text_tokenizer *t) { return t->kind->vocab_size(t->impl); }
int text_tokenizer_eot(const text_tokenizer *t) { return t->kind->eot(t->impl); }

wgt_status text_tokenizer_encode(const text_tokenizer *t, const uint8_t *bytes, size_t n, int allow_special,
                                 uint32_t **ids, size_t *n_ids) {
    const size_t ml = strlen(TOKENIZER_EOT_TEXT);
    const uint8_t *hit = allow_special && n ? memmem(bytes, n, TOKENIZER_EOT_TEXT, ml) : NULL;
    if (!hit) return t->kind->encode(t->impl, bytes, n, ids, n_ids);
    // text, end-of-text, text, ...: each stretch between the markers encoded on its own
    uint32_t *all = NULL;
    size_t total = 0, cap = 0;
    for (size_t s = 0;;) {
        size_t e = hit ? (size_t)(hit - bytes) : n;
        uint32_t *part;
        size_t k;
        wgt_status st = t->kind->encode(t->impl, bytes + s, e - s, &part, &k);
        if (st != WGT_OK) {
            free(all);
            return st;
        }
        if (total + k + 1 > cap) {
            cap = (total + k + 1) * 2;
            all = realloc(all, cap * sizeof *all);
            WGT_ASSERT(all, "out of host memory");
        }
        if (k) memcpy(all + total, part, k * sizeof *part);
        total += k;
        free(part);
        if (!hit) break;
        all[total++] = (uint32_t)text_tokenizer_eot(t);
        s = e + ml;
        hit = s < n ? memmem(bytes + s, n - s, TOKENIZER_EOT_TEXT, ml) : NULL;
    }
    *ids = all;
    *n_ids = total;
    return WGT_OK;
}

wgt_status text_tokenizer_decode(const text_tokenizer *t, const uint32_t *ids, size_t n, uint8_t **bytes,
                                 size_t *n_bytes) {
    return t->kind->decode(t->impl, ids, n, bytes, n_bytes);
}

const uint8_t *text_tokenizer_token_bytes(const text_tokenizer *t, int id, size_t *len) {
    return t->kind->token_bytes(t->impl, id, len);
}

uint64_t text_tokenizer_fingerprint(const text_tokenizer *t) {
    if (t->kind->fingerprint) return t->kind->fingerprint(t->impl);
    uint64_t h = fnv1a64(FNV64_INIT, t->kind->name, strlen(t->kind->name) + 1);
    for (int id = 0; id < text_tokenizer_vocab_size(t); id++) {
        size_t len = 0;
        const uint8_t *b = text_tokenizer_token_bytes(t, id, &len);
        uint32_t n = (uint32_t)len;
        h = fnv1a64(h, &n, sizeof n);
        if (len) h = fnv1a64(h, b, len);
    }
    return h;
}

wgt_status text_tokenizer_save_dir(const text_tokenizer *t, const char *dir) {
    int n = n_files(t->kind);
    char *paths[TEXT_TOK_MAX_FILES] = {0};
    for (int i = 0; i < n; i++) paths[i] = join(dir, t->kind->files[i]);
    wgt_status st = t->kind->save(t->impl, (const char *const *)paths);
    for (int i = 0; i < n; i++) free(paths[i]);
    WGT_TRY(st);
    // the other kinds' files go, so that the directory holds one tokenizer
    for (int i = 0; text_tok_kinds[i]; i++) {
        if (text_tok_kinds[i] == t->kind) continue;
        for (int j = 0; text_tok_kinds[i]->files[j]; j++) {
            int ours = 0;
            for (int q = 0; q < n; q++) ours |= !strcmp(t->kind->files[q], text_tok_kinds[i]->files[j]);
            if (ours) continue;
            char *p = join(dir, text_tok_kinds[i]->files[j]);
            if (unlink(p) != 0 && errno != ENOENT)
                st = wgt_fail(WGT_ERR_IO, "cannot remove %s (another tokenizer's file): %s", p, strerror(errno));
            free(p);
            WGT_TRY(st);
        }
    }
    return WGT_OK;
}

char *text_tokenizer_meta_json(const text_tokenizer *t) {
    const text_tok_kind *k = t->kind;
    size_t cap = 64 + strlen(k->name);
    for (int i = 0; k->files[i]; i++) cap += strlen(k->files[i]) + 8;
    char *s = wgt_malloc(cap);
    int w = snprintf(s, cap, "\"tokenizer_kind\": \"%s\",\n  ", k->name);
    if (n_files(k) == 1) {
        snprintf(s + w, cap - (size_t)w, "\"tokenizer\": \"%s\"", k->files[0]);
    } else {
        w += snprintf(s + w, cap - (size_t)w, "\"tokenizer_files\": [");
        for (int i = 0; k->files[i]; i++)
            w += snprintf(s + w, cap - (size_t)w, "%s\"%s\"", i ? ", " : "", k->files[i]);
        snprintf(s + w, cap - (size_t)w, "]");
    }
    return s;
}
