// cmd_op.c — `wgtrain op NAME --backend cpu|webgpu --in NAME=FILE.npy ... --set KEY=VALUE ...
// --out NAME=FILE.npy ...`: runs any op of src/backend/op_list.h on NumPy inputs, through one
// generic path driven by the op's descriptor (op_desc.h):
//   1. the given arrays are matched against their bindings' shapes, which finds the sizes
//      (a shape "N,C" given a [B, T, C] array flattens the leading dimensions into N; a
//      missing leading dimension, as [T, 3C] for "B,T,3*C", is 1); scalars no shape tells then
//      take their defaults (computed ones in op_extras, as NKV = NH; then op_list.h's), and the
//      shapes are matched again, which finds the sizes a default implies and checks it;
//   2. every scalar is checked against its type and range (op_list.h), and the few constraints
//      between sizes (op_checks: NKV divides NH, an even head size for rope);
//   3. buffers are allocated, inputs uploaded, in+out bindings not given start at zero;
//   4. the op runs through its generic call; the outputs asked for are written.
// In-place bindings are named once: `--in x=a.npy --out x=b.npy`.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "backend/lowbit.h"
#include "backend/op_desc.h"
#include "backend/opt_status.h"
#include "cli/cli.h"
#include "core/npy.h"

typedef struct {
    const wgt_op_desc *d;
    const char *in_path[WGT_OP_MAX_BINDS], *out_path[WGT_OP_MAX_BINDS];
    npy_array a[WGT_OP_MAX_BINDS];
    int have[WGT_OP_MAX_BINDS];  // an array is loaded (or made) for this binding
    double s[WGT_OP_MAX_SCALARS];
    int s_set[WGT_OP_MAX_SCALARS];   // given with --set
    const char *s_from[WGT_OP_MAX_SCALARS];  // the binding a size was read from
    // leading dimensions of a given array that a first dimension stood for (output shapes)
    int lead_sym[WGT_OP_MAX_BINDS];
    int lead_nd[WGT_OP_MAX_BINDS];
    size_t lead[WGT_OP_MAX_BINDS][NPY_MAX_DIMS];
} op_call;

static void op_list(FILE *f) {
    for (int i = 0; i < WGT_OP_COUNT; i++) fprintf(f, "  %-22s %s\n", wgt_op_descs[i].name, wgt_op_descs[i].summary);
}

static void op_help(const wgt_op_desc *d) {
    printf("wgtrain op %s: %s\n  bindings (outputs first):\n", d->name, d->summary);
    for (int i = 0; i < d->nb; i++)
        printf("    %-12s [%s] %s, %s\n", d->b[i].name, d->b[i].shape,
               d->b[i].type == WGT_TYPE_F32 ? "float32" : d->b[i].type == WGT_TYPE_F16 ? "float16" : "int32|uint32",
               wgt_role_name(d->b[i].role));
    printf("  scalars (sizes are found from the shapes; --set KEY=VALUE):\n");
    for (int i = 0; i < d->ns; i++) {
        printf("    %-12s %s in [%g, %g]", d->s[i].name, d->s[i].type == WGT_TYPE_F32 ? "float" : "integer", d->s[i].lo,
               d->s[i].hi);
        if (!isnan(d->s[i].def)) printf(", default %g", d->s[i].def);
        printf("\n");
    }
}

static int bind_index(const wgt_op_desc *d, const char *name) {
    for (int i = 0; i < d->nb; i++)
        if (!strcmp(d->b[i].name, name)) return i;
    return -1;
}

static int scalar_index(const wgt_op_desc *d, const char *name) {
    for (int i = 0; i < d->ns; i++)
        if (!strcmp(d->s[i].name, name)) return i;
    return -1;
}

static wgt_status split_kv(const char *flag, const char *arg, char *key, size_t cap, const char **val) {
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg || !eq[1]) return wgt_fail(WGT_ERR_ARG, "%s expects NAME=VALUE, got '%s'", flag, arg);
    size_t n = (size_t)(eq - arg);
    if (n >= cap) return wgt_fail(WGT_ERR_ARG, "%s: name too long in '%s'", flag, arg);
    memcpy(key, arg, n);
    key[n] = 0;
    *val = eq + 1;
    return WGT_OK;
}

