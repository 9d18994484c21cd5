// chat_template.c — the evaluator of the chat-template interpreter: values with Python's
// semantics (str, int, float, bool, None, list, tuple, dict, Jinja2's Undefined and namespace),
// the filters, tests, globals and string / dict methods that chat templates use, and the render
// entry point. Each string carries, per byte, the index of the message whose content it was
// copied from (or nothing, for template text), so that the output's provenance is known byte
// by byte; chat_template.h and docs/chat-templates.md say what that provenance means.
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include "data/chat_template_impl.h"

typedef enum { V_UNDEF, V_NONE, V_BOOL, V_INT, V_FLOAT, V_STR, V_LIST, V_DICT, V_NS, V_FUNC, V_MACRO, V_LOOP } vtype;
enum { L_LIST, L_TUPLE, L_GEN };  // list flavours: Python list, tuple, generator (map/select/... results)

typedef struct val val;
struct val {
    vtype t;
    int flavour;          // V_LIST
    int64_t i;            // V_BOOL, V_INT; V_FUNC: the builtin
    double f;             // V_FLOAT
    const char *s;        // V_STR (NUL-terminated); V_UNDEF: the message when used
    size_t n;             // V_STR bytes; V_LIST / V_DICT / V_NS: items
    const int32_t *tag;   // V_STR: per-byte message index, NULL when all -1
    val **items, **vals;  // V_LIST items; V_DICT / V_NS keys and values
    size_t cap, pos;      // V_DICT / V_NS capacity; V_LIST generator: items consumed; V_LOOP: the index
    val *self;            // V_FUNC: the bound object
    const ct_node *macro; // V_MACRO
};

typedef struct frame {
    struct frame *parent;
    const char **names;
    val **vals;
    size_t n, cap;
} frame;

typedef struct sbuf {
    char *p;
    int32_t *tag;  // NULL while every byte is -1
    size_t n, cap;
} sbuf;

typedef struct rnd {
    ct_arena a;
    jmp_buf jb;
    frame *root;
    sbuf *out, *main_out;
    int depth, max_depth, ctl;  // ctl: 1 break, 2 continue
    int nest;                   // nesting of the value being printed
    uint64_t steps, max_steps;
    size_t max_output;
    int64_t now;
    chat_template_span *gen;
    size_t n_gen, cap_gen;
    struct val *small_ints[1024];
} rnd;

enum { CTL_BREAK = 1, CTL_CONTINUE = 2 };

static _Noreturn void rfail(rnd *R, int line, const char *fmt, ...) {
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    wgt_fail(WGT_ERR_FORMAT, "chat template line %d: %s", line, msg);
    longjmp(R->jb, 1);
}

// ---- values ----
static val V_NONE_ = {.t = V_NONE}, V_TRUE_ = {.t = V_BOOL, .i = 1},
           V_FALSE_ = {.t = V_BOOL, .i = 0};
static val *vnew(rnd *R, vtype t) {
    val *v = ct_alloc(&R->a, sizeof *v);
    v->t = t;
    return v;
}
static val *vbool(int b) { return b ? &V_TRUE_ : &V_FALSE_; }
static val *vint(rnd *R, int64_t i) {
    if (i >= 0 && i < 1024) {  // small integers are shared (values are never modified in place)
        if (!R->small_ints[i]) {
            R->small_ints[i] = vnew(R, V_INT);
            R->small_ints[i]->i = i;
        }
        return R->small_ints[i];
    }
    val *v = vnew(R, V_INT);
    v->i = i;
    return v;
}
static val *vfloat(rnd *R, double f) {
    val *v = vnew(R, V_FLOAT);
    v->f = f;
    return v;
}
static val *vundef(rnd *R, const char *fmt, ...) {
    val *v = vnew(R, V_UNDEF);
    char buf[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    size_t n = strlen(buf);
    char *s = ct_alloc(&R->a, n + 1);
    memcpy(s, buf, n);
    v->s = s;
    return v;
}
static val *vstr(rnd *R, const char *s, size_t n, const int32_t *tag) {
    val *v = vnew(R, V_STR);
    char *p = ct_alloc_raw(&R->a, n + 1);
    if (n) memcpy(p, s, n);
    p[n] = 0;
    v->s = p;
    v->n = n;
    if (tag) {
        int any = 0;
        for (size_t k = 0; k < n && !any; k++) any = tag[k] >= 0;
        if (any) {
            int32_t *t = ct_alloc_raw(&R->a, ct_mul(&R->a, n, sizeof *t));
            memcpy(t, tag, n * sizeof *t);
            v->tag = t;
        }
    }
    return v;
}
static val *vcstr(rnd *R, const char *s) { return vstr(R, s, strlen(s), NULL); }
static val *vlist(rnd *R, size_t n, int flavour) {
    val *v = vnew(R, V_LIST);
    v->flavour = flavour;
    v->items = ct_alloc(&R->a, ct_mul(&R->a, n ? n : 1, sizeof *v->items));
    v->n = n;
    return v;
}
static val *vdict(rnd *R, vtype t) {
    val *v = vnew(R, t);
    return v;
}
static val *dict_get(const val *d, const char *key, size_t kn) {
    for (size_t k = 0; k < d->n; k++)
        if (d->items[k]->t == V_STR && d->items[k]->n == kn && memcmp(d->items[k]->s, key, kn) == 0) return d->vals[k];
    return NULL;
}
static void dict_put(rnd *R, val *d, val *key, val *value);

static const char *type_name(const val *v) {
    switch (v->t) {
    case V_UNDEF: return "Undefined";
    case V_NONE: return "NoneType";
    case V_BOOL: return "bool";
    case V_INT: return "int";
    case V_FLOAT: return "float";
    case V_STR: return "str";
    case V_LIST: return v->flavour == L_TUPLE ? "tuple" : v->flavour == L_GEN ? "generator" : "list";
    case V_DICT: return "dict";
    case V_NS: return "Namespace";
    case V_FUNC: return "builtin_function_or_method";
    case V_MACRO: return "Macro";
    case V_LOOP: return "LoopContext";
    }
    return "?";
}

// ---- string builder with provenance ----
static void sb_grow(rnd *R, sbuf *b, size_t extra) {
    if (extra > SIZE_MAX / 2 - b->n) rfail(R, 0, "a string grows past the size limit");
    size_t need = b->n + extra + 1;
    if (need <= b->cap) return;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) cap *= 2;
    char *p = ct_alloc_raw(&R->a, cap);
    if (b->n) memcpy(p, b->p, b->n);
    b->p = p;
    if (b->tag) {
        int32_t *t = ct_alloc_raw(&R->a, ct_mul(&R->a, cap, sizeof *t));
        memcpy(t, b->tag, b->n * sizeof *t);
        b->tag = t;
    }
    b->cap = cap;
}
static void sb_put(rnd *R, sbuf *b, const char *s, size_t n, const int32_t *tag) {
    if (!n) return;
    sb_grow(R, b, n);
    if (tag && !b->tag) {
        b->tag = ct_alloc_raw(&R->a, ct_mul(&R->a, b->cap, sizeof *b->tag));
        for (size_t k = 0; k < b->n; k++) b->tag[k] = -1;
    }
    memcpy(b->p + b->n, s, n);
    if (b->tag) {
        if (tag) memcpy(b->tag + b->n, tag, n * sizeof *tag);
        else for (size_t k = 0; k < n; k++) b->tag[b->n + k] = -1;
    }
    b->n += n;
    b->p[b->n] = 0;
}
static void sb_cstr(rnd *R, sbuf *b, const char *s) { sb_put(R, b, s, strlen(s), NULL); }
static void sb_printf(rnd *R, sbuf *b, const char *fmt, ...) {
    char buf[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    sb_cstr(R, b, buf);
}
static val *sb_val(rnd *R, sbuf *b) {
    val *v = vnew(R, V_STR);
    v->s = b->p ? b->p : "";
    v->n = b->n;
    if (b->tag) {
        int any = 0;
        for (size_t k = 0; k < b->n && !any; k++) any = b->tag[k] >= 0;
        v->tag = any ? b->tag : NULL;
    }
    return v;
}
// substring of a string value, keeping its provenance
static val *vsub(rnd *R, const val *s, size_t off, size_t n) { return vstr(R, s->s + off, n, s->tag ? s->tag + off : NULL); }

// ---- UTF-8 ----
static size_t u8len(unsigned char c) { return c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4; }
static size_t u8count(const char *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i += u8len((unsigned char)s[i])) k++;
    return k;
}
static uint32_t u8dec(const char *s, size_t *len) {
    const unsigned char *u = (const unsigned char *)s;
    *len = u8len(u[0]);
    switch (*len) {
    case 1: return u[0];
    case 2: return ((u[0] & 0x1fu) << 6) | (u[1] & 0x3fu);
    case 3: return ((u[0] & 0x0fu) << 12) | ((u[1] & 0x3fu) << 6) | (u[2] & 0x3fu);
    default: return ((u[0] & 0x07u) << 18) | ((u[1] & 0x3fu) << 12) | ((u[2] & 0x3fu) << 6) | (u[3] & 0x3fu);
    }
}
static int u8valid(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        unsigned char c = u[i];
        size_t k = c < 0x80 ? 1 : (c >= 0xc2 && c < 0xe0) ? 2 : (c >= 0xe0 && c < 0xf0) ? 3 : (c >= 0xf0 && c < 0xf5) ? 4 : 0;
        if (!k || i + k > n) return 0;
        for (size_t j = 1; j < k; j++)
            if ((u[i + j] & 0xc0) != 0x80) return 0;
        if (k == 3 && ((c == 0xe0 && u[i + 1] < 0xa0) || (c == 0xed && u[i + 1] >= 0xa0))) return 0;
        if (k == 4 && ((c == 0xf0 && u[i + 1] < 0x90) || (c == 0xf4 && u[i + 1] >= 0x90))) return 0;
        i += k;
    }
    return 1;
}
// Python's str.isspace() for one code point
static int py_isspace(uint32_t c) {
    return (c >= 9 && c <= 13) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}
// byte offsets of each code point of s, plus n at the end; count in *cnt
static size_t *u8offsets(rnd *R, const val *s, size_t *cnt) {
    size_t c = u8count(s->s, s->n);
    size_t *o = ct_alloc(&R->a, ct_mul(&R->a, c + 1, sizeof *o));
    size_t k = 0;
    for (size_t i = 0; i < s->n; i += u8len((unsigned char)s->s[i])) o[k++] = i;
    o[k] = s->n;
    *cnt = c;
    return o;
}

