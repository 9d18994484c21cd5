// model.c — the part of every model that does not depend on its family: the registry of
// families, the config (checks, JSON, comparison), and everything driven by the family's
// tensor table: the memory layout, binding the family's named views, initialisation,
// safetensors in Hugging Face naming, checkpoint state, the loss and the optimizer. A family
// (gpt2.c) adds its table, its activations and its forward and backward op lists.
//
// Memory: parameters, gradients and the two AdamW moments are each one buffer with every
// tensor at a 256-byte aligned offset, weight-decayed tensors first so that AdamW runs as two
// contiguous ranges; activations are one buffer per tensor.
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend/dropout.h"
#include "core/token_id.h"
#include "backend/opt_status.h"
#include "backend/half.h"
#include "core/clock.h"
#include "core/fileutil.h"
#include "core/json_strict.h"
#include "model/base_lowbit.h"
#include "model/lora.h"
#include "model/model_impl.h"

// ------------------------------------------------------------------ families

#define archs model_archs  // the registry: families.c
#define N_ARCHS model_n_archs

const model_arch *model_arch_find(const char *name) {
    for (int i = 0; i < N_ARCHS; i++)
        if (!strcmp(archs[i]->name, name)) return archs[i];
    return NULL;
}

static wgt_status unknown_arch(const char *name) {
    char known[256] = "";
    for (int i = 0; i < N_ARCHS; i++)
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "", archs[i]->name);
    return wgt_fail(WGT_ERR_CONFIG, "unknown model family '%s'; this build has: %s", name, known);
}

// ------------------------------------------------------------------ config

// The sizes every family has (JSON keys, and the largest value JSON accepts).
static const model_config_field shared_fields[] = {
    {"n_layer", offsetof(model_config, n_layer), MODEL_CF_INT, 256, 0},
    {"n_head", offsetof(model_config, n_head), MODEL_CF_INT, 4096, 0},
    {"d_model", offsetof(model_config, d_model), MODEL_CF_INT, 65536, 0},
    {"d_ff", offsetof(model_config, d_ff), MODEL_CF_INT, 262144, 0},
    {"vocab", offsetof(model_config, vocab), MODEL_CF_INT, TOKEN_MAX_VOCAB, 0},
    {"max_seq", offsetof(model_config, max_seq), MODEL_CF_INT, 1 << 20, 0},
};
#define N_SHARED (int)(sizeof shared_fields / sizeof shared_fields[0])

static double cf_get(const model_config *c, const model_config_field *f) {
    const char *p = (const char *)c + f->off;
    return f->type == MODEL_CF_INT ? *(const int *)p : *(const double *)p;
}
static void cf_set(model_config *c, const model_config_field *f, double v) {
    char *p = (char *)c + f->off;
    if (f->type == MODEL_CF_INT) *(int *)p = (int)v;
    else *(double *)p = v;
}
static void cf_format(const model_config *c, const model_config_field *f, char *buf, size_t n) {
    if (f->type == MODEL_CF_INT) snprintf(buf, n, "%d", (int)cf_get(c, f));
    else {
        // the shortest form that reads back exactly
        double v = cf_get(c, f);
        for (int prec = 15; prec <= 17; prec++) {
            snprintf(buf, n, "%.*g", prec, v);
            if (strtod(buf, NULL) == v) break;
        }
    }
}

// Calls fn on every field of c's family (shared first); stops at a nonzero return.
typedef int (*cf_visit)(const model_config_field *f, void *ctx);
static int each_field(const model_arch *a, cf_visit fn, void *ctx) {
    for (int i = 0; i < N_SHARED; i++) if (fn(&shared_fields[i], ctx)) return 1;
    for (int i = 0; a && i < a->n_config_fields; i++) if (fn(&a->config_fields[i], ctx)) return 1;
    return 0;
}

// Whether family a has the config field at offset off.
static int has_field(const model_arch *a, size_t off) {
    for (int i = 0; i < a->n_config_fields; i++)
        if (a->config_fields[i].off == off) return 1;
    return 0;
}

// The family-specific fields of the other families must be 0 (not set) in a config of family a.
static wgt_status check_foreign_fields(const model_config *c, const model_arch *a) {
    for (int k = 0; k < N_ARCHS; k++) {
        const model_arch *o = archs[k];
        for (int i = 0; o != a && i < o->n_config_fields; i++) {
            const model_config_field *f = &o->config_fields[i];
            if (has_field(a, f->off) || cf_get(c, f) == 0) continue;
            char v[40];
            cf_format(c, f, v, sizeof v);
            return wgt_fail(WGT_ERR_CONFIG, "%s = %s is a setting of the %s family; a %s model has none (leave it unset)",
                            f->key, v, o->name, a->name);
        }
    }
    return WGT_OK;
}

void model_config_defaults(model_config *c) {
    const model_arch *a = model_arch_find(c->arch);
    if (a && a->defaults) a->defaults(c);
}

void model_config_set_arch(model_config *c, const char *arch) {
    for (int k = 0; k < N_ARCHS; k++)
        for (int i = 0; i < archs[k]->n_config_fields; i++) cf_set(c, &archs[k]->config_fields[i], 0);
    snprintf(c->arch, sizeof c->arch, "%s", arch);
}

wgt_status model_config_check(const model_config *c) {
    const model_arch *a = model_arch_find(c->arch);
    if (!a) return unknown_arch(c->arch);
    WGT_TRY(check_foreign_fields(c, a));
    if (c->n_layer < 1 || c->n_layer > 256) return wgt_fail(WGT_ERR_CONFIG, "n_layer must be 1..256, got %d", c->n_layer);
    if (c->n_head < 1) return wgt_fail(WGT_ERR_CONFIG, "n_head must be at least 1, got %d", c->n_head);
    if (c->d_model < 1 || (!c->head_dim && c->d_model % c->n_head))
        return wgt_fail(WGT_ERR_CONFIG, "d_model (%d) must be a positive multiple of n_head (%d)", c->d_model, c->n_head);
    if (c->head_dim < 0) return wgt_fail(WGT_ERR_CONFIG, "head_dim must be at least 0 (0: d_model/n_head), got %d", c->head_dim);
    if (model_head_size(c) > MODEL_HEAD_SIZE_MAX)
        return wgt_fail(WGT_ERR_CONFIG, "head size %s = %d is above the supported %d; use more heads",
                        c->head_dim ? "head_dim" : "d_model/n_head", model_head_size(c), MODEL_HEAD_SIZE_MAX);
    if (c->d_ff < 1) return wgt_fail(WGT_ERR_CONFIG, "d_ff must be at least 1, got %d", c->d_ff);
    if (c->vocab < 1 || c->vocab > TOKEN_MAX_VOCAB)
        return wgt_fail(WGT_ERR_CONFIG, "vocab must be 1..%d, got %d", TOKEN_MAX_VOCAB, c->vocab);
    if (c->max_seq < 1) return wgt_fail(WGT_ERR_CONFIG, "max_seq must be at least 1, got %d", c->max_seq);
    return a->config_check ? a->config_check(c) : WGT_OK;
}

typedef struct { const model_config *c; cJSON *obj; } to_json_ctx;
static int field_to_json(const model_config_field *f, void *p) {
    to_json_ctx *x = p;
    char num[40];
    cf_format(x->c, f, num, sizeof num);
    cJSON_AddRawToObject(x->obj, f->key, num);
    return 0;
}

cJSON *model_config_to_cjson(const model_config *c) {
    cJSON *obj = cJSON_CreateObject();
    WGT_ASSERT(obj, "cJSON_CreateObject failed (out of memory)");
    cJSON_AddStringToObject(obj, "arch", c->arch);
    to_json_ctx x = {c, obj};
    each_field(model_arch_find(c->arch), field_to_json, &x);
    return obj;
}

char *model_config_to_json(const model_config *c) {
    cJSON *obj = model_config_to_cjson(c);
    char *s = cJSON_Print(obj);
    cJSON_Delete(obj);
    WGT_ASSERT(s, "cJSON_Print failed (out of memory)");
    return s;
}

typedef struct { model_config *c; const cJSON *obj; const char *what; wgt_status st; } from_json_ctx;
static int field_from_json(const model_config_field *f, void *p) {
    from_json_ctx *x = p;
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(x->obj, f->key);
    if (!it && f->since_later) {  // a config written before the field existed: the field's "none"
        cf_set(x->c, f, 0);
        return 0;
    }
    int ok = cJSON_IsNumber(it) && isfinite(it->valuedouble) && it->valuedouble >= 0 && it->valuedouble <= f->hi;
    if (ok && f->type == MODEL_CF_INT && it->valuedouble != floor(it->valuedouble)) ok = 0;
    if (!ok) {
        x->st = wgt_fail(WGT_ERR_FORMAT, "%s: the model configuration lacks model.%s or its value is out of range",
                         x->what, f->key);
        return 1;
    }
    cf_set(x->c, f, it->valuedouble);
    return 0;
}

wgt_status model_config_from_cjson(model_config *c, const cJSON *obj, const char *what) {
    memset(c, 0, sizeof *c);
    if (!cJSON_IsObject(obj))
        return wgt_fail(WGT_ERR_FORMAT, "%s: the configuration has no \"model\" object", what);
    const cJSON *arch = cJSON_GetObjectItemCaseSensitive(obj, "arch");
    if (!arch) snprintf(c->arch, sizeof c->arch, "%s", MODEL_ARCH_DEFAULT);  // written before families existed
    else if (!cJSON_IsString(arch) || strlen(arch->valuestring) >= sizeof c->arch)
        return wgt_fail(WGT_ERR_FORMAT, "%s: the model configuration's \"arch\" is not a family name", what);
    else snprintf(c->arch, sizeof c->arch, "%s", arch->valuestring);
    const model_arch *a = model_arch_find(c->arch);
    if (!a) {
        char msg[512];
        unknown_arch(c->arch);
        snprintf(msg, sizeof msg, "%s", wgt_last_error());
        return wgt_fail(WGT_ERR_FORMAT, "%s: %s (written by another wgtrain?)", what, msg);
    }
    from_json_ctx x = {c, obj, what, WGT_OK};
    each_field(a, field_from_json, &x);
    return x.st;
}

wgt_status model_config_from_json(model_config *c, const char *json, const char *what) {
    cJSON *obj;
    char label[512];
    snprintf(label, sizeof label, "%s: the model configuration", what);
    if (json_parse_strict(&obj, json, strlen(json), 0, label) != WGT_OK) {
        memset(c, 0, sizeof *c);
        return WGT_ERR_FORMAT;  // the message names the problem
    }
    wgt_status st = model_config_from_cjson(c, obj, what);
    cJSON_Delete(obj);
    return st;
}

