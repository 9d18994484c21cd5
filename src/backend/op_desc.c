// op_desc.c — the descriptor table and generic calls generated from op_list.h, and the shape
// arithmetic over the descriptors' shape strings.
#include "backend/op_desc.h"
#include <ctype.h>
#include <string.h>

wgt_view wgt_view_sub(wgt_view v, size_t elems, size_t n) {
    WGT_ASSERT(elems <= v.n && n <= v.n - elems, "sub-view runs past the end of its view");
    v.off += elems;
    v.n = n;
    return v;
}

wgt_view wgt_buf_view(wgt_backend *be, wgt_buf *buf) { return wgt_view_of(buf, 0, be->buf_elems(buf)); }

// ---- generated: the bindings and scalars of each op ----
#define DESC_B(name, role, type, shape) {#name, WGT_ROLE_##role, WGT_TYPE_##type, shape},
#define DESC_S(name, type, def, lo, hi) {#name, WGT_TYPE_##type, def, lo, hi},
#define DESC_ARRAYS(op, summary)                                                \
    static const wgt_op_bind binds_##op[] = {WGT_OP_##op(DESC_B, WGT_NO_S)};    \
    static const wgt_op_scalar scalars_##op[] = {WGT_OP_##op(WGT_NO_B, DESC_S)};
WGT_OPS(DESC_ARRAYS)

// ---- generated: call_OP(be, v, s) unpacks the arrays into the typed entry be->OP ----
// A local enum numbers the fields in list order; scalars follow the nb_ bindings.
#define CALL_ENUM_B(name, role, type, shape) f_##name,
#define CALL_ENUM_S(name, type, def, lo, hi) f_##name,
#define CALL_COUNT_B(name, role, type, shape) +1
#define CALL_ARG_B(name, role, type, shape) , v[f_##name]
#define CALL_ARG_S(name, type, def, lo, hi) , (WGT_CTYPE_##type)s[f_##name - nb_]
#define CALL_FN(op, summary)                                                     \
    static void call_##op(wgt_backend *be, const wgt_view *v, const double *s) { \
        enum { WGT_OP_##op(CALL_ENUM_B, CALL_ENUM_S) f_end_ };                   \
        enum { nb_ = 0 WGT_OP_##op(CALL_COUNT_B, WGT_NO_S) };                    \
        be->op(be WGT_OP_##op(CALL_ARG_B, CALL_ARG_S));                          \
    }
WGT_OPS(CALL_FN)

#define COUNT(a) ((int)(sizeof a / sizeof a[0]))
#define DESC_ENTRY(op, summary) {#op, summary, COUNT(binds_##op), COUNT(scalars_##op), binds_##op, scalars_##op, call_##op},
const wgt_op_desc wgt_op_descs[WGT_OP_COUNT] = {WGT_OPS(DESC_ENTRY)};

const wgt_op_desc *wgt_op_find(const char *name) {
    for (int i = 0; i < WGT_OP_COUNT; i++)
        if (!strcmp(wgt_op_descs[i].name, name)) return &wgt_op_descs[i];
    return NULL;
}

const char *wgt_role_name(wgt_role r) {
    static const char *const n[] = {"out", "in+out", "in", "in, optional", "in+out, optional"};
    return n[r];
}

const char *wgt_type_name(wgt_type t) {
    static const char *const n[] = {"float32", "int32", "uint32", "size", "float16"};
    return n[t];
}

// ---- shapes ----

static int scalar_index(const wgt_op_desc *d, const char *name, size_t len) {
    for (int i = 0; i < d->ns; i++)
        if (strlen(d->s[i].name) == len && !strncmp(d->s[i].name, name, len)) return i;
    return -1;
}

int wgt_op_dims(const wgt_op_desc *d, int b, wgt_op_dim *dims) {
    const char *p = d->b[b].shape;
    int nd = 0;
    for (;;) {
        WGT_ASSERT(nd < WGT_OP_MAX_DIMS, "a shape in op_list.h has too many dimensions");
        wgt_op_dim *dim = &dims[nd++];
        memset(dim, 0, sizeof *dim);
        if (p[0] == '>' && p[1] == '=') { dim->atleast = 1; p += 2; }
        for (;;) {  // terms joined by '+'
            WGT_ASSERT(dim->nterm < 3, "a shape in op_list.h has too many terms");
            wgt_op_term *t = &dim->term[dim->nterm++];
            t->factor = 1;
            for (;;) {  // factors joined by '*'
                if (isdigit((unsigned char)*p)) {
                    t->factor *= strtoull(p, (char **)&p, 10);
                } else {
                    const char *q = p;
                    while (isalnum((unsigned char)*q) || *q == '_') q++;
                    int si = scalar_index(d, p, (size_t)(q - p));
                    WGT_ASSERT(si >= 0 && t->nsym < 3, "a shape in op_list.h names an unknown scalar");
                    t->sym[t->nsym++] = si;
                    p = q;
                }
                if (*p != '*') break;
                p++;
            }
            if (*p != '+') break;
            p++;
        }
        if (*p == 0) return nd;
        WGT_ASSERT(*p == ',', "malformed shape in op_list.h");
        p++;
    }
}

static uint64_t mul_sat(uint64_t a, uint64_t b) {
    return (a && b > UINT64_MAX / a) ? UINT64_MAX : a * b;
}

uint64_t wgt_op_dim_value(const wgt_op_dim *dim, const double *s) {
    uint64_t sum = 0;
    for (int i = 0; i < dim->nterm; i++) {
        uint64_t v = dim->term[i].factor;
        for (int k = 0; k < dim->term[i].nsym; k++) {
            double x = s[dim->term[i].sym[k]];
            v = (x >= 0 && x < 18446744073709551616.0) ? mul_sat(v, (uint64_t)x) : UINT64_MAX;
        }
        sum = v > UINT64_MAX - sum ? UINT64_MAX : sum + v;
    }
    return sum;
}

uint64_t wgt_op_need(const wgt_op_desc *d, int b, const double *s) {
    wgt_op_dim dims[WGT_OP_MAX_DIMS];
    int nd = wgt_op_dims(d, b, dims);
    uint64_t n = 1;
    for (int i = 0; i < nd; i++) n = mul_sat(n, wgt_op_dim_value(&dims[i], s));
    if (d->b[b].type == WGT_TYPE_F16 && n != UINT64_MAX) n = n / 2 + (n & 1);
    return n;
}

void wgt_op_check_views(const wgt_op_desc *d, const wgt_view *v, const double *s) {
    for (int b = 0; b < d->nb; b++) {
        if (!v[b].buf) {
            if (wgt_role_optional(d->b[b].role)) continue;
            fprintf(stderr, "op %s: binding '%s' has no buffer\n", d->name, d->b[b].name);
            WGT_ASSERT(0, "a required binding was given the empty view");
        }
        uint64_t need = wgt_op_need(d, b, s);
        if (need > v[b].n) {
            fprintf(stderr, "op %s: binding '%s' [%s] needs %llu elements but its view holds %zu\n", d->name,
                    d->b[b].name, d->b[b].shape, (unsigned long long)need, v[b].n);
            WGT_ASSERT(0, "a view is smaller than its op's shape: a layout bug in the caller");
        }
    }
}