// ---- conversions ----
static void py_float_repr(double x, char *out, size_t cap) {
    if (isnan(x)) { snprintf(out, cap, "nan"); return; }
    if (isinf(x)) { snprintf(out, cap, x < 0 ? "-inf" : "inf"); return; }
    if (x == 0) { snprintf(out, cap, signbit(x) ? "-0.0" : "0.0"); return; }
    char buf[40];
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, sizeof buf, "%.*e", p - 1, x);
        if (strtod(buf, NULL) == x) break;
    }
    // buf: [-]d[.ddd]e[+-]XX
    char digits[24];
    size_t nd = 0;
    const char *q = buf;
    int neg = *q == '-';
    if (neg) q++;
    for (; *q && *q != 'e'; q++)
        if (*q != '.') digits[nd++] = *q;
    int exp = atoi(q + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = 0;
    size_t k = 0;
    char o[64];
    if (neg) o[k++] = '-';
    if (exp >= -4 && exp < 16) {
        if (exp >= 0) {
            for (int i = 0; i <= exp; i++) o[k++] = (size_t)i < nd ? digits[i] : '0';
            o[k++] = '.';
            if ((size_t)exp + 1 < nd) for (size_t i = (size_t)exp + 1; i < nd; i++) o[k++] = digits[i];
            else o[k++] = '0';
        } else {
            o[k++] = '0';
            o[k++] = '.';
            for (int i = 0; i < -exp - 1; i++) o[k++] = '0';
            for (size_t i = 0; i < nd; i++) o[k++] = digits[i];
        }
        o[k] = 0;
    } else {
        o[k++] = digits[0];
        if (nd > 1) {
            o[k++] = '.';
            for (size_t i = 1; i < nd; i++) o[k++] = digits[i];
        }
        snprintf(o + k, sizeof o - k, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    }
    snprintf(out, cap, "%s", o);
}

// Python's repr() of a string (printable-character table: ASCII, Latin-1 and the common
// format / separator characters; docs/chat-templates.md)
static int py_printable(uint32_t c) {
    if (c < 0x20 || c == 0x7f) return 0;
    if (c >= 0x80 && c <= 0xa0) return 0;
    if (c == 0xad || c == 0x1680 || (c >= 0x2000 && c <= 0x200f) || (c >= 0x2028 && c <= 0x202f) ||
        (c >= 0x205f && c <= 0x206f) || c == 0x3000 || c == 0xfeff || (c >= 0xe000 && c <= 0xf8ff) ||
        (c >= 0xfff9 && c <= 0xfffb))
        return 0;
    return 1;
}
static void repr_str(rnd *R, sbuf *b, const val *s) {
    int has_sq = memchr(s->s, '\'', s->n) != NULL, has_dq = memchr(s->s, '"', s->n) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    sb_put(R, b, &q, 1, NULL);
    for (size_t i = 0; i < s->n;) {
        size_t l;
        uint32_t c = u8dec(s->s + i, &l);
        const int32_t *tg = s->tag ? s->tag + i : NULL;
        if (c == (uint32_t)q || c == '\\') { sb_put(R, b, "\\", 1, NULL); sb_put(R, b, s->s + i, 1, tg); }
        else if (c == '\n') sb_cstr(R, b, "\\n");
        else if (c == '\r') sb_cstr(R, b, "\\r");
        else if (c == '\t') sb_cstr(R, b, "\\t");
        else if (!py_printable(c)) {
            if (c < 0x100) sb_printf(R, b, "\\x%02x", c);
            else if (c < 0x10000) sb_printf(R, b, "\\u%04x", c);
            else sb_printf(R, b, "\\U%08x", c);
        } else sb_put(R, b, s->s + i, l, tg);
        i += l;
    }
    sb_put(R, b, &q, 1, NULL);
}

static void to_str(rnd *R, sbuf *b, const val *v, int repr, int line);
static void seq_str(rnd *R, sbuf *b, const val *v, int line) {
    if (v->t == V_LIST) {
        if (v->flavour == L_GEN) rfail(R, line, "printing a generator (the result of map / select / reverse ...) is not supported: add |list");
        sb_cstr(R, b, v->flavour == L_TUPLE ? "(" : "[");
        for (size_t k = 0; k < v->n; k++) {
            if (k) sb_cstr(R, b, ", ");
            to_str(R, b, v->items[k], 1, line);
        }
        sb_cstr(R, b, v->flavour == L_TUPLE ? (v->n == 1 ? ",)" : ")") : "]");
    } else {
        sb_cstr(R, b, "{");
        for (size_t k = 0; k < v->n; k++) {
            if (k) sb_cstr(R, b, ", ");
            to_str(R, b, v->items[k], 1, line);
            sb_cstr(R, b, ": ");
            to_str(R, b, v->vals[k], 1, line);
        }
        sb_cstr(R, b, "}");
    }
}
// str(v) (repr = 0) or repr(v) (repr = 1) appended to b
static void to_str(rnd *R, sbuf *b, const val *v, int repr, int line) {
    char buf[64];
    if ((v->t == V_LIST || v->t == V_DICT || v->t == V_NS) && ++R->nest > 200) {
        R->nest = 0;
        rfail(R, line, "printing a value nested more than 200 deep (or a namespace that contains itself)");
    }
    switch (v->t) {
    case V_UNDEF: if (repr) sb_cstr(R, b, "Undefined"); break;
    case V_NONE: sb_cstr(R, b, "None"); break;
    case V_BOOL: sb_cstr(R, b, v->i ? "True" : "False"); break;
    case V_INT: sb_printf(R, b, "%lld", (long long)v->i); break;
    case V_FLOAT: py_float_repr(v->f, buf, sizeof buf); sb_cstr(R, b, buf); break;
    case V_STR: if (repr) repr_str(R, b, v); else sb_put(R, b, v->s, v->n, v->tag); break;
    case V_LIST: case V_DICT: seq_str(R, b, v, line); break;
    case V_NS: sb_cstr(R, b, "<Namespace "); seq_str(R, b, v, line); sb_cstr(R, b, ">"); break;
    case V_FUNC: case V_MACRO: case V_LOOP: rfail(R, line, "printing a %s object is not supported", type_name(v));
    }
    if (v->t == V_LIST || v->t == V_DICT || v->t == V_NS) R->nest--;
}
static val *as_str(rnd *R, val *v, int line) {
    if (v->t == V_STR) return v;
    sbuf b = {0};
    to_str(R, &b, v, 0, line);
    return sb_val(R, &b);
}

static int truthy(const val *v) {
    switch (v->t) {
    case V_UNDEF: case V_NONE: return 0;
    case V_BOOL: case V_INT: return v->i != 0;
    case V_FLOAT: return v->f != 0;
    case V_STR: return v->n > 0;
    case V_LIST: return v->flavour == L_GEN ? 1 : v->n > 0;
    case V_DICT: return v->n > 0;
    default: return 1;
    }
}
static int is_num(const val *v) { return v->t == V_BOOL || v->t == V_INT || v->t == V_FLOAT; }
static double num(const val *v) { return v->t == V_FLOAT ? v->f : (double)v->i; }

static int veq(rnd *R, const val *a, const val *b) {
    if (is_num(a) && is_num(b)) {
        if (a->t != V_FLOAT && b->t != V_FLOAT) return a->i == b->i;
        return num(a) == num(b);
    }
    if (a->t != b->t) return 0;
    if ((a->t == V_LIST || a->t == V_DICT) && R->nest > 200) rfail(R, 0, "comparing values nested more than 200 deep");
    switch (a->t) {
    case V_UNDEF: case V_NONE: return 1;
    case V_STR: return a->n == b->n && memcmp(a->s, b->s, a->n) == 0;
    case V_LIST:
        if (a->flavour != b->flavour || a->flavour == L_GEN) return a == b;
        if (a->n != b->n) return 0;
        R->nest++;
        for (size_t k = 0; k < a->n; k++)
            if (!veq(R, a->items[k], b->items[k])) { R->nest--; return 0; }
        R->nest--;
        return 1;
    case V_DICT:
        if (a->n != b->n) return 0;
        R->nest++;
        for (size_t k = 0; k < a->n; k++) {
            int found = 0;
            for (size_t j = 0; j < b->n && !found; j++)
                if (veq(R, a->items[k], b->items[j])) {
                    if (!veq(R, a->vals[k], b->vals[j])) { R->nest--; return 0; }
                    found = 1;
                }
            if (!found) { R->nest--; return 0; }
        }
        R->nest--;
        return 1;
    default: return a == b;
    }
}
// <0, 0, >0 as Python's ordering of a and b; a type error for unorderable pairs
static int vcmp(rnd *R, const val *a, const val *b, const char *op, int line) {
    if (is_num(a) && is_num(b)) {
        if (a->t != V_FLOAT && b->t != V_FLOAT) return (a->i > b->i) - (a->i < b->i);
        double x = num(a), y = num(b);
        return (x > y) - (x < y);
    }
    if (a->t == V_STR && b->t == V_STR) {
        size_t m = a->n < b->n ? a->n : b->n;
        int c = memcmp(a->s, b->s, m);
        return c ? c : (a->n > b->n) - (a->n < b->n);
    }
    if (a->t == V_LIST && b->t == V_LIST && a->flavour == b->flavour && a->flavour != L_GEN) {
        if (++R->nest > 200) rfail(R, line, "comparing values nested more than 200 deep");
        for (size_t k = 0; k < a->n && k < b->n; k++)
            if (!veq(R, a->items[k], b->items[k])) {
                int c = vcmp(R, a->items[k], b->items[k], op, line);
                R->nest--;
                return c;
            }
        R->nest--;
        return (a->n > b->n) - (a->n < b->n);
    }
    if (a->t == V_UNDEF || b->t == V_UNDEF) rfail(R, line, "%s", a->t == V_UNDEF ? a->s : b->s);
    rfail(R, line, "'%s' not supported between instances of '%s' and '%s'", op, type_name(a), type_name(b));
}

// the items iterated by a for loop / filter over v
static val **iter_items(rnd *R, val *v, size_t *n, int line) {
    switch (v->t) {
    case V_UNDEF: *n = 0; return NULL;
    case V_LIST:
        if (v->flavour == L_GEN) {
            val **p = v->items + v->pos;
            *n = v->n - v->pos;
            v->pos = v->n;  // a generator is consumed by iterating it
            return p;
        }
        *n = v->n;
        return v->items;
    case V_DICT: *n = v->n; return v->items;
    case V_STR: {
        size_t c;
        size_t *o = u8offsets(R, v, &c);
        val **p = ct_alloc(&R->a, ct_mul(&R->a, c ? c : 1, sizeof *p));
        for (size_t k = 0; k < c; k++) p[k] = vsub(R, v, o[k], o[k + 1] - o[k]);
        *n = c;
        return p;
    }
    default: rfail(R, line, "'%s' object is not iterable", type_name(v));
    }
}

// ---- context from JSON ----
// Every string of j carries `tag` as its provenance (-1: none).
static val *from_json(rnd *R, const cJSON *j, int depth, int32_t tag) {
    if (depth > 64) rfail(R, 0, "the context JSON is nested more than 64 deep");
    if (cJSON_IsNull(j)) return &V_NONE_;
    if (cJSON_IsBool(j)) return vbool(cJSON_IsTrue(j));
    if (cJSON_IsNumber(j)) {
        double d = j->valuedouble;
        if (d == floor(d) && fabs(d) <= 9007199254740992.0) return vint(R, (int64_t)d);
        return vfloat(R, d);
    }
    if (cJSON_IsString(j)) {
        const char *s = j->valuestring;
        size_t n = strlen(s);
        if (!u8valid(s, n)) rfail(R, 0, "a string in the context is not valid UTF-8");
        val *v = vstr(R, s, n, NULL);
        if (tag >= 0 && n) {
            int32_t *t = ct_alloc_raw(&R->a, ct_mul(&R->a, n, sizeof *t));
            for (size_t k = 0; k < n; k++) t[k] = tag;
            v->tag = t;
        }
        return v;
    }
    if (cJSON_IsArray(j)) {
        size_t n = (size_t)cJSON_GetArraySize(j), k = 0;
        val *v = vlist(R, n, L_LIST);
        for (const cJSON *c = j->child; c && k < n; c = c->next, k++) v->items[k] = from_json(R, c, depth + 1, tag);
        return v;
    }
    if (cJSON_IsObject(j)) {
        val *v = vdict(R, V_DICT);
        for (const cJSON *c = j->child; c; c = c->next) {
            const char *key = c->string ? c->string : "";
            if (!u8valid(key, strlen(key))) rfail(R, 0, "a key in the context is not valid UTF-8");
            dict_put(R, v, vcstr(R, key), from_json(R, c, depth + 1, tag));
        }
        return v;
    }
    rfail(R, 0, "the context holds a JSON value of an unknown kind");
}

// Message k of "messages": the strings of "content" and "reasoning_content", and the "text"
// strings of a content list's items, carry k as their provenance.
static val *message_from_json(rnd *R, const cJSON *m, int32_t k) {
    if (!cJSON_IsObject(m)) return from_json(R, m, 2, -1);
    val *v = vdict(R, V_DICT);
    for (const cJSON *c = m->child; c; c = c->next) {
        const char *key = c->string ? c->string : "";
        if (!u8valid(key, strlen(key))) rfail(R, 0, "a key in the context is not valid UTF-8");
        val *x;
        if ((!strcmp(key, "content") || !strcmp(key, "reasoning_content")) && cJSON_IsString(c)) x = from_json(R, c, 3, k);
        else if (!strcmp(key, "content") && cJSON_IsArray(c)) {
            size_t n = (size_t)cJSON_GetArraySize(c), i = 0;
            x = vlist(R, n, L_LIST);
            for (const cJSON *it = c->child; it && i < n; it = it->next, i++) {
                if (!cJSON_IsObject(it)) { x->items[i] = from_json(R, it, 4, -1); continue; }
                val *d = vdict(R, V_DICT);
                for (const cJSON *f = it->child; f; f = f->next) {
                    const char *fk = f->string ? f->string : "";
                    if (!u8valid(fk, strlen(fk))) rfail(R, 0, "a key in the context is not valid UTF-8");
                    dict_put(R, d, vcstr(R, fk), from_json(R, f, 5, !strcmp(fk, "text") && cJSON_IsString(f) ? k : -1));
                }
                x->items[i] = d;
            }
        } else x = from_json(R, c, 3, -1);
        dict_put(R, v, vcstr(R, key), x);
    }
    return v;
}

static void dict_put(rnd *R, val *d, val *key, val *value) {
    for (size_t k = 0; k < d->n; k++)
        if (veq(R, d->items[k], key)) { d->vals[k] = value; return; }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 8;
        val **ks = ct_alloc(&R->a, ct_mul(&R->a, cap, sizeof *ks)), **vs = ct_alloc(&R->a, ct_mul(&R->a, cap, sizeof *vs));
        if (d->n) { memcpy(ks, d->items, d->n * sizeof *ks); memcpy(vs, d->vals, d->n * sizeof *vs); }
        d->items = ks;
        d->vals = vs;
        d->cap = cap;
    }
    d->items[d->n] = key;
    d->vals[d->n++] = value;
}

// ---- variables ----
static void frame_set(rnd *R, frame *f, const char *name, val *v) {
    for (size_t k = 0; k < f->n; k++)
        if (!strcmp(f->names[k], name)) { f->vals[k] = v; return; }
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 8;
        const char **ns = ct_alloc(&R->a, ct_mul(&R->a, cap, sizeof *ns));
        val **vs = ct_alloc(&R->a, ct_mul(&R->a, cap, sizeof *vs));
        if (f->n) { memcpy(ns, f->names, f->n * sizeof *ns); memcpy(vs, f->vals, f->n * sizeof *vs); }
        f->names = ns;
        f->vals = vs;
        f->cap = cap;
    }
    f->names[f->n] = name;
    f->vals[f->n++] = v;
}
static val *lookup(rnd *R, frame *f, const char *name) {
    for (; f; f = f->parent)
        for (size_t k = f->n; k-- > 0;)
            if (!strcmp(f->names[k], name)) return f->vals[k];
    return vundef(R, "'%s' is undefined", name);
}

// ---- builtins: globals and methods ----
enum {
    F_RANGE, F_NAMESPACE, F_RAISE, F_STRFTIME, F_DICT,
    M_STARTSWITH, M_ENDSWITH, M_SPLIT, M_RSPLIT, M_STRIP, M_LSTRIP, M_RSTRIP, M_REPLACE, M_UPPER, M_LOWER, M_TITLE,
    M_CAPITALIZE, M_FIND, M_JOIN, M_COUNT, M_GET, M_ITEMS, M_KEYS, M_VALUES, M_LCOUNT, M_LINDEX, M_NONE
};
static const char *const str_methods[] = {"startswith", "endswith", "split", "rsplit", "strip", "lstrip", "rstrip",
                                          "replace", "upper", "lower", "title", "capitalize", "find", "join", "count"};
static val *vfunc(rnd *R, int id, val *self) {
    val *v = vnew(R, V_FUNC);
    v->i = id;
    v->self = self;
    return v;
}