typedef struct { const model_config *a, *b; model_config_delta *d; } diff_ctx;
static int field_diff(const model_config_field *f, void *p) {
    diff_ctx *x = p;
    if (cf_get(x->a, f) == cf_get(x->b, f)) return 0;
    snprintf(x->d->key, sizeof x->d->key, "%s", f->key);
    cf_format(x->a, f, x->d->a, sizeof x->d->a);
    cf_format(x->b, f, x->d->b, sizeof x->d->b);
    return 1;
}

int model_config_diff(const model_config *a, const model_config *b, model_config_delta *d) {
    if (strcmp(a->arch, b->arch)) {
        snprintf(d->key, sizeof d->key, "arch");
        snprintf(d->a, sizeof d->a, "'%s'", a->arch);
        snprintf(d->b, sizeof d->b, "'%s'", b->arch);
        return 1;
    }
    diff_ctx x = {a, b, d};
    return each_field(model_arch_find(a->arch), field_diff, &x);
}

const st_tensor *model_st_find(const model_arch *a, const st_file *f, const char *name) {
    const st_tensor *t = st_find(f, name);
    if (t || !a->hf_prefix) return t;
    char buf[192];
    snprintf(buf, sizeof buf, "%s%s", a->hf_prefix, name);
    return st_find(f, buf);
}

wgt_status model_config_from_safetensors(model_config *c, const char *arch, const char *path, int n_head) {
    memset(c, 0, sizeof *c);
    const model_arch *a = model_arch_find(arch);
    if (!a) return unknown_arch(arch);
    st_file *f;
    WGT_TRY(st_open_checkpoint(&f, path));  // the shapes alone
    snprintf(c->arch, sizeof c->arch, "%s", a->name);
    wgt_status st = a->config_from_safetensors(c, f, path, n_head);
    st_close(f);
    if (st == WGT_OK) st = model_config_check(c);
    return st;
}

// ------------------------------------------------------------------ Hugging Face config.json

static const char *json_type(const cJSON *it) {
    if (cJSON_IsNumber(it)) return "a number";
    if (cJSON_IsString(it)) return "a string";
    if (cJSON_IsBool(it)) return "a boolean";
    if (cJSON_IsArray(it)) return "an array";
    if (cJSON_IsObject(it)) return "an object";
    return "null";
}

wgt_status model_hf_int(const cJSON *o, const char *what, const char *key, int required, int dflt, int lo, int hi,
                        int *out) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!it || cJSON_IsNull(it)) {
        if (required) return wgt_fail(WGT_ERR_CONFIG, "%s lacks \"%s\"", what, key);
        *out = dflt;
        return WGT_OK;
    }
    if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble) || it->valuedouble != floor(it->valuedouble))
        return wgt_fail(WGT_ERR_CONFIG, "%s: \"%s\" must be an integer, got %s", what, key, json_type(it));
    if (it->valuedouble < lo || it->valuedouble > hi)
        return wgt_fail(WGT_ERR_CONFIG, "%s: \"%s\" is %.15g; this build takes %d..%d", what, key, it->valuedouble, lo, hi);
    *out = (int)it->valuedouble;
    return WGT_OK;
}

wgt_status model_hf_double(const cJSON *o, const char *what, const char *key, int required, double dflt, double lo,
                           double hi, double *out) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!it || cJSON_IsNull(it)) {
        if (required) return wgt_fail(WGT_ERR_CONFIG, "%s lacks \"%s\"", what, key);
        *out = dflt;
        return WGT_OK;
    }
    if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble))
        return wgt_fail(WGT_ERR_CONFIG, "%s: \"%s\" must be a number, got %s", what, key, json_type(it));
    if (!(it->valuedouble >= lo && it->valuedouble <= hi))
        return wgt_fail(WGT_ERR_CONFIG, "%s: \"%s\" is %g; this build takes %g..%g", what, key, it->valuedouble, lo, hi);
    *out = it->valuedouble;
    return WGT_OK;
}

wgt_status model_hf_bool(const cJSON *o, const char *what, const char *key, int dflt, int *out) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!it || cJSON_IsNull(it)) {
        *out = dflt;
        return WGT_OK;
    }
    if (!cJSON_IsBool(it)) return wgt_fail(WGT_ERR_CONFIG, "%s: \"%s\" must be true or false, got %s", what, key, json_type(it));
    *out = cJSON_IsTrue(it);
    return WGT_OK;
}

wgt_status model_hf_expect(const cJSON *o, const char *what, const char *key, const char *want, int is_bool,
                           const char *why) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!it || cJSON_IsNull(it)) return WGT_OK;
    if (is_bool) {
        if (cJSON_IsBool(it) && cJSON_IsTrue(it) == !strcmp(want, "true")) return WGT_OK;
        return wgt_fail(WGT_ERR_CONFIG, "%s: \"%s\" must be %s: %s", what, key, want, why);
    }
    if (cJSON_IsString(it)) {
        // want: one value or several separated by '|'
        size_t n = strlen(it->valuestring);
        for (const char *w = want; *w;) {
            const char *bar = strchr(w, '|');
            size_t len = bar ? (size_t)(bar - w) : strlen(w);
            if (len == n && !strncmp(w, it->valuestring, n)) return WGT_OK;
            w += len + (bar != NULL);
        }
        return wgt_fail(WGT_ERR_CONFIG, "%s: \"%s\" is \"%s\", this build supports only %s: %s", what, key,
                        it->valuestring, want, why);
    }
    return wgt_fail(WGT_ERR_CONFIG, "%s: \"%s\" must be %s (got %s): %s", what, key, want, json_type(it), why);
}

cJSON *model_hf_config_new(const char *hf_class, const char *model_type) {
    cJSON *o = cJSON_CreateObject();
    WGT_ASSERT(o, "cJSON_CreateObject failed (out of memory)");
    cJSON *arch = cJSON_AddArrayToObject(o, "architectures");
    cJSON_AddItemToArray(arch, cJSON_CreateString(hf_class));
    cJSON_AddStringToObject(o, "model_type", model_type);
    return o;
}

void model_hf_add_number(cJSON *o, const char *key, double v) {
    char num[40];
    if (v == floor(v) && fabs(v) < 9007199254740992.0) snprintf(num, sizeof num, "%.0f", v);
    else
        for (int prec = 15; prec <= 17; prec++) {
            snprintf(num, sizeof num, "%.*g", prec, v);
            if (strtod(num, NULL) == v) break;
        }
    cJSON_AddRawToObject(o, key, num);
}

static const model_arch *arch_by_hf_type(const char *t) {
    for (int i = 0; i < N_ARCHS; i++)
        if (archs[i]->hf_model_type && !strcmp(archs[i]->hf_model_type, t)) return archs[i];
    return NULL;
}

static wgt_status hf_config_parse(model_config *c, const char *json, size_t json_len, const char *what) {
    memset(c, 0, sizeof *c);
    // strict: a duplicate key (which Python's json would read as its last value), trailing
    // data, a NUL or a byte order mark is refused rather than read differently from transformers
    cJSON *obj;
    if (json_parse_strict(&obj, json, json_len, 0, what) != WGT_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", wgt_last_error());
        return wgt_fail(WGT_ERR_CONFIG, "%s (a Hugging Face config.json must be one plain JSON object)", msg);
    }
    if (!cJSON_IsObject(obj)) {
        cJSON_Delete(obj);
        return wgt_fail(WGT_ERR_CONFIG, "%s is not a JSON object (a Hugging Face config.json)", what);
    }
    wgt_status st = WGT_OK;
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(obj, "model_type");
    const model_arch *a = cJSON_IsString(mt) ? arch_by_hf_type(mt->valuestring) : NULL;
    if (!cJSON_IsString(mt)) {
        st = wgt_fail(WGT_ERR_CONFIG, "%s has no \"model_type\" string (a Hugging Face config.json names its model type)",
                      what);
    } else if (!a || !a->config_from_hf) {
        char known[256] = "";
        for (int i = 0; i < N_ARCHS; i++)
            if (archs[i]->hf_model_type && archs[i]->config_from_hf)
                snprintf(known + strlen(known), sizeof known - strlen(known), "%s\"%s\"", known[0] ? ", " : "",
                         archs[i]->hf_model_type);
        st = wgt_fail(WGT_ERR_CONFIG, "%s: model_type \"%s\" is not a family of this build; it reads %s", what,
                      mt->valuestring, known);
    } else {
        snprintf(c->arch, sizeof c->arch, "%s", a->name);
        st = a->config_from_hf(c, obj, what);
    }
    cJSON_Delete(obj);
    if (st == WGT_OK && model_config_check(c) != WGT_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", wgt_last_error());
        st = wgt_fail(WGT_ERR_CONFIG, "%s: %s", what, msg);
    }
    return st;
}

wgt_status model_config_from_hf_json(model_config *c, const char *json, const char *what) {
    return hf_config_parse(c, json, strlen(json), what);
}

wgt_status model_config_from_hf_file(model_config *c, const char *path) {
    memset(c, 0, sizeof *c);
    enum { MAX_BYTES = 1 << 24 };  // a config.json is a few kilobytes
    char *buf;
    size_t n;
    WGT_TRY(file_read_all(path, "the model config", "pass a Hugging Face config.json", MAX_BYTES, &buf, &n));
    wgt_status st = hf_config_parse(c, buf, n, path);  // its length: a NUL inside is refused, not an end
    free(buf);
    return st;
}

char *model_config_to_hf_json(const model_config *c) {
    const model_arch *a = model_arch_find(c->arch);
    WGT_ASSERT(a && a->config_to_hf, "model_config_to_hf_json: a family without a Hugging Face config");
    cJSON *obj = a->config_to_hf(c);
    char *s = cJSON_Print(obj);
    cJSON_Delete(obj);
    WGT_ASSERT(s, "cJSON_Print failed (out of memory)");
    return s;
}

size_t model_dim_size(const model_config *c, model_dim d) {
    switch (d) {
    case DIM_NONE: return 0;
    case DIM_C: return (size_t)c->d_model;
    case DIM_3C: return 3 * (size_t)c->d_model;
    case DIM_F: return (size_t)c->d_ff;
    case DIM_V: return (size_t)c->vocab;
    case DIM_MAXT: return (size_t)c->max_seq;
    case DIM_KV: return (size_t)c->n_kv_heads * (size_t)model_head_size(c);
    case DIM_Q: return (size_t)c->n_head * (size_t)model_head_size(c);
    case DIM_HS: return (size_t)model_head_size(c);
    }
    WGT_ASSERT(0, "unknown model_dim");
    return 0;
}

