// json_strict.c — an RFC 8259 validator in front of cJSON, plus duplicate-key and integer
// checks (see json_strict.h).
#include "core/json_strict.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const unsigned char *p;
    size_t n, i;
    unsigned flags;
    const char *err;
} vstate;

static int fail(vstate *s, const char *why) {
    if (!s->err) s->err = why;
    return 0;
}

static void skip_ws(vstate *s) {
    while (s->i < s->n && (s->p[s->i] == ' ' || s->p[s->i] == '\t' || s->p[s->i] == '\n' || s->p[s->i] == '\r')) s->i++;
}

static int hex4(vstate *s, unsigned *v) {
    if (s->n - s->i < 4) return fail(s, "truncated \\u escape");
    unsigned x = 0;
    for (int k = 0; k < 4; k++) {
        unsigned char c = s->p[s->i++];
        x <<= 4;
        if (c >= '0' && c <= '9') x |= c - '0';
        else if (c >= 'a' && c <= 'f') x |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') x |= c - 'A' + 10;
        else return fail(s, "bad hex digit in a \\u escape");
    }
    *v = x;
    return 1;
}

// One UTF-8 sequence starting at s->i (its first byte >= 0x80): shortest form, no surrogates,
// at most U+10FFFF.
static int utf8_seq(vstate *s) {
    unsigned char c = s->p[s->i];
    int len;
    unsigned cp;
    if (c >= 0xC2 && c <= 0xDF) len = 2, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, cp = c & 0x07;
    else return fail(s, "invalid UTF-8");
    if (s->n - s->i < (size_t)len) return fail(s, "truncated UTF-8 sequence");
    for (int k = 1; k < len; k++) {
        unsigned char d = s->p[s->i + (size_t)k];
        if ((d & 0xC0) != 0x80) return fail(s, "invalid UTF-8");
        cp = cp << 6 | (d & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return fail(s, "invalid UTF-8 (overlong form, surrogate or beyond U+10FFFF)");
    s->i += (size_t)len;
    return 1;
}

static int v_string(vstate *s) {
    s->i++;  // the opening quote
    for (;;) {
        if (s->i >= s->n) return fail(s, "unterminated string");
        unsigned char c = s->p[s->i];
        if (c == '"') {
            s->i++;
            return 1;
        }
        if (c < 0x20) return fail(s, c ? "control character inside a string" : "NUL byte inside a string");
        if (c >= 0x80) {
            if (!utf8_seq(s)) return 0;
            continue;
        }
        if (c != '\\') {
            s->i++;
            continue;
        }
        s->i++;
        if (s->i >= s->n) return fail(s, "unterminated escape");
        c = s->p[s->i++];
        if (strchr("\"\\/bfnrt", c) && c) continue;
        if (c != 'u') return fail(s, "invalid escape");
        unsigned u;
        if (!hex4(s, &u)) return 0;
        if (u == 0) return fail(s, "\\u0000 (NUL) inside a string");
        if (u >= 0xDC00 && u <= 0xDFFF) return fail(s, "lone low surrogate");
        if (u >= 0xD800 && u <= 0xDBFF) {
            unsigned lo;
            if (s->n - s->i < 2 || s->p[s->i] != '\\' || s->p[s->i + 1] != 'u') return fail(s, "lone high surrogate");
            s->i += 2;
            if (!hex4(s, &lo)) return 0;
            if (lo < 0xDC00 || lo > 0xDFFF) return fail(s, "lone high surrogate");
        }
    }
}

static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

static int v_number(vstate *s) {
    size_t start = s->i;
    int neg = 0, frac = 0, expo = 0;
    if (s->p[s->i] == '-') neg = 1, s->i++;
    if (s->i >= s->n || !is_digit(s->p[s->i])) return fail(s, "invalid number");
    if (s->p[s->i] == '0') {
        s->i++;
        if (s->i < s->n && is_digit(s->p[s->i])) return fail(s, "number with a leading zero");
    } else {
        while (s->i < s->n && is_digit(s->p[s->i])) s->i++;
    }
    if (s->i < s->n && s->p[s->i] == '.') {
        frac = 1;
        s->i++;
        if (s->i >= s->n || !is_digit(s->p[s->i])) return fail(s, "invalid number (no digit after '.')");
        while (s->i < s->n && is_digit(s->p[s->i])) s->i++;
    }
    if (s->i < s->n && (s->p[s->i] == 'e' || s->p[s->i] == 'E')) {
        expo = 1;
        s->i++;
        if (s->i < s->n && (s->p[s->i] == '+' || s->p[s->i] == '-')) s->i++;
        if (s->i >= s->n || !is_digit(s->p[s->i])) return fail(s, "invalid number (no digit in the exponent)");
        while (s->i < s->n && is_digit(s->p[s->i])) s->i++;
    }
    size_t len = s->i - start;
    if (len > 60) return fail(s, "number with too many digits");
    if (s->flags & JSON_INTEGERS_ONLY) {
        if (neg || frac || expo) return fail(s, "number that is not a non-negative integer");
        if (len > 16) return fail(s, "integer above 2^53 - 1");
        char buf[20];
        memcpy(buf, s->p + start, len);
        buf[len] = 0;
        if (strtoull(buf, NULL, 10) > (unsigned long long)JSON_MAX_SAFE_INT) return fail(s, "integer above 2^53 - 1");
    }
    return 1;
}

static int v_literal(vstate *s, const char *lit) {
    size_t k = strlen(lit);
    if (s->n - s->i < k || memcmp(s->p + s->i, lit, k)) return fail(s, "invalid literal");
    s->i += k;
    return 1;
}

static int v_value(vstate *s, int depth) {
    skip_ws(s);
    if (s->i >= s->n) return fail(s, "unexpected end");
    unsigned char c = s->p[s->i];
    if (c == '{' || c == '[') {
        if (depth >= JSON_MAX_DEPTH) return fail(s, "nested too deep (more than 64 levels of objects and arrays)");
        unsigned char close = c == '{' ? '}' : ']';
        s->i++;
        skip_ws(s);
        if (s->i < s->n && s->p[s->i] == close) {
            s->i++;
            return 1;
        }
        for (;;) {
            if (c == '{') {
                skip_ws(s);
                if (s->i >= s->n || s->p[s->i] != '"') return fail(s, "object key is not a string");
                if (!v_string(s)) return 0;
                skip_ws(s);
                if (s->i >= s->n || s->p[s->i] != ':') return fail(s, "missing ':' after an object key");
                s->i++;
            }
            if (!v_value(s, depth + 1)) return 0;
            skip_ws(s);
            if (s->i >= s->n) return fail(s, "unexpected end");
            if (s->p[s->i] == ',') {
                s->i++;
                continue;
            }
            if (s->p[s->i] == close) {
                s->i++;
                return 1;
            }
            return fail(s, c == '{' ? "expected ',' or '}'" : "expected ',' or ']'");
        }
    }
    if (c == '"') return v_string(s);
    if (c == '-' || is_digit(c)) return v_number(s);
    if (c == 't') return v_literal(s, "true");
    if (c == 'f') return v_literal(s, "false");
    if (c == 'n') return v_literal(s, "null");
    return fail(s, "unexpected character");
}

static int cmp_name(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

// The first duplicate key anywhere in the tree, or NULL.
static const char *find_duplicate(const cJSON *node) {
    if (!node) return NULL;
    if (cJSON_IsObject(node)) {
        size_t k = 0;
        for (const cJSON *c = node->child; c; c = c->next) k++;
        if (k > 1) {
            const char **names = wgt_malloc(k * sizeof *names);
            size_t i = 0;
            for (const cJSON *c = node->child; c; c = c->next) names[i++] = c->string;
            qsort(names, k, sizeof *names, cmp_name);
            const char *dup = NULL;
            for (i = 1; i < k && !dup; i++)
                if (!strcmp(names[i - 1], names[i])) dup = names[i];
            free(names);
            if (dup) return dup;
        }
    }
    if (cJSON_IsObject(node) || cJSON_IsArray(node))
        for (const cJSON *c = node->child; c; c = c->next) {
            const char *d = find_duplicate(c);
            if (d) return d;
        }
    return NULL;
}

wgt_status json_parse_strict(cJSON **out, const char *text, size_t n, unsigned flags, const char *what) {
    size_t at;
    return json_parse_strict_at(out, text, n, flags, what, &at);
}

wgt_status json_parse_strict_at(cJSON **out, const char *text, size_t n, unsigned flags, const char *what, size_t *err_at) {
    *out = NULL;
    *err_at = 0;
    vstate s = {(const unsigned char *)text, n, 0, flags, NULL};
    int ok;
    if (n >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3)) ok = fail(&s, "a byte order mark (U+FEFF) before the value; save the file as UTF-8 without one");
    else ok = v_value(&s, 0);
    if (ok) {
        skip_ws(&s);
        if (s.i != s.n) ok = fail(&s, s.p[s.i] ? "data after the JSON value" : "NUL byte after the JSON value");
    }
    if (!ok) {
        *err_at = s.i;
        return wgt_fail(WGT_ERR_FORMAT, "%s is not valid JSON: %s at byte %zu", what, s.err ? s.err : "error", s.i);
    }
    cJSON *root = cJSON_ParseWithLength(text, n);
    if (!root) return wgt_fail(WGT_ERR_FORMAT, "%s: the JSON parser refused it (out of memory?)", what);
    const char *dup = find_duplicate(root);
    if (dup) {
        char name[80];
        snprintf(name, sizeof name, "%s", dup);
        cJSON_Delete(root);
        return wgt_fail(WGT_ERR_FORMAT, "%s has the key \"%s\" twice in one object", what, name);
    }
    *out = root;
    return WGT_OK;
}

int json_int_in(const cJSON *it, int64_t lo, int64_t hi, int64_t *out) {
    if (!cJSON_IsNumber(it)) return 0;
    double v = it->valuedouble;
    if (!isfinite(v) || v != floor(v) || v < (double)lo || v > (double)hi) return 0;
    if (v < -(double)JSON_MAX_SAFE_INT || v > (double)JSON_MAX_SAFE_INT) return 0;
    *out = (int64_t)v;
    return 1;
}