static val *get_attr(rnd *R, val *o, const char *name, int line) {
    switch (o->t) {
    case V_UNDEF: rfail(R, line, "%s", o->s);
    case V_STR:
        for (size_t k = 0; k < sizeof str_methods / sizeof str_methods[0]; k++)
            if (!strcmp(name, str_methods[k])) return vfunc(R, M_STARTSWITH + (int)k, o);
        break;
    case V_DICT: {
        if (!strcmp(name, "get")) return vfunc(R, M_GET, o);
        if (!strcmp(name, "items")) return vfunc(R, M_ITEMS, o);
        if (!strcmp(name, "keys")) return vfunc(R, M_KEYS, o);
        if (!strcmp(name, "values")) return vfunc(R, M_VALUES, o);
        static const char *const other[] = {"pop", "popitem", "update", "clear", "setdefault", "copy", "fromkeys"};
        for (size_t k = 0; k < 7; k++)
            if (!strcmp(name, other[k])) return vundef(R, "the dict method '%s' is not supported", name);
        val *v = dict_get(o, name, strlen(name));
        if (v) return v;
        return vundef(R, "'dict object' has no attribute '%s'", name);
    }
    case V_NS: {
        val *v = dict_get(o, name, strlen(name));
        if (v) return v;
        return vundef(R, "'Namespace object' has no attribute '%s'", name);
    }
    case V_LIST:
        if (o->flavour != L_GEN && !strcmp(name, "count")) return vfunc(R, M_LCOUNT, o);
        if (o->flavour != L_GEN && !strcmp(name, "index")) return vfunc(R, M_LINDEX, o);
        break;
    case V_LOOP: {  // the loop variable: items (o->items, o->n) at index o->pos
        int64_t k = (int64_t)o->pos, n = (int64_t)o->n;
        if (!strcmp(name, "index")) return vint(R, k + 1);
        if (!strcmp(name, "index0")) return vint(R, k);
        if (!strcmp(name, "revindex")) return vint(R, n - k);
        if (!strcmp(name, "revindex0")) return vint(R, n - k - 1);
        if (!strcmp(name, "first")) return vbool(k == 0);
        if (!strcmp(name, "last")) return vbool(k + 1 == n);
        if (!strcmp(name, "length")) return vint(R, n);
        if (!strcmp(name, "depth")) return vint(R, 1);
        if (!strcmp(name, "depth0")) return vint(R, 0);
        if (!strcmp(name, "previtem")) return k > 0 ? o->items[k - 1] : vundef(R, "there is no previous item");
        if (!strcmp(name, "nextitem")) return k + 1 < n ? o->items[k + 1] : vundef(R, "there is no next item");
        if (!strcmp(name, "cycle") || !strcmp(name, "changed")) return vundef(R, "loop.%s() is not supported", name);
        return vundef(R, "'LoopContext object' has no attribute '%s'", name);
    }
    default: break;
    }
    return vundef(R, "'%s object' has no attribute '%s'", type_name(o), name);
}

static int64_t as_index(rnd *R, const val *k, int line) {
    if (k->t == V_INT || k->t == V_BOOL) return k->i;
    rfail(R, line, "an index must be an integer, not '%s'", type_name(k));
}

static val *get_item(rnd *R, val *o, val *k, int line) {
    switch (o->t) {
    case V_UNDEF: rfail(R, line, "%s", o->s);
    case V_LIST:
        if (o->flavour != L_GEN && (k->t == V_INT || k->t == V_BOOL)) {
            int64_t i = k->i, n = (int64_t)o->n;
            if (i < 0) i += n;
            if (i >= 0 && i < n) return o->items[i];
            return vundef(R, "list index out of range");
        }
        break;
    case V_STR:
        if (k->t == V_INT || k->t == V_BOOL) {
            size_t c;
            size_t *off = u8offsets(R, o, &c);
            int64_t i = k->i, n = (int64_t)c;
            if (i < 0) i += n;
            if (i >= 0 && i < n) return vsub(R, o, off[i], off[i + 1] - off[i]);
            return vundef(R, "string index out of range");
        }
        break;
    case V_DICT:
        for (size_t j = 0; j < o->n; j++)
            if (veq(R, o->items[j], k)) return o->vals[j];
        break;
    default: break;
    }
    if (k->t == V_STR && memchr(k->s, 0, k->n)) return vundef(R, "no attribute with a NUL in its name");
    if (k->t == V_STR && o->t != V_DICT) return get_attr(R, o, k->s, line);
    if (k->t == V_STR && o->t == V_DICT) {
        if (!strcmp(k->s, "get") || !strcmp(k->s, "items") || !strcmp(k->s, "keys") || !strcmp(k->s, "values"))
            return get_attr(R, o, k->s, line);
        return vundef(R, "'dict object' has no attribute '%s'", k->s);
    }
    return vundef(R, "'%s object' has no element", type_name(o));
}

// Python's slice indices for a sequence of n items
static void slice_range(rnd *R, int64_t n, const val *a, const val *b, const val *c, int64_t *start, int64_t *stop,
                        int64_t *step, int line) {
    int64_t st = 1;
    if (c && c->t != V_NONE) st = as_index(R, c, line);
    if (st == 0) rfail(R, line, "slice step cannot be zero");
    if (st < -(INT64_MAX / 2) || st > INT64_MAX / 2) rfail(R, line, "slice step out of range");
    int64_t lo, hi;
    if (!a || a->t == V_NONE) lo = st > 0 ? 0 : n - 1;
    else {
        lo = as_index(R, a, line);
        if (lo < 0) { lo = lo < -n ? (st > 0 ? 0 : -1) : lo + n; }
        else if (lo >= n) lo = st > 0 ? n : n - 1;
    }
    if (!b || b->t == V_NONE) hi = st > 0 ? n : -1;
    else {
        hi = as_index(R, b, line);
        if (hi < 0) { hi = hi < -n ? (st > 0 ? 0 : -1) : hi + n; }
        else if (hi >= n) hi = st > 0 ? n : n - 1;
    }
    *start = lo;
    *stop = hi;
    *step = st;
}
static val *do_slice(rnd *R, val *o, val *a, val *b, val *c, int line) {
    if (o->t == V_UNDEF) rfail(R, line, "%s", o->s);
    int64_t lo, hi, st;
    if (o->t == V_LIST && o->flavour != L_GEN) {
        slice_range(R, (int64_t)o->n, a, b, c, &lo, &hi, &st, line);
        size_t cnt = 0;
        for (int64_t i = lo; st > 0 ? i < hi : i > hi; i += st) cnt++;
        val *r = vlist(R, cnt, o->flavour);
        size_t k = 0;
        for (int64_t i = lo; st > 0 ? i < hi : i > hi; i += st) r->items[k++] = o->items[i];
        return r;
    }
    if (o->t == V_STR) {
        size_t n;
        size_t *off = u8offsets(R, o, &n);
        slice_range(R, (int64_t)n, a, b, c, &lo, &hi, &st, line);
        sbuf s = {0};
        for (int64_t i = lo; st > 0 ? i < hi : i > hi; i += st)
            sb_put(R, &s, o->s + off[i], off[i + 1] - off[i], o->tag ? o->tag + off[i] : NULL);
        return sb_val(R, &s);
    }
    // Jinja2 compiles a slice to Python's own subscript: anything else fails
    if (o->t == V_DICT) rfail(R, line, "unhashable type: 'slice'");
    rfail(R, line, "'%s' object is not subscriptable", type_name(o));
}

// ---- string methods (Python semantics, code points) ----
static const char *memfind(const char *h, size_t hn, const char *nd, size_t nn) {
    if (nn == 0) return h;
    if (nn > hn) return NULL;
    return memmem(h, hn, nd, nn);
}
// strip: which 1 = left, 2 = right, 3 = both; chars NULL = Python whitespace
static val *str_strip(rnd *R, val *s, const val *chars, int which) {
    size_t lo = 0, hi = s->n;
    for (;;) {  // left
        if (!(which & 1) || lo >= hi) break;
        size_t l;
        uint32_t c = u8dec(s->s + lo, &l);
        int hit = chars ? memfind(chars->s, chars->n, s->s + lo, l) != NULL : py_isspace(c);
        if (!hit) break;
        lo += l;
    }
    while ((which & 2) && hi > lo) {
        size_t st = hi - 1;
        while (st > lo && ((unsigned char)s->s[st] & 0xc0) == 0x80) st--;
        size_t l;
        uint32_t c = u8dec(s->s + st, &l);
        int hit = chars ? memfind(chars->s, chars->n, s->s + st, l) != NULL : py_isspace(c);
        if (!hit) break;
        hi = st;
    }
    return vsub(R, s, lo, hi - lo);
}

static val *str_split(rnd *R, val *s, val *sep, int64_t maxsplit, int from_right, int line) {
    val *out = vlist(R, s->n + 1, L_LIST);
    size_t cnt = 0;
    if (!sep || sep->t == V_NONE) {
        // runs of whitespace; empty strings dropped
        size_t *ws = ct_alloc(&R->a, ct_mul(&R->a, s->n + 1, 2 * sizeof *ws));  // word starts / ends
        size_t nw = 0, i = 0;
        while (i < s->n) {
            size_t l;
            while (i < s->n && py_isspace(u8dec(s->s + i, &l))) i += l;
            if (i >= s->n) break;
            size_t st = i;
            while (i < s->n && !py_isspace(u8dec(s->s + i, &l))) i += l;
            ws[2 * nw] = st;
            ws[2 * nw + 1] = i;
            nw++;
        }
        if (maxsplit < 0 || (uint64_t)maxsplit + 1 >= nw) {
            for (size_t k = 0; k < nw; k++) out->items[cnt++] = vsub(R, s, ws[2 * k], ws[2 * k + 1] - ws[2 * k]);
        } else if (!from_right) {
            for (int64_t k = 0; k < maxsplit; k++) out->items[cnt++] = vsub(R, s, ws[2 * k], ws[2 * k + 1] - ws[2 * k]);
            size_t st = ws[2 * maxsplit], e = s->n;
            val *rest = vsub(R, s, st, e - st);
            out->items[cnt++] = str_strip(R, rest, NULL, 2);
        } else {
            size_t first = nw - (size_t)maxsplit;
            val *rest = vsub(R, s, 0, ws[2 * first - 1]);
            out->items[cnt++] = str_strip(R, rest, NULL, 1);
            for (size_t k = first; k < nw; k++) out->items[cnt++] = vsub(R, s, ws[2 * k], ws[2 * k + 1] - ws[2 * k]);
        }
        out->n = cnt;
        return out;
    }
    if (sep->t != V_STR) rfail(R, line, "split() separator must be a string or None, not '%s'", type_name(sep));
    if (sep->n == 0) rfail(R, line, "split(): empty separator");
    // positions of the separators, left to right
    size_t *pos = ct_alloc(&R->a, ct_mul(&R->a, s->n / sep->n + 1, sizeof *pos));
    size_t np = 0;
    for (const char *p = s->s; (p = memfind(p, s->n - (size_t)(p - s->s), sep->s, sep->n)) != NULL; p += sep->n)
        pos[np++] = (size_t)(p - s->s);
    size_t first = 0, use = np;
    if (maxsplit >= 0 && (uint64_t)maxsplit < np) {
        use = (size_t)maxsplit;
        if (from_right) {
            // scanning from the right finds the same separators as from the left unless the
            // separator overlaps itself; that case is refused rather than rendered differently
            for (size_t k = 1; k < sep->n; k++)
                if (!memcmp(sep->s, sep->s + k, sep->n - k)) rfail(R, line, "rsplit() with a self-overlapping separator is not supported");
            first = np - use;
        }
    }
    size_t prev = 0;
    for (size_t k = first; k < first + use; k++) {
        out->items[cnt++] = vsub(R, s, prev, pos[k] - prev);
        prev = pos[k] + sep->n;
    }
    out->items[cnt++] = vsub(R, s, prev, s->n - prev);
    out->n = cnt;
    return out;
}

static val *str_replace(rnd *R, val *s, val *old, val *nw, int64_t count) {
    sbuf b = {0};
    size_t i = 0;
    int64_t done = 0;
    if (old->n == 0) {  // Python inserts `new` before every code point and at the end
        size_t l;
        while (i <= s->n && (count < 0 || done < count)) {
            sb_put(R, &b, nw->s, nw->n, nw->tag);
            done++;
            if (i == s->n) { i++; break; }
            l = u8len((unsigned char)s->s[i]);
            sb_put(R, &b, s->s + i, l, s->tag ? s->tag + i : NULL);
            i += l;
        }
        if (i <= s->n) sb_put(R, &b, s->s + i, s->n - i, s->tag ? s->tag + i : NULL);
        return sb_val(R, &b);
    }
    while (i < s->n && (count < 0 || done < count)) {
        const char *p = memfind(s->s + i, s->n - i, old->s, old->n);
        if (!p) break;
        size_t at = (size_t)(p - s->s);
        sb_put(R, &b, s->s + i, at - i, s->tag ? s->tag + i : NULL);
        sb_put(R, &b, nw->s, nw->n, nw->tag);
        i = at + old->n;
        done++;
    }
    sb_put(R, &b, s->s + i, s->n - i, s->tag ? s->tag + i : NULL);
    return sb_val(R, &b);
}

