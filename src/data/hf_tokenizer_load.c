// hf_tokenizer_load.c — reading a Hugging Face tokenizer.json into the layout of
// hf_tokenizer_impl.h: the vocabulary and merges streamed into hash tables, every other component
// parsed as strict JSON and checked field by field; anything not implemented is refused by name.
#include <errno.h>
#include <stdarg.h>
#include <sys/stat.h>
#include "core/fileutil.h"
#include "core/json_strict.h"
#include "data/hf_tokenizer_impl.h"

static wgt_status bad(const char *what, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static wgt_status bad(const char *what, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return wgt_fail(WGT_ERR_FORMAT, "%s: %s", what, msg);
}
static wgt_status unsupported(const char *what, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static wgt_status unsupported(const char *what, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return wgt_fail(WGT_ERR_CONFIG, "%s: %s is not supported by this implementation (docs/hf-tokenizers.md lists what is)",
                    what, msg);
}

// ---------------------------------------------------------------- regex

// White_Space, the meaning of \s in Oniguruma (and Rust); PCRE2's \s with UCP adds U+180E.
#define WS_CLASS "\\t-\\r\\x{20}\\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}"

// Compiles a pattern of tokenizer.json for PCRE2, with \s (and \S outside a class) spelled as
// the White_Space class so that PCRE2 agrees with Oniguruma on U+180E.
static wgt_status regex_compile(pcre2_code **out, const char *pat, size_t n, const char *what) {
    sbuf b = {0};
    int in_class = 0;
    for (size_t i = 0; i < n; i++) {
        char c = pat[i];
        if (c == '\\' && i + 1 < n) {
            char d = pat[i + 1];
            if (d == 's') sb_add(&b, in_class ? WS_CLASS : "[" WS_CLASS "]", strlen(in_class ? WS_CLASS : "[" WS_CLASS "]"));
            else if (d == 'S' && !in_class) sb_add(&b, "[^" WS_CLASS "]", strlen("[^" WS_CLASS "]"));
            else sb_add(&b, pat + i, 2);
            i++;
            continue;
        }
        if (c == '[' && !in_class) {
            in_class = 1;
            sb_byte(&b, (uint8_t)c);
            // a ']' right after '[' or '[^' is literal
            if (i + 1 < n && pat[i + 1] == '^') sb_byte(&b, '^'), i++;
            if (i + 1 < n && pat[i + 1] == ']') sb_byte(&b, ']'), i++;
            continue;
        }
        if (c == '[' && in_class && i + 1 < n && pat[i + 1] == ':') {  // POSIX class inside a class
            const char *e = memchr(pat + i + 2, ']', n - i - 2);
            size_t l = e ? (size_t)(e - (pat + i)) + 1 : n - i;
            sb_add(&b, pat + i, l);
            i += l - 1;
            continue;
        }
        if (c == ']' && in_class) in_class = 0;
        sb_byte(&b, (uint8_t)c);
    }
    int err;
    PCRE2_SIZE off;
    *out = pcre2_compile(b.p ? b.p : (PCRE2_SPTR) "", b.n, PCRE2_UTF | PCRE2_UCP, &err, &off, NULL);
    free(b.p);
    if (!*out) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(err, msg, sizeof msg);
        return bad(what, "the regex pattern \"%.*s\" does not compile: %s", (int)(n > 120 ? 120 : n), pat, (char *)msg);
    }
    pcre2_jit_compile(*out, PCRE2_JIT_COMPLETE);  // without JIT the interpreter runs it
    return WGT_OK;
}

// ---------------------------------------------------------------- loading

static const cJSON *jget(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }
static int jnull(const cJSON *v) { return !v || cJSON_IsNull(v); }

// Refuses a key of obj not in allowed (NULL-terminated): a field this implementation would ignore.
static wgt_status check_keys(const cJSON *obj, const char *what, const char *comp, const char *const *allowed) {
    for (const cJSON *c = obj->child; c; c = c->next) {
        int ok = 0;
        for (const char *const *a = allowed; *a && !ok; a++) ok = !strcmp(*a, c->string);
        if (!ok) return unsupported(what, "the field \"%s\" of %s", c->string, comp);
    }
    return WGT_OK;
}

static wgt_status get_bool(const cJSON *o, const char *k, int dflt, int *out, const char *what, const char *comp) {
    const cJSON *v = jget(o, k);
    if (!v) { *out = dflt; return WGT_OK; }
    if (!cJSON_IsBool(v)) return bad(what, "%s: \"%s\" must be true or false", comp, k);
    *out = cJSON_IsTrue(v);
    return WGT_OK;
}

static wgt_status get_str(const cJSON *o, const char *k, int optional, char **out, size_t *len, const char *what, const char *comp) {
    const cJSON *v = jget(o, k);
    *out = NULL;
    if (len) *len = 0;
    if (jnull(v) && optional) return WGT_OK;
    if (!cJSON_IsString(v)) return bad(what, "%s: \"%s\" must be a string", comp, k);
    *out = wgt_strdup(v->valuestring);
    if (len) *len = strlen(v->valuestring);
    return WGT_OK;
}

static const char *type_of(const cJSON *o) {
    const cJSON *ty = jget(o, "type");
    return cJSON_IsString(ty) ? ty->valuestring : NULL;
}

// A pattern object {"String": s} or {"Regex": r} into step s (a/alen or re).
static wgt_status get_pattern(const cJSON *o, step *s, const char *what, const char *comp) {
    const cJSON *p = jget(o, "pattern");
    if (!cJSON_IsObject(p) || !p->child || p->child->next || !cJSON_IsString(p->child))
        return bad(what, "%s: \"pattern\" must be {\"String\": ...} or {\"Regex\": ...}", comp);
    const char *v = p->child->valuestring;
    if (!strcmp(p->child->string, "String")) {
        s->a = wgt_strdup(v);
        s->alen = strlen(v);
        return WGT_OK;
    }
    if (!strcmp(p->child->string, "Regex")) return regex_compile(&s->re, v, strlen(v), what);
    return unsupported(what, "the pattern kind \"%s\" of %s", p->child->string, comp);
}

static step *push_step(step **v, size_t *n) {
    WGT_ASSERT(*n < 1024, "too many steps");
    *v = realloc(*v, (*n + 1) * sizeof **v);
    WGT_ASSERT(*v, "out of host memory");
    step *s = &(*v)[(*n)++];
    memset(s, 0, sizeof *s);
    return s;
}

static wgt_status load_normalizer(hf_tokenizer *t, const cJSON *o, const char *what, int depth) {
    if (!cJSON_IsObject(o)) return bad(what, "\"normalizer\" must be an object or null");
    const char *ty = type_of(o);
    if (!ty) return bad(what, "a normalizer has no \"type\"");
    if (depth > 8) return bad(what, "normalizers nested more than 8 deep");
    if (!strcmp(ty, "Sequence")) {
        WGT_TRY(check_keys(o, what, "the normalizer Sequence", (const char *const[]){"type", "normalizers", NULL}));
        const cJSON *l = jget(o, "normalizers");
        if (!cJSON_IsArray(l)) return bad(what, "normalizer Sequence: \"normalizers\" must be an array");
        for (const cJSON *c = l->child; c; c = c->next) WGT_TRY(load_normalizer(t, c, what, depth + 1));
        return WGT_OK;
    }
    static const char *const nf[] = {"NFC", "NFD", "NFKC", "NFKD"};
    for (int k = 0; k < 4; k++)
        if (!strcmp(ty, nf[k])) {
            WGT_TRY(check_keys(o, what, ty, (const char *const[]){"type", NULL}));
            push_step(&t->norm, &t->n_norm)->kind = NORM_NFC + k;
            return WGT_OK;
        }
    if (!strcmp(ty, "Prepend")) {
        WGT_TRY(check_keys(o, what, "the normalizer Prepend", (const char *const[]){"type", "prepend", NULL}));
        step *s = push_step(&t->norm, &t->n_norm);
        s->kind = NORM_PREPEND;
        return get_str(o, "prepend", 0, &s->a, &s->alen, what, "normalizer Prepend");
    }
    if (!strcmp(ty, "Replace")) {
        WGT_TRY(check_keys(o, what, "the normalizer Replace", (const char *const[]){"type", "pattern", "content", NULL}));
        step *s = push_step(&t->norm, &t->n_norm);
        s->kind = NORM_REPLACE;
        WGT_TRY(get_pattern(o, s, what, "normalizer Replace"));
        return get_str(o, "content", 0, &s->b, &s->blen, what, "normalizer Replace");
    }
    return unsupported(what, "the normalizer \"%s\"", ty);
}

// Metaspace's replacement (one character) and prepend scheme, with the older add_prefix_space.
static wgt_status load_metaspace(const cJSON *o, step *s, const char *what, const char *comp) {
    const cJSON *r = jget(o, "replacement");
    uint32_t cp;
    size_t l = cJSON_IsString(r) ? strlen(r->valuestring) : 0;
    if (!l || hf_utf8_valid_len((const uint8_t *)r->valuestring, l, &cp) != l || cp == ' ')
        return bad(what, "%s: \"replacement\" must be one character other than a space", comp);
    s->a = wgt_strdup(r->valuestring);
    s->alen = l;
    s->ch = cp;
    const cJSON *ps = jget(o, "prepend_scheme"), *aps = jget(o, "add_prefix_space");
    s->behavior = PREPEND_ALWAYS;
    if (!jnull(ps)) {
        if (!cJSON_IsString(ps)) return bad(what, "%s: \"prepend_scheme\" must be a string", comp);
        if (!strcmp(ps->valuestring, "always")) s->behavior = PREPEND_ALWAYS;
        else if (!strcmp(ps->valuestring, "first")) s->behavior = PREPEND_FIRST;
        else if (!strcmp(ps->valuestring, "never")) s->behavior = PREPEND_NEVER;
        else return unsupported(what, "the prepend_scheme \"%s\" of %s", ps->valuestring, comp);
    }
    if (!jnull(aps)) {
        if (!cJSON_IsBool(aps)) return bad(what, "%s: \"add_prefix_space\" must be true or false", comp);
        if (cJSON_IsFalse(aps)) {
            if (!jnull(ps) && s->behavior != PREPEND_NEVER)
                return bad(what, "%s: add_prefix_space false contradicts prepend_scheme \"%s\"", comp, ps->valuestring);
            s->behavior = PREPEND_NEVER;
        }
    }
    return WGT_OK;
}

static wgt_status load_pretokenizer(hf_tokenizer *t, const cJSON *o, const char *what, int depth) {
    if (!cJSON_IsObject(o)) return bad(what, "\"pre_tokenizer\" must be an object or null");
    const char *ty = type_of(o);
    if (!ty) return bad(what, "a pre-tokenizer has no \"type\"");
    if (depth > 8) return bad(what, "pre-tokenizers nested more than 8 deep");
    if (!strcmp(ty, "Sequence")) {
        WGT_TRY(check_keys(o, what, "the pre-tokenizer Sequence", (const char *const[]){"type", "pretokenizers", NULL}));
        const cJSON *l = jget(o, "pretokenizers");
        if (!cJSON_IsArray(l)) return bad(what, "pre-tokenizer Sequence: \"pretokenizers\" must be an array");
        for (const cJSON *c = l->child; c; c = c->next) WGT_TRY(load_pretokenizer(t, c, what, depth + 1));
        return WGT_OK;
    }
    if (!strcmp(ty, "Split")) {
        WGT_TRY(check_keys(o, what, "the pre-tokenizer Split", (const char *const[]){"type", "pattern", "behavior", "invert", NULL}));
        step *s = push_step(&t->pre, &t->n_pre);
        s->kind = PRE_SPLIT;
        WGT_TRY(get_pattern(o, s, what, "pre-tokenizer Split"));
        WGT_TRY(get_bool(o, "invert", 0, &s->invert, what, "pre-tokenizer Split"));
        const cJSON *b = jget(o, "behavior");
        static const char *const names[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"};
        if (!cJSON_IsString(b)) return bad(what, "pre-tokenizer Split: \"behavior\" must be a string");
        for (int k = 0; k < 5; k++)
            if (!strcmp(b->valuestring, names[k])) {
                s->behavior = k;
                return WGT_OK;
            }
        return unsupported(what, "the Split behavior \"%s\"", b->valuestring);
    }
    if (!strcmp(ty, "ByteLevel")) {
        WGT_TRY(check_keys(o, what, "the pre-tokenizer ByteLevel",
                           (const char *const[]){"type", "add_prefix_space", "trim_offsets", "use_regex", NULL}));
        step *s = push_step(&t->pre, &t->n_pre);
        s->kind = PRE_BYTELEVEL;
        int trim;
        WGT_TRY(get_bool(o, "trim_offsets", 1, &trim, what, "pre-tokenizer ByteLevel"));
        WGT_TRY(get_bool(o, "add_prefix_space", 1, &s->flag, what, "pre-tokenizer ByteLevel"));
        WGT_TRY(get_bool(o, "use_regex", 1, &s->flag2, what, "pre-tokenizer ByteLevel"));
        if (s->flag2 && !t->bytelevel_re) {
            static const char gpt2[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
            WGT_TRY(regex_compile(&t->bytelevel_re, gpt2, strlen(gpt2), what));
        }
        return WGT_OK;
    }
    if (!strcmp(ty, "Digits")) {
        WGT_TRY(check_keys(o, what, "the pre-tokenizer Digits", (const char *const[]){"type", "individual_digits", NULL}));
        step *s = push_step(&t->pre, &t->n_pre);
        s->kind = PRE_DIGITS;
        return get_bool(o, "individual_digits", 0, &s->flag, what, "pre-tokenizer Digits");
    }
    if (!strcmp(ty, "Metaspace")) {
        WGT_TRY(check_keys(o, what, "the pre-tokenizer Metaspace",
                           (const char *const[]){"type", "replacement", "add_prefix_space", "prepend_scheme", "split", "str_rep", NULL}));
        step *s = push_step(&t->pre, &t->n_pre);
        s->kind = PRE_METASPACE;
        WGT_TRY(load_metaspace(o, s, what, "pre-tokenizer Metaspace"));
        return get_bool(o, "split", 1, &s->flag, what, "pre-tokenizer Metaspace");
    }
    return unsupported(what, "the pre-tokenizer \"%s\"", ty);
}

static void ids_prepend(uint32_t **v, size_t *n, const uint32_t *x, size_t k) {
    uint32_t *nv = wgt_malloc((*n + k + 1) * sizeof *nv);
    if (k) memcpy(nv, x, k * sizeof *nv);
    if (*n) memcpy(nv + k, *v, *n * sizeof *nv);
    free(*v);
    *v = nv;
    *n += k;
}
static void ids_append(uint32_t **v, size_t *n, const uint32_t *x, size_t k) {
    *v = realloc(*v, (*n + k + 1) * sizeof **v);
    WGT_ASSERT(*v, "out of host memory");
    if (k) memcpy(*v + *n, x, k * sizeof **v);
    *n += k;
}

static wgt_status load_postprocessor(hf_tokenizer *t, const cJSON *o, const char *what, int depth) {
    if (!cJSON_IsObject(o)) return bad(what, "\"post_processor\" must be an object or null");
    const char *ty = type_of(o);
    if (!ty) return bad(what, "a post-processor has no \"type\"");
    if (depth > 8) return bad(what, "post-processors nested more than 8 deep");
    if (!strcmp(ty, "Sequence")) {
        WGT_TRY(check_keys(o, what, "the post-processor Sequence", (const char *const[]){"type", "processors", NULL}));
        const cJSON *l = jget(o, "processors");
        if (!cJSON_IsArray(l)) return bad(what, "post-processor Sequence: \"processors\" must be an array");
        for (const cJSON *c = l->child; c; c = c->next) WGT_TRY(load_postprocessor(t, c, what, depth + 1));
        return WGT_OK;
    }
    if (!strcmp(ty, "ByteLevel")) {
        // trims offsets only: no effect on ids
        return check_keys(o, what, "the post-processor ByteLevel",
                          (const char *const[]){"type", "add_prefix_space", "trim_offsets", "use_regex", NULL});
    }
    if (!strcmp(ty, "RobertaProcessing") || !strcmp(ty, "BertProcessing")) {
        WGT_TRY(check_keys(o, what, ty, (const char *const[]){"type", "sep", "cls", "trim_offsets", "add_prefix_space", NULL}));
        uint32_t id[2];
        const char *k2[2] = {"cls", "sep"};
        for (int k = 0; k < 2; k++) {
            const cJSON *p = jget(o, k2[k]);
            int64_t v;
            if (!cJSON_IsArray(p) || cJSON_GetArraySize(p) != 2 || !cJSON_IsString(p->child) ||
                !json_int_in(p->child->next, 0, HF_MAX_ID, &v))
                return bad(what, "%s: \"%s\" must be [token, id] with an id in 0..%u", ty, k2[k], HF_MAX_ID);
            id[k] = (uint32_t)v;
        }
        ids_prepend(&t->tmpl_pre, &t->n_tmpl_pre, &id[0], 1);
        ids_append(&t->tmpl_post, &t->n_tmpl_post, &id[1], 1);
        return WGT_OK;
    }
    if (!strcmp(ty, "TemplateProcessing")) {
        WGT_TRY(check_keys(o, what, "the post-processor TemplateProcessing",
                           (const char *const[]){"type", "single", "pair", "special_tokens", NULL}));
        const cJSON *single = jget(o, "single"), *sp = jget(o, "special_tokens");
        if (!cJSON_IsArray(single) || !cJSON_IsObject(sp))
            return bad(what, "TemplateProcessing: \"single\" must be an array and \"special_tokens\" an object");
        uint32_t *pre = NULL, *post = NULL;
        size_t npre = 0, npost = 0;
        int seen_a = 0;
        wgt_status st = WGT_OK;
        for (const cJSON *it = single->child; it && st == WGT_OK; it = it->next) {
            const cJSON *s = jget(it, "SpecialToken"), *q = jget(it, "Sequence");
            if (cJSON_IsObject(q) && !s && cJSON_GetArraySize(it) == 1) {
                const cJSON *id = jget(q, "id");
                if (!cJSON_IsString(id) || strcmp(id->valuestring, "A") || seen_a)
                    st = bad(what, "TemplateProcessing: \"single\" must hold the sequence \"A\" once");
                seen_a = 1;
                continue;
            }
            if (!cJSON_IsObject(s) || q || cJSON_GetArraySize(it) != 1) {
                st = bad(what, "TemplateProcessing: each item of \"single\" must be {\"SpecialToken\": ...} or {\"Sequence\": ...}");
                break;
            }
            const cJSON *name = jget(s, "id");
            const cJSON *def = cJSON_IsString(name) ? jget(sp, name->valuestring) : NULL;
            const cJSON *ids = def ? jget(def, "ids") : NULL;
            if (!cJSON_IsArray(ids)) {
                st = bad(what, "TemplateProcessing: the special token \"%s\" is not defined in \"special_tokens\" with its \"ids\"",
                         cJSON_IsString(name) ? name->valuestring : "?");
                break;
            }
            for (const cJSON *x = ids->child; x; x = x->next) {
                int64_t v;
                if (!json_int_in(x, 0, HF_MAX_ID, &v)) {
                    st = bad(what, "TemplateProcessing: an id of \"%s\" is not an integer in 0..%u", name->valuestring, HF_MAX_ID);
                    break;
                }
                uint32_t u = (uint32_t)v;
                if (seen_a) ids_append(&post, &npost, &u, 1);
                else ids_append(&pre, &npre, &u, 1);
            }
        }
        if (st == WGT_OK && !seen_a) st = bad(what, "TemplateProcessing: \"single\" has no sequence \"A\"");
        if (st == WGT_OK) {
            ids_prepend(&t->tmpl_pre, &t->n_tmpl_pre, pre, npre);
            ids_append(&t->tmpl_post, &t->n_tmpl_post, post, npost);
        }
        free(pre);
        free(post);
        return st;
    }
    return unsupported(what, "the post-processor \"%s\"", ty);
}

static wgt_status load_decoder(hf_tokenizer *t, const cJSON *o, const char *what, int depth) {
    if (!cJSON_IsObject(o)) return bad(what, "\"decoder\" must be an object or null");
    const char *ty = type_of(o);
    if (!ty) return bad(what, "a decoder has no \"type\"");
    if (depth > 8) return bad(what, "decoders nested more than 8 deep");
    if (!strcmp(ty, "Sequence")) {
        WGT_TRY(check_keys(o, what, "the decoder Sequence", (const char *const[]){"type", "decoders", NULL}));
        const cJSON *l = jget(o, "decoders");
        if (!cJSON_IsArray(l)) return bad(what, "decoder Sequence: \"decoders\" must be an array");
        for (const cJSON *c = l->child; c; c = c->next) WGT_TRY(load_decoder(t, c, what, depth + 1));
        return WGT_OK;
    }
    if (!strcmp(ty, "ByteLevel")) {
        WGT_TRY(check_keys(o, what, "the decoder ByteLevel",
                           (const char *const[]){"type", "add_prefix_space", "trim_offsets", "use_regex", NULL}));
        push_step(&t->dec, &t->n_dec)->kind = DEC_BYTELEVEL;
        return WGT_OK;
    }
    if (!strcmp(ty, "ByteFallback") || !strcmp(ty, "Fuse")) {
        WGT_TRY(check_keys(o, what, ty, (const char *const[]){"type", NULL}));
        push_step(&t->dec, &t->n_dec)->kind = ty[0] == 'B' ? DEC_BYTEFALLBACK : DEC_FUSE;
        return WGT_OK;
    }
    if (!strcmp(ty, "Replace")) {
        WGT_TRY(check_keys(o, what, "the decoder Replace", (const char *const[]){"type", "pattern", "content", NULL}));
        step *s = push_step(&t->dec, &t->n_dec);
        s->kind = DEC_REPLACE;
        WGT_TRY(get_pattern(o, s, what, "decoder Replace"));
        return get_str(o, "content", 0, &s->b, &s->blen, what, "decoder Replace");
    }
    if (!strcmp(ty, "Strip")) {
        WGT_TRY(check_keys(o, what, "the decoder Strip", (const char *const[]){"type", "content", "start", "stop", NULL}));
        step *s = push_step(&t->dec, &t->n_dec);
        s->kind = DEC_STRIP;
        const cJSON *c = jget(o, "content");
        uint32_t cp;
        size_t l = cJSON_IsString(c) ? strlen(c->valuestring) : 0;
        if (!l || hf_utf8_valid_len((const uint8_t *)c->valuestring, l, &cp) != l)
            return bad(what, "decoder Strip: \"content\" must be one character");
        s->ch = cp;
        int64_t a, b;
        if (!json_int_in(jget(o, "start"), 0, 1 << 20, &a) || !json_int_in(jget(o, "stop"), 0, 1 << 20, &b))
            return bad(what, "decoder Strip: \"start\" and \"stop\" must be integers in 0..%d", 1 << 20);
        s->start = (size_t)a;
        s->stop = (size_t)b;
        return WGT_OK;
    }
    if (!strcmp(ty, "Metaspace")) {
        WGT_TRY(check_keys(o, what, "the decoder Metaspace",
                           (const char *const[]){"type", "replacement", "add_prefix_space", "prepend_scheme", "split", "str_rep", NULL}));
        step *s = push_step(&t->dec, &t->n_dec);
        s->kind = DEC_METASPACE;
        return load_metaspace(o, s, what, "decoder Metaspace");
    }
    return unsupported(what, "the decoder \"%s\"", ty);
}

static wgt_status load_model(hf_tokenizer *t, const cJSON *m, const char *what) {
    if (!cJSON_IsObject(m)) return bad(what, "\"model\" must be an object");
    const char *ty = type_of(m);
    if (!ty) return unsupported(what, "a model without \"type\"");
    if (strcmp(ty, "BPE")) return unsupported(what, "the model \"%s\" (only BPE is)", ty);
    WGT_TRY(check_keys(m, what, "the BPE model",
                       (const char *const[]){"type", "dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix",
                                             "fuse_unk", "byte_fallback", "ignore_merges", "vocab", "merges", NULL}));
    const cJSON *d = jget(m, "dropout");
    if (!jnull(d) && !(cJSON_IsNumber(d) && d->valuedouble == 0.0)) return unsupported(what, "BPE dropout");
    WGT_TRY(get_str(m, "unk_token", 1, &t->unk_token, NULL, what, "the BPE model"));
    WGT_TRY(get_str(m, "continuing_subword_prefix", 1, &t->prefix, NULL, what, "the BPE model"));
    WGT_TRY(get_str(m, "end_of_word_suffix", 1, &t->suffix, NULL, what, "the BPE model"));
    WGT_TRY(get_bool(m, "fuse_unk", 0, &t->fuse_unk, what, "the BPE model"));
    WGT_TRY(get_bool(m, "byte_fallback", 0, &t->byte_fallback, what, "the BPE model"));
    WGT_TRY(get_bool(m, "ignore_merges", 0, &t->ignore_merges, what, "the BPE model"));
    if (!t->vocab_seen) return bad(what, "the BPE model has no \"vocab\"");
    size_t nv = t->vocab.n;
    uint32_t maxid = t->vocab_max;
    t->model_size = nv ? maxid + 1 : 0;
    t->tok_off = wgt_malloc(((size_t)t->model_size + 1) * sizeof *t->tok_off);
    t->tok_len = wgt_malloc(((size_t)t->model_size + 1) * sizeof *t->tok_len);
    for (size_t i = 0; i < t->model_size; i++) t->tok_len[i] = UINT32_MAX;
    for (size_t e = 0; e < t->vocab.n; e++) {
        uint32_t id = t->vocab.id[e];
        if (t->tok_len[id] != UINT32_MAX)
            return bad(what, "the vocabulary gives the id %u to two tokens (\"%.60s\" and \"%.60s\")", id,
                       (const char *)t->vocab.pool.p + t->tok_off[id], (const char *)t->vocab.pool.p + t->vocab.off[e]);
        t->tok_off[id] = t->vocab.off[e];
        t->tok_len[id] = t->vocab.len[e];
    }
    t->unk_id = t->unk_token ? hf_strmap_get(&t->vocab, (const uint8_t *)t->unk_token, strlen(t->unk_token)) : -1;
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        t->byte_ids[b] = hf_strmap_get(&t->vocab, (const uint8_t *)name, 6);
    }
    if (!t->merges_seen) return WGT_OK;
    size_t nm = t->n_mrec / 4;
    hf_mergemap_init(&t->merges, nm);
    size_t plen = t->prefix ? strlen(t->prefix) : 0;
    sbuf tmp = {0};
    uint32_t rank = 0;
    wgt_status st = WGT_OK;
    for (size_t r = 0; r < nm && st == WGT_OK; r++, rank++) {
        const uint32_t *rec = t->mrec + 4 * r;
        const char *a = (const char *)t->mpool.p + rec[0], *b;
        size_t la = rec[1], lb;
        char *owned = NULL;
        if (rec[3] == UINT32_MAX) {
            const char *sp = memchr(a, ' ', la);
            if (!sp) {
                st = bad(what, "merge #%u \"%.*s\" is not two tokens separated by a space", rank, (int)(la > 80 ? 80 : la), a);
                break;
            }
            b = sp + 1;
            lb = la - (size_t)(b - a);
            la = (size_t)(sp - a);
        } else {
            b = (const char *)t->mpool.p + rec[2];
            lb = rec[3];
        }
        int64_t ia = hf_strmap_get(&t->vocab, (const uint8_t *)a, la), ib = hf_strmap_get(&t->vocab, (const uint8_t *)b, lb);
        if (ia < 0 || ib < 0) {
            st = bad(what, "merge #%u: the token \"%.*s\" is not in the vocabulary", rank, (int)(ia < 0 ? (la > 80 ? 80 : la) : (lb > 80 ? 80 : lb)),
                     ia < 0 ? a : b);
        } else if (lb < plen) {
            st = bad(what, "merge #%u: the right token \"%.80s\" is shorter than the continuing-subword prefix", rank, b);
        } else {
            tmp.n = 0;
            sb_add(&tmp, a, la);
            sb_add(&tmp, b + plen, lb - plen);
            int64_t nid = hf_strmap_get(&t->vocab, tmp.p, tmp.n);
            if (nid < 0) st = bad(what, "merge #%u: the merged token \"%.*s\" is not in the vocabulary", rank, (int)(tmp.n > 80 ? 80 : tmp.n), (const char *)tmp.p);
            else hf_mergemap_put(&t->merges, (uint32_t)ia, (uint32_t)ib, rank, (uint32_t)nid);
        }
        free(owned);
    }
    free(tmp.p);
    return st;
}

static wgt_status load_added(hf_tokenizer *t, const cJSON *l, const char *what) {
    if (jnull(l)) return WGT_OK;
    if (!cJSON_IsArray(l)) return bad(what, "\"added_tokens\" must be an array");
    size_t n = 0;
    for (const cJSON *c = l->child; c; c = c->next) n++;
    if (n > (size_t)HF_MAX_ID + 1) return bad(what, "%zu added tokens, more than %u", n, HF_MAX_ID + 1);
    t->added = wgt_calloc(n + 1, sizeof *t->added);
    hf_strmap_init(&t->added_map, n);
    uint32_t vocab_len = (uint32_t)t->vocab.n;
    int64_t max_added = -1;
    for (const cJSON *c = l->child; c; c = c->next) {
        if (!cJSON_IsObject(c)) return bad(what, "added token #%zu is not an object", t->n_added);
        WGT_TRY(check_keys(c, what, "an added token",
                           (const char *const[]){"id", "content", "single_word", "lstrip", "rstrip", "normalized", "special", NULL}));
        added_token *a = &t->added[t->n_added];
        int64_t id;
        const cJSON *ct = jget(c, "content");
        if (!cJSON_IsString(ct) || !ct->valuestring[0]) return bad(what, "added token #%zu has no \"content\" string", t->n_added);
        if (!json_int_in(jget(c, "id"), 0, HF_MAX_ID, &id))
            return bad(what, "the added token \"%.80s\" has no integer \"id\" in 0..%u", ct->valuestring, HF_MAX_ID);
        a->content = wgt_strdup(ct->valuestring);
        a->len = strlen(a->content);
        t->n_added++;
        WGT_TRY(get_bool(c, "special", 0, &a->special, what, "an added token"));
        WGT_TRY(get_bool(c, "single_word", 0, &a->single_word, what, "an added token"));
        WGT_TRY(get_bool(c, "lstrip", 0, &a->lstrip, what, "an added token"));
        WGT_TRY(get_bool(c, "rstrip", 0, &a->rstrip, what, "an added token"));
        WGT_TRY(get_bool(c, "normalized", !a->special, &a->normalized, what, "an added token"));
        // the id `tokenizers` gives it: the vocabulary's, else one past the last added one
        int64_t want = hf_strmap_get(&t->vocab, (const uint8_t *)a->content, a->len);
        if (want < 0)
            want = max_added < 0 ? vocab_len : ((uint64_t)max_added >= vocab_len || !vocab_len ? max_added + 1 : vocab_len);
        if (want != id)
            return bad(what, "the added token \"%.80s\" has the id %lld but Hugging Face tokenizers would give it %lld (the id "
                       "of the same text in the vocabulary, or the next one after the vocabulary and the added tokens before it)",
                       a->content, (long long)id, (long long)want);
        if (!hf_strmap_put(&t->added_map, (const uint8_t *)a->content, a->len, (uint32_t)(t->n_added - 1)))
            return bad(what, "the added token \"%.80s\" is listed twice", a->content);
        a->id = (uint32_t)id;
        if (id > max_added) max_added = id;
    }
    return WGT_OK;
}


// ---------------------------------------------------------------- the file, streamed

// tokenizer.json is read in one pass: the model's "vocab" and "merges" (nearly all of the file:
// 262k tokens and 514k merges for Gemma-3) go straight into the hash tables and a string pool,
// every other value is handed, as its own text, to the strict JSON parser. Building a cJSON tree
// of the whole file costs seconds in allocations; this costs a fraction of one. The scanner
// checks what RFC 8259 asks of the parts it reads itself (UTF-8, escapes, no lone surrogates,
// no NUL); json_parse_strict checks the rest.
typedef struct {
    const uint8_t *p;
    size_t n, i;
    const char *what;
} jscan;

static wgt_status js_err(jscan *js, const char *msg) {
    return wgt_fail(WGT_ERR_FORMAT, "%s is not valid JSON: %s at byte %zu", js->what, msg, js->i);
}
static void js_ws(jscan *js) {
    while (js->i < js->n && (js->p[js->i] == ' ' || js->p[js->i] == '\t' || js->p[js->i] == '\n' || js->p[js->i] == '\r')) js->i++;
}
static int js_peek(jscan *js) {
    js_ws(js);
    return js->i < js->n ? js->p[js->i] : -1;
}
static wgt_status js_expect(jscan *js, char c) {
    if (js_peek(js) != c) {
        char m[32];
        snprintf(m, sizeof m, "expected '%c'", c);
        return js_err(js, m);
    }
    js->i++;
    return WGT_OK;
}
static int hex4(const uint8_t *p, uint32_t *v) {
    *v = 0;
    for (int k = 0; k < 4; k++) {
        int c = p[k], d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        else return 0;
        *v = *v * 16 + (uint32_t)d;
    }
    return 1;
}
// A string at the cursor, decoded onto the end of out.
static wgt_status js_string(jscan *js, sbuf *out) {
    if (js_peek(js) != '"') return js_err(js, "expected a string");
    js->i++;
    for (;;) {
        if (js->i >= js->n) return js_err(js, "unterminated string");
        uint8_t c = js->p[js->i];
        if (c == '"') {
            js->i++;
            return WGT_OK;
        }
        if (c < 0x20) return js_err(js, "raw control character in a string");
        if (c == '\\') {
            if (js->i + 1 >= js->n) return js_err(js, "unterminated string");
            uint8_t e = js->p[js->i + 1];
            if (e != 'u') {
                uint8_t d;
                switch (e) {
                case '"': d = '"'; break;
                case '\\': d = '\\'; break;
                case '/': d = '/'; break;
                case 'b': d = '\b'; break;
                case 'f': d = '\f'; break;
                case 'n': d = '\n'; break;
                case 'r': d = '\r'; break;
                case 't': d = '\t'; break;
                default: return js_err(js, "bad escape in a string");
                }
                sb_byte(out, d);
                js->i += 2;
                continue;
            }
            uint32_t v, lo;
            if (js->i + 6 > js->n || !hex4(js->p + js->i + 2, &v)) return js_err(js, "bad \\u escape");
            js->i += 6;
            if (v >= 0xDC00 && v <= 0xDFFF) return js_err(js, "lone low surrogate");
            if (v >= 0xD800 && v <= 0xDBFF) {
                if (js->i + 6 > js->n || js->p[js->i] != '\\' || js->p[js->i + 1] != 'u' || !hex4(js->p + js->i + 2, &lo) ||
                    lo < 0xDC00 || lo > 0xDFFF)
                    return js_err(js, "lone high surrogate");
                js->i += 6;
                v = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
            }
            if (!v) return js_err(js, "\\u0000 in a string");
            sb_cp(out, v);
            continue;
        }
        uint32_t cp;
        size_t k = hf_utf8_valid_len(js->p + js->i, js->n - js->i, &cp);
        if (!k) return js_err(js, "invalid UTF-8");
        sb_add(out, js->p + js->i, k);
        js->i += k;
    }
}
// Skips any value (its text is checked later by json_parse_strict).
static wgt_status js_skip(jscan *js) {
    int depth = 0;
    js_ws(js);
    size_t start = js->i;
    for (;;) {
        if (js->i >= js->n) return js_err(js, "unexpected end");
        uint8_t c = js->p[js->i];
        if (c == '"') {
            js->i++;
            while (js->i < js->n && js->p[js->i] != '"') js->i += js->p[js->i] == '\\' ? 2 : 1;
            if (js->i >= js->n) return js_err(js, "unterminated string");
            js->i++;
        } else if (c == '{' || c == '[') {
            if (++depth > JSON_MAX_DEPTH) return js_err(js, "nested too deeply");
            js->i++;
        } else if (c == '}' || c == ']') {
            if (depth == 0) break;
            depth--;
            js->i++;
        } else if (c == ',' && depth == 0) break;
        else js->i++;
        if (depth == 0 && js->i > start && (c == '"' || c == '}' || c == ']')) break;
    }
    if (js->i == start) return js_err(js, "missing value");
    return WGT_OK;
}
// Parses the skipped value at [start, js->i) and adds it to obj under key.
static wgt_status js_capture(jscan *js, cJSON *obj, const char *key) {
    js_ws(js);
    size_t start = js->i;
    WGT_TRY(js_skip(js));
    if (cJSON_GetObjectItemCaseSensitive(obj, key)) return wgt_fail(WGT_ERR_FORMAT, "%s has the key \"%s\" twice in one object", js->what, key);
    cJSON *v;
    WGT_TRY(json_parse_strict(&v, (const char *)js->p + start, js->i - start, 0, js->what));
    cJSON_AddItemToObject(obj, key, v);
    return WGT_OK;
}

static wgt_status js_vocab(jscan *js, hf_tokenizer *t) {
    if (t->vocab_seen) return wgt_fail(WGT_ERR_FORMAT, "%s has the key \"vocab\" twice in one object", js->what);
    t->vocab_seen = 1;
    if (js_peek(js) != '{') return bad(js->what, "the BPE model's \"vocab\" must be an object of token: id");
    js->i++;
    hf_strmap_init(&t->vocab, 1 << 16);
    sbuf key = {0};
    wgt_status st = WGT_OK;
    if (js_peek(js) == '}') js->i++;
    else
        for (;;) {
            key.n = 0;
            if ((st = js_string(js, &key)) != WGT_OK || (st = js_expect(js, ':')) != WGT_OK) break;
            js_ws(js);
            uint64_t v = 0;
            size_t d0 = js->i;
            while (js->i < js->n && js->p[js->i] >= '0' && js->p[js->i] <= '9' && v <= HF_MAX_ID) v = v * 10 + (js->p[js->i++] - '0');
            int c = js->i < js->n ? js->p[js->i] : -1;
            if (js->i == d0 || v > HF_MAX_ID || (js->i - d0 > 1 && js->p[d0] == '0') || c == '.' || c == 'e' || c == 'E' ||
                (c >= '0' && c <= '9')) {
                st = bad(js->what, "the vocabulary entry \"%.*s\" has no integer id in 0..%u", (int)(key.n > 80 ? 80 : key.n),
                         (const char *)key.p, HF_MAX_ID);
                break;
            }
            if (t->vocab.n > HF_MAX_ID) {
                st = bad(js->what, "the vocabulary has more than %u entries", HF_MAX_ID + 1);
                break;
            }
            if (!hf_strmap_put(&t->vocab, key.p, key.n, (uint32_t)v)) {
                st = wgt_fail(WGT_ERR_FORMAT, "%s has the key \"%.*s\" twice in one object (the vocabulary)", js->what,
                              (int)(key.n > 80 ? 80 : key.n), (const char *)key.p);
                break;
            }
            if (v > t->vocab_max) t->vocab_max = (uint32_t)v;
            int n = js_peek(js);
            js->i++;
            if (n == '}') break;
            if (n != ',') {
                js->i--;
                st = js_err(js, "expected ',' or '}'");
                break;
            }
        }
    free(key.p);
    return st;
}

static wgt_status js_merges(jscan *js, hf_tokenizer *t) {
    if (t->merges_seen) return wgt_fail(WGT_ERR_FORMAT, "%s has the key \"merges\" twice in one object", js->what);
    t->merges_seen = 1;
    int c = js_peek(js);
    if (c == 'n' && js->i + 4 <= js->n && !memcmp(js->p + js->i, "null", 4)) {
        js->i += 4;
        t->merges_seen = 0;
        return WGT_OK;
    }
    if (c != '[') return bad(js->what, "the BPE model's \"merges\" must be an array");
    js->i++;
    if (js_peek(js) == ']') {
        js->i++;
        return WGT_OK;
    }
    for (size_t k = 0;; k++) {
        if (k >= (1u << 26)) return bad(js->what, "more than %u merges", 1u << 26);
        WGT_ASSERT(t->mpool.n < UINT32_MAX / 2, "merges over 2 GB");
        uint32_t rec[4];
        rec[0] = (uint32_t)t->mpool.n;
        c = js_peek(js);
        if (c == '"') {
            WGT_TRY(js_string(js, &t->mpool));
            rec[1] = (uint32_t)(t->mpool.n - rec[0]);
            rec[2] = 0;
            rec[3] = UINT32_MAX;
        } else if (c == '[') {
            js->i++;
            if (js_peek(js) != '"') return bad(js->what, "merge #%zu is neither \"a b\" nor [\"a\", \"b\"]", k);
            WGT_TRY(js_string(js, &t->mpool));
            rec[1] = (uint32_t)(t->mpool.n - rec[0]);
            if (js_peek(js) != ',') return bad(js->what, "merge #%zu is neither \"a b\" nor [\"a\", \"b\"]", k);
            js->i++;
            rec[2] = (uint32_t)t->mpool.n;
            if (js_peek(js) != '"') return bad(js->what, "merge #%zu is neither \"a b\" nor [\"a\", \"b\"]", k);
            WGT_TRY(js_string(js, &t->mpool));
            rec[3] = (uint32_t)(t->mpool.n - rec[2]);
            if (js_peek(js) != ']') return bad(js->what, "merge #%zu is neither \"a b\" nor [\"a\", \"b\"]", k);
            js->i++;
        } else
            return bad(js->what, "merge #%zu is neither \"a b\" nor [\"a\", \"b\"]", k);
        for (int q = 0; q < 4; q++) VEC_PUSH(t->mrec, t->n_mrec, t->cap_mrec, rec[q]);
        c = js_peek(js);
        js->i++;
        if (c == ']') return WGT_OK;
        if (c != ',') {
            js->i--;
            return js_err(js, "expected ',' or ']'");
        }
    }
}

// An object at the cursor, each member captured into a new cJSON object, except those the
// model's vocab / merges readers take (when model is set).
static wgt_status js_object(jscan *js, hf_tokenizer *t, int model, cJSON **out) {
    *out = cJSON_CreateObject();
    WGT_ASSERT(*out, "out of host memory");
    if (js_peek(js) != '{') return js_err(js, "expected an object");
    js->i++;
    if (js_peek(js) == '}') {
        js->i++;
        return WGT_OK;
    }
    sbuf key = {0};
    wgt_status st = WGT_OK;
    for (;;) {
        key.n = 0;
        if ((st = js_string(js, &key)) != WGT_OK || (st = js_expect(js, ':')) != WGT_OK) break;
        sb_byte(&key, 0);
        const char *k = (const char *)key.p;
        if (model && !strcmp(k, "vocab") && js_peek(js) == '{') st = js_vocab(js, t);
        else if (model && !strcmp(k, "merges")) st = js_merges(js, t);
        else if (!model && !strcmp(k, "model") && js_peek(js) == '{') {
            if (cJSON_GetObjectItemCaseSensitive(*out, "model")) st = wgt_fail(WGT_ERR_FORMAT, "%s has the key \"model\" twice", js->what);
            cJSON *m = NULL;
            if (st == WGT_OK) st = js_object(js, t, 1, &m);
            if (m) cJSON_AddItemToObject(*out, "model", m);
        } else st = js_capture(js, *out, k);
        if (st != WGT_OK) break;
        int c = js_peek(js);
        js->i++;
        if (c == '}') break;
        if (c != ',') {
            js->i--;
            st = js_err(js, "expected ',' or '}'");
            break;
        }
    }
    free(key.p);
    return st;
}

wgt_status hf_tokenizer_load_text(hf_tokenizer **out, const char *text, size_t n, const char *what) {
    *out = NULL;
    hf_tokenizer *t = wgt_calloc(1, sizeof *t);
    t->unk_id = -1;
    jscan js = {(const uint8_t *)text, n, 0, what};
    cJSON *root = NULL;
    wgt_status st = WGT_OK;
    if (n >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3))  // as json_parse_strict: refused by name
        st = bad(what, "a byte order mark (U+FEFF) before the JSON value; save the file as UTF-8 without one");
    else if (js_peek(&js) != '{') st = bad(what, "the top level must be a JSON object");
    if (st == WGT_OK) st = js_object(&js, t, 0, &root);
    if (st == WGT_OK && js_peek(&js) != -1) st = js_err(&js, "data after the JSON value");
    if (st == WGT_OK)
        st = check_keys(root, what, "tokenizer.json",
                        (const char *const[]){"version", "truncation", "padding", "added_tokens", "normalizer", "pre_tokenizer",
                                              "model", "post_processor", "decoder", NULL});
    if (st == WGT_OK && !jnull(jget(root, "truncation"))) st = unsupported(what, "truncation (set \"truncation\": null)");
    if (st == WGT_OK && !jnull(jget(root, "padding"))) st = unsupported(what, "padding (set \"padding\": null)");
    if (st == WGT_OK && !cJSON_IsObject(jget(root, "model"))) st = bad(what, "there is no \"model\" object");
    if (st == WGT_OK) st = load_model(t, jget(root, "model"), what);
    if (st == WGT_OK && !jnull(jget(root, "normalizer"))) st = load_normalizer(t, jget(root, "normalizer"), what, 0);
    if (st == WGT_OK && !jnull(jget(root, "pre_tokenizer"))) st = load_pretokenizer(t, jget(root, "pre_tokenizer"), what, 0);
    if (st == WGT_OK && !jnull(jget(root, "post_processor"))) st = load_postprocessor(t, jget(root, "post_processor"), what, 0);
    if (st == WGT_OK && !jnull(jget(root, "decoder"))) {
        t->has_decoder = 1;
        st = load_decoder(t, jget(root, "decoder"), what, 0);
    }
    if (st == WGT_OK) st = load_added(t, jget(root, "added_tokens"), what);
    cJSON_Delete(root);
    if (st == WGT_OK) {
        // sizes and the id -> added token table
        t->size = t->model_size;
        for (size_t i = 0; i < t->n_added; i++)
            if (t->added[i].id + 1 > t->size) t->size = t->added[i].id + 1;
        t->added_by_id = wgt_malloc(((size_t)t->size + 1) * sizeof *t->added_by_id);
        for (size_t i = 0; i < t->size; i++) t->added_by_id[i] = -1;
        for (size_t i = 0; i < t->n_added; i++) t->added_by_id[t->added[i].id] = (int32_t)i;
        // the tries: contents as written, or normalised for the "normalized" ones
        hf_trie_init(&t->raw_trie);
        hf_trie_init(&t->norm_trie);
        for (size_t i = 0; i < t->n_added && st == WGT_OK; i++) {
            added_token *a = &t->added[i];
            if (!a->normalized || !t->n_norm) {
                // a normalized token with no normaliser is matched in the same (unchanged) text
                hf_trie_add(a->normalized ? &t->norm_trie : &t->raw_trie, (const uint8_t *)a->content, a->len, (int32_t)i);
                *(a->normalized ? &t->has_norm : &t->has_raw) = 1;
                continue;
            }
            sbuf nb = {0};
            st = hf_normalize(t, (const uint8_t *)a->content, a->len, &nb);
            if (st == WGT_OK && nb.n) {
                hf_trie_add(&t->norm_trie, nb.p, nb.n, (int32_t)i);
                t->has_norm = 1;
            }
            free(nb.p);
        }
        for (int b = 0, k = 0; b < 256; b++) {
            int self = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
            t->byte_char[b] = self ? (uint32_t)b : (uint32_t)(256 + k++);
        }
        for (int c = 0; c < 324; c++) t->char_byte[c] = -1;
        for (int b = 0; b < 256; b++) t->char_byte[t->byte_char[b]] = (int16_t)b;
        for (size_t i = 0; i < t->n_tmpl_pre + t->n_tmpl_post; i++) {
            uint32_t id = i < t->n_tmpl_pre ? t->tmpl_pre[i] : t->tmpl_post[i - t->n_tmpl_pre];
            if (id >= t->size || (t->added_by_id[id] < 0 && (id >= t->model_size || t->tok_len[id] == UINT32_MAX)))
                st = bad(what, "the post-processor adds the id %u, which names no token", id);
        }
    }
    if (st != WGT_OK) {
        hf_tokenizer_free(t);
        return st;
    }
    *out = t;
    return WGT_OK;
}

wgt_status hf_tokenizer_load(hf_tokenizer **out, const char *path) {
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb) != 0) return wgt_fail(WGT_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    char *file = NULL;
    if (S_ISDIR(sb.st_mode)) {
        size_t l = strlen(path) + strlen(HF_TOKENIZER_FILE) + 2;
        file = wgt_malloc(l);
        snprintf(file, l, "%s/%s", path, HF_TOKENIZER_FILE);
    } else file = wgt_strdup(path);
    char *text = NULL;
    size_t n = 0;
    wgt_status st = file_read_all(file, "the tokenizer file", "pass a Hugging Face tokenizer.json or the directory holding it",
                                  HF_MAX_FILE_BYTES, &text, &n);
    if (st == WGT_OK) st = hf_tokenizer_load_text(out, text, n, file);
    free(text);
    free(file);
    return st;
}
