// chat_template_parse.c — the lexer and parser of the chat-template interpreter: Jinja2's
// syntax with the settings transformers uses (trim_blocks, lstrip_blocks, no trailing newline
// kept, newlines normalized to "\n"), producing the tree of chat_template_impl.h. Anything
// outside the supported subset is refused here with its line, so that a render never meets it.
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "data/chat_template_impl.h"

// ---- arena ----
struct ct_arena_block {
    ct_arena_block *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

static _Noreturn void ct_arena_fail(ct_arena *a, const char *fmt, size_t v) {
    wgt_fail(WGT_ERR_FORMAT, fmt, v);
    longjmp(*a->fail, 1);
}

size_t ct_mul(ct_arena *a, size_t x, size_t y) {
    if (y && x > SIZE_MAX / y) ct_arena_fail(a, "chat template: a value of more than %zu bytes", SIZE_MAX);
    return x * y;
}

void *ct_alloc(ct_arena *a, size_t n) {
    void *p = ct_alloc_raw(a, n);
    memset(p, 0, n);
    return p;
}

void *ct_alloc_raw(ct_arena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (n > a->cap || a->used > a->cap - n)
        ct_arena_fail(a, "chat template: rendering needs more than %zu MiB of memory (the limit; the template builds too large values)",
                      a->cap >> 20);
    a->used += n;
    ct_arena_block *b = a->head;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        b = malloc(sizeof *b + cap);
        if (!b) ct_arena_fail(a, "chat template: out of memory allocating %zu bytes", cap);
        b->next = a->head;
        b->used = 0;
        b->cap = cap;
        a->head = b;
    }
    void *p = b->data + b->used;
    b->used += n;
    return p;
}

void ct_arena_free(ct_arena *a) {
    for (ct_arena_block *b = a->head, *nx; b; b = nx) {
        nx = b->next;
        free(b);
    }
    a->head = NULL;
    a->used = 0;
}

// ---- lexer ----
enum { T_DATA, T_VAR_BEGIN, T_VAR_END, T_BLOCK_BEGIN, T_BLOCK_END, T_NAME, T_STR, T_INT, T_FLOAT, T_OP, T_EOF };
static const char *const tok_names[] = {"text", "'{{'", "'}}'", "'{%'", "'%}'", "name", "string", "integer", "float",
                                        "operator", "end of template"};

typedef struct tok {
    int type, line;
    const char *s;  // T_DATA / T_STR: decoded text (arena); T_NAME / T_OP: the source text
    size_t n;
    int64_t i;
    double f;
} tok;

typedef struct lexer {
    ct_arena *a;
    jmp_buf *fail;
    const char *src;
    size_t n, pos;
    int line;
    tok *toks;
    size_t nt, cap;
} lexer;

static _Noreturn void lx_fail(jmp_buf *fail, int line, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    wgt_fail(WGT_ERR_FORMAT, "chat template line %d: %s", line, msg);
    longjmp(*fail, 1);
}

static tok *lx_push(lexer *L, int type, int line) {
    if (L->nt == L->cap) {
        size_t cap = L->cap ? L->cap * 2 : 256;
        tok *t = ct_alloc(L->a, ct_mul(L->a, cap, sizeof *t));
        if (L->nt) memcpy(t, L->toks, L->nt * sizeof *t);
        L->toks = t;
        L->cap = cap;
    }
    tok *t = &L->toks[L->nt++];
    memset(t, 0, sizeof *t);
    t->type = type;
    t->line = line;
    return t;
}

static int count_nl(const char *s, size_t n) {
    int k = 0;
    for (size_t i = 0; i < n; i++) k += s[i] == '\n';
    return k;
}

static int is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

// Python's str.isspace() over one UTF-8 character at s (n bytes left): its byte length, or 0.
static size_t py_space_len(const unsigned char *s, size_t n) {
    if (!n) return 0;
    if (s[0] < 0x80) return (is_space(s[0]) || (s[0] >= 0x1c && s[0] <= 0x1f)) ? 1 : 0;
    uint32_t c;
    size_t k;
    if ((s[0] & 0xe0) == 0xc0 && n >= 2) { c = ((s[0] & 0x1fu) << 6) | (s[1] & 0x3fu); k = 2; }
    else if ((s[0] & 0xf0) == 0xe0 && n >= 3) { c = ((s[0] & 0x0fu) << 12) | ((s[1] & 0x3fu) << 6) | (s[2] & 0x3fu); k = 3; }
    else return 0;
    int sp = c == 0x85 || c == 0xa0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 ||
             c == 0x202f || c == 0x205f || c == 0x3000;
    return sp ? k : 0;
}
// Length of s[0..n) without its trailing Python whitespace.
static size_t rstrip_len(const char *s, size_t n) {
    for (;;) {
        size_t m = 0;
        for (size_t k = 1; k <= 3 && k <= n; k++)
            if (py_space_len((const unsigned char *)s + n - k, k) == k) { m = k; break; }
        if (!m) return n;
        n -= m;
    }
}

static void lx_data(lexer *L, const char *s, size_t n, int line) {
    if (!n) return;
    tok *t = lx_push(L, T_DATA, line);
    t->s = s;
    t->n = n;
}