static void shape_text(char *buf, size_t cap, const size_t *dims, int nd) {
    size_t k = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < nd && k < cap; i++) k += (size_t)snprintf(buf + k, cap - k, "%s%zu", i ? ", " : "", dims[i]);
    if (k < cap) snprintf(buf + k, cap - k, "]");
}

// ---- 1. sizes from shapes ----

// Matches one dimension of a binding's shape with a value. Returns 1 if it learned a scalar,
// 0 if nothing changed (checked, or not yet decidable), -1 on a contradiction.
static int unify(op_call *c, int b, const wgt_op_dim *dim, uint64_t value) {
    // the known terms' sum, and the one unknown scalar with its known coefficient
    uint64_t known_sum = 0, coef = 0;
    int unknown = -1, n_unknown = 0;
    for (int i = 0; i < dim->nterm; i++) {
        uint64_t prod = dim->term[i].factor;
        int term_unknown = 0;
        for (int k = 0; k < dim->term[i].nsym; k++) {
            int si = dim->term[i].sym[k];
            if (isnan(c->s[si])) {
                if (si != unknown) n_unknown++;
                unknown = si;
                term_unknown++;
            } else {
                prod *= (uint64_t)c->s[si];
            }
        }
        if (term_unknown > 1) n_unknown = 2;  // a product of unknowns: not solvable here
        if (term_unknown) coef += prod;
        else known_sum += prod;
    }
    if (dim->atleast) return n_unknown ? 0 : (value >= known_sum ? 0 : -1);
    if (n_unknown == 0) return value == known_sum ? 0 : -1;
    if (n_unknown > 1) return 0;
    if (value < known_sum || coef == 0 || (value - known_sum) % coef) return -1;
    c->s[unknown] = (double)((value - known_sum) / coef);
    c->s_from[unknown] = c->d->b[b].name;
    return 1;
}

static wgt_status shape_mismatch(op_call *c, int b) {
    char have[128];
    shape_text(have, sizeof have, c->a[b].shape, c->a[b].ndim);
    char known[256] = "";
    size_t k = 0;
    for (int i = 0; i < c->d->ns && k < sizeof known; i++)
        if (!isnan(c->s[i]) && c->d->s[i].type != WGT_TYPE_F32)
            k += (size_t)snprintf(known + k, sizeof known - k, "%s%s = %.0f", k ? ", " : "", c->d->s[i].name, c->s[i]);
    return wgt_fail(WGT_ERR_FORMAT, "%s: '%s' has shape %s, which does not fit [%s]%s%s", c->d->name, c->d->b[b].name, have,
                    c->d->b[b].shape, k ? " with " : "", known);
}

// One pass over the given arrays; *changed is set when a scalar was learned.
static wgt_status match_shapes(op_call *c, int *changed) {
    const wgt_op_desc *d = c->d;
    for (int b = 0; b < d->nb; b++) {
        if (!c->have[b]) continue;
        wgt_op_dim dims[WGT_OP_MAX_DIMS];
        int k = wgt_op_dims(d, b, dims), nd = c->a[b].ndim;
        const size_t *sh = c->a[b].shape;
        for (int i = 0; i < k; i++) {
            uint64_t value;
            if (nd >= k) {  // leading dimensions flatten into the first
                value = 1;
                if (i == 0)
                    for (int j = 0; j <= nd - k; j++) value *= sh[j];
                else
                    value = sh[nd - k + i];
            } else {  // missing leading dimensions are 1
                value = i < k - nd ? 1 : sh[i - (k - nd)];
            }
            int r = unify(c, b, &dims[i], value);
            if (r < 0) return shape_mismatch(c, b);
            if (r > 0) *changed = 1;
        }
        if (nd != k && wgt_op_dim_symbol(&dims[0]) >= 0) {  // for output shapes
            c->lead_sym[b] = wgt_op_dim_symbol(&dims[0]);
            c->lead_nd[b] = nd >= k ? nd - k + 1 : 0;
            for (int j = 0; j < c->lead_nd[b]; j++) c->lead[b][j] = sh[j];
        }
    }
    return WGT_OK;
}

// ---- 2. scalars ----

