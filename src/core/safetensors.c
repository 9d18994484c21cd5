// safetensors.c — .safetensors I/O on top of cJSON (Debian's libcjson) for the header.
#include "core/safetensors.h"
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "core/fileutil.h"

struct st_file {
    void *map;
    size_t size;
    st_tensor *t;
    int n;
};

static wgt_status st_bad(st_file *f, const char *path, const char *what) {
    wgt_status s = wgt_fail(WGT_ERR_FORMAT, "'%s' is not a valid safetensors file: %s", path, what);
    st_close(f);
    return s;
}

wgt_status st_open(st_file **out, const char *path) {
    *out = NULL;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return wgt_fail(WGT_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) { close(fd); return wgt_fail(WGT_ERR_IO, "cannot stat '%s': %s", path, strerror(errno)); }
    st_file *f = wgt_calloc(1, sizeof *f);
    f->size = (size_t)sb.st_size;
    if (f->size < 8) { close(fd); return st_bad(f, path, "shorter than its 8-byte header length"); }
    f->map = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (f->map == MAP_FAILED) { f->map = NULL; st_close(f); return wgt_fail(WGT_ERR_IO, "cannot map '%s'", path); }
    uint64_t hlen;
    memcpy(&hlen, f->map, 8);
    if (hlen > f->size - 8 || hlen > (100u << 20)) return st_bad(f, path, "header length beyond the end of the file (truncated?)");
    cJSON *root = cJSON_ParseWithLength((const char *)f->map + 8, hlen);
    if (!root || !cJSON_IsObject(root)) { cJSON_Delete(root); return st_bad(f, path, "header is not a JSON object"); }
    size_t data_size = f->size - 8 - hlen;
    const float *base = (const float *)((const char *)f->map + 8 + hlen);
    int cap = cJSON_GetArraySize(root);
    f->t = wgt_calloc(cap ? cap : 1, sizeof *f->t);
    const char *err = NULL;
    char errbuf[256];
    for (cJSON *it = root->child; it && !err; it = it->next) {
        if (!strcmp(it->string, "__metadata__")) continue;
        st_tensor *t = &f->t[f->n];
        if (strlen(it->string) >= sizeof t->name) { err = "tensor name too long"; break; }
        strcpy(t->name, it->string);
        cJSON *dt = cJSON_GetObjectItemCaseSensitive(it, "dtype");
        cJSON *sh = cJSON_GetObjectItemCaseSensitive(it, "shape");
        cJSON *off = cJSON_GetObjectItemCaseSensitive(it, "data_offsets");
        if (!cJSON_IsString(dt) || !cJSON_IsArray(sh) || !cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2) {
            snprintf(errbuf, sizeof errbuf, "tensor '%s' lacks dtype, shape or data_offsets", t->name);
            err = errbuf;
            break;
        }
        if (strcmp(dt->valuestring, "F32")) {
            snprintf(errbuf, sizeof errbuf, "tensor '%s' has dtype %s; wgtrain reads F32 weights (convert with "
                     "tensor.float() before saving)", t->name, dt->valuestring);
            err = errbuf;
            break;
        }
        t->ndim = cJSON_GetArraySize(sh);
        if (t->ndim > ST_MAX_DIMS) { err = "a tensor has more than 4 dimensions"; break; }
        t->n = 1;
        int k = 0;
        for (cJSON *d = sh->child; d; d = d->next, k++) {
            if (!cJSON_IsNumber(d) || d->valuedouble < 0) { err = "negative or non-numeric shape"; break; }
            t->shape[k] = (size_t)d->valuedouble;
            t->n *= t->shape[k];
        }
        if (err) break;
        double b = cJSON_GetArrayItem(off, 0)->valuedouble, e = cJSON_GetArrayItem(off, 1)->valuedouble;
        if (b < 0 || e < b || e > (double)data_size || (size_t)(e - b) != t->n * 4 || ((size_t)b % 4)) {
            snprintf(errbuf, sizeof errbuf, "tensor '%s' has data offsets [%.0f, %.0f) that do not match its shape "
                     "or lie beyond the file's %zu data bytes (truncated file?)", t->name, b, e, data_size);
            err = errbuf;
            break;
        }
        t->data = base + (size_t)b / 4;
        f->n++;
    }
    cJSON_Delete(root);
    if (err) return st_bad(f, path, err);
    *out = f;
    return WGT_OK;
}

void st_close(st_file *f) {
    if (!f) return;
    if (f->map) munmap(f->map, f->size);
    free(f->t);
    free(f);
}
int st_count(const st_file *f) { return f->n; }
const st_tensor *st_at(const st_file *f, int i) { return &f->t[i]; }
const st_tensor *st_find(const st_file *f, const char *name) {
    for (int i = 0; i < f->n; i++) if (!strcmp(f->t[i].name, name)) return &f->t[i];
    return NULL;
}

typedef struct { char name[128]; int ndim; size_t shape[ST_MAX_DIMS]; size_t n; const float *data; } st_entry;
struct st_writer { st_entry *e; int n, cap; };

st_writer *st_writer_new(void) { return wgt_calloc(1, sizeof(st_writer)); }

void st_writer_add(st_writer *w, const char *name, int ndim, const size_t *shape, const float *data) {
    if (w->n == w->cap) {
        w->cap = w->cap ? 2 * w->cap : 64;
        w->e = realloc(w->e, w->cap * sizeof *w->e);
        WGT_ASSERT(w->e, "out of host memory");
    }
    st_entry *e = &w->e[w->n++];
    WGT_ASSERT(strlen(name) < sizeof e->name && ndim <= ST_MAX_DIMS, "tensor name too long or too many dims");
    strcpy(e->name, name);
    e->ndim = ndim;
    e->n = 1;
    for (int i = 0; i < ndim; i++) { e->shape[i] = shape[i]; e->n *= shape[i]; }
    e->data = data;
}

wgt_status st_writer_finish(st_writer *w, const char *path) {
    cJSON *root = cJSON_CreateObject();
    size_t off = 0;
    for (int i = 0; i < w->n; i++) {
        cJSON *t = cJSON_CreateObject();
        cJSON_AddStringToObject(t, "dtype", "F32");
        cJSON *sh = cJSON_AddArrayToObject(t, "shape");
        for (int k = 0; k < w->e[i].ndim; k++) cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)w->e[i].shape[k]));
        cJSON *o = cJSON_AddArrayToObject(t, "data_offsets");
        cJSON_AddItemToArray(o, cJSON_CreateNumber((double)off));
        off += w->e[i].n * 4;
        cJSON_AddItemToArray(o, cJSON_CreateNumber((double)off));
        cJSON_AddItemToObject(root, w->e[i].name, t);
    }
    char *json = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    size_t jl = strlen(json);
    size_t padded = (jl + 7) & ~(size_t)7;  // keeps the data 8-byte aligned, as the format recommends
    wgt_status st;
    atomic_file af;
    st = atomic_file_open(&af, path);
    if (st == WGT_OK) {
        uint64_t hl = padded;
        atomic_file_write(&af, &hl, 8);
        atomic_file_write(&af, json, jl);
        for (size_t i = jl; i < padded; i++) atomic_file_write(&af, " ", 1);
        for (int i = 0; i < w->n; i++) atomic_file_write(&af, w->e[i].data, w->e[i].n * 4);
        st = atomic_file_commit(&af);
    }
    free(json);
    free(w->e);
    free(w);
    return st;
}