// Decodes a Python string literal body (the escapes Jinja2 accepts through "unicode-escape").
static void lx_string(lexer *L, tok *t, const char *s, size_t n, int line) {
    char *o = ct_alloc(L->a, n + 1);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\' || i + 1 >= n) { o[k++] = s[i]; continue; }
        char c = s[++i];
        uint32_t cp = 0;
        int hex = 0;
        switch (c) {
        case '\n': break;  // line continuation
        case '\\': o[k++] = '\\'; break;
        case '\'': o[k++] = '\''; break;
        case '"': o[k++] = '"'; break;
        case 'a': o[k++] = '\a'; break;
        case 'b': o[k++] = '\b'; break;
        case 'f': o[k++] = '\f'; break;
        case 'n': o[k++] = '\n'; break;
        case 'r': o[k++] = '\r'; break;
        case 't': o[k++] = '\t'; break;
        case 'v': o[k++] = '\v'; break;
        case 'x': hex = 2; break;
        case 'u': hex = 4; break;
        case 'U': hex = 8; break;
        case 'N': lx_fail(L->fail, line, "the \\N{...} string escape is not supported");
        default:
            if (c >= '0' && c <= '7') {
                int d = 0;
                while (d < 3 && i < n && s[i] >= '0' && s[i] <= '7') cp = cp * 8 + (uint32_t)(s[i++] - '0'), d++;
                i--;
                hex = -1;
            } else {
                o[k++] = '\\';
                o[k++] = c;
            }
        }
        if (hex > 0) {
            for (int d = 0; d < hex; d++) {
                char h = ++i < n ? s[i] : 0;
                int v = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
                if (v < 0) lx_fail(L->fail, line, "a truncated \\%c escape in a string", c);
                cp = cp * 16 + (uint32_t)v;
            }
        }
        if (hex) {
            if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
                lx_fail(L->fail, line, "the string escape of U+%X is not a Unicode scalar value", (unsigned)cp);
            if (cp < 0x80) o[k++] = (char)cp;
            else if (cp < 0x800) { o[k++] = (char)(0xc0 | (cp >> 6)); o[k++] = (char)(0x80 | (cp & 63)); }
            else if (cp < 0x10000) { o[k++] = (char)(0xe0 | (cp >> 12)); o[k++] = (char)(0x80 | ((cp >> 6) & 63)); o[k++] = (char)(0x80 | (cp & 63)); }
            else { o[k++] = (char)(0xf0 | (cp >> 18)); o[k++] = (char)(0x80 | ((cp >> 12) & 63)); o[k++] = (char)(0x80 | ((cp >> 6) & 63)); o[k++] = (char)(0x80 | (cp & 63)); }
        }
    }
    o[k] = 0;
    t->s = o;
    t->n = k;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_name0(unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }

// digits with single underscores between them ((\d+_)*\d+) at s[p]; returns the end, or p.
static size_t lx_digits(const char *s, size_t n, size_t p) {
    size_t q = p;
    while (q < n && is_digit(s[q])) {
        q++;
        if (q + 1 < n && s[q] == '_' && is_digit(s[q + 1])) q++;
    }
    return q;
}

// Tokens of one {{ }} / {% %} tag from L->pos up to its end; end_var selects the closing "}}".
// Returns the end of the closing tag (after any whitespace it strips) and sets *nl when that
// end is a newline (Jinja2's "line starting" for the next lstrip).
static void lx_tag(lexer *L, int end_var, int *nl) {
    const char *s = L->src;
    size_t n = L->n, p = L->pos;
    int depth = 0, open_line = L->line;
    for (;;) {
        while (p < n && is_space((unsigned char)s[p])) { if (s[p] == '\n') L->line++; p++; }
        if (p >= n) lx_fail(L->fail, open_line, "unexpected end of template: the %s tag is not closed", end_var ? "{{" : "{%");
        if (depth == 0) {
            const char *e = end_var ? "}}" : "%}";
            int minus = s[p] == '-' && p + 2 < n && s[p + 1] == e[0] && s[p + 2] == e[1];
            int plus = !end_var && s[p] == '+' && p + 2 < n && s[p + 1] == e[0] && s[p + 2] == e[1];
            if (minus || plus || (p + 1 < n && s[p] == e[0] && s[p + 1] == e[1])) {
                lx_push(L, end_var ? T_VAR_END : T_BLOCK_END, L->line);
                p += 2 + (size_t)(minus || plus);
                *nl = 0;
                if (minus) {
                    size_t q = p;
                    for (size_t k; (k = py_space_len((const unsigned char *)s + q, n - q)) > 0; q += k) L->line += s[q] == '\n';
                    *nl = q > p && s[q - 1] == '\n';
                    p = q;
                } else if (!end_var && !plus && p < n && s[p] == '\n') {  // trim_blocks
                    p++;
                    L->line++;
                    *nl = 1;
                }
                L->pos = p;
                return;
            }
        }
        char c = s[p];
        if (c == '\'' || c == '"') {
            size_t q = p + 1;
            while (q < n && s[q] != c) q += s[q] == '\\' ? 2 : 1;
            if (q >= n) lx_fail(L->fail, L->line, "a string is not closed");
            tok *t = lx_push(L, T_STR, L->line);
            lx_string(L, t, s + p + 1, q - p - 1, L->line);
            L->line += count_nl(s + p, q - p);
            p = q + 1;
        } else if (is_digit(c)) {
            size_t q = lx_digits(s, n, p), e = q;
            int is_float = 0, base = 10;
            if (q + 1 < n && s[q] == '.' && is_digit(s[q + 1])) { e = lx_digits(s, n, q + 1); is_float = 1; }
            if (e < n && (s[e] == 'e' || s[e] == 'E')) {
                size_t x = e + 1;
                if (x < n && (s[x] == '+' || s[x] == '-')) x++;
                size_t y = lx_digits(s, n, x);
                if (y > x) { e = y; is_float = 1; }
            }
            if (!is_float && c == '0') {
                // Jinja2's integers: 0b.., 0o.., 0x.., [1-9](_?digit)* or 0(_?0)*
                char pfx = p + 1 < n ? (char)(s[p + 1] | 32) : 0;
                base = pfx == 'b' ? 2 : pfx == 'o' ? 8 : pfx == 'x' ? 16 : 10;
                e = p + 1;
                if (base != 10) {
                    size_t x = p + 2, y = x;
                    for (;;) {
                        size_t z = y + (y < n && s[y] == '_');
                        char d = z < n ? (char)(s[z] | 32) : 0;
                        int ok = base == 2 ? (d == '0' || d == '1') : base == 8 ? (d >= '0' && d <= '7')
                               : ((d >= '0' && d <= '9') || (d >= 'a' && d <= 'f'));
                        if (!ok) break;
                        y = z + 1;
                    }
                    if (y > x) e = y;
                    else { base = 10; e = p + 1; }
                }
                if (base == 10)
                    while (e < n && (s[e] == '0' || (s[e] == '_' && e + 1 < n && s[e + 1] == '0'))) e++;
            }
            char buf[128];
            size_t k = 0;
            for (size_t i = p; i < e; i++)
                if (s[i] != '_') {
                    if (k + 1 >= sizeof buf) lx_fail(L->fail, L->line, "a number literal longer than 100 digits");
                    buf[k++] = s[i];
                }
            buf[k] = 0;
            tok *t = lx_push(L, is_float ? T_FLOAT : T_INT, L->line);
            errno = 0;
            if (is_float) t->f = strtod(buf, NULL);
            else {
                t->i = strtoll(base == 10 ? buf : buf + 2, NULL, base);
                if (errno == ERANGE) lx_fail(L->fail, L->line, "the integer literal %s does not fit 64 bits", buf);
            }
            p = e;
        } else if (is_name0((unsigned char)c)) {
            size_t q = p;
            while (q < n && (is_name0((unsigned char)s[q]) || is_digit(s[q]))) q++;
            tok *t = lx_push(L, T_NAME, L->line);
            t->s = s + p;
            t->n = q - p;
            p = q;
        } else {
            static const char *const ops2[] = {"//", "**", "==", "!=", "<=", ">="};
            size_t len = 0;
            for (size_t k = 0; k < 6; k++)
                if (p + 1 < n && s[p] == ops2[k][0] && s[p + 1] == ops2[k][1]) len = 2;
            if (!len) {
                if (!strchr("+-/*%~[](){}<>=.:|,;", c) || !c) {
                    if ((unsigned char)c >= 0x20 && (unsigned char)c < 0x7f)
                        lx_fail(L->fail, L->line, "unexpected character '%c' in a tag", c);
                    lx_fail(L->fail, L->line, "unexpected byte 0x%02x in a tag", (unsigned char)c);
                }
                len = 1;
                if (c == '(' || c == '[' || c == '{') depth++;
                if (c == ')' || c == ']' || c == '}') {
                    if (depth == 0) lx_fail(L->fail, L->line, "unexpected '%c'", c);
                    depth--;
                }
            }
            tok *t = lx_push(L, T_OP, L->line);
            t->s = s + p;
            t->n = len;
            p += len;
        }
    }
}