// Scalar i against its range and type (the range first: only a double within it may become an
// integer).
static wgt_status check_scalar(op_call *c, int i) {
    const wgt_op_desc *d = c->d;
    const wgt_op_scalar *s = &d->s[i];
    double x = c->s[i];
    int whole = s->type != WGT_TYPE_F32;
    if (x < s->lo || x > s->hi || (whole && x != floor(x))) {
        const char *from = c->s_from[i];
        return wgt_fail(WGT_ERR_ARG, "%s: %s = %.17g%s%s%s is outside its range: %s in [%g, %g]", d->name, s->name, x,
                        from ? " (from the shape of '" : "", from ? from : "", from ? "')" : "",
                        whole ? "a whole number" : "a value", s->lo, s->hi);
    }
    return WGT_OK;
}

static wgt_status check_scalars(op_call *c) {
    const wgt_op_desc *d = c->d;
    for (int i = 0; i < d->ns; i++) {
        if (isnan(c->s[i]))
            return wgt_fail(WGT_ERR_ARG, "%s: %s cannot be told from the shapes given; add --set %s=VALUE", d->name,
                            d->s[i].name, d->s[i].name);
        WGT_TRY(check_scalar(c, i));
    }
    return WGT_OK;
}

// Matches the given arrays against their shapes until no size is learned any more.
static wgt_status match_all(op_call *c) {
    wgt_status st = WGT_OK;
    for (int changed = 1; st == WGT_OK && changed;) {
        changed = 0;
        st = match_shapes(c, &changed);
    }
    return st;
}

// The few things a shape cannot say, per op: defaults computed from other scalars or from the
// data, value ranges of integer inputs, and constraints between sizes. Scalars set here are
// matched against the shapes again afterwards (op_main), which finds the sizes they imply.
static wgt_status op_extras(op_call *c) {
    const wgt_op_desc *d = c->d;
    int id = (int)(d - wgt_op_descs);
    // grouped heads: NKV (kv heads) is NH (plain multi-head) unless the shapes tell it
    int nh = scalar_index(d, "NH"), nkv = scalar_index(d, "NKV");
    if (nh >= 0 && nkv >= 0 && isnan(c->s[nkv]) && !isnan(c->s[nh])) c->s[nkv] = c->s[nh];
    if (id == WGT_OP_ID_embedding_forward || id == WGT_OP_ID_embedding_backward) {
        int t = bind_index(d, "tokens"), v = scalar_index(d, "V");
        if (isnan(c->s[v])) return WGT_OK;  // reported by check_scalars
        const int32_t *tk = c->a[t].data;
        for (size_t i = 0; i < c->a[t].n; i++)
            if (tk[i] < 0 || (double)tk[i] >= c->s[v])
                return wgt_fail(WGT_ERR_FORMAT, "%s: tokens[%zu] = %d is outside the vocabulary [0, %.0f); fix the token "
                                "file or the embedding's V", d->name, i, tk[i], c->s[v]);
    }
    int inv = scalar_index(d, "inv_norm"), V = scalar_index(d, "V");
    if (id == WGT_OP_ID_cross_entropy && isnan(c->s[inv]) && !isnan(c->s[V])) {  // 1 / the targets not ignored
        const npy_array *t = &c->a[bind_index(d, "targets")];
        const uint32_t *tg = t->data;
        size_t valid = 0;
        for (size_t i = 0; i < t->n; i++) valid += tg[i] < c->s[V];
        c->s[inv] = valid ? 1.0 / (double)valid : 0.0;
    }
    return WGT_OK;
}