// ------------------------------------------------------------------ layout and memory

static size_t align_up(size_t n) { return (n + WGT_VIEW_ALIGN - 1) / WGT_VIEW_ALIGN * WGT_VIEW_ALIGN; }

static void add_tensor(wgt_model *m, const model_tensor_desc *d, int layer) {
    model_tensor *t = &m->t[m->np++];
    model_param_info *p = &t->info;
    t->desc = d;
    t->layer = layer;
    int len = snprintf(p->name, sizeof p->name, d->hf_name, layer);
    WGT_ASSERT(len > 0 && (size_t)len < sizeof p->name, "a tensor name is longer than model_param_info.name");
    p->ndim = d->shape[1] == DIM_NONE ? 1 : 2;
    p->shape[0] = model_dim_size(&m->c, d->shape[0]);
    p->shape[1] = model_dim_size(&m->c, d->shape[1]);
    p->n = p->ndim == 2 ? p->shape[0] * p->shape[1] : p->shape[0];
    p->flags = d->flags;
    p->init = d->init;
}

static int desc_present(const model_arch *a, const model_tensor_desc *d, const model_config *c) {
    return !a->tensor_absent || !a->tensor_absent(c, d);
}

// Expands the family's tensor table into the parameter table and gives every tensor its offset.
static void layout(wgt_model *m) {
    const model_arch *a = m->arch;
    const int L = m->c.n_layer;
    int count = 0;
    for (int i = 0; i < a->n_tensors; i++)
        if (desc_present(a, &a->tensors[i], &m->c)) count += a->tensors[i].per_layer ? L : 1;
    m->t = wgt_calloc((size_t)(count ? count : 1), sizeof *m->t);
    for (int i = 0; i < a->n_tensors;) {
        int j = i + 1;  // [i, j): one global entry, or a run of per-layer ones
        if (a->tensors[i].per_layer) while (j < a->n_tensors && a->tensors[j].per_layer) j++;
        if (!a->tensors[i].per_layer) {
            if (desc_present(a, &a->tensors[i], &m->c)) add_tensor(m, &a->tensors[i], -1);
        } else {
            for (int l = 0; l < L; l++)
                for (int k = i; k < j; k++)
                    if (desc_present(a, &a->tensors[k], &m->c)) add_tensor(m, &a->tensors[k], l);
        }
        i = j;
    }
    WGT_ASSERT(m->np == count, "tensor table expansion miscounted");
    size_t end = 0;  // where the last placed tensor ends
    for (int pass = 1; pass >= 0; pass--) {  // decayed tensors first
        for (int i = 0; i < m->np; i++) {
            model_param_info *p = &m->t[i].info;
            if (!!(p->flags & MODEL_T_DECAY) != pass) continue;
            if (p->flags & MODEL_T_PACKED) {
                // right after its predecessor, which must have been the tensor placed last
                const model_param_info *q = i > 0 ? &m->t[i - 1].info : NULL;
                WGT_ASSERT(q && m->t[i - 1].layer == m->t[i].layer && !!(q->flags & MODEL_T_DECAY) == pass &&
                               q->off + q->n == end && q->ndim == p->ndim && (p->ndim == 1 || q->shape[1] == p->shape[1]),
                           "a packed tensor must follow a matrix of the same width (or a vector), layer and decay in "
                           "the table");
                p->off = end;
            } else {
                p->off = align_up(end);
            }
            end = p->off + p->n;
        }
        end = align_up(end);
        if (pass == 1) m->decay_end = end;
    }
    m->n_elems = end;
}

// Points the family's view structs (globals, then one per layer) at each tensor of `state`.
static void bind_views(wgt_model *m, wgt_view state, void *globals, void *layers) {
    const model_arch *a = m->arch;
    for (int i = 0; i < m->np; i++) {
        const model_tensor *t = &m->t[i];
        size_t size = t->layer < 0 ? a->globals_size : a->layer_size;
        char *base = t->layer < 0 ? globals : (char *)layers + (size_t)t->layer * a->layer_size;
        WGT_ASSERT(t->desc->field + sizeof(wgt_view) <= size, "a tensor's field lies outside the family's view struct");
        *(wgt_view *)(base + t->desc->field) = model_subview(state, t->info.off, t->info.n);
    }
    // the structs hold only views, and every one must belong to a tensor (or to a tensor that
    // this config leaves out)
    WGT_ASSERT(a->globals_size % sizeof(wgt_view) == 0 && a->layer_size % sizeof(wgt_view) == 0,
               "the family's view structs must hold only wgt_views");
    const size_t ng = a->globals_size / sizeof(wgt_view), nl = a->layer_size / sizeof(wgt_view);
    unsigned char *absent_g = wgt_calloc(ng + 1, 1), *absent_l = wgt_calloc(nl + 1, 1);
    for (int i = 0; i < a->n_tensors; i++) {
        const model_tensor_desc *d = &a->tensors[i];
        if (desc_present(a, d, &m->c)) continue;
        size_t k = d->field / sizeof(wgt_view);
        if (d->per_layer && k < nl) absent_l[k] = 1;
        if (!d->per_layer && k < ng) absent_g[k] = 1;
    }
    const wgt_view *g = globals, *l = layers;
    for (size_t k = 0; k < ng; k++)
        WGT_ASSERT(g[k].buf || absent_g[k], "a view of the family's globals struct has no tensor in the table");
    for (size_t k = 0; k < (size_t)m->c.n_layer * nl; k++)
        WGT_ASSERT(l[k].buf || absent_l[k % nl], "a view of the family's per-layer struct has no tensor in the table");
    free(absent_g);
    free(absent_l);
}

// LoRA: the gradient views of the frozen tensors (lora_grad_view), in the family's structs.
static void bind_frozen_grads(wgt_model *m) {
    const model_arch *a = m->arch;
    for (int i = 0; i < m->np; i++) {
        const model_tensor *t = &m->t[i];
        char *base = t->layer < 0 ? m->gg : (char *)m->gl + (size_t)t->layer * a->layer_size;
        *(wgt_view *)(base + t->desc->field) = lora_grad_view(m, &t->info);
    }
}

static void track(wgt_model *m, wgt_buf *b) {
    if (m->nbufs == m->cap_bufs) {
        int cap = m->cap_bufs ? 2 * m->cap_bufs : 64;
        wgt_buf **nb = wgt_calloc((size_t)cap, sizeof *nb);
        if (m->nbufs) memcpy(nb, m->bufs, (size_t)m->nbufs * sizeof *nb);
        free(m->bufs);
        m->bufs = nb;
        m->cap_bufs = cap;
    }
    m->bufs[m->nbufs++] = b;
}

void model_alloc(wgt_model *m, wgt_view *v, size_t n, const char *label, int may_exceed) {
    *v = model_no_view();
    if (m->alloc_st != WGT_OK) return;
    if (n > m->be->max_binding_elems && !may_exceed) {
        m->alloc_st = wgt_fail(WGT_ERR_CONFIG, "activation '%s' needs %.1f MiB, above the device's %.1f MiB storage "
                               "binding limit; use a smaller batch (--batch) or sequence length (--seq)", label,
                               n * 4 / 1048576.0, m->be->max_binding_elems * 4 / 1048576.0);
        return;
    }
    wgt_buf *b = NULL;
    m->alloc_st = m->be->buf_alloc(m->be, &b, n, label);
    if (m->alloc_st != WGT_OK) return;
    track(m, b);
    *v = model_view(b, 0, n);
}

const char *model_precision_name(model_precision p) { return p == MODEL_PREC_F16 ? "f16" : "f32"; }

wgt_status model_precision_parse(const char *s, const char *flag, model_precision *out) {
    if (s && !strcmp(s, "f32")) *out = MODEL_PREC_F32;
    else if (s && !strcmp(s, "f16")) *out = MODEL_PREC_F16;
    else return wgt_fail(WGT_ERR_ARG, "%s must be f32 or f16, got '%s'", flag, s ? s : "");
    return WGT_OK;
}

model_precision model_prec(const wgt_model *m) { return m->prec; }

void model_alloc_act(wgt_model *m, wgt_view *v, size_t n, const char *label) {
    model_alloc(m, v, model_f16(m) ? wgt_f16_words(n) : n, label, 0);
}

void model_act_keep(wgt_model *m, wgt_view saved, wgt_view out, size_t n) {
    if (model_f16(m)) m->be->cast_f16(m->be, saved, out, n);
}

wgt_view model_act_f32(wgt_model *m, wgt_view saved, wgt_view scratch, size_t n) {
    if (!model_f16(m)) return saved;
    wgt_view v = model_subview(scratch, 0, n);
    m->be->cast_f32(m->be, v, saved, n);
    return v;
}

wgt_view model_half_weight(const wgt_model *m, wgt_view w) {
    WGT_ASSERT(w.buf == m->params.buf && w.off + w.n <= m->decay_end && w.off % 2 == 0,
               "an f16 GEMM weight must be a tensor of the weight-decayed range starting at an even element");
    return model_subview(m->params_h, w.off / 2, wgt_f16_words(w.n));
}

// LoRA in f16: a frozen weight (in the base, f32 or packed) has no f16 copy, so its GEMM and its
// adapters take the f16 input widened to f32 (LoRA's scratch).
static int frozen_f16(const wgt_model *m, wgt_view w) {
    return m->lora && model_f16(m) && (w.buf == m->base.buf || base_lowbit_is(m, w));
}