static int is_word_break(char c) { return c == ' ' || (c >= 9 && c <= 13) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<'; }
// mode: 0 upper, 1 lower, 2 Python title(), 3 capitalize(), 4 Jinja2's |title
static val *str_case(rnd *R, val *s, int mode, int line) {
    for (size_t i = 0; i < s->n; i++)
        if ((unsigned char)s->s[i] >= 0x80) {
            // which letters a non-ASCII character maps to needs Unicode's case tables
            rfail(R, line, "changing the case of non-ASCII text is not supported");
        }
    char *p = ct_alloc(&R->a, s->n + 1);
    int prev_alpha = 0;
    for (size_t i = 0; i < s->n; i++) {
        char c = s->s[i];
        int alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
        int up;
        if (mode == 0) up = 1;
        else if (mode == 1) up = 0;
        else if (mode == 2) up = !prev_alpha;
        else if (mode == 3) up = i == 0;
        else {  // Jinja2 title: a word starts after whitespace, '-', '(', '{', '[', '<' or at the start
            up = i == 0 || is_word_break(s->s[i - 1]);
        }
        p[i] = alpha ? (up ? (char)(c & ~32) : (char)(c | 32)) : c;
        if (mode == 2) prev_alpha = alpha;
    }
    val *v = vnew(R, V_STR);
    v->s = p;
    v->n = s->n;
    v->tag = s->tag;
    return v;
}

// ---- JSON (transformers' tojson: json.dumps with ensure_ascii=False by default) ----
typedef struct json_opts {
    const char *indent;  // NULL: no newlines
    const char *item_sep, *key_sep;
    size_t item_sep_n, key_sep_n;
    int sort_keys, ensure_ascii;
} json_opts;

static void json_str(rnd *R, sbuf *b, const val *s, int ensure_ascii) {
    sb_cstr(R, b, "\"");
    for (size_t i = 0; i < s->n;) {
        size_t l;
        uint32_t c = u8dec(s->s + i, &l);
        const int32_t *tg = s->tag ? s->tag + i : NULL;
        char e[16] = {0};
        if (c == '"') strcpy(e, "\\\"");
        else if (c == '\\') strcpy(e, "\\\\");
        else if (c == '\n') strcpy(e, "\\n");
        else if (c == '\r') strcpy(e, "\\r");
        else if (c == '\t') strcpy(e, "\\t");
        else if (c == '\b') strcpy(e, "\\b");
        else if (c == '\f') strcpy(e, "\\f");
        else if (c < 0x20 || (ensure_ascii && c >= 0x7f)) {
            if (c < 0x10000) snprintf(e, sizeof e, "\\u%04x", c);
            else snprintf(e, sizeof e, "\\u%04x\\u%04x", 0xd800 + ((c - 0x10000) >> 10), 0xdc00 + ((c - 0x10000) & 0x3ff));
        }
        if (e[0]) {
            // an escape keeps the provenance of the character it stands for
            for (size_t k = 0; e[k]; k++) sb_put(R, b, e + k, 1, tg);
        } else sb_put(R, b, s->s + i, l, tg);
        i += l;
    }
    sb_cstr(R, b, "\"");
}
static void json_newline(rnd *R, sbuf *b, const json_opts *o, int level) {
    sb_cstr(R, b, "\n");
    for (int k = 0; k < level; k++) sb_cstr(R, b, o->indent);
}
static void json_dump(rnd *R, sbuf *b, val *v, const json_opts *o, int level, int line) {
    if (level > 200) rfail(R, line, "tojson: a value nested more than 200 deep (or a namespace that contains itself)");
    char buf[64];
    switch (v->t) {
    case V_NONE: sb_cstr(R, b, "null"); return;
    case V_BOOL: sb_cstr(R, b, v->i ? "true" : "false"); return;
    case V_INT: sb_printf(R, b, "%lld", (long long)v->i); return;
    case V_FLOAT:
        if (isnan(v->f)) sb_cstr(R, b, "NaN");
        else if (isinf(v->f)) sb_cstr(R, b, v->f < 0 ? "-Infinity" : "Infinity");
        else { py_float_repr(v->f, buf, sizeof buf); sb_cstr(R, b, buf); }
        return;
    case V_STR: json_str(R, b, v, o->ensure_ascii); return;
    case V_LIST: {
        if (v->flavour == L_GEN) rfail(R, line, "tojson: Object of type generator is not JSON serializable");
        if (!v->n) { sb_cstr(R, b, "[]"); return; }
        sb_cstr(R, b, "[");
        for (size_t k = 0; k < v->n; k++) {
            if (k) sb_put(R, b, o->item_sep, o->item_sep_n, NULL);
            if (o->indent) json_newline(R, b, o, level + 1);
            json_dump(R, b, v->items[k], o, level + 1, line);
        }
        if (o->indent) json_newline(R, b, o, level);
        sb_cstr(R, b, "]");
        return;
    }
    case V_DICT: {
        if (!v->n) { sb_cstr(R, b, "{}"); return; }
        size_t *ord = ct_alloc(&R->a, ct_mul(&R->a, v->n, sizeof *ord));
        for (size_t k = 0; k < v->n; k++) ord[k] = k;
        if (o->sort_keys)  // insertion sort: stable, and dicts here are small
            for (size_t k = 1; k < v->n; k++)
                for (size_t j = k; j > 0 && vcmp(R, v->items[ord[j - 1]], v->items[ord[j]], "<", line) > 0; j--) {
                    size_t t = ord[j]; ord[j] = ord[j - 1]; ord[j - 1] = t;
                }
        sb_cstr(R, b, "{");
        for (size_t j = 0; j < v->n; j++) {
            val *key = v->items[ord[j]];
            if (j) sb_put(R, b, o->item_sep, o->item_sep_n, NULL);
            if (o->indent) json_newline(R, b, o, level + 1);
            if (key->t == V_STR) json_str(R, b, key, o->ensure_ascii);
            else if (key->t == V_INT || key->t == V_FLOAT || key->t == V_BOOL || key->t == V_NONE) {
                sb_cstr(R, b, "\"");
                json_dump(R, b, key, o, level + 1, line);
                sb_cstr(R, b, "\"");
            } else rfail(R, line, "tojson: keys must be str, int, float, bool or None, not %s", type_name(key));
            sb_put(R, b, o->key_sep, o->key_sep_n, NULL);
            json_dump(R, b, v->vals[ord[j]], o, level + 1, line);
        }
        if (o->indent) json_newline(R, b, o, level);
        sb_cstr(R, b, "}");
        return;
    }
    default: rfail(R, line, "tojson: Object of type %s is not JSON serializable", type_name(v));
    }
}

// ---- evaluation ----
static val *eval(rnd *R, frame *f, const ct_node *n);
static void exec_body(rnd *R, frame *f, ct_nodes body);

static void step(rnd *R, int line) {
    if (++R->steps > R->max_steps)
        rfail(R, line, "the template ran more than %llu steps (the limit; an endless or huge loop?)", (unsigned long long)R->max_steps);
}

typedef struct args {
    val **pos;
    size_t np;
    const char **kn;
    val **kv;
    size_t nk;
    int line;
    const char *what;  // the function, for messages
} args;

// argument `name` at position i (or as a keyword), NULL when absent
static val *arg(rnd *R, const args *a, size_t i, const char *name) {
    val *v = i < a->np ? a->pos[i] : NULL;
    for (size_t k = 0; k < a->nk; k++)
        if (!strcmp(a->kn[k], name)) {
            if (v) rfail(R, a->line, "%s() got multiple values for argument '%s'", a->what, name);
            v = a->kv[k];
        }
    return v;
}
// refuses more than `npos` positional arguments and keywords not in the NULL-terminated list
static void args_check(rnd *R, const args *a, size_t npos, const char *const *names) {
    if (a->np > npos) rfail(R, a->line, "%s() takes at most %zu positional argument%s (%zu given)", a->what, npos, npos == 1 ? "" : "s", a->np);
    for (size_t k = 0; k < a->nk; k++) {
        int ok = 0;
        for (size_t j = 0; names && names[j]; j++) ok |= !strcmp(names[j], a->kn[k]);
        if (!ok) rfail(R, a->line, "%s() got an unexpected keyword argument '%s'", a->what, a->kn[k]);
    }
}
static val *need_str(rnd *R, val *v, const args *a, const char *what) {
    if (!v || v->t != V_STR) rfail(R, a->line, "%s(): %s must be a string, not '%s'", a->what, what, v ? type_name(v) : "nothing");
    return v;
}
static int64_t need_int(rnd *R, val *v, const args *a, const char *what) {
    if (!v || (v->t != V_INT && v->t != V_BOOL)) rfail(R, a->line, "%s(): %s must be an integer, not '%s'", a->what, what, v ? type_name(v) : "nothing");
    return v->i;
}

static val *apply_filter(rnd *R, const char *name, val *x, const args *a);
static int apply_test(rnd *R, const char *name, val *x, const args *a);

static int contains(rnd *R, val *item, val *c, int line) {
    switch (c->t) {
    case V_STR:
        if (item->t != V_STR) rfail(R, line, "'in <string>' requires string as left operand, not %s", type_name(item));
        return memfind(c->s, c->n, item->s, item->n) != NULL;
    case V_LIST: {
        size_t n;
        val **it = iter_items(R, c, &n, line);
        for (size_t k = 0; k < n; k++)
            if (veq(R, item, it[k])) return 1;
        return 0;
    }
    case V_DICT:
        if ((item->t == V_LIST && item->flavour != L_TUPLE) || item->t == V_DICT || item->t == V_NS)
            rfail(R, line, "unhashable type: '%s'", type_name(item));
        for (size_t k = 0; k < c->n; k++)
            if (veq(R, item, c->items[k])) return 1;
        return 0;
    case V_UNDEF: return 0;
    default: rfail(R, line, "argument of type '%s' is not iterable", type_name(c));
    }
}

static _Noreturn void bad_operands(rnd *R, const char *op, const val *a, const val *b, int line) {
    if (a->t == V_UNDEF) rfail(R, line, "%s", a->s);
    if (b->t == V_UNDEF) rfail(R, line, "%s", b->s);
    rfail(R, line, "unsupported operand type(s) for %s: '%s' and '%s'", op, type_name(a), type_name(b));
}

static val *repeat(rnd *R, val *s, int64_t k, int line) {
    if (k <= 0) return s->t == V_STR ? vcstr(R, "") : vlist(R, 0, s->flavour);
    if (s->t == V_STR) {
        sbuf b = {0};
        size_t total = ct_mul(&R->a, s->n, (size_t)k);
        if (total > R->max_output) rfail(R, line, "a string of %zu bytes from '*' is past the output limit", total);
        for (int64_t i = 0; i < k; i++) sb_put(R, &b, s->s, s->n, s->tag);
        return b.p ? sb_val(R, &b) : vcstr(R, "");
    }
    size_t total = ct_mul(&R->a, s->n, (size_t)k);
    val *r = vlist(R, total, s->flavour);
    for (size_t i = 0; i < total; i++) r->items[i] = s->items[i % s->n];
    return r;
}

// a + b of two strings, in one allocation of the exact size
static val *vconcat(rnd *R, const val *a, const val *b) {
    if (a->n > SIZE_MAX / 8 - b->n) rfail(R, 0, "a string grows past the size limit");
    size_t n = a->n + b->n;
    val *v = vnew(R, V_STR);
    char *p = ct_alloc_raw(&R->a, n + 1);
    if (a->n) memcpy(p, a->s, a->n);
    if (b->n) memcpy(p + a->n, b->s, b->n);
    p[n] = 0;
    v->s = p;
    v->n = n;
    if (a->tag || b->tag) {
        int32_t *t = ct_alloc_raw(&R->a, ct_mul(&R->a, n, sizeof *t));
        for (size_t k = 0; k < a->n; k++) t[k] = a->tag ? a->tag[k] : -1;
        for (size_t k = 0; k < b->n; k++) t[a->n + k] = b->tag ? b->tag[k] : -1;
        v->tag = t;
    }
    return v;
}

// Python's str % arg for the conversions %s, %r, %d, %i and %% without flags, width or
// precision (anything else is refused)
static val *py_format(rnd *R, const val *fmt, val *arg, int line) {
    int is_tuple = arg->t == V_LIST && arg->flavour == L_TUPLE;
    // Python's mapping check (anything with __getitem__ but a tuple or str: dicts, lists, Undefined)
    int mapping = arg->t == V_DICT || arg->t == V_UNDEF || (arg->t == V_LIST && arg->flavour == L_LIST);
    size_t argidx = 0, arglen = is_tuple ? arg->n : 1;
    sbuf b = {0};
    for (size_t i = 0; i < fmt->n; i++) {
        if (fmt->s[i] != '%') { sb_put(R, &b, fmt->s + i, 1, fmt->tag ? fmt->tag + i : NULL); continue; }
        if (++i >= fmt->n) rfail(R, line, "incomplete format");
        if (fmt->s[i] == '%') { sb_put(R, &b, "%", 1, NULL); continue; }
        val *v;
        if (fmt->s[i] == '(') {
            size_t e = i + 1;
            while (e < fmt->n && fmt->s[e] != ')') e++;
            if (e >= fmt->n) rfail(R, line, "incomplete format key");
            if (!mapping) rfail(R, line, "format requires a mapping");
            if (arg->t == V_LIST) rfail(R, line, "list indices must be integers or slices, not str");
            if (arg->t == V_UNDEF) rfail(R, line, "%s", arg->s);
            v = dict_get(arg, fmt->s + i + 1, e - i - 1);
            if (!v) rfail(R, line, "KeyError in %% formatting: '%.*s'", (int)(e - i - 1), fmt->s + i + 1);
            i = e + 1;
            if (i >= fmt->n) rfail(R, line, "incomplete format");
        } else {
            if (argidx >= arglen) rfail(R, line, "not enough arguments for format string");
            v = is_tuple ? arg->items[argidx] : arg;
            argidx++;
        }
        char c = fmt->s[i];
        if (c == 's') to_str(R, &b, v, 0, line);
        else if (c == 'r') to_str(R, &b, v, 1, line);
        else if (c == 'd' || c == 'i') {
            if (v->t == V_INT || v->t == V_BOOL) sb_printf(R, &b, "%lld", (long long)v->i);
            else if (v->t == V_FLOAT && isfinite(v->f) && fabs(v->f) < 9.2e18) sb_printf(R, &b, "%lld", (long long)v->f);
            else rfail(R, line, "%%%c format: a real number is required, not %s", c, type_name(v));
        } else rfail(R, line, "the %% format conversion '%c' (or a flag, width or precision) is not supported", c);
    }
    if (argidx < arglen && !mapping && !(is_tuple && arglen == 0))
        rfail(R, line, "not all arguments converted during string formatting");
    return sb_val(R, &b);
}

static val *binop(rnd *R, int op, val *a, val *b, int line) {
    static const char *const opn[] = {"+", "-", "*", "/", "//", "%", "**", "~", "==", "!=", "<", "<=", ">", ">=", "in", "not in"};
    WGT_ASSERT(op >= 0 && op <= OP_NOTIN, "chat template: an unknown binary operator");
    switch (op) {
    case OP_EQ: return vbool(veq(R, a, b));
    case OP_NE: return vbool(!veq(R, a, b));
    case OP_LT: return vbool(vcmp(R, a, b, "<", line) < 0);
    case OP_LE: return vbool(vcmp(R, a, b, "<=", line) <= 0);
    case OP_GT: return vbool(vcmp(R, a, b, ">", line) > 0);
    case OP_GE: return vbool(vcmp(R, a, b, ">=", line) >= 0);
    case OP_IN: return vbool(contains(R, a, b, line));
    case OP_NOTIN: return vbool(!contains(R, a, b, line));
    case OP_CONCAT: return vconcat(R, as_str(R, a, line), as_str(R, b, line));
    default: break;
    }
    if (is_num(a) && is_num(b)) {
        int fl = a->t == V_FLOAT || b->t == V_FLOAT;
        int64_t x = a->i, y = b->i, r;
        double p = num(a), q = num(b);
        switch (op) {
        case OP_ADD:
            if (fl) return vfloat(R, p + q);
            if (__builtin_add_overflow(x, y, &r)) rfail(R, line, "integer overflow in +");
            return vint(R, r);
        case OP_SUB:
            if (fl) return vfloat(R, p - q);
            if (__builtin_sub_overflow(x, y, &r)) rfail(R, line, "integer overflow in -");
            return vint(R, r);
        case OP_MUL:
            if (fl) return vfloat(R, p * q);
            if (__builtin_mul_overflow(x, y, &r)) rfail(R, line, "integer overflow in *");
            return vint(R, r);
        case OP_DIV:
            if (q == 0) rfail(R, line, "division by zero");
            return vfloat(R, p / q);
        case OP_FLOORDIV:
        case OP_MOD:
            if (q == 0) rfail(R, line, "integer division or modulo by zero");
            if (!fl) {
                if (x == INT64_MIN && y == -1) rfail(R, line, "integer overflow in %s", opn[op]);
                int64_t d = x / y, m = x % y;
                if (m != 0 && ((m < 0) != (y < 0))) { d--; m += y; }
                return op == OP_MOD ? vint(R, m) : vint(R, d);
            } else {
                double m = fmod(p, q);
                if (m != 0 && ((m < 0) != (q < 0))) m += q;
                if (op == OP_MOD) return vfloat(R, m == 0 ? copysign(0.0, q) : m);
                // CPython's float floor division
                double mod = fmod(p, q), div = (p - mod) / q;
                if (mod != 0 && ((q < 0) != (mod < 0))) div -= 1.0;
                double fd = div != 0 ? floor(div) : copysign(0.0, p / q);
                if (div != 0 && div - fd > 0.5) fd += 1.0;
                return vfloat(R, fd);
            }
        case OP_POW:
            if (!fl && y >= 0) {
                int64_t acc = 1;
                for (int64_t k = 0; k < y; k++) {
                    if (__builtin_mul_overflow(acc, x, &acc)) rfail(R, line, "integer overflow in **");
                    if (acc == 0 || acc == 1) break;
                    if (acc == -1) { acc = ((y - k - 1) % 2) ? -acc : acc; break; }
                }
                return vint(R, acc);
            }
            if (p == 0 && q < 0) rfail(R, line, "0.0 cannot be raised to a negative power");
            return vfloat(R, pow(p, q));
        default: break;
        }
    }
    if (op == OP_ADD && a->t == V_STR && b->t == V_STR) return vconcat(R, a, b);
    if (op == OP_ADD && a->t == V_LIST && b->t == V_LIST && a->flavour == b->flavour && a->flavour != L_GEN) {
        val *r = vlist(R, a->n + b->n, a->flavour);
        if (a->n) memcpy(r->items, a->items, a->n * sizeof *r->items);
        if (b->n) memcpy(r->items + a->n, b->items, b->n * sizeof *r->items);
        return r;
    }
    if (op == OP_MUL && (a->t == V_STR || (a->t == V_LIST && a->flavour != L_GEN)) && (b->t == V_INT || b->t == V_BOOL))
        return repeat(R, a, b->i, line);
    if (op == OP_MUL && (b->t == V_STR || (b->t == V_LIST && b->flavour != L_GEN)) && (a->t == V_INT || a->t == V_BOOL))
        return repeat(R, b, a->i, line);
    if (op == OP_MOD && a->t == V_STR) return py_format(R, a, b, line);
    bad_operands(R, opn[op], a, b, line);
}

static val *call_macro(rnd *R, const ct_node *m, const args *a);

static val *call_builtin(rnd *R, val *fn, const args *a) {
    val *self = fn->self;
    int line = a->line;
    switch ((int)fn->i) {
    case F_RANGE: {
        args_check(R, a, 3, NULL);
        if (a->np == 0) rfail(R, line, "range() expects at least 1 argument");
        int64_t lo = 0, hi, st = 1;
        if (a->np == 1) hi = need_int(R, a->pos[0], a, "stop");
        else {
            lo = need_int(R, a->pos[0], a, "start");
            hi = need_int(R, a->pos[1], a, "stop");
            if (a->np == 3) st = need_int(R, a->pos[2], a, "step");
        }
        if (st == 0) rfail(R, line, "range() arg 3 must not be zero");
        // the count in 128 bits: no overflow for any 64-bit arguments
        __int128 cnt = st > 0 ? (hi > lo ? ((__int128)hi - lo + st - 1) / st : 0) : (lo > hi ? ((__int128)lo - hi - st - 1) / -st : 0);
        if (cnt > 100000) rfail(R, line, "range() of %lld items: the sandbox allows at most 100000", (long long)(cnt > INT64_MAX ? INT64_MAX : (int64_t)cnt));
        val *r = vlist(R, (size_t)cnt, L_LIST);
        for (int64_t k = 0; k < (int64_t)cnt; k++) r->items[k] = vint(R, lo + k * st);
        return r;
    }
    case F_NAMESPACE: {
        val *ns = vdict(R, V_NS);
        if (a->np > 1) rfail(R, line, "namespace() takes at most one positional argument");
        if (a->np == 1) {
            if (a->pos[0]->t != V_DICT) rfail(R, line, "namespace(): the positional argument must be a dict");
            for (size_t k = 0; k < a->pos[0]->n; k++) dict_put(R, ns, a->pos[0]->items[k], a->pos[0]->vals[k]);
        }
        for (size_t k = 0; k < a->nk; k++) dict_put(R, ns, vcstr(R, a->kn[k]), a->kv[k]);
        return ns;
    }
    case F_DICT: {
        val *d = vdict(R, V_DICT);
        if (a->np) rfail(R, line, "dict() with positional arguments is not supported");
        for (size_t k = 0; k < a->nk; k++) dict_put(R, d, vcstr(R, a->kn[k]), a->kv[k]);
        return d;
    }
    case F_RAISE: {
        sbuf b = {0};
        if (a->np >= 1) to_str(R, &b, a->pos[0], 0, line);
        rfail(R, line, "the template raised an error: %s", b.p ? b.p : "");
    }
    case F_STRFTIME: {
        args_check(R, a, 1, NULL);
        val *fmt = need_str(R, a->np ? a->pos[0] : NULL, a, "format");
        if (memchr(fmt->s, 0, fmt->n)) rfail(R, line, "strftime_now(): embedded null character in the format");
        if (R->now < 0) rfail(R, line, "the template calls strftime_now() and no date was given (set the render's time)");
        time_t t = (time_t)R->now;
        struct tm tm;
        if (!gmtime_r(&t, &tm)) rfail(R, line, "strftime_now(): the time %lld is out of range", (long long)R->now);
        char out[512];
        size_t k = fmt->n ? strftime(out, sizeof out, fmt->s, &tm) : 0;
        if (fmt->n && k == 0) rfail(R, line, "strftime_now(): the formatted date is empty or longer than 511 bytes");
        return vstr(R, out, k, NULL);
    }
    case M_STARTSWITH:
    case M_ENDSWITH: {
        args_check(R, a, 1, NULL);
        val *p = a->np ? a->pos[0] : NULL;
        if (!p) rfail(R, line, "%s() takes exactly one argument", a->what);
        size_t cnt = 1;
        val **cands = &p;
        if (p->t == V_LIST && p->flavour == L_TUPLE) { cnt = p->n; cands = p->items; }
        for (size_t k = 0; k < cnt; k++) {
            val *c = need_str(R, cands[k], a, "the prefix");
            if (c->n > self->n) continue;
            if (fn->i == M_STARTSWITH ? !memcmp(self->s, c->s, c->n) : !memcmp(self->s + self->n - c->n, c->s, c->n)) return vbool(1);
        }
        return vbool(0);
    }
    case M_SPLIT:
    case M_RSPLIT: {
        static const char *const kw[] = {"sep", "maxsplit", NULL};
        args_check(R, a, 2, kw);
        val *sep = arg(R, a, 0, "sep"), *mx = arg(R, a, 1, "maxsplit");
        return str_split(R, self, sep, mx ? need_int(R, mx, a, "maxsplit") : -1, fn->i == M_RSPLIT, line);
    }
    case M_STRIP:
    case M_LSTRIP:
    case M_RSTRIP: {
        args_check(R, a, 1, NULL);
        val *ch = a->np ? a->pos[0] : NULL;
        if (ch && ch->t == V_NONE) ch = NULL;
        if (ch) need_str(R, ch, a, "chars");
        return str_strip(R, self, ch, fn->i == M_STRIP ? 3 : fn->i == M_LSTRIP ? 1 : 2);
    }
    case M_REPLACE: {
        args_check(R, a, 3, NULL);
        if (a->np < 2) rfail(R, line, "replace() takes at least 2 arguments");
        val *o = need_str(R, a->pos[0], a, "old"), *nw = need_str(R, a->pos[1], a, "new");
        return str_replace(R, self, o, nw, a->np > 2 ? need_int(R, a->pos[2], a, "count") : -1);
    }
    case M_UPPER: case M_LOWER: case M_TITLE: case M_CAPITALIZE:
        args_check(R, a, 0, NULL);
        return str_case(R, self, fn->i == M_UPPER ? 0 : fn->i == M_LOWER ? 1 : fn->i == M_TITLE ? 2 : 3, line);
    case M_FIND: {
        args_check(R, a, 1, NULL);
        val *sub = need_str(R, a->np ? a->pos[0] : NULL, a, "sub");
        const char *p = memfind(self->s, self->n, sub->s, sub->n);
        return vint(R, p ? (int64_t)u8count(self->s, (size_t)(p - self->s)) : -1);
    }
    case M_COUNT: {
        args_check(R, a, 1, NULL);
        val *sub = need_str(R, a->np ? a->pos[0] : NULL, a, "sub");
        if (!sub->n) return vint(R, (int64_t)u8count(self->s, self->n) + 1);
        int64_t k = 0;
        for (const char *p = self->s; (p = memfind(p, self->n - (size_t)(p - self->s), sub->s, sub->n)) != NULL; p += sub->n) k++;
        return vint(R, k);
    }
    case M_JOIN: {
        args_check(R, a, 1, NULL);
        if (!a->np) rfail(R, line, "join() takes exactly one argument");
        size_t n;
        val **it = iter_items(R, a->pos[0], &n, line);
        sbuf b = {0};
        for (size_t k = 0; k < n; k++) {
            if (it[k]->t != V_STR) rfail(R, line, "sequence item %zu: expected str instance, %s found", k, type_name(it[k]));
            if (k) sb_put(R, &b, self->s, self->n, self->tag);
            sb_put(R, &b, it[k]->s, it[k]->n, it[k]->tag);
        }
        return sb_val(R, &b);
    }
    case M_GET: {
        args_check(R, a, 2, NULL);
        if (!a->np) rfail(R, line, "get() takes at least one argument");
        for (size_t k = 0; k < self->n; k++)
            if (veq(R, self->items[k], a->pos[0])) return self->vals[k];
        return a->np > 1 ? a->pos[1] : &V_NONE_;
    }
    case M_ITEMS: {
        args_check(R, a, 0, NULL);
        val *r = vlist(R, self->n, L_LIST);
        for (size_t k = 0; k < self->n; k++) {
            val *t = vlist(R, 2, L_TUPLE);
            t->items[0] = self->items[k];
            t->items[1] = self->vals[k];
            r->items[k] = t;
        }
        return r;
    }
    case M_LCOUNT:
    case M_LINDEX: {
        args_check(R, a, 1, NULL);
        if (!a->np) rfail(R, line, "%s() takes exactly one argument", a->what);
        int64_t cnt = 0;
        for (size_t k = 0; k < self->n; k++)
            if (veq(R, self->items[k], a->pos[0])) {
                if (fn->i == M_LINDEX) return vint(R, (int64_t)k);
                cnt++;
            }
        if (fn->i == M_LINDEX) rfail(R, line, "index(): the value is not in the list");
        return vint(R, cnt);
    }
    case M_KEYS:
    case M_VALUES: {
        args_check(R, a, 0, NULL);
        val *r = vlist(R, self->n, L_LIST);
        for (size_t k = 0; k < self->n; k++) r->items[k] = fn->i == M_KEYS ? self->items[k] : self->vals[k];
        return r;
    }
    }
    rfail(R, line, "calling %s is not supported", a->what);
}

static val *call_value(rnd *R, val *fn, const args *a) {
    if (fn->t == V_FUNC) return call_builtin(R, fn, a);
    if (fn->t == V_MACRO) return call_macro(R, fn->macro, a);
    if (fn->t == V_UNDEF) rfail(R, a->line, "%s", fn->s);
    rfail(R, a->line, "'%s' object is not callable", type_name(fn));
}

// evaluates the arguments of a call / filter / test node
static void eval_args(rnd *R, frame *f, const ct_node *n, args *a) {
    a->line = n->line;
    a->np = n->body.n;
    a->pos = ct_alloc(&R->a, ct_mul(&R->a, a->np + 1, sizeof *a->pos));
    for (size_t k = 0; k < a->np; k++) a->pos[k] = eval(R, f, n->body.p[k]);
    a->nk = n->names.n;
    a->kn = n->names.p;
    a->kv = ct_alloc(&R->a, ct_mul(&R->a, a->nk + 1, sizeof *a->kv));
    for (size_t k = 0; k < a->nk; k++) a->kv[k] = eval(R, f, n->other.p[k]);
}

static val *call_macro(rnd *R, const ct_node *m, const args *a) {
    if (R->depth >= R->max_depth) rfail(R, a->line, "macro calls nested more than %d deep (the limit)", R->max_depth);
    if (a->np > m->names.n) rfail(R, a->line, "macro '%s' takes not more than %zu argument(s)", m->s, m->names.n);
    frame *mf = ct_alloc(&R->a, sizeof *mf);
    mf->parent = R->root;
    for (size_t k = 0; k < a->nk; k++) {
        int ok = 0;
        for (size_t j = 0; j < m->names.n; j++) ok |= !strcmp(m->names.p[j], a->kn[k]);
        if (!ok) rfail(R, a->line, "macro '%s' takes no keyword argument '%s'", m->s, a->kn[k]);
    }
    for (size_t j = 0; j < m->names.n; j++) {
        val *v = j < a->np ? a->pos[j] : NULL;
        for (size_t k = 0; k < a->nk; k++)
            if (!strcmp(m->names.p[j], a->kn[k])) {
                if (v) rfail(R, a->line, "macro '%s' got multiple values for argument '%s'", m->s, a->kn[k]);
                v = a->kv[k];
            }
        if (!v) v = m->other.p[j] ? eval(R, mf, m->other.p[j]) : vundef(R, "parameter '%s' was not provided", m->names.p[j]);
        frame_set(R, mf, m->names.p[j], v);
    }
    R->depth++;
    sbuf cap = {0}, *saved = R->out;
    R->out = &cap;
    exec_body(R, mf, m->body);
    R->out = saved;
    R->ctl = 0;
    R->depth--;
    return sb_val(R, &cap);
}

// ---- filters ----
static const char *const filter_names[] = {"abs", "capitalize", "count", "d", "default", "first", "float", "int",
                                           "items", "join", "last", "length", "list", "lower", "map", "reject",
                                           "rejectattr", "replace", "reverse", "select", "selectattr", "string",
                                           "title", "tojson", "trim", "upper", NULL};
static const char *const test_names[] = {"defined", "undefined", "none", "string", "number", "integer", "float",
                                         "mapping", "sequence", "iterable", "true", "false", "boolean", "odd",
                                         "even", "divisibleby", "eq", "equalto", "==", "ne", "!=", "lt", "lessthan",
                                         "<", "le", "<=", "gt", "greaterthan", ">", "ge", ">=", "in", "lower",
                                         "upper", "sameas", "callable", NULL};
int ct_filter_known(const char *name) {
    for (size_t k = 0; filter_names[k]; k++)
        if (!strcmp(filter_names[k], name)) return 1;
    return 0;
}
int ct_test_known(const char *name) {
    for (size_t k = 0; test_names[k]; k++)
        if (!strcmp(test_names[k], name)) return 1;
    return 0;
}

// Python's int(str): whitespace around, a sign, digits with single underscores between them.
// 1 with *out set, 0 when not a number, -1 when it does not fit 64 bits.
static int py_parse_int(const val *s, int64_t *out) {
    size_t i = 0, n = s->n;
    while (i < n && py_isspace((unsigned char)s->s[i])) i++;
    while (n > i && py_isspace((unsigned char)s->s[n - 1])) n--;
    int neg = 0;
    if (i < n && (s->s[i] == '+' || s->s[i] == '-')) neg = s->s[i++] == '-';
    if (i >= n || !(s->s[i] >= '0' && s->s[i] <= '9')) return 0;
    uint64_t v = 0;
    int over = 0;
    for (; i < n; i++) {
        char c = s->s[i];
        if (c == '_' && i + 1 < n && s->s[i + 1] >= '0' && s->s[i + 1] <= '9' && s->s[i - 1] != '_') continue;
        if (!(c >= '0' && c <= '9')) return 0;
        if (v > (UINT64_MAX - 9) / 10) over = 1;
        else v = v * 10 + (uint64_t)(c - '0');
    }
    if (over || v > (uint64_t)INT64_MAX + (uint64_t)neg) return -1;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 1;
}
// Python's float(str): whitespace around, digits with single underscores, a fraction, an
// exponent, or inf / infinity / nan in any case. 1 with *out set, 0 when not a number.
static int py_parse_float(const val *s, double *out) {
    size_t i = 0, n = s->n;
    while (i < n && py_isspace((unsigned char)s->s[i])) i++;
    while (n > i && py_isspace((unsigned char)s->s[n - 1])) n--;
    char buf[128];
    size_t k = 0, j = i;
    if (j < n && (s->s[j] == '+' || s->s[j] == '-')) buf[k++] = s->s[j++];
    size_t rest = n - j;
    const char *r = s->s + j;
    if ((rest == 3 && !strncasecmp(r, "inf", 3)) || (rest == 8 && !strncasecmp(r, "infinity", 8))) {
        *out = (k && buf[0] == '-') ? -INFINITY : INFINITY;
        return 1;
    }
    if (rest == 3 && !strncasecmp(r, "nan", 3)) { *out = NAN; return 1; }
    int digits = 0, dot = 0, exp = 0;
    for (; j < n; j++) {
        char c = s->s[j];
        if (k + 2 >= sizeof buf) return 0;
        if (c >= '0' && c <= '9') { buf[k++] = c; digits++; continue; }
        if (c == '_' && j > i && j + 1 < n && s->s[j - 1] >= '0' && s->s[j - 1] <= '9' && s->s[j + 1] >= '0' && s->s[j + 1] <= '9') continue;
        if (c == '.' && !dot && !exp) { dot = 1; buf[k++] = c; continue; }
        if ((c == 'e' || c == 'E') && digits && !exp) {
            exp = 1;
            buf[k++] = c;
            if (j + 1 < n && (s->s[j + 1] == '+' || s->s[j + 1] == '-')) buf[k++] = s->s[++j];
            if (!(j + 1 < n && s->s[j + 1] >= '0' && s->s[j + 1] <= '9')) return 0;
            continue;
        }
        return 0;
    }
    if (!digits) return 0;
    buf[k] = 0;
    *out = strtod(buf, NULL);
    return 1;
}

static int64_t seq_len(rnd *R, val *x, int line) {
    switch (x->t) {
    case V_UNDEF: return 0;
    case V_STR: return (int64_t)u8count(x->s, x->n);
    case V_LIST:
        if (x->flavour == L_GEN) rfail(R, line, "object of type 'generator' has no len()");
        return (int64_t)x->n;
    case V_DICT: return (int64_t)x->n;
    default: rfail(R, line, "object of type '%s' has no len()", type_name(x));
    }
}

// Jinja2's attribute lookup for map / selectattr (dotted paths allowed: "function.name")
static val *attr_path(rnd *R, val *x, val *path, int line) {
    if (path->t == V_INT) return get_item(R, x, path, line);
    if (path->t != V_STR) rfail(R, line, "an attribute name must be a string");
    const char *p = path->s, *e = path->s + path->n;
    while (p <= e) {
        const char *dot = memchr(p, '.', (size_t)(e - p));
        size_t len = dot ? (size_t)(dot - p) : (size_t)(e - p);
        val *key = vstr(R, p, len, NULL);
        int digits = len > 0;
        for (size_t k = 0; k < len; k++) digits &= p[k] >= '0' && p[k] <= '9';
        if (digits && len < 18) key = vint(R, strtoll(key->s, NULL, 10));
        x = get_item(R, x, key, line);
        if (!dot) break;
        p = dot + 1;
    }
    return x;
}

static val *as_gen(rnd *R, val **items, size_t n) {
    val *r = vlist(R, n, L_GEN);
    if (n) memcpy(r->items, items, n * sizeof *items);
    return r;
}

static int json_indent(rnd *R, val *v, const args *a, char **out) {
    if (!v || v->t == V_NONE) { *out = NULL; return 0; }
    if (v->t == V_STR) {
        if (memchr(v->s, 0, v->n)) rfail(R, a->line, "tojson(): an indent string with a NUL is not supported");
        *out = (char *)v->s;
        return 1;
    }
    int64_t k = need_int(R, v, a, "indent");
    if (k > 64) rfail(R, a->line, "tojson(): an indent of %lld is more than the 64 supported", (long long)k);
    char *s = ct_alloc(&R->a, (size_t)(k > 0 ? k : 0) + 1);
    for (int64_t i = 0; i < k; i++) s[i] = ' ';
    *out = s;
    return 1;
}

static val *apply_filter(rnd *R, const char *name, val *x, const args *a0) {
    args A = *a0;
    A.what = name;
    const args *a = &A;
    int line = a->line;
    if (!strcmp(name, "trim")) {
        static const char *const kw[] = {"chars", NULL};
        args_check(R, a, 1, kw);
        val *ch = arg(R, a, 0, "chars");
        if (ch && ch->t == V_NONE) ch = NULL;
        if (ch) ch = as_str(R, ch, line);
        return str_strip(R, as_str(R, x, line), ch, 3);
    }
    if (!strcmp(name, "length") || !strcmp(name, "count")) { args_check(R, a, 0, NULL); return vint(R, seq_len(R, x, line)); }
    if (!strcmp(name, "tojson")) {
        static const char *const kw[] = {"ensure_ascii", "indent", "separators", "sort_keys", NULL};
        args_check(R, a, 4, kw);
        val *ea = arg(R, a, 0, "ensure_ascii"), *ind = arg(R, a, 1, "indent"), *sep = arg(R, a, 2, "separators"),
            *sk = arg(R, a, 3, "sort_keys");
        json_opts o = {0};
        char *indent;
        int has_indent = json_indent(R, ind, a, &indent);
        o.indent = has_indent ? indent : NULL;
        o.item_sep = has_indent ? "," : ", ";
        o.key_sep = ": ";
        if (sep && sep->t != V_NONE) {
            if (sep->t != V_LIST || sep->flavour == L_GEN || sep->n != 2 || sep->items[0]->t != V_STR || sep->items[1]->t != V_STR)
                rfail(R, line, "tojson(): separators must be a pair of strings");
            o.item_sep = sep->items[0]->s;
            o.key_sep = sep->items[1]->s;
        }
        o.item_sep_n = strlen(o.item_sep);
        o.key_sep_n = strlen(o.key_sep);
        if (sep && sep->t == V_LIST && sep->n == 2) {
            o.item_sep_n = sep->items[0]->n;
            o.key_sep_n = sep->items[1]->n;
        }
        o.sort_keys = sk ? truthy(sk) : 0;
        o.ensure_ascii = ea ? truthy(ea) : 0;
        sbuf b = {0};
        json_dump(R, &b, x, &o, 0, line);
        return sb_val(R, &b);
    }
    if (!strcmp(name, "upper") || !strcmp(name, "lower") || !strcmp(name, "capitalize") || !strcmp(name, "title")) {
        args_check(R, a, 0, NULL);
        int mode = name[0] == 'u' ? 0 : name[0] == 'l' ? 1 : name[0] == 'c' ? 3 : 4;
        return str_case(R, as_str(R, x, line), mode, line);
    }
    if (!strcmp(name, "replace")) {
        static const char *const kw[] = {"old", "new", "count", NULL};
        args_check(R, a, 3, kw);
        val *o = arg(R, a, 0, "old"), *nw = arg(R, a, 1, "new"), *c = arg(R, a, 2, "count");
        if (!o || !nw) rfail(R, line, "replace() needs old and new");
        int64_t cnt = c && c->t != V_NONE ? need_int(R, c, a, "count") : -1;
        return str_replace(R, as_str(R, x, line), as_str(R, o, line), as_str(R, nw, line), cnt);
    }
    if (!strcmp(name, "default") || !strcmp(name, "d")) {
        static const char *const kw[] = {"default_value", "boolean", NULL};
        args_check(R, a, 2, kw);
        val *dv = arg(R, a, 0, "default_value"), *bo = arg(R, a, 1, "boolean");
        if (!dv) dv = vcstr(R, "");
        if (x->t == V_UNDEF || (bo && truthy(bo) && !truthy(x))) return dv;
        return x;
    }
    if (!strcmp(name, "first") || !strcmp(name, "last")) {
        args_check(R, a, 0, NULL);
        if (x->t == V_UNDEF) return vundef(R, "%s of an undefined value", name);
        if (name[0] == 'l' && x->t == V_LIST && x->flavour == L_GEN) rfail(R, line, "last() of a generator: add |list");
        if (name[0] == 'f' && x->t == V_LIST && x->flavour == L_GEN) {
            if (x->pos >= x->n) return vundef(R, "No first item, sequence was empty.");
            return x->items[x->pos++];
        }
        size_t n;
        val **it = iter_items(R, x, &n, line);
        if (!n) return vundef(R, "No %s item, sequence was empty.", name);
        return name[0] == 'f' ? it[0] : it[n - 1];
    }
    if (!strcmp(name, "join")) {
        static const char *const kw[] = {"d", "attribute", NULL};
        args_check(R, a, 2, kw);
        val *d = arg(R, a, 0, "d"), *at = arg(R, a, 1, "attribute");
        val *sep = d ? as_str(R, d, line) : vcstr(R, "");
        size_t n;
        val **it = iter_items(R, x, &n, line);
        sbuf b = {0};
        for (size_t k = 0; k < n; k++) {
            if (k) sb_put(R, &b, sep->s, sep->n, sep->tag);
            to_str(R, &b, at ? attr_path(R, it[k], at, line) : it[k], 0, line);
        }
        return sb_val(R, &b);
    }
    if (!strcmp(name, "string")) { args_check(R, a, 0, NULL); return as_str(R, x, line); }
    if (!strcmp(name, "list")) {
        args_check(R, a, 0, NULL);
        size_t n;
        val **it = iter_items(R, x, &n, line);
        val *r = vlist(R, n, L_LIST);
        if (n) memcpy(r->items, it, n * sizeof *it);
        return r;
    }
    if (!strcmp(name, "items")) {
        args_check(R, a, 0, NULL);
        if (x->t == V_UNDEF) return vlist(R, 0, L_GEN);
        if (x->t != V_DICT) rfail(R, line, "items(): can only get item pairs from a mapping, not '%s'", type_name(x));
        val *r = vlist(R, x->n, L_GEN);
        for (size_t k = 0; k < x->n; k++) {
            val *t = vlist(R, 2, L_TUPLE);
            t->items[0] = x->items[k];
            t->items[1] = x->vals[k];
            r->items[k] = t;
        }
        return r;
    }
    if (!strcmp(name, "int") || !strcmp(name, "float")) {
        static const char *const kw[] = {"default", NULL};
        args_check(R, a, 1, kw);
        val *dv = arg(R, a, 0, "default");
        int is_int = name[0] == 'i';
        if (x->t == V_UNDEF) rfail(R, line, "%s", x->s);
        double d = 0;
        int64_t i = 0;
        int have = 0;  // 1: an integer in i, 2: a float in d
        if (x->t == V_INT || x->t == V_BOOL) { i = x->i; have = 1; }
        else if (x->t == V_FLOAT) { d = x->f; have = 2; }
        else if (x->t == V_STR) {
            int r = is_int ? py_parse_int(x, &i) : 0;
            if (r < 0) rfail(R, line, "int(): '%s' is outside the 64-bit integers supported", x->s);
            if (r > 0) have = 1;
            else if (py_parse_float(x, &d)) have = 2;
        }
        if (!have) return dv ? dv : is_int ? vint(R, 0) : vfloat(R, 0.0);
        if (!is_int) return vfloat(R, have == 1 ? (double)i : d);
        if (have == 1) return vint(R, i);
        if (isnan(d)) return dv ? dv : vint(R, 0);  // int(nan) is a ValueError: the default
        if (isinf(d)) rfail(R, line, "int(): cannot convert float infinity to integer");
        if (!(fabs(d) < 9.2e18)) rfail(R, line, "int(): %g is outside the 64-bit integers supported", d);
        return vint(R, (int64_t)d);
    }
    if (!strcmp(name, "abs")) {
        args_check(R, a, 0, NULL);
        if (x->t == V_INT || x->t == V_BOOL) {
            if (x->i == INT64_MIN) rfail(R, line, "integer overflow in abs");
            return vint(R, x->i < 0 ? -x->i : x->i);
        }
        if (x->t == V_FLOAT) return vfloat(R, fabs(x->f));
        rfail(R, line, "bad operand type for abs(): '%s'", type_name(x));
    }
    if (!strcmp(name, "reverse")) {
        args_check(R, a, 0, NULL);
        if (x->t == V_STR) {
            size_t n;
            size_t *o = u8offsets(R, x, &n);
            sbuf b = {0};
            for (size_t k = n; k-- > 0;) sb_put(R, &b, x->s + o[k], o[k + 1] - o[k], x->tag ? x->tag + o[k] : NULL);
            return sb_val(R, &b);
        }
        size_t n;
        val **it = iter_items(R, x, &n, line);
        val *r = vlist(R, n, L_GEN);
        for (size_t k = 0; k < n; k++) r->items[k] = it[n - 1 - k];
        return r;
    }
    if ((!strcmp(name, "map") || !strcmp(name, "select") || !strcmp(name, "reject") || !strcmp(name, "selectattr") ||
         !strcmp(name, "rejectattr")) && !truthy(x))
        return vlist(R, 0, L_GEN);  // Jinja2's map / select start with "if value:"
    if (!strcmp(name, "map")) {
        size_t n;
        val *at = NULL, *dflt = NULL;
        for (size_t k = 0; k < a->nk; k++) {
            if (!strcmp(a->kn[k], "attribute")) at = a->kv[k];
            else if (!strcmp(a->kn[k], "default")) dflt = a->kv[k];
            else if (a->np == 0) rfail(R, line, "map(): unexpected keyword argument '%s'", a->kn[k]);
        }
        val **it = iter_items(R, x, &n, line);
        val **o = ct_alloc(&R->a, ct_mul(&R->a, n + 1, sizeof *o));
        if (at) {
            if (a->np) rfail(R, line, "map(): attribute= with positional arguments");
            for (size_t k = 0; k < n; k++) {
                o[k] = attr_path(R, it[k], at, line);
                if (o[k]->t == V_UNDEF && dflt) o[k] = dflt;
            }
        } else {
            if (!a->np || a->pos[0]->t != V_STR || memchr(a->pos[0]->s, 0, a->pos[0]->n))
                rfail(R, line, "map(): needs a filter name or attribute=");
            const char *fname = a->pos[0]->s;
            if (!ct_filter_known(fname)) rfail(R, line, "map(): unknown or unsupported filter '%s'", fname);
            args sub = *a;
            sub.pos++;
            sub.np--;
            for (size_t k = 0; k < n; k++) o[k] = apply_filter(R, fname, it[k], &sub);
        }
        return as_gen(R, o, n);
    }
    if (!strcmp(name, "select") || !strcmp(name, "reject") || !strcmp(name, "selectattr") || !strcmp(name, "rejectattr")) {
        int by_attr = strstr(name, "attr") != NULL, keep_true = name[0] == 's';
        if (a->nk) rfail(R, line, "%s(): keyword arguments are not supported", name);
        size_t skip = by_attr ? 1 : 0;
        if (by_attr && !a->np) rfail(R, line, "%s(): needs an attribute name", name);
        const char *tname = NULL;
        if (a->np > skip) {
            if (a->pos[skip]->t != V_STR || memchr(a->pos[skip]->s, 0, a->pos[skip]->n))
                rfail(R, line, "%s(): the test name must be a string", name);
            tname = a->pos[skip]->s;
            if (!ct_test_known(tname)) rfail(R, line, "%s(): unknown or unsupported test '%s'", name, tname);
        }
        args sub = *a;
        sub.pos += skip + (tname ? 1 : 0);
        sub.np -= skip + (tname ? 1 : 0);
        size_t n, m = 0;
        val **it = iter_items(R, x, &n, line);
        val **o = ct_alloc(&R->a, ct_mul(&R->a, n + 1, sizeof *o));
        for (size_t k = 0; k < n; k++) {
            val *v = by_attr ? attr_path(R, it[k], a->pos[0], line) : it[k];
            int t = tname ? apply_test(R, tname, v, &sub) : truthy(v);
            if (t == keep_true) o[m++] = it[k];
        }
        return as_gen(R, o, m);
    }
    rfail(R, line, "unknown filter '%s'", name);
}

// ---- tests ----
static int apply_test(rnd *R, const char *name, val *x, const args *a0) {
    args A = *a0;
    A.what = name;
    const args *a = &A;
    int line = a->line;
    val *p = a->np ? a->pos[0] : NULL;
    if (strcmp(name, "divisibleby") && strcmp(name, "eq") && strcmp(name, "equalto") && strcmp(name, "==") &&
        strcmp(name, "ne") && strcmp(name, "!=") && strcmp(name, "lt") && strcmp(name, "lessthan") &&
        strcmp(name, "<") && strcmp(name, "le") && strcmp(name, "<=") && strcmp(name, "gt") &&
        strcmp(name, "greaterthan") && strcmp(name, ">") && strcmp(name, "ge") && strcmp(name, ">=") &&
        strcmp(name, "in") && strcmp(name, "sameas"))
        args_check(R, a, 0, NULL);
    else {
        args_check(R, a, 1, NULL);
        if (!p) rfail(R, line, "the test '%s' needs an argument", name);
    }
    if (!strcmp(name, "defined")) return x->t != V_UNDEF;
    if (!strcmp(name, "undefined")) return x->t == V_UNDEF;
    if (!strcmp(name, "none")) return x->t == V_NONE;
    if (!strcmp(name, "string")) return x->t == V_STR;
    if (!strcmp(name, "number")) return is_num(x);
    if (!strcmp(name, "integer")) return x->t == V_INT;
    if (!strcmp(name, "float")) return x->t == V_FLOAT;
    if (!strcmp(name, "boolean")) return x->t == V_BOOL;
    if (!strcmp(name, "true")) return x->t == V_BOOL && x->i;
    if (!strcmp(name, "false")) return x->t == V_BOOL && !x->i;
    if (!strcmp(name, "mapping")) return x->t == V_DICT;
    if (!strcmp(name, "sequence"))  // has len() and __getitem__: Jinja2's Undefined has both
        return x->t == V_STR || x->t == V_DICT || x->t == V_UNDEF || (x->t == V_LIST && x->flavour != L_GEN);
    if (!strcmp(name, "iterable")) return x->t == V_STR || x->t == V_DICT || x->t == V_LIST || x->t == V_UNDEF;
    if (!strcmp(name, "callable")) return x->t == V_FUNC || x->t == V_MACRO;
    // Jinja2: value % 2 == 1, value % 2 == 0, value % num == 0 (Python's % on any operands)
    if (!strcmp(name, "odd")) return veq(R, binop(R, OP_MOD, x, vint(R, 2), line), vint(R, 1));
    if (!strcmp(name, "even")) return veq(R, binop(R, OP_MOD, x, vint(R, 2), line), vint(R, 0));
    if (!strcmp(name, "divisibleby")) return veq(R, binop(R, OP_MOD, x, p, line), vint(R, 0));
    if (!strcmp(name, "eq") || !strcmp(name, "equalto") || !strcmp(name, "==")) return veq(R, x, p);
    if (!strcmp(name, "ne") || !strcmp(name, "!=")) return !veq(R, x, p);
    if (!strcmp(name, "lt") || !strcmp(name, "lessthan") || !strcmp(name, "<")) return vcmp(R, x, p, "<", line) < 0;
    if (!strcmp(name, "le") || !strcmp(name, "<=")) return vcmp(R, x, p, "<=", line) <= 0;
    if (!strcmp(name, "gt") || !strcmp(name, "greaterthan") || !strcmp(name, ">")) return vcmp(R, x, p, ">", line) > 0;
    if (!strcmp(name, "ge") || !strcmp(name, ">=")) return vcmp(R, x, p, ">=", line) >= 0;
    if (!strcmp(name, "in")) return contains(R, x, p, line);
    if (!strcmp(name, "sameas")) {
        if (x->t == V_NONE || x->t == V_BOOL || x->t == V_UNDEF) return x->t == p->t && (x->t != V_BOOL || x->i == p->i);
        return x == p;
    }
    if (!strcmp(name, "lower") || !strcmp(name, "upper")) {
        // Python's islower() / isupper(), ASCII letters only
        val *s = as_str(R, x, line);
        int cased = 0;
        for (size_t k = 0; k < s->n; k++) {
            unsigned char c = (unsigned char)s->s[k];
            if (c >= 0x80) rfail(R, line, "the test '%s' on non-ASCII text is not supported", name);
            int lo = c >= 'a' && c <= 'z', up = c >= 'A' && c <= 'Z';
            if ((name[0] == 'l' && up) || (name[0] == 'u' && lo)) return 0;
            cased |= lo | up;
        }
        return cased;
    }
    rfail(R, line, "unknown test '%s'", name);
}

static val *eval(rnd *R, frame *f, const ct_node *n) {
    step(R, n->line);
    switch (n->kind) {
    case E_STR: {
        val *v = vnew(R, V_STR);
        v->s = n->s;
        v->n = n->n;
        return v;
    }
    case E_INT: return vint(R, n->i);
    case E_FLOAT: return vfloat(R, n->f);
    case E_BOOL: return vbool((int)n->i);
    case E_NONE: return &V_NONE_;
    case E_NAME: return lookup(R, f, n->s);
    case E_ATTR: return get_attr(R, eval(R, f, n->a), n->s, n->line);
    case E_INDEX: {
        val *o = eval(R, f, n->a);
        return get_item(R, o, eval(R, f, n->b), n->line);
    }
    case E_SLICE: {
        val *o = eval(R, f, n->a);
        val *a = n->b ? eval(R, f, n->b) : NULL, *b = n->c ? eval(R, f, n->c) : NULL, *c = n->d ? eval(R, f, n->d) : NULL;
        if (n->op && !(o->t == V_STR || (o->t == V_LIST && o->flavour != L_GEN)))
            return vundef(R, "'%s' object cannot be sliced", type_name(o));
        return do_slice(R, o, a, b, c, n->line);
    }
    case E_CALL: {
        val *fn;
        char what[80];
        if (n->a->kind == E_ATTR) snprintf(what, sizeof what, "%s", n->a->s);
        else if (n->a->kind == E_NAME) snprintf(what, sizeof what, "%s", n->a->s);
        else snprintf(what, sizeof what, "the called object");
        fn = eval(R, f, n->a);
        args a = {.what = what};
        eval_args(R, f, n, &a);
        a.what = what;
        return call_value(R, fn, &a);
    }
    case E_FILTER: {
        val *x = eval(R, f, n->a);
        args a = {0};
        eval_args(R, f, n, &a);
        return apply_filter(R, n->s, x, &a);
    }
    case E_TEST: {
        val *x = eval(R, f, n->a);
        args a = {0};
        eval_args(R, f, n, &a);
        int r = apply_test(R, n->s, x, &a);
        return vbool(n->op ? !r : r);
    }
    case E_BIN: {
        val *a = eval(R, f, n->a);
        return binop(R, n->op, a, eval(R, f, n->b), n->line);
    }
    case E_NOT: return vbool(!truthy(eval(R, f, n->a)));
    case E_NEG:
    case E_POS: {
        val *x = eval(R, f, n->a);
        if (x->t == V_INT || x->t == V_BOOL) {
            if (n->kind == E_POS) return vint(R, x->i);
            if (x->i == INT64_MIN) rfail(R, n->line, "integer overflow in unary -");
            return vint(R, -x->i);
        }
        if (x->t == V_FLOAT) return vfloat(R, n->kind == E_NEG ? -x->f : x->f);
        if (x->t == V_UNDEF) rfail(R, n->line, "%s", x->s);
        rfail(R, n->line, "bad operand type for unary %c: '%s'", n->kind == E_NEG ? '-' : '+', type_name(x));
    }
    case E_AND: {
        val *a = eval(R, f, n->a);
        return truthy(a) ? eval(R, f, n->b) : a;
    }
    case E_OR: {
        val *a = eval(R, f, n->a);
        return truthy(a) ? a : eval(R, f, n->b);
    }
    case E_COND:
        if (truthy(eval(R, f, n->a))) return eval(R, f, n->b);
        return n->c ? eval(R, f, n->c) : vundef(R, "the inline if expression evaluated to false and no else section was defined");
    case E_LIST:
    case E_TUPLE: {
        val *l = vlist(R, n->body.n, n->kind == E_LIST ? L_LIST : L_TUPLE);
        for (size_t k = 0; k < n->body.n; k++) l->items[k] = eval(R, f, n->body.p[k]);
        return l;
    }
    case E_DICT: {
        val *d = vdict(R, V_DICT);
        for (size_t k = 0; k < n->body.n; k++) {
            val *key = eval(R, f, n->body.p[k]);
            if (key->t == V_LIST && key->flavour != L_TUPLE) rfail(R, n->line, "unhashable type: 'list'");
            if (key->t == V_DICT || key->t == V_NS || key->t == V_UNDEF) rfail(R, n->line, "unhashable type: '%s'", type_name(key));
            dict_put(R, d, key, eval(R, f, n->other.p[k]));
        }
        return d;
    }
    default: break;
    }
    WGT_ASSERT(0, "chat template: a statement node evaluated as an expression");
    return NULL;
}

static void check_output(rnd *R, int line) {
    if (R->out->n > R->max_output) rfail(R, line, "the output is larger than %zu bytes (the limit)", R->max_output);
}

// binds the targets of a for / set to v (one name: v itself; several: v unpacked)
static void bind(rnd *R, frame *f, ct_names names, val *v, int line) {
    if (names.n == 1) { frame_set(R, f, names.p[0], v); return; }
    size_t n;
    if (v->t == V_UNDEF) rfail(R, line, "%s", v->s);
    val **it = iter_items(R, v, &n, line);
    if (n != names.n) rfail(R, line, "%s values to unpack (expected %zu, got %zu)", n > names.n ? "too many" : "not enough", names.n, n);
    for (size_t k = 0; k < n; k++) frame_set(R, f, names.p[k], it[k]);
}

static void exec_for(rnd *R, frame *f, const ct_node *n) {
    val *seq = eval(R, f, n->a);
    size_t cnt;
    val **items = iter_items(R, seq, &cnt, n->line);
    if (n->b) {  // {% for x in xs if cond %}: the loop sees only the items that pass
        val **kept = ct_alloc(&R->a, ct_mul(&R->a, cnt + 1, sizeof *kept));
        size_t m = 0;
        for (size_t k = 0; k < cnt; k++) {
            step(R, n->line);
            frame tf = {.parent = f};
            bind(R, &tf, n->names, items[k], n->line);
            if (truthy(eval(R, &tf, n->b))) kept[m++] = items[k];
        }
        items = kept;
        cnt = m;
    }
    if (!cnt) { exec_body(R, f, n->other); return; }
    val *loop = vnew(R, V_LOOP);
    loop->items = items;
    loop->n = cnt;
    frame *it = ct_alloc(&R->a, sizeof *it);  // reused: nothing outlives an iteration's frame
    it->parent = f;
    for (size_t k = 0; k < cnt; k++) {
        step(R, n->line);
        it->n = 0;
        loop->pos = k;
        frame_set(R, it, "loop", loop);
        bind(R, it, n->names, items[k], n->line);
        exec_body(R, it, n->body);
        if (R->ctl == CTL_BREAK) { R->ctl = 0; break; }
        R->ctl = 0;
    }
}

static void exec_node(rnd *R, frame *f, const ct_node *n) {
    switch (n->kind) {
    case N_TEXT:
        sb_put(R, R->out, n->s, n->n, NULL);
        check_output(R, n->line);
        return;
    case N_OUTPUT: {
        val *v = eval(R, f, n->a);
        to_str(R, R->out, v, 0, n->line);
        check_output(R, n->line);
        return;
    }
    case N_IF:
        step(R, n->line);
        exec_body(R, f, truthy(eval(R, f, n->a)) ? n->body : n->other);
        return;
    case N_FOR: exec_for(R, f, n); return;
    case N_SET: bind(R, f, n->names, eval(R, f, n->a), n->line); return;
    case N_SET_ATTR: {
        val *ns = lookup(R, f, n->s);
        if (ns->t != V_NS) rfail(R, n->line, "cannot assign attribute on non-namespace object '%s'", n->s);
        dict_put(R, ns, vcstr(R, n->s2), eval(R, f, n->a));
        return;
    }
    case N_SET_BLOCK: {
        sbuf cap = {0}, *saved = R->out;
        R->out = &cap;
        exec_body(R, f, n->body);
        R->out = saved;
        frame_set(R, f, n->names.p[0], sb_val(R, &cap));
        return;
    }
    case N_MACRO: {
        val *m = vnew(R, V_MACRO);
        m->macro = n;
        frame_set(R, f, n->s, m);
        return;
    }
    case N_BREAK: R->ctl = CTL_BREAK; return;
    case N_CONTINUE: R->ctl = CTL_CONTINUE; return;
    case N_GENERATION: {
        size_t start = R->out->n;
        exec_body(R, f, n->body);
        if (R->out == R->main_out && R->out->n > start) {
            if (R->n_gen == R->cap_gen) {
                size_t cap = R->cap_gen ? R->cap_gen * 2 : 8;
                chat_template_span *g = ct_alloc(&R->a, ct_mul(&R->a, cap, sizeof *g));
                if (R->n_gen) memcpy(g, R->gen, R->n_gen * sizeof *g);
                R->gen = g;
                R->cap_gen = cap;
            }
            R->gen[R->n_gen++] = (chat_template_span){-1, start, R->out->n};
        }
        return;
    }
    default: WGT_ASSERT(0, "chat template: an expression node executed as a statement");
    }
}

static void exec_body(rnd *R, frame *f, ct_nodes body) {
    for (size_t k = 0; k < body.n; k++) {
        exec_node(R, f, body.p[k]);
        if (R->ctl) return;
    }
}

// ---- public API ----
wgt_status chat_template_from_config(const cJSON *config, const char *name, const char **text) {
    *text = NULL;
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(config, "chat_template");
    if (cJSON_IsString(ct)) {
        if (name && strcmp(name, "default"))
            return wgt_fail(WGT_ERR_CONFIG, "chat template: tokenizer_config.json has one chat_template, not one named '%s'", name);
        *text = ct->valuestring;
        return WGT_OK;
    }
    if (cJSON_IsArray(ct)) {
        const char *want = name ? name : "default";
        for (const cJSON *e = ct->child; e; e = e->next) {
            const cJSON *n = cJSON_GetObjectItemCaseSensitive(e, "name"), *t = cJSON_GetObjectItemCaseSensitive(e, "template");
            if (cJSON_IsString(n) && cJSON_IsString(t) && !strcmp(n->valuestring, want)) {
                *text = t->valuestring;
                return WGT_OK;
            }
        }
        return wgt_fail(WGT_ERR_CONFIG, "chat template: tokenizer_config.json has no chat_template named '%s'", want);
    }
    return wgt_fail(WGT_ERR_CONFIG,
                    "chat template: tokenizer_config.json has no chat_template (the model defines no chat format): "
                    "give a template explicitly");
}

wgt_status chat_template_add_special_tokens(const cJSON *config, cJSON *context) {
    static const char *const keys[] = {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"};
    if (!cJSON_IsObject(context)) return wgt_fail(WGT_ERR_ARG, "chat template: the context must be a JSON object");
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(config, keys[k]);
        if (cJSON_IsObject(v)) v = cJSON_GetObjectItemCaseSensitive(v, "content");
        if (!v || cJSON_IsNull(v) || cJSON_GetObjectItemCaseSensitive(context, keys[k])) continue;
        if (!cJSON_IsString(v))
            return wgt_fail(WGT_ERR_FORMAT, "tokenizer_config.json: %s must be a string or an object with a \"content\" string", keys[k]);
        cJSON_AddStringToObject(context, keys[k], v->valuestring);
    }
    const cJSON *add = cJSON_GetObjectItemCaseSensitive(config, "additional_special_tokens");
    if (cJSON_IsArray(add) && !cJSON_GetObjectItemCaseSensitive(context, "additional_special_tokens")) {
        cJSON *list = cJSON_CreateArray();
        for (const cJSON *e = add->child; e; e = e->next) {
            const cJSON *v = cJSON_IsObject(e) ? cJSON_GetObjectItemCaseSensitive(e, "content") : e;
            if (!cJSON_IsString(v)) {
                cJSON_Delete(list);
                return wgt_fail(WGT_ERR_FORMAT, "tokenizer_config.json: additional_special_tokens holds something other than a token");
            }
            cJSON_AddItemToArray(list, cJSON_CreateString(v->valuestring));
        }
        cJSON_AddItemToObject(context, "additional_special_tokens", list);
    }
    return WGT_OK;
}

wgt_status chat_template_parse(const char *src, size_t n, chat_template **out) {
    *out = NULL;
    if (!src) return wgt_fail(WGT_ERR_ARG, "chat template: no template text");
    if (n > ((size_t)16 << 20)) return wgt_fail(WGT_ERR_FORMAT, "chat template: %zu bytes is more than the 16 MiB supported", n);
    if (!u8valid(src, n)) return wgt_fail(WGT_ERR_FORMAT, "chat template: the template is not valid UTF-8");
    chat_template *t = wgt_calloc(1, sizeof *t);
    t->arena.cap = (size_t)1 << 30;
    wgt_status st = ct_parse(t, src, n);
    if (st != WGT_OK) {
        chat_template_free(t);
        return st;
    }
    *out = t;
    return WGT_OK;
}

void chat_template_free(chat_template *t) {
    if (!t) return;
    ct_arena_free(&t->arena);
    free(t);
}

void chat_template_output_free(chat_template_output *o) {
    if (!o) return;
    free(o->text);
    free(o->source);
    free(o->spans);
    free(o->generation);
    memset(o, 0, sizeof *o);
}

wgt_status chat_template_render(const chat_template *t, const cJSON *context, const chat_template_opts *opts,
                                chat_template_output *out) {
    memset(out, 0, sizeof *out);
    if (!t) return wgt_fail(WGT_ERR_ARG, "chat template: no template");
    if (context && !cJSON_IsObject(context)) return wgt_fail(WGT_ERR_ARG, "chat template: the context must be a JSON object");
    chat_template_limits lim = {20000000, (size_t)256 << 20, (size_t)64 << 20, 64};
    if (opts && opts->limits) {
        const chat_template_limits *l = opts->limits;
        if (l->max_steps) lim.max_steps = l->max_steps;
        if (l->max_memory) lim.max_memory = l->max_memory;
        if (l->max_output) lim.max_output = l->max_output;
        if (l->max_call_depth > 0) lim.max_call_depth = l->max_call_depth;
        if (lim.max_call_depth > 1000) return wgt_fail(WGT_ERR_ARG, "chat template: a call depth limit of %d is over 1000", lim.max_call_depth);
    }
    rnd *R = wgt_calloc(1, sizeof *R);
    R->a.cap = lim.max_memory;
    R->a.fail = &R->jb;
    R->max_steps = lim.max_steps;
    R->max_output = lim.max_output;
    R->max_depth = lim.max_call_depth;
    R->now = opts ? opts->now : -1;
    wgt_status st = WGT_OK;
    if (setjmp(R->jb)) {
        st = WGT_ERR_FORMAT;
        goto done;
    }
    {
        frame *globals = ct_alloc(&R->a, sizeof *globals);
        frame_set(R, globals, "range", vfunc(R, F_RANGE, NULL));
        frame_set(R, globals, "namespace", vfunc(R, F_NAMESPACE, NULL));
        frame_set(R, globals, "dict", vfunc(R, F_DICT, NULL));
        frame_set(R, globals, "raise_exception", vfunc(R, F_RAISE, NULL));
        frame_set(R, globals, "strftime_now", vfunc(R, F_STRFTIME, NULL));
        R->root = ct_alloc(&R->a, sizeof *R->root);
        R->root->parent = globals;
        for (const cJSON *c = context ? context->child : NULL; c; c = c->next) {
            const char *key = c->string ? c->string : "";
            if (!u8valid(key, strlen(key))) rfail(R, 0, "a key in the context is not valid UTF-8");
            val *v;
            if (!strcmp(key, "messages") && cJSON_IsArray(c)) {
                size_t n = (size_t)cJSON_GetArraySize(c), k = 0;
                if (n > INT32_MAX) rfail(R, 0, "more than 2^31 messages");
                v = vlist(R, n, L_LIST);
                for (const cJSON *m = c->child; m && k < n; m = m->next, k++) v->items[k] = message_from_json(R, m, (int32_t)k);
            } else v = from_json(R, c, 1, -1);
            size_t kl = strlen(key);
            char *name = ct_alloc(&R->a, kl + 1);
            memcpy(name, key, kl);
            frame_set(R, R->root, name, v);
        }
        sbuf main_out = {0};
        R->out = R->main_out = &main_out;
        exec_body(R, R->root, t->body);
        // copy out of the arena
        size_t n = main_out.n;
        out->text = wgt_malloc(n + 1);
        if (n) memcpy(out->text, main_out.p, n);
        out->text[n] = 0;
        out->n = n;
        out->source = wgt_malloc((n ? n : 1) * sizeof *out->source);
        for (size_t k = 0; k < n; k++) out->source[k] = main_out.tag ? main_out.tag[k] : -1;
        size_t ns = 0;
        for (size_t k = 0; k < n; k++)
            if (out->source[k] >= 0 && (k == 0 || out->source[k - 1] != out->source[k])) ns++;
        out->spans = wgt_malloc((ns ? ns : 1) * sizeof *out->spans);
        for (size_t k = 0; k < n; k++) {
            if (out->source[k] < 0) continue;
            if (k == 0 || out->source[k - 1] != out->source[k])
                out->spans[out->n_spans++] = (chat_template_span){out->source[k], k, k + 1};
            else out->spans[out->n_spans - 1].end = k + 1;
        }
        out->generation = wgt_malloc((R->n_gen ? R->n_gen : 1) * sizeof *out->generation);
        if (R->n_gen) memcpy(out->generation, R->gen, R->n_gen * sizeof *R->gen);
        out->n_generation = R->n_gen;
    }
done:
    ct_arena_free(&R->a);
    free(R);
    if (st != WGT_OK) chat_template_output_free(out);
    return st;
}