// Constraints between sizes that neither a shape nor a range can state, checked once every
// scalar is known and in range.
static wgt_status op_checks(op_call *c) {
    const wgt_op_desc *d = c->d;
    int id = (int)(d - wgt_op_descs);
    int nh = scalar_index(d, "NH"), nkv = scalar_index(d, "NKV"), hs = scalar_index(d, "HS");
    if (nh >= 0 && nkv >= 0 && fmod(c->s[nh], c->s[nkv]) != 0)
        return wgt_fail(WGT_ERR_ARG, "%s: NKV = %.0f kv heads must divide NH = %.0f query heads", d->name, c->s[nkv],
                        c->s[nh]);
    if ((id == WGT_OP_ID_rope_forward || id == WGT_OP_ID_rope_backward) && fmod(c->s[hs], 2) != 0)
        return wgt_fail(WGT_ERR_ARG, "%s: HS = %.0f is odd; rotary embedding pairs the two halves of a head, so the head "
                        "size must be even", d->name, c->s[hs]);
    // doc_start (attention's mask, rope's positions): each at most its position and non-decreasing
    // along its sequence (docs/kernels.md#attention-mask)
    int db = bind_index(d, "doc_start"), bs = scalar_index(d, "B"), ts = scalar_index(d, "T");
    if (db >= 0 && c->have[db] && bs >= 0 && ts >= 0) {
        const uint32_t *doc = c->a[db].data;
        const size_t B = (size_t)c->s[bs], T = (size_t)c->s[ts];
        for (size_t i = 0; i < B * T && i < c->a[db].n; i++) {
            size_t t = i % T;
            if (doc[i] > t || (t && doc[i] < doc[i - 1]))
                return wgt_fail(WGT_ERR_FORMAT, "%s: doc_start[%zu][%zu] = %u; each entry is the first position of its "
                                "example, so it must be at most its position (%zu) and not below the entry before it",
                                d->name, i / T, t, doc[i], t);
        }
    }
    // a packed weight: its words hold OC x C values of the format, an nf4 one has its absmax
    if (id == WGT_OP_ID_matmul_lowbit || id == WGT_OP_ID_matmul_t_lowbit) {
        const uint32_t fmt = (uint32_t)c->s[scalar_index(d, "fmt")];
        const uint64_t n = (uint64_t)c->s[scalar_index(d, "C")] * (uint64_t)c->s[scalar_index(d, "OC")];
        const uint64_t words = wgt_lowbit_words(fmt, n), blocks = wgt_lowbit_blocks(fmt, n);
        if (c->s[scalar_index(d, "WW")] < (double)words)
            return wgt_fail(WGT_ERR_ARG, "%s: weight holds %.0f words; OC x C = %llu values of fmt %u (%s) need %llu",
                            d->name, c->s[scalar_index(d, "WW")], (unsigned long long)n, fmt,
                            fmt == 0 ? "f16" : fmt == 1 ? "bf16" : "nf4", (unsigned long long)words);
        if (fmt == WGT_LOWBIT_NF4 && (!c->have[bind_index(d, "absmax")] || c->s[scalar_index(d, "NB")] < (double)blocks))
            return wgt_fail(WGT_ERR_ARG, "%s: an nf4 weight needs absmax, one value per 64: %llu for OC x C = %llu values "
                            "(--in absmax=FILE)", d->name, (unsigned long long)blocks, (unsigned long long)n);
    }
    // decoding with a cache: every row's new positions inside the cache, tokens inside the
    // vocabulary, an even head size for the rotation
    if (id == WGT_OP_ID_decode_embedding || id == WGT_OP_ID_kv_cache_append || id == WGT_OP_ID_decode_attention) {
        int pb = bind_index(d, "pos"), cb = bind_index(d, "cos"), tb = bind_index(d, "tokens");
        const double T = c->s[scalar_index(d, "T")], maxT = c->s[scalar_index(d, "maxT")];
        const uint32_t *pos = c->have[pb] ? c->a[pb].data : NULL;
        for (size_t i = 0; pos && i < c->a[pb].n; i++)
            if ((double)pos[i] + T > maxT)
                return wgt_fail(WGT_ERR_ARG, "%s: pos[%zu] = %u and T = %.0f new tokens run past the cache of maxT = %.0f "
                                "positions", d->name, i, pos[i], T, maxT);
        if (cb >= 0 && c->have[cb] && fmod(c->s[hs], 2) != 0)
            return wgt_fail(WGT_ERR_ARG, "%s: HS = %.0f is odd; the rotation needs an even head size (or no cos/sin)",
                            d->name, c->s[hs]);
        const int32_t *tk = tb >= 0 && c->have[tb] ? c->a[tb].data : NULL;
        for (size_t i = 0; tk && i < c->a[tb].n; i++)
            if (tk[i] < 0 || (double)tk[i] >= c->s[scalar_index(d, "V")])
                return wgt_fail(WGT_ERR_FORMAT, "%s: tokens[%zu] = %d is outside the vocabulary [0, %.0f)", d->name, i,
                                tk[i], c->s[scalar_index(d, "V")]);
    }
    // the optimizer status words the ops rely on (docs/kernels.md#the-optimizer-status); a status
    // that is not given starts at zero
    int sb = bind_index(d, "status");
    if (sb >= 0) {
        float w[WGT_ST_WORDS] = {0};
        if (c->have[sb] && c->a[sb].n >= WGT_ST_WORDS) memcpy(w, c->a[sb].data, sizeof w);
        const float S = w[WGT_ST_LOSS_SCALE];
        if (id == WGT_OP_ID_grad_clip_scale && !(S > 0.0f && isfinite(S)))
            return wgt_fail(WGT_ERR_FORMAT, "%s: the status's loss scale S (word %d) is %g; it must be a positive finite "
                            "number (1 without loss scaling)", d->name, WGT_ST_LOSS_SCALE, (double)S);
        if (id == WGT_OP_ID_adamw && w[WGT_ST_CLIP] != 0.0f && wgt_st_u32(w, WGT_ST_T) < 1)
            return wgt_fail(WGT_ERR_FORMAT, "%s: the status's update count t (word %d, a uint32's bits) is 0 while its "
                            "multiplier clip/S (word %d) is %g: an applied update has t >= 1 (grad_clip_scale writes "
                            "both; clip/S = 0 skips the update)", d->name, WGT_ST_T, WGT_ST_CLIP,
                            (double)w[WGT_ST_CLIP]);
    }
    return WGT_OK;
}