void model_matmul(wgt_model *m, wgt_view out, wgt_view inp, wgt_view w, wgt_view bias, uint32_t N, uint32_t C,
                  uint32_t OC) {
    if (frozen_f16(m, w)) inp = lora_widen(m, inp, (size_t)N * C);
    if (base_lowbit_is(m, w)) base_lowbit_matmul(m, out, inp, w, bias, N, C, OC);  // a packed frozen base
    else if (frozen_f16(m, w)) m->be->matmul(m->be, out, inp, w, bias, N, C, OC);
    else if (model_f16(m)) m->be->matmul_f16(m->be, out, inp, model_half_weight(m, w), bias, N, C, OC);
    else m->be->matmul(m->be, out, inp, w, bias, N, C, OC);
    lora_matmul(m, out, inp, w, N, C, OC);
}
void model_matmul_t(wgt_model *m, wgt_view dinp, wgt_view dout, wgt_view w, uint32_t N, uint32_t C, uint32_t OC) {
    if (base_lowbit_is(m, w)) base_lowbit_matmul_t(m, dinp, dout, w, N, C, OC);
    else if (frozen_f16(m, w)) m->be->matmul_t(m->be, dinp, dout, w, N, C, OC);  // (dout, dinp are f32)
    else if (model_f16(m)) m->be->matmul_t_f16(m->be, dinp, dout, model_half_weight(m, w), N, C, OC);
    else m->be->matmul_t(m->be, dinp, dout, w, N, C, OC);
    lora_matmul_t(m, dinp, dout, w, N, C, OC);
}
void model_matmul_at(wgt_model *m, wgt_view dw, wgt_view db, wgt_view dout, wgt_view inp, uint32_t N, uint32_t C,
                     uint32_t OC) {
    if (m->lora && model_f16(m) && lora_grad_frozen(m, dw)) inp = lora_widen(m, inp, (size_t)N * C);
    if (lora_matmul_at(m, dw, dout, inp, N, C, OC)) return;  // a frozen weight: its adapters' gradients alone
    if (model_f16(m)) m->be->matmul_at_f16(m->be, dw, db, dout, inp, N, C, OC);
    else m->be->matmul_at(m->be, dw, db, dout, inp, N, C, OC);
}

// ------------------------------------------------------------------ the head in row chunks

// The logits [B*T, V] are the largest buffer of a model with a large vocabulary at a long
// sequence (SmolLM2-360M at B=4, T=2048: 1.5 GiB). Under --recompute (a run that trades compute
// for memory) and past HEAD_WHOLE_MAX_BYTES the head runs in chunks of rows of HEAD_CHUNK_BYTES
// each, so that one chunk of logits exists at a time; the backward computes each chunk's logits
// again (one more lm_head GEMM a step) and the chunks' GEMMs are thinner, so without
// recomputation the logits stay whole and the step as fast as before.
#define HEAD_WHOLE_MAX_BYTES (256ull << 20)
#define HEAD_CHUNK_BYTES (64ull << 20)

// m->head_rows: 0 (whole) or the rows of a chunk; WGTRAIN_LOGITS_CHUNK_ROWS=N forces chunks of N
// rows (tests cover the chunking on small models with it; 0 or unset: chosen by size).
static wgt_status head_rows_pick(const wgt_model *m, uint32_t *rows) {
    const uint64_t BT = (uint64_t)m->B * (uint64_t)m->T, V = (uint64_t)m->c.vocab;
    uint64_t r = 0;
    *rows = 0;
    const char *e = getenv("WGTRAIN_LOGITS_CHUNK_ROWS");
    if (e && *e) {
        char *end = NULL;
        errno = 0;
        unsigned long long v = strtoull(e, &end, 10);
        if (*e < '0' || *e > '9' || *end || errno || v > UINT32_MAX)
            return wgt_fail(WGT_ERR_ARG, "WGTRAIN_LOGITS_CHUNK_ROWS must be a number of rows from 0 (chosen by size) "
                            "to %u, got '%s'", UINT32_MAX, e);
        r = v;
    }
    if (!r && m->recompute != MODEL_RECOMPUTE_NONE && BT * V * 4 > HEAD_WHOLE_MAX_BYTES) {
        r = HEAD_CHUNK_BYTES / (V * 4);
        if (r < 1) r = 1;
    }
    // f16: lnf holds two values a word, so each chunk's rows must start on a whole word
    if (r && model_f16(m) && m->c.d_model % 2 && r % 2) r++;
    *rows = r && r < BT ? (uint32_t)r : 0;
    return WGT_OK;
}

// Rows [r0, r0 + rows) of the saved lnf [B*T, C] (f32, or f16 two a word).
static wgt_view head_lnf_rows(const wgt_model *m, wgt_view lnf, size_t r0, size_t rows) {
    const size_t C = (size_t)m->c.d_model;
    if (!model_f16(m)) return model_subview(lnf, r0 * C, rows * C);
    WGT_ASSERT(r0 * C % 2 == 0, "an f16 chunk of lnf must start on a whole word");
    return model_subview(lnf, r0 * C / 2, wgt_f16_words(rows * C));
}

// The rows of the chunk that starts at row r0 (the last one may be short).
static uint32_t head_chunk_rows(const wgt_model *m, size_t r0) {
    const size_t BT = (size_t)m->B * m->T;
    return (uint32_t)(BT - r0 < m->head_rows ? BT - r0 : m->head_rows);
}

// One chunk's logits into m->logits and its loss (the logits become dlogits), as the loss step.
static void head_chunk_loss(wgt_model *m, size_t r0, uint32_t rows) {
    wgt_backend *be = m->be;
    const uint32_t C = (uint32_t)m->c.d_model, V = (uint32_t)m->c.vocab;
    model_matmul(m, m->logits, head_lnf_rows(m, m->head_lnf, r0, rows), m->head_w, model_no_view(), rows, C, V);
    be->cross_entropy(be, m->logits, model_subview(m->losses, r0, rows), model_subview(m->targets, r0, rows),
                      wgt_view_sub(m->status, WGT_ST_LOSS_SCALE, 1), rows, V, m->ce_alpha, m->ce_beta, m->ce_inv_norm);
}

void model_head_forward(wgt_model *m, wgt_view lnf, wgt_view w) {
    const uint32_t BT = (uint32_t)m->B * (uint32_t)m->T;
    m->head_lnf = lnf;
    m->head_w = w;
    if (!m->head_rows)
        model_matmul(m, m->logits, lnf, w, model_no_view(), BT, (uint32_t)m->c.d_model, (uint32_t)m->c.vocab);
    // chunked: the loss step (model_forward) or model_forward_logits runs the chunks
}

void model_head_backward(wgt_model *m, wgt_view dlnf, wgt_view lnf, wgt_view w, wgt_view gw) {
    const uint32_t BT = (uint32_t)m->B * (uint32_t)m->T, C = (uint32_t)m->c.d_model, V = (uint32_t)m->c.vocab;
    if (!m->head_rows) {  // m->logits holds dlogits [B*T, V]
        model_matmul_t(m, dlnf, m->logits, w, BT, C, V);                          // dlnf [B*T, C]
        model_matmul_at(m, gw, model_no_view(), m->logits, lnf, BT, C, V);         // dW [V, C]
        return;
    }
    // each chunk's dlogits again (the forward kept only the last chunk's), then its two GEMMs; W's
    // gradient accumulates chunk after chunk
    WGT_ASSERT(lnf.buf == m->head_lnf.buf && lnf.off == m->head_lnf.off && w.buf == m->head_w.buf &&
               w.off == m->head_w.off, "the head's backward must take the forward's lnf and lm_head");
    for (size_t r0 = 0; r0 < BT; r0 += m->head_rows) {
        const uint32_t rows = head_chunk_rows(m, r0);
        head_chunk_loss(m, r0, rows);
        model_matmul_t(m, model_subview(dlnf, r0 * C, (size_t)rows * C), m->logits, w, rows, C, V);
        model_matmul_at(m, gw, model_no_view(), m->logits, head_lnf_rows(m, lnf, r0, rows), rows, C, V);
    }
}

// f16: the weights' f16 copy from the f32 masters, when they changed since the last cast.
static void refresh_half(wgt_model *m) {
    if (!model_f16(m) || !m->half_stale) return;
    m->be->cast_f16(m->be, m->params_h, model_subview(m->params, 0, m->decay_end), m->decay_end);
    m->half_stale = 0;
}

wgt_status model_init(wgt_model **out, wgt_backend *be, const model_config *cfg, int B, int T) {
    return model_init_prec(out, be, cfg, B, T, MODEL_PREC_F32);
}

wgt_status model_init_prec(wgt_model **out, wgt_backend *be, const model_config *cfg, int B, int T,
                           model_precision prec) {
    return model_init_lora(out, be, cfg, B, T, prec, NULL);
}

wgt_status model_init_lora(wgt_model **out, wgt_backend *be, const model_config *cfg, int B, int T,
                           model_precision prec, const model_lora_opts *lo) {
    model_opts o = {prec, lo, MODEL_RECOMPUTE_NONE, 0};
    return model_init_opts(out, be, cfg, B, T, &o);
}

static const char *const recompute_names[] = {"none", "attention", "block"};
const char *model_recompute_name(model_recompute r) {
    return r >= MODEL_RECOMPUTE_NONE && r <= MODEL_RECOMPUTE_BLOCK ? recompute_names[r] : "?";
}
wgt_status model_recompute_parse(const char *s, const char *flag, model_recompute *out) {
    for (int i = 0; i < 3; i++)
        if (s && !strcmp(s, recompute_names[i])) {
            *out = (model_recompute)i;
            return WGT_OK;
        }
    return wgt_fail(WGT_ERR_ARG, "%s must be none, attention or block, got '%s'", flag, s ? s : "");
}