// Is the text at s[p..] "{%" [-+]? ws* word ws* [-]? "%}"? Returns the end of the tag or 0.
static size_t lx_simple_tag(const char *s, size_t n, size_t p, const char *word, int *minus_before, int *minus_after) {
    if (p + 2 > n || s[p] != '{' || s[p + 1] != '%') return 0;
    size_t q = p + 2;
    *minus_before = q < n && s[q] == '-';
    if (q < n && (s[q] == '-' || s[q] == '+')) q++;
    while (q < n && is_space((unsigned char)s[q])) q++;
    size_t w = strlen(word);
    if (q + w > n || memcmp(s + q, word, w) != 0) return 0;
    q += w;
    while (q < n && is_space((unsigned char)s[q])) q++;
    *minus_after = q < n && s[q] == '-';
    if (*minus_after) q++;
    if (q + 2 > n || s[q] != '%' || s[q + 1] != '}') return 0;
    return q + 2;
}

static void lx_run(lexer *L) {
    const char *s = L->src;
    size_t n = L->n;
    int line_starting = 1;
    while (L->pos < n) {
        size_t p = L->pos, q = p;
        while (q + 1 < n && !(s[q] == '{' && (s[q + 1] == '{' || s[q + 1] == '%' || s[q + 1] == '#'))) q++;
        if (q + 1 >= n) {
            lx_data(L, s + p, n - p, L->line);
            L->line += count_nl(s + p, n - p);
            L->pos = n;
            break;
        }
        char kind = s[q + 1], sign = q + 2 < n ? s[q + 2] : 0;
        size_t tn = q - p;
        int line = L->line;
        if (sign == '-') tn = rstrip_len(s + p, tn);
        else if (sign != '+' && kind != '{') {
            size_t l_pos = tn;
            while (l_pos > 0 && s[p + l_pos - 1] != '\n') l_pos--;
            if (l_pos > 0 || line_starting) {
                size_t k = l_pos, m;
                while (k < tn && (m = py_space_len((const unsigned char *)s + p + k, tn - k)) > 0) k += m;
                if (k == tn) tn = l_pos;
            }
        }
        lx_data(L, s + p, tn, line);
        L->line += count_nl(s + p, q - p);
        int mb, ma;
        size_t raw_end = kind == '%' ? lx_simple_tag(s, n, q, "raw", &mb, &ma) : 0;
        if (raw_end) {  // {% raw %} ... {% endraw %}: the text in between verbatim
            size_t r = raw_end;
            if (ma) while (r < n && is_space((unsigned char)s[r])) r++;
            else if (r < n && s[r] == '\n') r++;  // trim_blocks
            size_t e = r, end = 0;
            for (; e < n; e++)
                if ((end = lx_simple_tag(s, n, e, "endraw", &mb, &ma)) > 0) break;
            if (!end) lx_fail(L->fail, line, "{%% raw %%} without {%% endraw %%}");
            size_t dn = e - r;
            if (mb) dn = rstrip_len(s + r, dn);
            lx_data(L, s + r, dn, L->line);
            L->line += count_nl(s + q, end - q);
            p = end;
            if (ma) while (p < n && is_space((unsigned char)s[p])) L->line += s[p++] == '\n';
            else if (p < n && s[p] == '\n') { p++; L->line++; }
            line_starting = p > 0 && s[p - 1] == '\n';
            L->pos = p;
            continue;
        }
        if (kind == '#') {
            size_t e = q + 2;
            if (e + (sign == '-' || sign == '+') == n) {  // "{#" ending the template: Jinja2 drops it
                L->pos = n;
                break;
            }
            while (e + 1 < n && !(s[e] == '#' && s[e + 1] == '}')) e++;
            if (e + 1 >= n) lx_fail(L->fail, line, "a comment {# is not closed");
            int minus = e > q + 2 && s[e - 1] == '-', plus = e > q + 2 && s[e - 1] == '+';
            L->line += count_nl(s + q, e - q);
            p = e + 2;
            line_starting = 0;
            if (minus) {
                size_t k;
                while ((k = py_space_len((const unsigned char *)s + p, n - p)) > 0) { L->line += s[p] == '\n'; p += k; line_starting = 1; }
                line_starting = line_starting && s[p - 1] == '\n';
            } else if (!plus && p < n && s[p] == '\n') { p++; L->line++; line_starting = 1; }
            L->pos = p;
            continue;
        }
        lx_push(L, kind == '{' ? T_VAR_BEGIN : T_BLOCK_BEGIN, L->line);
        L->pos = q + 2 + (sign == '-' || sign == '+');
        lx_tag(L, kind == '{', &line_starting);
    }
    lx_push(L, T_EOF, L->line);
}