// ---- 3. shapes of what is not given ----

static wgt_status fill_shape(op_call *c, int b) {
    const wgt_op_desc *d = c->d;
    wgt_op_dim dims[WGT_OP_MAX_DIMS];
    int k = wgt_op_dims(d, b, dims);
    npy_array *a = &c->a[b];
    a->dtype = d->b[b].type == WGT_TYPE_F32 ? NPY_F32 : d->b[b].type == WGT_TYPE_F16 ? NPY_F16
             : d->b[b].type == WGT_TYPE_I32 ? NPY_I32 : NPY_U32;
    a->ndim = 0;
    // an output whose first dimension is a size some input spelled as several dimensions (or
    // left out) keeps that input's spelling: matmul of [B, T, C] gives [B, T, OC]
    int lead_from = -1;
    for (int i = 0; i < d->nb && lead_from < 0; i++)
        if (c->have[i] && c->lead_nd[i] >= 0 && wgt_op_dim_symbol(&dims[0]) >= 0 &&
            c->lead_sym[i] == wgt_op_dim_symbol(&dims[0]))
            lead_from = i;
    int first = 0;
    if (lead_from >= 0) {
        for (int j = 0; j < c->lead_nd[lead_from]; j++) a->shape[a->ndim++] = c->lead[lead_from][j];
        first = 1;
    }
    for (int i = first; i < k; i++) {
        uint64_t v = wgt_op_dim_value(&dims[i], c->s);
        if (v > SIZE_MAX / 4) return wgt_fail(WGT_ERR_ARG, "%s: '%s' would be too large", d->name, d->b[b].name);
        a->shape[a->ndim++] = (size_t)v;
    }
    uint64_t n = 1;
    for (int i = 0; i < a->ndim; i++) {
        if (a->shape[i] && n > (SIZE_MAX / 4) / a->shape[i])
            return wgt_fail(WGT_ERR_ARG, "%s: '%s' would be too large", d->name, d->b[b].name);
        n *= a->shape[i];
    }
    a->n = (size_t)n;
    return WGT_OK;
}

static wgt_status check_memory(op_call *c, wgt_backend *be) {
    const wgt_op_desc *d = c->d;
    double total = 0;
    for (int b = 0; b < d->nb; b++) {
        if (!c->have[b] && wgt_role_optional(d->b[b].role)) continue;
        total += (double)c->a[b].n * 4;
        if (c->a[b].n > be->max_binding_elems)
            return wgt_fail(WGT_ERR_CONFIG, "%s: '%s' holds %.1f MiB, above this device's largest storage binding (%.1f MiB); "
                            "use --backend cpu or smaller arrays", d->name, d->b[b].name, c->a[b].n * 4 / 1048576.0,
                            be->max_binding_elems * 4 / 1048576.0);
    }
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    double ram = pages > 0 && psize > 0 ? (double)pages * (double)psize : 0;
    if (ram > 0 && 2 * total > ram)  // host copies plus device buffers
        return wgt_fail(WGT_ERR_MEMORY, "%s: these sizes need %.1f GiB, more than this machine can hold (%.1f GiB)", d->name,
                        2 * total / 1073741824.0, ram / 1073741824.0);
    return WGT_OK;
}

static const char *const op_flags[] = {"--backend=", "--device=", "--adapter=", "--in=", "--out=", "--set=", "--help",
                                       "--list", NULL};