wgt_status model_init_opts(wgt_model **out, wgt_backend *be, const model_config *cfg, int B, int T,
                           const model_opts *o) {
    const model_precision prec = o->prec;
    const model_lora_opts *lo = o->lora;
    *out = NULL;
    WGT_TRY(model_config_check(cfg));
    if (B < 1) return wgt_fail(WGT_ERR_CONFIG, "batch size must be at least 1, got %d", B);
    if (T < 1 || T > cfg->max_seq)
        return wgt_fail(WGT_ERR_CONFIG, "sequence length %d is outside 1..%d (the model's maximum sequence length)", T,
                        cfg->max_seq);
    wgt_model *m = wgt_calloc(1, sizeof *m);
    m->arch = model_arch_find(cfg->arch);
    m->be = be;
    m->c = *cfg;
    m->B = B;
    m->T = T;
    m->prec = prec;
    m->recompute = o->recompute;
    m->inference = o->inference;
    m->half_stale = 1;
    layout(m);
    for (int i = 0; i < m->np; i++) {
        const model_param_info *p = &m->t[i].info;
        if (p->n <= be->max_binding_elems || (p->flags & MODEL_T_MAY_EXCEED_BINDING)) continue;
        wgt_status st = wgt_fail(WGT_ERR_CONFIG, "the tensor %s (%zu x %zu) is larger than this device's storage binding "
                                 "limit (%.0f MiB) and its ops bind it whole; use a smaller vocabulary or d_model on "
                                 "this device", p->name, p->shape[0], p->shape[1], be->max_binding_elems * 4 / 1048576.0);
        model_free(m);
        return st;
    }
    m->n_base = m->n_elems;
    m->base_decay_end = m->decay_end;
    wgt_status lst = lora_plan(m, lo, &m->lora);  // under LoRA n_elems becomes the adapters'
    if (lst == WGT_OK && lo && lo->base_prec != MODEL_BASE_F32 && !m->lora)
        lst = wgt_fail(WGT_ERR_CONFIG, "--base-precision %s stores a frozen base: it needs --lora R (a model whose every "
                       "weight trains keeps them in f32)", model_base_prec_name(lo->base_prec));
    if (lst == WGT_OK && m->lora) lst = base_lowbit_plan(m, lo->base_prec);
    if (lst != WGT_OK) {
        model_free(m);
        return lst;
    }
    const size_t BT = (size_t)B * T;
    model_alloc(m, &m->params, m->n_elems, "params", 1);
    if (!o->inference) {  // an inference-only model: the parameters alone (the gradient views stay empty)
        model_alloc(m, &m->grads, m->n_elems, "grads", 1);
        model_alloc(m, &m->m1, m->n_elems, "adam_m", 1);
        model_alloc(m, &m->v1, m->n_elems, "adam_v", 1);
    }
    if (prec == MODEL_PREC_F16) model_alloc(m, &m->params_h, wgt_f16_words(m->decay_end), "params_f16", 1);
    model_alloc(m, &m->tokens, BT, "tokens", 0);
    model_alloc(m, &m->targets, BT, "targets", 0);
    model_alloc(m, &m->doc_start, BT, "doc_start", 0);
    {
        wgt_status hst = head_rows_pick(m, &m->head_rows);
        if (hst != WGT_OK) {
            model_free(m);
            return hst;
        }
    }
    // (the lm_head matmuls and the loss split it)
    model_alloc(m, &m->logits, (m->head_rows ? m->head_rows : BT) * (size_t)cfg->vocab, "logits", 1);
    model_alloc(m, &m->losses, BT, "losses", 0);
    model_alloc(m, &m->status, WGT_ST_WORDS, "optimizer_status", 0);
    if (m->lora) lora_alloc(m);
    else m->base = m->params;
    m->ls_window = 2000;
    wgt_status st = m->alloc_st;
    if (st == WGT_OK) {
        // no update yet, loss scale 1 (model_set_loss_scale changes it)
        float s0[WGT_ST_WORDS] = {0};
        s0[WGT_ST_LOSS_SCALE] = 1.0f;
        s0[WGT_ST_STEP_SCALE] = 1.0f;
        st = be->upload(be, m->status, s0, WGT_ST_WORDS);
    }
    if (st == WGT_OK) {
        const model_arch *a = m->arch;
        size_t lsize = (size_t)cfg->n_layer * a->layer_size;
        m->pg = wgt_calloc(1, a->globals_size ? a->globals_size : 1);
        m->gg = wgt_calloc(1, a->globals_size ? a->globals_size : 1);
        m->pl = wgt_calloc(1, lsize ? lsize : 1);
        m->gl = wgt_calloc(1, lsize ? lsize : 1);
        if (m->packed) base_lowbit_bind(m);
        else bind_views(m, m->base, m->pg, m->pl);
        if (!m->inference && !m->lora) bind_views(m, m->grads, m->gg, m->gl);
        else if (!m->inference) bind_frozen_grads(m);
        st = a->init(m);
        if (st == WGT_OK) st = m->alloc_st;
    }
    if (st == WGT_OK) st = be->sync(be);
    if (st != WGT_OK) {
        model_free(m);
        return st;
    }
    *out = m;
    return WGT_OK;
}

void model_free(wgt_model *m) {
    if (!m) return;
    for (int i = 0; i < m->nbufs; i++) m->be->buf_free(m->be, m->bufs[i]);
    free(m->bufs);
    free(m->t);
    free(m->pg);
    free(m->pl);
    free(m->gg);
    free(m->gl);
    free(m->acts);
    lora_free(m->lora);
    base_lowbit_free(m);
    free(m);
}

const model_config *model_cfg(const wgt_model *m) { return &m->c; }

size_t model_num_params(const wgt_model *m) {
    size_t n = 0;
    for (int i = 0; i < m->np; i++) n += m->t[i].info.n;
    return n;
}

int model_param_count(const wgt_model *m) { return m->np; }
const model_param_info *model_param(const wgt_model *m, int i) {
    WGT_ASSERT(i >= 0 && i < m->np, "model_param: index out of range");
    return &m->t[i].info;
}
static wgt_view tensor_view(wgt_view state, const model_param_info *p) { return model_subview(state, p->off, p->n); }
wgt_status model_param_get(wgt_model *m, int i, float *dst, int grad) {
    const model_param_info *p = model_param(m, i);
    WGT_ASSERT(!grad || !m->lora, "model_param_get: the frozen base of a LoRA model has no gradients");
    WGT_ASSERT(!grad || !m->inference, "model_param_get: an inference-only model has no gradients");
    if (!grad) return base_tensor_get(m, p, dst);  // (a packed base decoded)
    return m->be->download(m->be, dst, tensor_view(m->grads, p), p->n);
}
wgt_status model_param_set(wgt_model *m, int i, const float *src) {
    const model_param_info *p = model_param(m, i);
    WGT_TRY(base_tensor_put(m, p, src));  // (a packed base quantised)
    m->half_stale = 1;
    return m->be->sync(m->be);
}

// ------------------------------------------------------------------ init