// ---- parser ----
typedef struct parser {
    ct_arena *a;
    jmp_buf *fail;
    tok *t;
    size_t pos;
    int depth, loops;
    int soft;  // inside an if or an inline if, where Jinja2 leaves unknown filters / tests to the render
} parser;

#define PMAX_DEPTH 100

static tok *pk(parser *P) { return &P->t[P->pos]; }
static int is_op(const tok *t, const char *op) { return t->type == T_OP && t->n == strlen(op) && memcmp(t->s, op, t->n) == 0; }
static int is_name(const tok *t, const char *nm) { return t->type == T_NAME && t->n == strlen(nm) && memcmp(t->s, nm, t->n) == 0; }
static const char *tok_desc(const tok *t, char *buf, size_t cap) {
    if (t->type == T_NAME || t->type == T_OP) snprintf(buf, cap, "'%.*s'", (int)(t->n > 40 ? 40 : t->n), t->s);
    else snprintf(buf, cap, "%s", tok_names[t->type]);
    return buf;
}
static _Noreturn void p_unexpected(parser *P, const char *want) {
    char b[64];
    lx_fail(P->fail, pk(P)->line, "expected %s, found %s", want, tok_desc(pk(P), b, sizeof b));
}
static void p_op(parser *P, const char *op) {
    if (!is_op(pk(P), op)) {
        char w[16];
        snprintf(w, sizeof w, "'%s'", op);
        p_unexpected(P, w);
    }
    P->pos++;
}
static int p_skip_op(parser *P, const char *op) {
    if (is_op(pk(P), op)) { P->pos++; return 1; }
    return 0;
}
static int p_skip_name(parser *P, const char *nm) {
    if (is_name(pk(P), nm)) { P->pos++; return 1; }
    return 0;
}
static const char *p_name(parser *P) {
    tok *t = pk(P);
    if (t->type != T_NAME) p_unexpected(P, "a name");
    P->pos++;
    char *s = ct_alloc(P->a, t->n + 1);
    memcpy(s, t->s, t->n);
    return s;
}
static void p_end(parser *P) {
    if (pk(P)->type != T_BLOCK_END) p_unexpected(P, "the end of the tag '%}'");
    P->pos++;
}

static ct_node *mk(parser *P, ct_kind k, int line) {
    ct_node *n = ct_alloc(P->a, sizeof *n);
    n->kind = k;
    n->line = line;
    return n;
}

typedef struct vec {
    void **p;
    size_t n, cap;
} vec;
static void vpush(parser *P, vec *v, void *x) {
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 4;
        void **p = ct_alloc(P->a, ct_mul(P->a, cap, sizeof *p));
        if (v->n) memcpy(p, v->p, v->n * sizeof *p);
        v->p = p;
        v->cap = cap;
    }
    v->p[v->n++] = x;
}
static ct_nodes as_nodes(vec v) { return (ct_nodes){(ct_node **)v.p, v.n}; }
static ct_names as_names(vec v) { return (ct_names){(const char **)v.p, v.n}; }

static ct_node *p_expr(parser *P);
static ct_node *p_or(parser *P);
static ct_node *p_unary(parser *P, int with_filter);

static void p_enter(parser *P) {
    if (++P->depth > PMAX_DEPTH) lx_fail(P->fail, pk(P)->line, "expressions or blocks nested more than %d deep", PMAX_DEPTH);
}

// (args) of a call, filter or test: positional then name=value
static void p_args(parser *P, ct_node *n) {
    vec pos = {0}, kn = {0}, kv = {0};
    p_op(P, "(");
    while (!is_op(pk(P), ")")) {
        if (pos.n + kn.n) p_op(P, ",");
        if (is_op(pk(P), ")")) break;
        if (pk(P)->type == T_NAME && is_op(&P->t[P->pos + 1], "=")) {
            vpush(P, &kn, (void *)p_name(P));
            P->pos++;
            vpush(P, &kv, p_expr(P));
        } else {
            if (kn.n) lx_fail(P->fail, pk(P)->line, "a positional argument after a keyword argument");
            if (is_op(pk(P), "*") || is_op(pk(P), "**")) lx_fail(P->fail, pk(P)->line, "*args / **kwargs in a call are not supported");
            vpush(P, &pos, p_expr(P));
        }
    }
    P->pos++;
    n->body = as_nodes(pos);
    n->names = as_names(kn);
    n->other = as_nodes(kv);
}

// a literal, or a list / tuple / dict of literals
static int is_const(const ct_node *n) {
    switch (n->kind) {
    case E_STR: case E_INT: case E_FLOAT: case E_BOOL: case E_NONE: return 1;
    case E_LIST: case E_TUPLE: case E_DICT:
        for (size_t k = 0; k < n->body.n; k++)
            if (!is_const(n->body.p[k])) return 0;
        for (size_t k = 0; k < n->other.n; k++)
            if (!is_const(n->other.p[k])) return 0;
        return 1;
    case E_NEG: case E_POS: return is_const(n->a);
    default: return 0;
    }
}