static wgt_status parse_args(op_call *c, int argc, char **argv, const char **backend, const char **adapter, int *want_help) {
    const wgt_op_desc *d = c->d;
    for (int argi = 2; argi < argc; argi++) {
        const char *a = argv[argi];
        if (!strcmp(a, "--help")) { op_help(d); *want_help = 2; return WGT_OK; }
        if (!cli_flag_known(a, op_flags) || !strcmp(a, "--list")) return cli_unknown_flag("op", a, op_flags);
        if (argi + 1 >= argc) return wgt_fail(WGT_ERR_ARG, "option '%s' needs a value", a);
        const char *v = argv[++argi];
        char key[64];
        const char *val;
        if (!strcmp(a, "--backend") || !strcmp(a, "--device")) {
            *backend = v;
        } else if (!strcmp(a, "--adapter")) {
            *adapter = v;
        } else if (!strcmp(a, "--in") || !strcmp(a, "--out")) {
            WGT_TRY(split_kv(a, v, key, sizeof key, &val));
            int b = bind_index(d, key);
            if (b < 0) return wgt_fail(WGT_ERR_ARG, "op '%s' has no binding '%s' (see wgtrain op %s --help)", d->name, key, d->name);
            int is_in = !strcmp(a, "--in");
            if (is_in && !wgt_role_reads(d->b[b].role))
                return wgt_fail(WGT_ERR_ARG, "'%s' is an output of %s; give it with --out", key, d->name);
            if (!is_in && !wgt_role_writes(d->b[b].role))
                return wgt_fail(WGT_ERR_ARG, "'%s' is an input of %s; give it with --in", key, d->name);
            (is_in ? c->in_path : c->out_path)[b] = val;
        } else if (!strcmp(a, "--set")) {
            WGT_TRY(split_kv(a, v, key, sizeof key, &val));
            int p = -1;
            for (int i = 0; i < d->ns; i++)
                if (!strcmp(d->s[i].name, key)) p = i;
            if (p < 0) return wgt_fail(WGT_ERR_ARG, "op '%s' has no scalar '%s' (see wgtrain op %s --help)", d->name, key, d->name);
            char flag[80];
            snprintf(flag, sizeof flag, "--set %s", key);
            WGT_TRY(cli_parse_double(flag, val, &c->s[p]));
            WGT_TRY(check_scalar(c, p));  // before any size is derived from it
            c->s_set[p] = 1;
        } else {
            return cli_unknown_flag("op", a, op_flags);
        }
    }
    return WGT_OK;
}

static wgt_status load_inputs(op_call *c) {
    const wgt_op_desc *d = c->d;
    for (int b = 0; b < d->nb; b++) {
        c->lead_nd[b] = -1;
        if (!c->in_path[b]) {
            if (d->b[b].role == WGT_ROLE_IN)
                return wgt_fail(WGT_ERR_ARG, "%s needs input '%s': add --in %s=FILE.npy", d->name, d->b[b].name,
                                d->b[b].name);
            continue;
        }
        WGT_TRY(npy_load(&c->a[b], c->in_path[b]));
        c->have[b] = 1;
        const wgt_type bt = d->b[b].type;
        const npy_dtype want = bt == WGT_TYPE_F32 ? NPY_F32 : bt == WGT_TYPE_F16 ? NPY_F16 : NPY_I32;
        if ((want == NPY_I32) != (c->a[b].dtype == NPY_I32 || c->a[b].dtype == NPY_U32) ||
            (want != NPY_I32 && c->a[b].dtype != want))
            return wgt_fail(WGT_ERR_FORMAT, "'%s' (%s) must be %s, got %s", d->b[b].name, c->in_path[b],
                            want == NPY_I32 ? "int32 or uint32" : npy_dtype_name(want), npy_dtype_name(c->a[b].dtype));
    }
    return WGT_OK;
}

