// cmd_op.c — `wgtrain op NAME --backend cpu|webgpu --in NAME=FILE.npy ... --set KEY=VALUE ...
// --out NAME=FILE.npy ...`: runs one kernel on NumPy inputs. In-place bindings are named once:
// `--in x=a.npy --out x=b.npy` reads x from a.npy and writes the kernel's result to b.npy.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/cli.h"
#include "cli/op_table.h"

static const op_desc *const tables[] = {op_table_seed, op_table_gpt, op_table_attn};

const op_desc *op_find(const char *name) {
    for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++)
        for (const op_desc *d = tables[t]; d->name; d++)
            if (!strcmp(d->name, name)) return d;
    return NULL;
}

void op_list(FILE *f) {
    for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++)
        for (const op_desc *d = tables[t]; d->name; d++) fprintf(f, "  %-22s %s\n", d->name, d->summary);
}

void op_out_shape(op_call *c, int out, int ndim, const size_t *shape) {
    npy_array *a = &c->a[out];
    a->dtype = c->d->b[out].kind == OP_F32 ? NPY_F32 : NPY_U32;
    a->ndim = ndim;
    a->n = 1;
    for (int i = 0; i < ndim; i++) { a->shape[i] = shape[i]; a->n *= shape[i]; }
}

void op_out_like(op_call *c, int out, int like) { op_out_shape(c, out, c->a[like].ndim, c->a[like].shape); }

static void op_help(const op_desc *d) {
    printf("wgtrain op %s: %s\n  bindings:", d->name, d->summary);
    for (int i = 0; i < d->nb; i++)
        printf(" %s(%s, %s%s)", d->b[i].name, d->b[i].kind == OP_F32 ? "float32" : "int32|uint32",
               d->b[i].role == OP_IN ? "in" : d->b[i].role == OP_OUT ? "out" : "in+out", d->b[i].optional ? ", optional" : "");
    printf("\n  parameters:");
    for (int i = 0; i < d->np; i++) {
        if (isnan(d->p[i].def)) printf(" %s(from shapes)", d->p[i].name);
        else printf(" %s=%g", d->p[i].name, d->p[i].def);
    }
    printf("\n");
}