static ct_node *p_primary(parser *P) {
    tok *t = pk(P);
    ct_node *n;
    p_enter(P);
    if (t->type == T_NAME) {
        P->pos++;
        if ((t->n == 4 && (!memcmp(t->s, "true", 4) || !memcmp(t->s, "True", 4))) ||
            (t->n == 5 && (!memcmp(t->s, "false", 5) || !memcmp(t->s, "False", 5)))) {
            n = mk(P, E_BOOL, t->line);
            n->i = t->n == 4;
        } else if (t->n == 4 && (!memcmp(t->s, "none", 4) || !memcmp(t->s, "None", 4))) {
            n = mk(P, E_NONE, t->line);
        } else {
            n = mk(P, E_NAME, t->line);
            P->pos--;
            n->s = p_name(P);
            n->n = strlen(n->s);
        }
    } else if (t->type == T_STR) {
        n = mk(P, E_STR, t->line);
        // adjacent string literals concatenate, as in Python
        size_t len = 0, k = P->pos;
        while (P->t[k].type == T_STR) len += P->t[k++].n;
        char *s = ct_alloc(P->a, len + 1);
        len = 0;
        while (pk(P)->type == T_STR) { memcpy(s + len, pk(P)->s, pk(P)->n); len += pk(P)->n; P->pos++; }
        n->s = s;
        n->n = len;
    } else if (t->type == T_INT) {
        n = mk(P, E_INT, t->line);
        n->i = t->i;
        P->pos++;
    } else if (t->type == T_FLOAT) {
        n = mk(P, E_FLOAT, t->line);
        n->f = t->f;
        P->pos++;
    } else if (is_op(t, "(")) {
        P->pos++;
        if (p_skip_op(P, ")")) n = mk(P, E_TUPLE, t->line);
        else {
            ct_node *first = p_expr(P);
            if (is_op(pk(P), ",")) {
                vec items = {0};
                vpush(P, &items, first);
                while (p_skip_op(P, ",")) {
                    if (is_op(pk(P), ")")) break;
                    vpush(P, &items, p_expr(P));
                }
                n = mk(P, E_TUPLE, t->line);
                n->body = as_nodes(items);
            } else n = first;
            p_op(P, ")");
        }
    } else if (is_op(t, "[")) {
        P->pos++;
        vec items = {0};
        while (!is_op(pk(P), "]")) {
            if (items.n) p_op(P, ",");
            if (is_op(pk(P), "]")) break;
            vpush(P, &items, p_expr(P));
        }
        P->pos++;
        n = mk(P, E_LIST, t->line);
        n->body = as_nodes(items);
    } else if (is_op(t, "{")) {
        P->pos++;
        vec ks = {0}, vs = {0};
        while (!is_op(pk(P), "}")) {
            if (ks.n) p_op(P, ",");
            if (is_op(pk(P), "}")) break;
            vpush(P, &ks, p_expr(P));
            p_op(P, ":");
            vpush(P, &vs, p_expr(P));
        }
        P->pos++;
        n = mk(P, E_DICT, t->line);
        n->body = as_nodes(ks);
        n->other = as_nodes(vs);
    } else p_unexpected(P, "an expression");
    // postfix: .name, [index], [a:b:c], (args)
    for (;;) {
        tok *u = pk(P);
        if (is_op(u, ".")) {
            P->pos++;
            ct_node *m;
            if (pk(P)->type == T_INT) {  // x.0 is x[0] in Jinja2
                m = mk(P, E_INDEX, u->line);
                m->b = mk(P, E_INT, u->line);
                m->b->i = pk(P)->i;
                P->pos++;
            } else {
                m = mk(P, E_ATTR, u->line);
                m->s = p_name(P);
                m->n = strlen(m->s);
            }
            m->a = n;
            n = m;
        } else if (is_op(u, "[")) {
            P->pos++;
            ct_node *parts[3] = {0};
            int k = 0, colons = 0;
            for (;;) {
                if (is_op(pk(P), ":")) {
                    if (++colons > 2) p_unexpected(P, "']'");
                    k++;
                    P->pos++;
                    continue;
                }
                if (is_op(pk(P), "]")) break;
                if (parts[k] && colons == 0 && is_op(pk(P), ",")) {  // x[a, b]: a tuple key
                    vec items = {0};
                    vpush(P, &items, parts[k]);
                    while (p_skip_op(P, ",") && !is_op(pk(P), "]")) vpush(P, &items, p_expr(P));
                    parts[k] = mk(P, E_TUPLE, u->line);
                    parts[k]->body = as_nodes(items);
                    if (!is_op(pk(P), "]")) p_unexpected(P, "']'");
                    continue;
                }
                if (parts[k]) p_unexpected(P, "':' or ']'");
                parts[k] = p_expr(P);
            }
            P->pos++;
            ct_node *m;
            if (colons == 0) {
                m = mk(P, E_INDEX, u->line);
                m->b = parts[0] ? parts[0] : mk(P, E_TUPLE, u->line);  // x[] is x[()] in Jinja2
            } else {
                m = mk(P, E_SLICE, u->line);
                m->b = parts[0];
                m->c = parts[1];
                m->d = parts[2];
                // Jinja2 folds a slice of constants when compiling, and a failing one becomes
                // Undefined there (on variables it is Python's own subscript, which raises)
                m->op = is_const(n) && (!m->b || is_const(m->b)) && (!m->c || is_const(m->c)) && (!m->d || is_const(m->d));
            }
            m->a = n;
            n = m;
        } else if (is_op(u, "(")) {
            ct_node *m = mk(P, E_CALL, u->line);
            m->a = n;
            p_args(P, m);
            n = m;
        } else break;
    }
    P->depth--;
    return n;
}

// a filter or test name: Jinja2 allows dots in them (name.name...)
static const char *p_dotted(parser *P) {
    size_t start = P->pos;
    p_name(P);
    while (is_op(pk(P), ".") && P->t[P->pos + 1].type == T_NAME) P->pos += 2;
    size_t len = 0;
    for (size_t k = start; k < P->pos; k++) len += P->t[k].n;
    char *s = ct_alloc(P->a, len + 1);
    len = 0;
    for (size_t k = start; k < P->pos; k++) { memcpy(s + len, P->t[k].s, P->t[k].n); len += P->t[k].n; }
    return s;
}