static wgt_status op_main(int argc, char **argv, int *want_help) {
    const char *backend = "cpu", *adapter = NULL;
    WGT_TRY(cli_args_split(&argc, &argv, op_flags));
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "--list")) { *want_help = 1; return WGT_OK; }
    op_call c;
    memset(&c, 0, sizeof c);
    c.d = wgt_op_find(argv[1]);
    if (!c.d) {
        const char *names[WGT_OP_COUNT + 1];
        for (int i = 0; i < WGT_OP_COUNT; i++) names[i] = wgt_op_descs[i].name;
        names[WGT_OP_COUNT] = NULL;
        char hint[128];
        cli_suggest(argv[1], names, hint, sizeof hint);
        if (hint[0]) return wgt_fail(WGT_ERR_ARG, "unknown op '%s'; did you mean %s? (`wgtrain op --list` lists them)", argv[1], hint);
        return wgt_fail(WGT_ERR_ARG, "unknown op '%s'; `wgtrain op --list` lists them", argv[1]);
    }
    const wgt_op_desc *d = c.d;
    for (int i = 0; i < d->ns; i++) c.s[i] = NAN;
    WGT_TRY(parse_args(&c, argc, argv, &backend, &adapter, want_help));
    if (*want_help) return WGT_OK;

    wgt_status st = load_inputs(&c);
    // sizes: --set values first, then whatever the shapes tell, repeated until nothing changes;
    // then the defaults (op_extras' computed ones, the list's), and the shapes matched again:
    // a default may make another size solvable (NKV = NH gives HS from qkv's width) and must
    // agree with the shapes
    if (st == WGT_OK) st = match_all(&c);
    if (st == WGT_OK) st = op_extras(&c);
    for (int i = 0; i < d->ns && st == WGT_OK; i++)
        if (isnan(c.s[i]) && !isnan(d->s[i].def)) c.s[i] = d->s[i].def;
    if (st == WGT_OK) st = match_all(&c);
    if (st == WGT_OK) st = check_scalars(&c);
    if (st == WGT_OK) st = op_checks(&c);
    // in+out bindings not given start at zero; optional ones not named stay absent
    for (int b = 0; b < d->nb && st == WGT_OK; b++) {
        if (c.have[b]) continue;
        if (wgt_role_optional(d->b[b].role) && !c.out_path[b]) continue;
        st = fill_shape(&c, b);
        if (st == WGT_OK) c.have[b] = wgt_role_reads(d->b[b].role) ? 2 : 3;  // 2: zeros, 3: output
    }
    wgt_backend *be = NULL;
    if (st == WGT_OK) st = cli_backend_open(&be, backend, adapter, 0);
    if (st == WGT_OK) st = check_memory(&c, be);
    wgt_buf *bufs[WGT_OP_MAX_BINDS] = {0};
    wgt_view v[WGT_OP_MAX_BINDS];
    for (int b = 0; b < d->nb && st == WGT_OK; b++) {
        v[b] = wgt_view_none();
        if (!c.have[b]) continue;
        st = be->buf_alloc(be, &bufs[b], npy_words(&c.a[b]), d->b[b].name);  // zero-filled
        if (st != WGT_OK) break;
        v[b] = wgt_buf_view(be, bufs[b]);
        if (c.have[b] == 1) st = be->upload(be, v[b], c.a[b].data, npy_words(&c.a[b]));
    }
    if (st == WGT_OK) {
        d->call(be, v, c.s);
        st = be->sync(be);
    }
    for (int b = 0; b < d->nb && st == WGT_OK; b++) {
        if (!c.out_path[b] || !c.have[b]) continue;
        if (!c.a[b].data) c.a[b].data = wgt_malloc(npy_words(&c.a[b]) * 4 + 4);
        st = be->download(be, c.a[b].data, v[b], npy_words(&c.a[b]));
        if (st == WGT_OK) st = npy_save(c.out_path[b], &c.a[b]);
    }
    for (int b = 0; b < d->nb; b++) {
        if (bufs[b]) be->buf_free(be, bufs[b]);
        npy_free(&c.a[b]);
    }
    if (be) be->free(be);
    return st;
}

int cmd_op(int argc, char **argv) {
    int want_help = 0;
    wgt_status st = op_main(argc, argv, &want_help);
    if (st != WGT_OK) return cli_fail("op", st);
    if (want_help == 1) {
        printf("usage: wgtrain op OP [--backend cpu|webgpu] [--adapter A] --in NAME=FILE.npy ... [--set KEY=VALUE ...]\n"
               "                 --out NAME=FILE.npy ...\n"
               "  Runs one op on .npy inputs (float32; float16 for f16 bindings; integers int32 or uint32) and writes\n"
               "  its outputs.\n"
               "  Sizes come from the input shapes; in-place bindings are named once: --in x=a.npy --out x=b.npy;\n"
               "  in+out bindings not given start at zero. OP --help lists its bindings and scalars.\n"
               "ops:\n");
        op_list(stdout);
    }
    return 0;
}