static uint64_t rng_next(uint64_t *s) {  // splitmix64
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static float rng_normal(uint64_t *s) {
    double u = ((rng_next(s) >> 11) + 0.5) / 9007199254740992.0, v = (rng_next(s) >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

// Normal number j of the stream that starts at state s0: splitmix64 adds a constant to its state
// per draw and a normal takes two draws, so the j-th needs none of the others, and the threads
// below fill a tensor with exactly the values of one sequential stream.
static float rng_normal_at(uint64_t s0, uint64_t j) {
    uint64_t s = s0 + 2 * j * 0x9e3779b97f4a7c15ull;
    return rng_normal(&s);
}

// random_base 0: the base is zeros (a checkpoint is about to replace every parameter)
static wgt_status init_state(wgt_model *m, uint64_t seed, int random_base) {
    float *h = wgt_calloc(m->n_base, sizeof(float));
    const uint64_t s0 = seed * 0x9E3779B97F4A7C15ull + 1;
    const float resid_std = 0.02f / sqrtf(2.0f * m->c.n_layer);
    // one random stream through the tensors in table order (`drawn`: its normals so far)
    uint64_t drawn = 0;
    for (int i = 0; random_base && i < m->np; i++) {
        const model_param_info *p = &m->t[i].info;
        float *d = h + p->off;
        if (p->init == MODEL_INIT_ONES) {
            for (size_t k = 0; k < p->n; k++) d[k] = 1.0f;
        } else if (p->init == MODEL_INIT_NORMAL || p->init == MODEL_INIT_RESIDUAL) {
            const float sd = p->init == MODEL_INIT_NORMAL ? 0.02f : resid_std;
            const long long n = (long long)p->n;
            const uint64_t j0 = drawn;
            #pragma omp parallel for schedule(static) if (n > 65536)
            for (long long k = 0; k < n; k++) d[k] = sd * rng_normal_at(s0, j0 + (uint64_t)k);
            drawn += p->n;
        }  // MODEL_INIT_ZEROS: h is zeroed
    }
    wgt_status st = WGT_OK;
    if (!m->packed) st = m->be->upload(m->be, m->base, h, m->n_base);
    for (int i = 0; m->packed && i < m->np && st == WGT_OK; i++) st = base_tensor_put(m, &m->t[i].info, h + m->t[i].info.off);
    free(h);
    if (st == WGT_OK && m->lora) st = lora_init_adapters(m, seed);
    m->half_stale = 1;
    if (st == WGT_OK && !m->inference) {
        m->be->fill_zero(m->be, m->m1, m->n_elems);
        m->be->fill_zero(m->be, m->v1, m->n_elems);
        m->be->fill_zero(m->be, m->grads, m->n_elems);
        st = m->be->sync(m->be);
    }
    return st;
}

wgt_status model_init_random(wgt_model *m, uint64_t seed) { return init_state(m, seed, 1); }
wgt_status model_init_for_load(wgt_model *m, uint64_t seed) { return init_state(m, seed, 0); }

// ------------------------------------------------------------------ safetensors

// Marks the file's tensor t as accounted for.
static void mark(const st_file *f, const st_tensor *t, unsigned char *used) {
    for (int k = 0; k < st_count(f); k++)
        if (st_at(f, k) == t) used[k] = 1;
}

// The table entry this config leaves out that has Hugging Face name `name` (NULL: none), and its layer.
static const model_tensor_desc *absent_desc(const wgt_model *m, const char *name, int *layer) {
    const model_arch *a = m->arch;
    for (int i = 0; i < a->n_tensors; i++) {
        const model_tensor_desc *d = &a->tensors[i];
        if (desc_present(a, d, &m->c)) continue;
        for (int l = 0; l < (d->per_layer ? m->c.n_layer : 1); l++) {
            char nm[128], pre[192];
            snprintf(nm, sizeof nm, d->hf_name, l);
            snprintf(pre, sizeof pre, "%s%s", a->hf_prefix ? a->hf_prefix : "", nm);
            if (!strcmp(nm, name) || !strcmp(pre, name)) {
                *layer = l;
                return d;
            }
        }
    }
    return NULL;
}

// Whether tensors t and u of f (of one shape) hold the same values (read from their files when
// `values`, else taken as equal: a check of the header alone). A read error is *st.
static int same_values(st_file *f, const st_tensor *t, const st_tensor *u, int values, wgt_status *st) {
    if (!values) return 1;
    float *a = wgt_malloc(t->n ? t->n * sizeof(float) : 1), *b = wgt_malloc(t->n ? t->n * sizeof(float) : 1);
    *st = st_tensor_read(f, t, a);
    if (*st == WGT_OK) *st = st_tensor_read(f, u, b);
    int same = *st != WGT_OK || !memcmp(a, b, t->n * sizeof(float));
    free(a);
    free(b);
    return same;
}

// Whether the file's tensor t, of absent entry d (layer l), is an exact copy of the tensor the
// family says it may copy; *src names that one (NULL: it may copy none).
static int absent_copy_ok(const wgt_model *m, st_file *f, const st_tensor *t, const model_tensor_desc *d, int l,
                          char *src, size_t n, int values, wgt_status *st) {
    const model_arch *a = m->arch;
    int k = a->absent_copy_of ? a->absent_copy_of(&m->c, d) : -1;
    if (k < 0 || k >= a->n_tensors) return 0;
    snprintf(src, n, a->tensors[k].hf_name, l);
    const st_tensor *u = model_st_find(a, f, src);
    if (!u || u->ndim != t->ndim || u->n != t->n) return 0;
    for (int i = 0; i < t->ndim; i++)
        if (u->shape[i] != t->shape[i]) return 0;
    return same_values(f, t, u, values, st);
}

// The file's tensors against the model's parameter table (m needs only its config, family and
// table: nothing allocated): every parameter present with its shape, and anything else one of the
// family's known non-parameters or an allowed copy. Copies are compared by value (read from the
// files) when `values`, else by shape.
static wgt_status match_tensors(const wgt_model *m, st_file *f, const char *path, int values) {
    unsigned char *used = wgt_calloc((size_t)st_count(f) + 1, 1);
    wgt_status st = WGT_OK;
    for (int i = 0; i < m->np && st == WGT_OK; i++) {
        const model_param_info *p = &m->t[i].info;
        const st_tensor *t = model_st_find(m->arch, f, p->name);
        if (!t) {
            st = wgt_fail(WGT_ERR_FORMAT, "'%s' lacks tensor '%s' needed by this model config", path, p->name);
            break;
        }
        mark(f, t, used);
        int tr = !!(p->flags & MODEL_T_HF_TRANSPOSED);
        size_t e0 = tr ? p->shape[1] : p->shape[0], e1 = tr ? p->shape[0] : p->shape[1];
        int shape_ok = t->ndim == p->ndim && t->shape[0] == e0 && (p->ndim == 1 || t->shape[1] == e1);
        if (!shape_ok) {
            char have[96] = "", want[64];
            for (int k = 0; k < t->ndim; k++)
                snprintf(have + strlen(have), sizeof have - strlen(have), "%s%zu", k ? ", " : "", t->shape[k]);
            if (p->ndim > 1) snprintf(want, sizeof want, "%zu, %zu", e0, e1);
            else snprintf(want, sizeof want, "%zu", e0);
            st = wgt_fail(WGT_ERR_FORMAT, "'%s': tensor '%s' has shape [%s] but the model expects [%s]%s", path, p->name,
                          have, want, tr ? " (Hugging Face's Conv1D layout: [in, out])" : "");
        }
    }
    // anything else in the file must be one of the family's known non-parameters
    for (int k = 0; k < m->arch->n_hf_ignored && st == WGT_OK; k++) {
        const model_hf_name *h = &m->arch->hf_ignored[k];
        for (int l = 0; l < (h->per_layer ? m->c.n_layer : 1); l++) {
            char name[128];
            snprintf(name, sizeof name, h->hf_name, l);
            const st_tensor *t = model_st_find(m->arch, f, name);
            if (!t) continue;
            mark(f, t, used);
            if (!h->copy_of) continue;
            char src[128];
            snprintf(src, sizeof src, h->copy_of, l);
            const st_tensor *u = model_st_find(m->arch, f, src);
            int same = u && u->ndim == t->ndim && u->n == t->n;
            for (int i = 0; same && i < t->ndim; i++) same = u->shape[i] == t->shape[i];
            if (same) same = same_values(f, t, u, values, &st);
            if (st == WGT_OK && !same)
                st = wgt_fail(WGT_ERR_FORMAT, "'%s': tensor '%s' is not an exact copy of '%s'; this %s model ties them "
                              "(its lm_head is the token embedding), so a file may hold it only as a copy", path,
                              t->name, src, m->arch->name);
            if (st != WGT_OK) break;
        }
    }
    for (int k = 0; k < st_count(f) && st == WGT_OK; k++) {
        if (used[k]) continue;
        int layer = -1;
        char src[128] = "";
        const model_tensor_desc *d = absent_desc(m, st_at(f, k)->name, &layer);
        if (d && absent_copy_ok(m, f, st_at(f, k), d, layer, src, sizeof src, values, &st)) {
            if (st != WGT_OK) break;
            continue;  // a copy: nothing to load
        }
        if (d)
            st = wgt_fail(WGT_ERR_FORMAT, "'%s' has tensor '%s', which this %s config leaves out: %s%s%s%s", path,
                          st_at(f, k)->name, m->arch->name, m->arch->tensor_absent(&m->c, d),
                          src[0] ? " (a file may hold it only as an exact copy of " : "", src, src[0] ? ")" : "");
        else
            st = wgt_fail(WGT_ERR_FORMAT, "'%s' has tensor '%s' that this %s config does not use (wrong --heads or "
                          "config, or not a %s checkpoint?)", path, st_at(f, k)->name, m->arch->name, m->arch->name);
    }
    free(used);
    return st;
}

wgt_status model_check_safetensors(const model_config *c, const char *path) {
    WGT_TRY(model_config_check(c));
    st_file *f;
    WGT_TRY(st_open_checkpoint(&f, path));
    wgt_model m;  // the table alone
    memset(&m, 0, sizeof m);
    m.arch = model_arch_find(c->arch);
    m.c = *c;
    layout(&m);
    wgt_status st = match_tensors(&m, f, path, 0);
    free(m.t);
    st_close(f);
    return st;
}

// Tensor by tensor (one file after another for a sharded checkpoint): the host holds one tensor
// at a time, never the model.
wgt_status model_load_safetensors(wgt_model *m, const char *path) {
    st_file *f;
    WGT_TRY(st_open_checkpoint(&f, path));
    wgt_status st = match_tensors(m, f, path, 1);
    float *buf = NULL, *tmp = NULL;
    size_t cap = 0;
    // in file order, so that each shard is read once, front to back
    int *order = wgt_calloc((size_t)(m->np ? m->np : 1), sizeof *order);
    const st_tensor **src_t = wgt_calloc((size_t)(m->np ? m->np : 1), sizeof *src_t);
    // non-finite weights (a NaN- or Inf-filled file) are loaded but said: the model computes NaN
    size_t bad_total = 0, bad_first = 0, bad_first_n = 0;
    int bad_tensors = 0;
    char bad_name[128] = "";
    for (int i = 0; i < m->np && st == WGT_OK; i++) {
        order[i] = i;
        src_t[i] = model_st_find(m->arch, f, m->t[i].info.name);
    }
    for (int i = 1; i < m->np && st == WGT_OK; i++)  // insertion sort by (shard, offset): a few thousand tensors
        for (int j = i; j > 0; j--) {
            const st_tensor *a = src_t[order[j - 1]], *b = src_t[order[j]];
            if (a->shard < b->shard || (a->shard == b->shard && a->file_off <= b->file_off)) break;
            int x = order[j];
            order[j] = order[j - 1];
            order[j - 1] = x;
        }
    for (int k = 0; k < m->np && st == WGT_OK; k++) {
        const model_param_info *p = &m->t[order[k]].info;
        const st_tensor *t = src_t[order[k]];
        if (cap < p->n) {  // (upload copies its source before it returns: the buffers are reused)
            free(buf);
            free(tmp);
            buf = wgt_malloc(p->n * 4);
            tmp = NULL;
            cap = p->n;
        }
        st = st_tensor_read(f, t, buf);
        if (st != WGT_OK) break;
        size_t bad = 0;
        for (size_t i = 0; i < p->n; i++) bad += !isfinite(buf[i]);
        if (bad && !bad_tensors++) {
            snprintf(bad_name, sizeof bad_name, "%s", t->name);
            bad_first = bad, bad_first_n = p->n;
        }
        bad_total += bad;
        if (p->flags & MODEL_T_HF_PLUS_ONE)
            for (size_t e = 0; e < p->n; e++) buf[e] = 1.0f + buf[e];
        const float *src = buf;
        if (p->flags & MODEL_T_HF_TRANSPOSED) {
            if (!tmp) tmp = wgt_malloc(cap * 4);
            size_t R = p->shape[0], Cc = p->shape[1];  // internal [R, Cc] = HF [Cc, R]^T
            for (size_t r = 0; r < R; r++)
                for (size_t c = 0; c < Cc; c++) tmp[r * Cc + c] = buf[c * R + r];
            src = tmp;
        }
        st = base_tensor_put(m, p, src);  // (a packed base quantised)
    }
    free(order);
    free(src_t);
    free(buf);
    free(tmp);
    st_close(f);
    m->half_stale = 1;
    if (st == WGT_OK && bad_tensors) {
        char more[128] = "";
        if (bad_tensors > 1)
            snprintf(more, sizeof more, " (and %d more tensors: %zu non-finite values in all)", bad_tensors - 1, bad_total);
        fprintf(stderr, "warning: %s: the tensor '%s' has %zu non-finite values (NaN or infinity) of %zu%s; a model with "
                "them computes NaN (every update is skipped, sampling and evaluation mean nothing): these weights are "
                "broken, use a good copy of the model\n", path, bad_name, bad_first, bad_first_n, more);
    }
    if (st == WGT_OK) st = m->be->sync(m->be);
    return st;
}

static wgt_status save_st(wgt_model *m, const char *path, int grads, int hf_export) {
    WGT_ASSERT(!grads || !m->lora, "model_save_safetensors: the frozen base of a LoRA model has no gradients");
    WGT_ASSERT(!grads || !m->inference, "model_save_safetensors: an inference-only model has no gradients");
    float *h = wgt_malloc(m->n_base * 4);
    float *hf = wgt_malloc(m->n_base * 4);
    wgt_status st = WGT_OK;
    if (m->packed)  // a packed base: its tensors decoded
        for (int i = 0; i < m->np && st == WGT_OK; i++) st = base_tensor_get(m, &m->t[i].info, h + m->t[i].info.off);
    else st = m->be->download(m->be, h, grads ? m->grads : m->base, m->n_base);
    if (st != WGT_OK) {
        free(h);
        free(hf);
        return st;
    }
    st_writer *w = st_writer_new();
    for (int i = 0; i < m->np; i++) {
        const model_param_info *p = &m->t[i].info;
        float *d = hf + p->off;
        size_t shape[2];
        if (p->flags & MODEL_T_HF_TRANSPOSED) {
            size_t R = p->shape[0], Cc = p->shape[1];
            for (size_t r = 0; r < R; r++)
                for (size_t c = 0; c < Cc; c++) d[c * R + r] = h[p->off + r * Cc + c];
            shape[0] = Cc;
            shape[1] = R;
        } else {
            memcpy(d, h + p->off, p->n * 4);
            shape[0] = p->shape[0];
            shape[1] = p->shape[1];
        }
        if (!grads && (p->flags & MODEL_T_HF_PLUS_ONE))
            for (size_t e = 0; e < p->n; e++) d[e] -= 1.0f;
        char name[192];
        snprintf(name, sizeof name, "%s%s", hf_export && m->arch->hf_prefix ? m->arch->hf_prefix : "", p->name);
        st_writer_add(w, name, p->ndim, shape, d);
    }
    if (hf_export) st_writer_set_metadata(w, "format", "pt");
    st = st_writer_finish(w, path);
    free(h);
    free(hf);
    return st;
}

wgt_status model_save_safetensors(wgt_model *m, const char *path, int grads) { return save_st(m, path, grads, 0); }

// Tensor i in Hugging Face layout (transposed back where the family's files are [in, out]) into
// dst[n]; tmp: scratch of n floats for the transposition.
static wgt_status hf_tensor_get(wgt_model *m, int i, float *dst, float *tmp, size_t shape[2]) {
    const model_param_info *p = &m->t[i].info;
    shape[0] = p->shape[0];
    shape[1] = p->shape[1];
    if (p->flags & MODEL_T_HF_PLUS_ONE) {
        WGT_TRY(model_param_get(m, i, dst, 0));
        for (size_t e = 0; e < p->n; e++) dst[e] -= 1.0f;
        return WGT_OK;
    }
    if (!(p->flags & MODEL_T_HF_TRANSPOSED)) return model_param_get(m, i, dst, 0);
    WGT_TRY(model_param_get(m, i, tmp, 0));
    size_t R = p->shape[0], Cc = p->shape[1];
    for (size_t r = 0; r < R; r++)
        for (size_t c = 0; c < Cc; c++) dst[c * R + r] = tmp[r * Cc + c];
    shape[0] = Cc;
    shape[1] = R;
    return WGT_OK;
}

// The file of shard k (0-based) of n as save_pretrained names it; one shard is model.safetensors.
static void shard_name(char *dst, size_t len, int k, int n) {
    if (n == 1) snprintf(dst, len, "model.safetensors");
    else snprintf(dst, len, "model-%05d-of-%05d.safetensors", k + 1, n);
}

wgt_status model_export_safetensors(wgt_model *m, const char *dir, uint64_t max_shard_bytes, int *n_shards) {
    WGT_ASSERT(max_shard_bytes > 0, "model_export_safetensors: a shard size of 0");
    // shards as save_pretrained cuts them: tensors in table order, a new shard when the next one
    // would pass the limit (a tensor larger than the limit is a shard of its own)
    int *first = wgt_calloc((size_t)m->np + 1, sizeof *first), n = 0;
    uint64_t cur = 0, total = 0;
    for (int i = 0; i < m->np; i++) {
        uint64_t b = (uint64_t)m->t[i].info.n * 4;
        if (i == 0 || (cur > 0 && cur + b > max_shard_bytes)) {
            first[n++] = i;
            cur = 0;
        }
        cur += b;
        total += b;
    }
    first[n] = m->np;
    size_t big = 0;  // the largest shard and the largest tensor, in floats
    size_t big_t = 0;
    for (int k = 0; k < n; k++) {
        size_t e = 0;
        for (int i = first[k]; i < first[k + 1]; i++) {
            e += m->t[i].info.n;
            if (m->t[i].info.n > big_t) big_t = m->t[i].info.n;
        }
        if (e > big) big = e;
    }
    float *buf = wgt_malloc((big ? big : 1) * 4), *tmp = wgt_malloc((big_t ? big_t : 1) * 4);
    const char *prefix = m->arch->hf_prefix ? m->arch->hf_prefix : "";
    cJSON *index = cJSON_CreateObject(), *wm = cJSON_CreateObject();
    WGT_ASSERT(index && wm, "cJSON_CreateObject failed (out of memory)");
    wgt_status st = WGT_OK;
    char file[64], path[4200];
    for (int k = 0; k < n && st == WGT_OK; k++) {
        shard_name(file, sizeof file, k, n);
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, file) >= sizeof path) {
            st = wgt_fail(WGT_ERR_ARG, "export path too long: %s/%s", dir, file);
            break;
        }
        st_writer *w = st_writer_new();
        size_t at = 0;
        for (int i = first[k]; i < first[k + 1] && st == WGT_OK; i++) {
            size_t shape[2];
            st = hf_tensor_get(m, i, buf + at, tmp, shape);
            char name[192];
            snprintf(name, sizeof name, "%s%s", prefix, m->t[i].info.name);
            st_writer_add(w, name, m->t[i].info.ndim, shape, buf + at);
            cJSON_AddStringToObject(wm, name, file);
            at += m->t[i].info.n;
        }
        st_writer_set_metadata(w, "format", "pt");
        if (st == WGT_OK) st = st_writer_finish(w, path);
        else st_writer_discard(w);
    }
    if (st == WGT_OK && n > 1) {
        cJSON *md = cJSON_AddObjectToObject(index, "metadata");
        model_hf_add_number(md, "total_size", (double)total);
        cJSON_AddItemToObject(index, "weight_map", wm);
        wm = NULL;
        char *text = cJSON_Print(index);
        WGT_ASSERT(text, "cJSON_Print failed (out of memory)");
        snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
        st = atomic_write_file(path, text, strlen(text));
        free(text);
    }
    cJSON_Delete(wm);
    cJSON_Delete(index);
    free(buf);
    free(tmp);
    free(first);
    if (n_shards) *n_shards = n;
    return st;
}

// ------------------------------------------------------------------ state

size_t model_state_elems(const wgt_model *m) { return m->n_elems; }

wgt_status model_state_download(wgt_model *m, float *params, float *m1, float *v1) {
    WGT_ASSERT(!m->inference, "model_state_download: an inference-only model has no optimizer state");
    WGT_TRY(m->be->download(m->be, params, m->params, m->n_elems));
    WGT_TRY(m->be->download(m->be, m1, m->m1, m->n_elems));
    return m->be->download(m->be, v1, m->v1, m->n_elems);
}

wgt_status model_grads_download(wgt_model *m, float *dst, size_t off, size_t n) {
    WGT_ASSERT(!m->inference, "an inference-only model has no gradients");
    WGT_ASSERT(n > 0 && off <= m->n_elems && n <= m->n_elems - off, "gradient range outside the state");
    return m->be->download(m->be, dst, model_subview(m->grads, off, n), n);
}

wgt_status model_grads_upload(wgt_model *m, const float *src, size_t off, size_t n) {
    WGT_ASSERT(!m->inference, "an inference-only model has no gradients");
    WGT_ASSERT(n > 0 && off <= m->n_elems && n <= m->n_elems - off, "gradient range outside the state");
    return m->be->upload(m->be, model_subview(m->grads, off, n), src, n);
}

wgt_status model_params_download(wgt_model *m, float *dst) { return m->be->download(m->be, dst, m->params, m->n_elems); }

wgt_status model_state_upload(wgt_model *m, const float *params, const float *m1, const float *v1) {
    WGT_TRY(m->be->upload(m->be, m->params, params, m->n_elems));
    m->half_stale = 1;
    if (!m->inference) {  // (an inference-only model keeps no moments: m1 and v1 are not read)
        WGT_TRY(m->be->upload(m->be, m->m1, m1, m->n_elems));
        WGT_TRY(m->be->upload(m->be, m->v1, v1, m->n_elems));
    }
    return m->be->sync(m->be);
}

// ------------------------------------------------------------------ forward, loss, backward

static wgt_status upload_batch(wgt_model *m, const int32_t *tokens, const int32_t *targets) {
    const size_t BT = (size_t)m->B * m->T;
    for (size_t i = 0; i < BT; i++)
        if (tokens[i] < 0 || tokens[i] >= m->c.vocab)
            return wgt_fail(WGT_ERR_FORMAT, "token id %d at position %zu is outside the vocabulary 0..%d; the data does "
                            "not belong to this model (check --data and the tokenizer)", tokens[i], i, m->c.vocab - 1);
    WGT_TRY(m->be->upload(m->be, m->tokens, tokens, BT));
    if (targets) {
        uint32_t *t = wgt_malloc(BT * 4);
        for (size_t i = 0; i < BT; i++)
            t[i] = (targets[i] < 0 || targets[i] >= m->c.vocab) ? UINT32_MAX : (uint32_t)targets[i];
        wgt_status st = m->be->upload(m->be, m->targets, t, BT);
        free(t);
        WGT_TRY(st);
    }
    return WGT_OK;
}

wgt_status model_set_doc_start(wgt_model *m, const uint32_t *doc_start) {
    if (!doc_start) {
        m->doc_view = wgt_view_none();
        return WGT_OK;
    }
    if (m->arch == &model_arch_gpt2)
        return wgt_fail(WGT_ERR_CONFIG, "packed examples (instruction data) need positions that restart at each example; "
                        "GPT-2's learned position embeddings do not restart in this build: train a LLaMA-family model "
                        "(--arch llama) on this data");
    const size_t B = (size_t)m->B, T = (size_t)m->T;
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < T; t++) {
            uint32_t d = doc_start[b * T + t];
            if (d > t || (t && d < doc_start[b * T + t - 1]))
                return wgt_fail(WGT_ERR_ARG, "doc_start[%zu][%zu] = %u: each must be <= its position and non-decreasing "
                                "along the sequence", b, t, d);
        }
    WGT_TRY(m->be->upload(m->be, m->doc_start, doc_start, B * T));
    m->doc_view = m->doc_start;
    return WGT_OK;
}