static ct_node *p_filters(parser *P, ct_node *n) {
    for (;;) {
        tok *u = pk(P);
        if (is_op(u, "|")) {
            P->pos++;
            ct_node *m = mk(P, E_FILTER, pk(P)->line);
            m->s = p_dotted(P);
            m->n = strlen(m->s);
            if (!ct_filter_known(m->s) && !P->soft) lx_fail(P->fail, m->line, "unknown or unsupported filter '%s'", m->s);
            m->a = n;
            if (is_op(pk(P), "(")) p_args(P, m);
            n = m;
        } else if (is_name(u, "is")) {
            P->pos++;
            ct_node *m = mk(P, E_TEST, u->line);
            m->op = p_skip_name(P, "not");
            m->s = p_dotted(P);
            m->n = strlen(m->s);
            if (!ct_test_known(m->s) && !P->soft) lx_fail(P->fail, m->line, "unknown or unsupported test '%s'", m->s);
            m->a = n;
            if (is_op(pk(P), "(")) p_args(P, m);
            else {
                // one bare argument, as Jinja2 takes it: "is divisibleby 3", "is sameas none"
                tok *v = pk(P);
                if ((v->type == T_STR || v->type == T_INT || v->type == T_FLOAT || v->type == T_NAME || is_op(v, "[") ||
                     is_op(v, "{")) && !is_name(v, "else") && !is_name(v, "or") && !is_name(v, "and")) {
                    if (is_name(v, "is")) lx_fail(P->fail, v->line, "multiple tests cannot be chained with 'is'");
                    vec a1 = {0};
                    vpush(P, &a1, p_primary(P));
                    m->body = as_nodes(a1);
                }
            }
            n = m;
        } else if (is_op(u, "(")) {
            ct_node *m = mk(P, E_CALL, u->line);
            m->a = n;
            p_args(P, m);
            n = m;
        } else break;
    }
    return n;
}

static ct_node *p_unary(parser *P, int with_filter) {
    tok *t = pk(P);
    ct_node *n;
    p_enter(P);
    if (is_op(t, "-") || is_op(t, "+")) {
        P->pos++;
        n = mk(P, is_op(t, "-") ? E_NEG : E_POS, t->line);
        n->a = p_unary(P, 0);
    } else n = p_primary(P);
    if (with_filter) n = p_filters(P, n);
    P->depth--;
    return n;
}

static ct_node *bin(parser *P, int op, ct_node *a, ct_node *b, int line) {
    ct_node *n = mk(P, E_BIN, line);
    n->op = op;
    n->a = a;
    n->b = b;
    return n;
}
static ct_node *p_pow(parser *P) {
    ct_node *n = p_unary(P, 1);
    while (is_op(pk(P), "**")) { int l = pk(P)->line; P->pos++; n = bin(P, OP_POW, n, p_unary(P, 1), l); }
    return n;
}
static ct_node *p_math2(parser *P) {
    ct_node *n = p_pow(P);
    for (;;) {
        tok *t = pk(P);
        int op = is_op(t, "*") ? OP_MUL : is_op(t, "/") ? OP_DIV : is_op(t, "//") ? OP_FLOORDIV : is_op(t, "%") ? OP_MOD : -1;
        if (op < 0) return n;
        P->pos++;
        n = bin(P, op, n, p_pow(P), t->line);
    }
}
static ct_node *p_concat(parser *P) {
    ct_node *n = p_math2(P);
    while (is_op(pk(P), "~")) { int l = pk(P)->line; P->pos++; n = bin(P, OP_CONCAT, n, p_math2(P), l); }
    return n;
}
static ct_node *p_math1(parser *P) {
    ct_node *n = p_concat(P);
    for (;;) {
        tok *t = pk(P);
        int op = is_op(t, "+") ? OP_ADD : is_op(t, "-") ? OP_SUB : -1;
        if (op < 0) return n;
        P->pos++;
        n = bin(P, op, n, p_concat(P), t->line);
    }
}
static int cmp_op(parser *P, int *width) {
    tok *t = pk(P);
    *width = 1;
    int op = is_op(t, "==") ? OP_EQ : is_op(t, "!=") ? OP_NE : is_op(t, "<") ? OP_LT : is_op(t, "<=") ? OP_LE
           : is_op(t, ">") ? OP_GT : is_op(t, ">=") ? OP_GE : is_name(t, "in") ? OP_IN : -1;
    if (op < 0 && is_name(t, "not") && is_name(&P->t[P->pos + 1], "in")) { op = OP_NOTIN; *width = 2; }
    return op;
}
// a op b [op c ...]: chains like Python's, a < b < c being (a < b) and (b < c) (the middle
// operand is evaluated twice; expressions have no side effects)
static ct_node *p_compare(parser *P) {
    ct_node *n = p_math1(P), *prev = n, *chain = NULL;
    int w, op;
    while ((op = cmp_op(P, &w)) >= 0) {
        int line = pk(P)->line;
        P->pos += (size_t)w;
        ct_node *rhs = p_math1(P);
        ct_node *c = bin(P, op, prev, rhs, line);
        if (!chain) chain = c;
        else {
            ct_node *a = mk(P, E_AND, line);
            a->a = chain;
            a->b = c;
            chain = a;
        }
        prev = rhs;
    }
    return chain ? chain : n;
}
static ct_node *p_not(parser *P) {
    if (is_name(pk(P), "not")) {
        ct_node *n = mk(P, E_NOT, pk(P)->line);
        P->pos++;
        p_enter(P);
        n->a = p_not(P);
        P->depth--;
        return n;
    }
    return p_compare(P);
}
static ct_node *p_and(parser *P) {
    ct_node *n = p_not(P);
    while (is_name(pk(P), "and")) {
        ct_node *m = mk(P, E_AND, pk(P)->line);
        P->pos++;
        m->a = n;
        m->b = p_not(P);
        n = m;
    }
    return n;
}
static ct_node *p_or(parser *P) {
    ct_node *n = p_and(P);
    while (is_name(pk(P), "or")) {
        ct_node *m = mk(P, E_OR, pk(P)->line);
        P->pos++;
        m->a = n;
        m->b = p_and(P);
        n = m;
    }
    return n;
}
static ct_node *p_expr(parser *P) {
    p_enter(P);
    // an inline if makes its three parts "soft" for unknown filters, the part before "if"
    // included: look ahead for an "if" at this bracket level before parsing it
    int soft_saved = P->soft, depth = 0;
    for (size_t k = P->pos; P->t[k].type != T_EOF && P->t[k].type != T_VAR_END && P->t[k].type != T_BLOCK_END; k++) {
        tok *t = &P->t[k];
        if (is_op(t, "(") || is_op(t, "[") || is_op(t, "{")) depth++;
        else if (is_op(t, ")") || is_op(t, "]") || is_op(t, "}")) { if (--depth < 0) break; }
        else if (depth == 0 && (is_op(t, ",") || is_op(t, ":"))) break;
        else if (depth == 0 && is_name(t, "if")) { P->soft = 1; break; }
    }
    ct_node *n = p_or(P);
    while (is_name(pk(P), "if")) {
        ct_node *m = mk(P, E_COND, pk(P)->line);
        P->pos++;
        m->b = n;
        m->a = p_or(P);
        if (p_skip_name(P, "else")) m->c = p_expr(P);
        n = m;
    }
    P->soft = soft_saved;
    P->depth--;
    return n;
}
// expr or expr, expr, ... (a tuple without parentheses)
static ct_node *p_tuple(parser *P) {
    int line = pk(P)->line;
    ct_node *first = p_expr(P);
    if (!is_op(pk(P), ",")) return first;
    vec items = {0};
    vpush(P, &items, first);
    while (p_skip_op(P, ",")) {
        if (pk(P)->type == T_VAR_END || pk(P)->type == T_BLOCK_END) break;
        vpush(P, &items, p_expr(P));
    }
    ct_node *n = mk(P, E_TUPLE, line);
    n->body = as_nodes(items);
    return n;
}