static int bind_index(const op_desc *d, const char *name) {
    for (int i = 0; i < d->nb; i++) if (!strcmp(d->b[i].name, name)) return i;
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

static wgt_status op_main(int argc, char **argv, int *want_help) {
    const char *backend = "cpu", *adapter = NULL;
    const op_desc *d = NULL;
    const char *in_path[OP_MAX_BINDS] = {0}, *out_path[OP_MAX_BINDS] = {0};
    op_call c;
    memset(&c, 0, sizeof c);
    int argi = 1;
    if (argc < 2 || !strcmp(argv[1], "--help")) { *want_help = 1; return WGT_OK; }
    d = op_find(argv[1]);
    if (!d) return wgt_fail(WGT_ERR_ARG, "unknown kernel '%s'; `wgtrain op --help` lists them", argv[1]);
    c.d = d;
    for (int i = 0; i < d->np; i++) c.p[i] = d->p[i].def;
    for (argi = 2; argi < argc; argi++) {
        const char *a = argv[argi];
        if (!strcmp(a, "--help")) { op_help(d); *want_help = 2; return WGT_OK; }
        if (argi + 1 >= argc) return wgt_fail(WGT_ERR_ARG, "option '%s' needs a value", a);
        const char *v = argv[++argi];
        char key[64];
        const char *val;
        if (!strcmp(a, "--backend") || !strcmp(a, "--device")) backend = v;
        else if (!strcmp(a, "--adapter")) adapter = v;
        else if (!strcmp(a, "--in") || !strcmp(a, "--out")) {
            WGT_TRY(split_kv(a, v, key, sizeof key, &val));
            int b = bind_index(d, key);
            if (b < 0) return wgt_fail(WGT_ERR_ARG, "kernel '%s' has no binding '%s' (see wgtrain op %s --help)", d->name, key, d->name);
            int is_in = !strcmp(a, "--in");
            if (is_in && d->b[b].role == OP_OUT)
                return wgt_fail(WGT_ERR_ARG, "'%s' is an output of %s; give it with --out", key, d->name);
            if (!is_in && d->b[b].role == OP_IN)
                return wgt_fail(WGT_ERR_ARG, "'%s' is an input of %s; give it with --in", key, d->name);
            (is_in ? in_path : out_path)[b] = val;
        } else if (!strcmp(a, "--set")) {
            WGT_TRY(split_kv(a, v, key, sizeof key, &val));
            int p = -1;
            for (int i = 0; i < d->np; i++) if (!strcmp(d->p[i].name, key)) p = i;
            if (p < 0) return wgt_fail(WGT_ERR_ARG, "kernel '%s' has no parameter '%s' (see wgtrain op %s --help)", d->name, key, d->name);
            char flag[80];
            snprintf(flag, sizeof flag, "--set %s", key);
            WGT_TRY(cli_parse_double(flag, val, &c.p[p]));
            c.p_set[p] = 1;
        } else {
            return wgt_fail(WGT_ERR_ARG, "unknown option '%s' (see wgtrain op %s --help)", a, d->name);
        }
    }
    wgt_status st = WGT_OK;
    for (int b = 0; b < d->nb && st == WGT_OK; b++) {
        if (d->b[b].role != OP_OUT && !in_path[b]) {
            if (d->b[b].optional) continue;
            st = wgt_fail(WGT_ERR_ARG, "%s needs input '%s': add --in %s=FILE.npy", d->name, d->b[b].name, d->b[b].name);
            break;
        }
        if (d->b[b].role == OP_OUT) continue;
        st = npy_load(&c.a[b], in_path[b]);
        if (st != WGT_OK) break;
        c.have[b] = 1;
        if (d->b[b].kind == OP_F32 && c.a[b].dtype != NPY_F32)
            st = wgt_fail(WGT_ERR_FORMAT, "'%s' (%s) must be float32, got %s", d->b[b].name, in_path[b], npy_dtype_name(c.a[b].dtype));
        else if (d->b[b].kind == OP_INT && c.a[b].dtype == NPY_F32)
            st = wgt_fail(WGT_ERR_FORMAT, "'%s' (%s) must be int32 or uint32, got float32", d->b[b].name, in_path[b]);
    }
    if (st == WGT_OK) st = d->plan(&c);
    for (int i = 0; i < d->np && st == WGT_OK; i++)
        if (isnan(c.p[i])) st = wgt_fail(WGT_ERR_ARG, "%s needs --set %s=VALUE", d->name, d->p[i].name);
    wgt_backend *be = NULL;
    if (st == WGT_OK) st = cli_backend_open(&be, backend, adapter, 0);
    wgt_buf *bufs[OP_MAX_BINDS] = {0};
    for (int b = 0; b < d->nb && st == WGT_OK; b++) {
        if (d->b[b].role == OP_IN && !c.have[b] && d->b[b].optional) continue;
        size_t n = c.a[b].n;
        st = be->buf_alloc(be, &bufs[b], n, d->b[b].name);
        if (st != WGT_OK) break;
        c.v[b].buf = bufs[b];
        c.v[b].off = 0;
        if (c.have[b]) st = be->upload(be, c.v[b], c.a[b].data, n);
    }
    if (st == WGT_OK) {
        d->run(be, &c);
        st = be->sync(be);
    }
    for (int b = 0; b < d->nb && st == WGT_OK; b++) {
        if (d->b[b].role == OP_IN) continue;
        if (!out_path[b]) continue;  // an output not asked for is computed and dropped
        if (d->b[b].role == OP_OUT) c.a[b].data = wgt_malloc(c.a[b].n * 4 + 4);
        st = be->download(be, c.a[b].data, c.v[b], c.a[b].n);
        if (st == WGT_OK) st = npy_save(out_path[b], &c.a[b]);
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
        printf("usage: wgtrain op KERNEL [--backend cpu|webgpu] [--adapter A] --in NAME=FILE.npy ... [--set KEY=VALUE ...]\n"
               "                 --out NAME=FILE.npy ...\n"
               "  Runs one kernel on .npy inputs (float32; integers int32 or uint32) and writes its outputs.\n"
               "  In-place bindings are named once: --in x=a.npy --out x=b.npy. KERNEL --help lists its bindings.\n"
               "kernels:\n");
        op_list(stdout);
    }
    return 0;
}