uint32_t model_dropout_seed(const wgt_model *m, int l, int site) {
    return wgt_dropout_key(m->drop_seed, (uint32_t)l, (uint32_t)site);
}

void model_branch_dropout(wgt_model *m, wgt_view x, int l, int site) {
    if (m->drop_p > 0.0f) m->be->dropout_forward(m->be, x, x, x.n, m->drop_p, model_dropout_seed(m, l, site), 0);
}

wgt_view model_branch_dropout_grad(wgt_model *m, wgt_view tmp, wgt_view dres, int l, int site) {
    if (m->drop_p <= 0.0f) return dres;
    m->be->dropout_backward(m->be, tmp, dres, dres.n, m->drop_p, model_dropout_seed(m, l, site), 0);
    return tmp;
}

static wgt_view status_word(wgt_model *m, int word) { return wgt_view_sub(m->status, (size_t)word, 1); }

wgt_status model_forward(wgt_model *m, const int32_t *tokens, const int32_t *targets, model_loss_opts lo, float inv_norm) {
    WGT_ASSERT(lo.dropout >= 0.0f && lo.dropout < 1.0f, "dropout probability outside [0, 1)");
    WGT_TRY(upload_batch(m, tokens, targets));
    m->drop_p = lo.dropout;
    m->drop_seed = lo.dropout_seed;
    refresh_half(m);
    m->arch->forward(m);
    wgt_backend *be = m->be;
    const uint32_t BT = (uint32_t)m->B * (uint32_t)m->T;
    m->ce_alpha = lo.alpha;
    m->ce_beta = lo.beta;
    m->ce_inv_norm = inv_norm;
    // the gradient seed carries the loss scale of the optimizer status (1 without scaling)
    if (m->head_rows) {  // chunk by chunk: the losses (model_head_backward recomputes the dlogits)
        for (size_t r0 = 0; r0 < BT; r0 += m->head_rows)
            head_chunk_loss(m, r0, head_chunk_rows(m, r0));
    } else {
        be->cross_entropy(be, m->logits, m->losses, m->targets, status_word(m, WGT_ST_LOSS_SCALE), BT,
                          (uint32_t)m->c.vocab, lo.alpha, lo.beta, inv_norm);
    }
    be->sum_losses(be, status_word(m, WGT_ST_LOSS_SUM), m->losses, BT, lo.accumulate_loss ? 1u : 0u);
    m->have_forward = 1;
    return WGT_OK;
}