static ct_nodes p_body(parser *P, const char *const *ends, int *which);

// the test of an if / elif: Jinja2 parses it without inline ifs (a, b makes a tuple)
static ct_node *p_if_test(parser *P) {
    int line = pk(P)->line;
    ct_node *first = p_or(P);
    if (!is_op(pk(P), ",")) return first;
    vec items = {0};
    vpush(P, &items, first);
    while (p_skip_op(P, ",")) {
        if (pk(P)->type == T_BLOCK_END) break;
        vpush(P, &items, p_or(P));
    }
    ct_node *n = mk(P, E_TUPLE, line);
    n->body = as_nodes(items);
    return n;
}

static const char *const unsupported_tags[] = {"include", "import", "from", "extends", "block", "call", "filter",
                                               "with", "autoescape", "do", "trans", "pluralize", "endraw"};

static ct_node *p_stmt(parser *P) {
    tok *t = pk(P);
    int line = t->line;
    if (t->type != T_NAME) p_unexpected(P, "a tag name");
    if (is_name(t, "if")) {
        P->pos++;
        int soft_saved = P->soft;
        P->soft = 1;  // Jinja2 leaves unknown filters and tests in an if to the render
        ct_node *n = mk(P, N_IF, line), *cur = n;
        cur->a = p_if_test(P);
        p_end(P);
        for (;;) {
            static const char *const ends[] = {"elif", "else", "endif", NULL};
            int w;
            cur->body = p_body(P, ends, &w);
            if (w == 0) {
                ct_node *e = mk(P, N_IF, pk(P)->line);
                P->pos++;
                e->a = p_if_test(P);
                p_end(P);
                vec one = {0};
                vpush(P, &one, e);
                cur->other = as_nodes(one);
                cur = e;
                continue;
            }
            P->pos++;
            p_end(P);
            if (w == 1) {
                static const char *const ends2[] = {"endif", NULL};
                cur->other = p_body(P, ends2, &w);
                P->pos++;
                p_end(P);
            }
            P->soft = soft_saved;
            return n;
        }
    }
    if (is_name(t, "for")) {
        P->pos++;
        ct_node *n = mk(P, N_FOR, line);
        vec names = {0};
        int paren = p_skip_op(P, "(");
        do vpush(P, &names, (void *)p_name(P));
        while (p_skip_op(P, ","));
        if (paren) p_op(P, ")");
        n->names = as_names(names);
        if (!p_skip_name(P, "in")) p_unexpected(P, "'in'");
        // the iterable: no inline if (an "if" after it filters the loop)
        int l2 = pk(P)->line;
        ct_node *it = p_or(P);
        if (is_op(pk(P), ",")) {
            vec items = {0};
            vpush(P, &items, it);
            while (p_skip_op(P, ",")) vpush(P, &items, p_or(P));
            it = mk(P, E_TUPLE, l2);
            it->body = as_nodes(items);
        }
        n->a = it;
        int soft_saved = P->soft;
        P->soft = 0;  // a loop's filter, body and else are Jinja2 inner frames, never soft
        if (p_skip_name(P, "if")) n->b = p_expr(P);
        if (is_name(pk(P), "recursive")) lx_fail(P->fail, line, "recursive for loops are not supported");
        p_end(P);
        static const char *const ends[] = {"else", "endfor", NULL};
        int w;
        P->loops++;
        n->body = p_body(P, ends, &w);
        P->loops--;
        P->pos++;
        p_end(P);
        if (w == 0) {
            static const char *const ends2[] = {"endfor", NULL};
            n->other = p_body(P, ends2, &w);
            P->pos++;
            p_end(P);
        }
        P->soft = soft_saved;
        return n;
    }
    if (is_name(t, "set")) {
        P->pos++;
        const char *first = p_name(P);
        if (p_skip_op(P, ".")) {
            ct_node *n = mk(P, N_SET_ATTR, line);
            n->s = first;
            n->s2 = p_name(P);
            p_op(P, "=");
            n->a = p_tuple(P);
            p_end(P);
            return n;
        }
        vec names = {0};
        vpush(P, &names, (void *)first);
        while (p_skip_op(P, ",")) vpush(P, &names, (void *)p_name(P));
        if (pk(P)->type == T_BLOCK_END && names.n == 1) {
            P->pos++;
            ct_node *n = mk(P, N_SET_BLOCK, line);
            n->names = as_names(names);
            static const char *const ends[] = {"endset", NULL};
            int w, soft_saved = P->soft;
            P->soft = 0;
            n->body = p_body(P, ends, &w);
            P->soft = soft_saved;
            P->pos++;
            p_end(P);
            return n;
        }
        if (is_op(pk(P), "|")) lx_fail(P->fail, line, "filtered block {%% set x | filter %%} is not supported");
        ct_node *n = mk(P, N_SET, line);
        n->names = as_names(names);
        p_op(P, "=");
        n->a = p_tuple(P);
        p_end(P);
        return n;
    }
    if (is_name(t, "macro")) {
        P->pos++;
        if (P->loops) lx_fail(P->fail, line, "a macro defined inside a for loop is not supported");
        ct_node *n = mk(P, N_MACRO, line);
        n->s = p_name(P);
        n->n = strlen(n->s);
        vec names = {0}, defs = {0};
        p_op(P, "(");
        while (!is_op(pk(P), ")")) {
            if (names.n) p_op(P, ",");
            if (is_op(pk(P), ")")) break;
            vpush(P, &names, (void *)p_name(P));
            vpush(P, &defs, p_skip_op(P, "=") ? p_expr(P) : NULL);
        }
        P->pos++;
        p_end(P);
        n->names = as_names(names);
        n->other = as_nodes(defs);
        static const char *const ends[] = {"endmacro", NULL};
        int w, saved = P->loops, soft_saved = P->soft;
        P->loops = 0;
        P->soft = 0;
        n->body = p_body(P, ends, &w);
        P->loops = saved;
        P->soft = soft_saved;
        P->pos++;
        if (pk(P)->type == T_NAME) P->pos++;  // {% endmacro name %}
        p_end(P);
        return n;
    }
    if (is_name(t, "break") || is_name(t, "continue")) {
        if (!P->loops) lx_fail(P->fail, line, "'%.*s' outside a for loop", (int)t->n, t->s);
        P->pos++;
        p_end(P);
        return mk(P, t->n == 5 ? N_BREAK : N_CONTINUE, line);
    }
    if (is_name(t, "generation")) {
        P->pos++;
        p_end(P);
        ct_node *n = mk(P, N_GENERATION, line);
        static const char *const ends[] = {"endgeneration", NULL};
        int w, soft_saved = P->soft;
        P->soft = 0;
        n->body = p_body(P, ends, &w);
        P->soft = soft_saved;
        P->pos++;
        p_end(P);
        return n;
    }
    for (size_t k = 0; k < sizeof unsupported_tags / sizeof unsupported_tags[0]; k++)
        if (is_name(t, unsupported_tags[k])) lx_fail(P->fail, line, "the {%% %s %%} tag is not supported", unsupported_tags[k]);
    lx_fail(P->fail, line, "unknown tag '%.*s'", (int)(t->n > 40 ? 40 : t->n), t->s);
}

// Statements and text up to one of the tags in `ends` (NULL-terminated; NULL itself = the end
// of the template), left unconsumed at its name; *which = its index.
static ct_nodes p_body(parser *P, const char *const *ends, int *which) {
    vec v = {0};
    int open_line = pk(P)->line;
    p_enter(P);
    for (;;) {
        tok *t = pk(P);
        if (t->type == T_EOF) {
            if (ends) lx_fail(P->fail, open_line, "unexpected end of template: a block opened here is not closed (expected {%% %s %%})", ends[0]);
            *which = -1;
            break;
        }
        if (t->type == T_DATA) {
            ct_node *n = mk(P, N_TEXT, t->line);
            n->s = t->s;
            n->n = t->n;
            vpush(P, &v, n);
            P->pos++;
        } else if (t->type == T_VAR_BEGIN) {
            P->pos++;
            ct_node *n = mk(P, N_OUTPUT, t->line);
            n->a = p_tuple(P);
            if (pk(P)->type != T_VAR_END) p_unexpected(P, "the end of the print tag '}}'");
            P->pos++;
            vpush(P, &v, n);
        } else if (t->type == T_BLOCK_BEGIN) {
            tok *nm = &P->t[P->pos + 1];
            if (ends)
                for (int k = 0; ends[k]; k++)
                    if (is_name(nm, ends[k])) {
                        P->pos++;
                        *which = k;
                        P->depth--;
                        return as_nodes(v);
                    }
            static const char *const closers[] = {"elif", "else", "endif", "endfor", "endset", "endmacro", "endgeneration", NULL};
            for (int k = 0; closers[k]; k++)
                if (is_name(nm, closers[k]))
                    lx_fail(P->fail, nm->line, "unexpected {%% %s %%}%s%s", closers[k], ends ? ": expected {% " : "",
                            ends ? ends[0] : "");
            P->pos++;
            vpush(P, &v, p_stmt(P));
        } else p_unexpected(P, "text or a tag");
    }
    P->depth--;
    return as_nodes(v);
}

wgt_status ct_parse(chat_template *t, const char *src, size_t n) {
    jmp_buf jb;
    t->arena.fail = &jb;
    if (setjmp(jb)) return WGT_ERR_FORMAT;
    if (memchr(src, 0, n)) lx_fail(&jb, 1, "the template contains a NUL byte");
    // newlines normalized to "\n" and one trailing newline dropped, as Jinja2 does
    char *s = ct_alloc(&t->arena, n + 1);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (src[i] == '\r') {
            s[k++] = '\n';
            if (i + 1 < n && src[i + 1] == '\n') i++;
        } else s[k++] = src[i];
    }
    if (k && s[k - 1] == '\n') k--;
    lexer L = {.a = &t->arena, .fail = &jb, .src = s, .n = k, .line = 1};
    lx_run(&L);
    parser P = {.a = &t->arena, .fail = &jb, .t = L.toks};
    int w;
    t->body = p_body(&P, NULL, &w);
    return WGT_OK;
}