wgt_status model_forward_logits(wgt_model *m, const int32_t *tokens, float *logits) {
    WGT_TRY(upload_batch(m, tokens, NULL));
    m->drop_p = 0.0f;  // inference: no dropout
    model_lora_set_training(m, 0);
    refresh_half(m);
    m->arch->forward(m);
    m->have_forward = 0;  // logits are not dlogits: no backward from here
    const size_t BT = (size_t)m->B * m->T, V = (size_t)m->c.vocab;
    if (!m->head_rows) return m->be->download(m->be, logits, m->logits, BT * V);
    for (size_t r0 = 0; r0 < BT; r0 += m->head_rows) {  // chunked: each chunk's logits, downloaded in turn
        const uint32_t rows = head_chunk_rows(m, r0);
        model_matmul(m, m->logits, head_lnf_rows(m, m->head_lnf, r0, rows), m->head_w, model_no_view(), rows,
                     (uint32_t)m->c.d_model, (uint32_t)V);
        WGT_TRY(m->be->download(m->be, logits + r0 * V, m->logits, rows * V));
    }
    return WGT_OK;
}

wgt_status model_loss_sum(wgt_model *m, double *sum) {
    float s;
    WGT_TRY(m->be->download(m->be, &s, status_word(m, WGT_ST_LOSS_SUM), 1));
    *sum = s;
    return WGT_OK;
}

wgt_status model_prepare_step(wgt_model *m, model_loss_opts lo, int *pipelines, double *seconds) {
    wgt_backend *be = m->be;
    if (pipelines) *pipelines = 0;
    if (seconds) *seconds = 0;
    if (!be->dry_run) return WGT_OK;
    WGT_ASSERT(!m->inference, "model_prepare_step: an inference-only model does not train");
    const double t0 = wgt_now_s();
    // what a recorded step changes on the host side, restored after it
    const int half_stale = m->half_stale, have_forward = m->have_forward;
    const float drop_p = m->drop_p;
    const uint32_t drop_seed = m->drop_seed;
    int32_t *tok = wgt_calloc((size_t)m->B * m->T, sizeof *tok);  // token 0: inside every vocabulary
    be->dry_run(be, 1);
    const int lora_train = lora_training(m);
    model_lora_set_training(m, 1);  // (LoRA: the adapter dropout's pipelines too)
    model_zero_grad(m);
    wgt_status st = model_forward(m, tok, tok, lo, 1.0f);
    if (st == WGT_OK) {
        model_backward(m);
        model_update(m, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f);
        st = model_result_begin(m, 0);
    }
    if (st == WGT_OK && lo.dropout > 0.0f) {  // validation: the forward without dropout
        model_loss_opts v = lo;
        v.dropout = 0.0f;
        model_lora_set_training(m, 0);
        st = model_forward(m, tok, tok, v, 1.0f);
    }
    int n = be->dry_run(be, 0);
    free(tok);
    m->half_stale = half_stale;
    m->have_forward = have_forward;
    m->drop_p = drop_p;
    m->drop_seed = drop_seed;
    model_lora_set_training(m, lora_train);
    if (pipelines) *pipelines = n;
    if (seconds) *seconds = wgt_now_s() - t0;
    return st;
}

void model_zero_grad(wgt_model *m) {
    WGT_ASSERT(!m->inference, "an inference-only model has no gradients");
    m->be->fill_zero(m->be, m->grads, m->n_elems);
    lora_zero_sink(m);
}

void model_backward(wgt_model *m) {
    WGT_ASSERT(!m->inference, "model_backward: an inference-only model has no gradients");
    WGT_ASSERT(m->have_forward, "model_backward needs a model_forward with targets first");
    m->have_forward = 0;
    m->arch->backward(m);
}

// ------------------------------------------------------------------ optimizer

// Elements of a whole-state range that one op may bind at once.
static size_t chunk_elems(const wgt_model *m) {
    size_t c = m->be->max_binding_elems / WGT_VIEW_ALIGN * WGT_VIEW_ALIGN;
    return c ? c : WGT_VIEW_ALIGN;
}

void model_update(wgt_model *m, float lr, float beta1, float beta2, float eps, float weight_decay, float max_norm) {
    WGT_ASSERT(!m->inference, "model_update: an inference-only model has no optimizer state");
    wgt_backend *be = m->be;
    const size_t ch = chunk_elems(m);
    for (size_t o = 0, n; o < m->n_elems; o += n) {
        n = m->n_elems - o < ch ? m->n_elems - o : ch;
        be->grad_norm_sq(be, status_word(m, WGT_ST_NORM_SQ), model_subview(m->grads, o, n), n, o > 0);
    }
    be->grad_clip_scale(be, m->status, max_norm, beta1, beta2, m->ls_dynamic ? 1u : 0u, m->ls_window);
    for (int group = 0; group < 2; group++) {  // decayed tensors, then the others
        size_t lo = group ? m->decay_end : 0, hi = group ? m->n_elems : m->decay_end;
        for (size_t o = lo, n; o < hi; o += n) {
            n = hi - o < ch ? hi - o : ch;
            be->adamw(be, model_subview(m->params, o, n), model_subview(m->m1, o, n), model_subview(m->v1, o, n),
                      model_subview(m->grads, o, n), m->status, n, lr, beta1, beta2, eps, group ? 0.0f : weight_decay);
        }
    }
    m->half_stale = 1;  // f16: the next forward casts the new weights (refresh_half)
}

wgt_status model_grad_norm(wgt_model *m, float *norm) {
    return m->be->download(m->be, norm, status_word(m, WGT_ST_NORM), 1);
}

wgt_status model_set_loss_scale(wgt_model *m, float scale, int dynamic, uint32_t window) {
    if (!(scale > 0.0f) || !isfinite(scale))
        return wgt_fail(WGT_ERR_ARG, "loss scale %g is not a positive finite f32", (double)scale);
    if (window < 1) return wgt_fail(WGT_ERR_ARG, "the loss scale's growth window must be at least 1 update");
    float s[WGT_ST_WORDS];
    WGT_TRY(m->be->download(m->be, s, m->status, WGT_ST_WORDS));
    s[WGT_ST_LOSS_SCALE] = scale;
    WGT_TRY(m->be->upload(m->be, m->status, s, WGT_ST_WORDS));
    m->ls_dynamic = dynamic != 0;
    m->ls_window = window;
    return WGT_OK;
}

wgt_status model_opt_state_get(wgt_model *m, model_opt_state *o) {
    float s[WGT_ST_WORDS];
    WGT_TRY(m->be->download(m->be, s, m->status, WGT_ST_WORDS));
    o->updates = wgt_st_u32(s, WGT_ST_T);
    o->skips = wgt_st_u32(s, WGT_ST_SKIPS);
    o->clean = wgt_st_u32(s, WGT_ST_CLEAN);
    o->loss_scale = s[WGT_ST_LOSS_SCALE];
    return WGT_OK;
}

wgt_status model_opt_state_set(wgt_model *m, const model_opt_state *o) {
    if (o->updates > UINT32_MAX || o->skips > UINT32_MAX)
        return wgt_fail(WGT_ERR_CONFIG, "%llu updates and %llu skips: the optimizer status counts at most %u of each",
                        (unsigned long long)o->updates, (unsigned long long)o->skips, UINT32_MAX);
    if (!(o->loss_scale > 0.0f) || !isfinite(o->loss_scale))
        return wgt_fail(WGT_ERR_FORMAT, "loss scale %g is not a positive finite f32", (double)o->loss_scale);
    float s[WGT_ST_WORDS];
    WGT_TRY(m->be->download(m->be, s, m->status, WGT_ST_WORDS));
    wgt_st_set_u32(s, WGT_ST_T, (uint32_t)o->updates);
    wgt_st_set_u32(s, WGT_ST_SKIPS, (uint32_t)o->skips);
    wgt_st_set_u32(s, WGT_ST_CLEAN, o->clean);
    s[WGT_ST_LOSS_SCALE] = o->loss_scale;
    return m->be->upload(m->be, m->status, s, WGT_ST_WORDS);
}

static void result_unpack(const float *s, model_step_result *r) {
    r->loss_sum = s[WGT_ST_LOSS_SUM];
    r->grad_norm = s[WGT_ST_NORM];
    r->loss_scale = s[WGT_ST_STEP_SCALE];
    r->next_scale = s[WGT_ST_LOSS_SCALE];
    r->updates = wgt_st_u32(s, WGT_ST_T);
    r->skips = wgt_st_u32(s, WGT_ST_SKIPS);
    r->clean = wgt_st_u32(s, WGT_ST_CLEAN);
    r->skipped = wgt_st_u32(s, WGT_ST_SKIPPED) != 0;
}

wgt_status model_result_begin(wgt_model *m, int slot) {
    return m->be->readback_begin(m->be, slot, m->status, WGT_ST_WORDS);
}

wgt_status model_result_end(wgt_model *m, int slot, int wait, int *ready, model_step_result *r) {
    float s[WGT_ST_WORDS];
    WGT_TRY(m->be->readback_end(m->be, slot, s, WGT_ST_WORDS, wait, ready));
    if (*ready) result_unpack(s, r);
    return WGT_OK;
}

wgt_status model_step_result_now(wgt_model *m, model_step_result *r) {
    float s[WGT_ST_WORDS];
    WGT_TRY(m->be->download(m->be, s, m->status, WGT_ST_WORDS));
    result_unpack(s, r);
    return WGT_OK;
}
