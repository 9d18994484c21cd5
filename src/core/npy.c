// npy.c — reader/writer for the .npy format. Hand-written: the format is a short ASCII dict
// header plus raw data, and no Debian C library provides it.
#include "core/npy.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *npy_dtype_name(npy_dtype t) {
    return t == NPY_F32 ? "float32" : t == NPY_I32 ? "int32" : "uint32";
}

static const char *find_key(const char *h, const char *key) {
    const char *p = strstr(h, key);
    if (!p) return NULL;
    p += strlen(key);
    while (*p == ' ' || *p == ':' ) p++;
    return p;
}

wgt_status npy_load(npy_array *out, const char *path) {
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f) return wgt_fail(WGT_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    unsigned char pre[10];
    if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6)) {
        fclose(f);
        return wgt_fail(WGT_ERR_FORMAT, "'%s' is not a .npy file (bad magic); save arrays with numpy.save", path);
    }
    int major = pre[6];
    size_t hlen;
    if (major == 1) hlen = pre[8] | (pre[9] << 8);
    else if (major == 2 || major == 3) {
        unsigned char ext[2];
        if (fread(ext, 1, 2, f) != 2) { fclose(f); return wgt_fail(WGT_ERR_FORMAT, "'%s': truncated .npy header", path); }
        hlen = pre[8] | (pre[9] << 8) | ((size_t)ext[0] << 16) | ((size_t)ext[1] << 24);
    } else {
        fclose(f);
        return wgt_fail(WGT_ERR_FORMAT, "'%s': unsupported .npy version %d", path, major);
    }
    if (hlen > 1 << 20) { fclose(f); return wgt_fail(WGT_ERR_FORMAT, "'%s': .npy header too long", path); }
    char *h = wgt_malloc(hlen + 1);
    if (fread(h, 1, hlen, f) != hlen) { free(h); fclose(f); return wgt_fail(WGT_ERR_FORMAT, "'%s': truncated .npy header", path); }
    h[hlen] = 0;
    wgt_status st = WGT_OK;
    const char *d = find_key(h, "'descr'");
    const char *fo = find_key(h, "'fortran_order'");
    const char *sh = find_key(h, "'shape'");
    if (!d || !fo || !sh) { st = wgt_fail(WGT_ERR_FORMAT, "'%s': malformed .npy header", path); goto done; }
    if (!strncmp(d, "'<f4'", 5)) out->dtype = NPY_F32;
    else if (!strncmp(d, "'<i4'", 5)) out->dtype = NPY_I32;
    else if (!strncmp(d, "'<u4'", 5)) out->dtype = NPY_U32;
    else {
        char got[16] = {0};
        sscanf(d, "'%15[^']", got);
        st = wgt_fail(WGT_ERR_FORMAT, "'%s' has dtype '%s'; wgtrain reads float32 ('<f4'), int32 ('<i4') or uint32 ('<u4'): "
                      "convert with arr.astype(numpy.float32) / numpy.int32", path, got);
        goto done;
    }
    if (!strncmp(fo, "True", 4)) { st = wgt_fail(WGT_ERR_FORMAT, "'%s' is in Fortran order; save a C-ordered array (numpy.ascontiguousarray)", path); goto done; }
    if (*sh != '(') { st = wgt_fail(WGT_ERR_FORMAT, "'%s': malformed shape in .npy header", path); goto done; }
    const char *p = sh + 1;
    out->n = 1;
    while (*p && *p != ')') {
        while (*p == ' ' || *p == ',') p++;
        if (*p == ')') break;
        char *end;
        errno = 0;
        unsigned long long v = strtoull(p, &end, 10);
        if (end == p || errno) { st = wgt_fail(WGT_ERR_FORMAT, "'%s': malformed shape in .npy header", path); goto done; }
        if (out->ndim == NPY_MAX_DIMS) { st = wgt_fail(WGT_ERR_FORMAT, "'%s': more than %d dimensions", path, NPY_MAX_DIMS); goto done; }
        out->shape[out->ndim++] = v;
        if (v && out->n > ((size_t)1 << 40) / v) { st = wgt_fail(WGT_ERR_FORMAT, "'%s': array too large", path); goto done; }
        out->n *= v;
        p = end;
    }
    // compare with the file's size before allocating: a corrupt header must not ask for terabytes
    long here = ftell(f);
    if (here >= 0 && fseek(f, 0, SEEK_END) == 0) {
        long end = ftell(f);
        if (end >= 0 && (unsigned long long)(end - here) < (unsigned long long)out->n * 4) {
            st = wgt_fail(WGT_ERR_FORMAT, "'%s' is truncated: the header promises %zu elements (%llu bytes) but %ld bytes "
                          "follow it", path, out->n, (unsigned long long)out->n * 4, end - here);
            goto done;
        }
        fseek(f, here, SEEK_SET);
    }
    out->data = wgt_malloc(out->n * 4);
    if (fread(out->data, 4, out->n, f) != out->n) {
        st = wgt_fail(WGT_ERR_FORMAT, "'%s' is truncated: the header promises %zu elements", path, out->n);
        goto done;
    }
done:
    free(h);
    fclose(f);
    if (st != WGT_OK) npy_free(out);
    return st;
}

wgt_status npy_save(const char *path, const npy_array *a) {
    char shape[256] = "";
    size_t len = 0;
    for (int i = 0; i < a->ndim; i++) len += snprintf(shape + len, sizeof shape - len, "%zu,%s", a->shape[i], (i + 1 < a->ndim) ? " " : "");
    if (a->ndim > 1) shape[len - 1] = 0;  // "(3, 4)" not "(3, 4,)"; a 1-d shape keeps "(3,)"
    const char *descr = a->dtype == NPY_F32 ? "<f4" : a->dtype == NPY_I32 ? "<i4" : "<u4";
    char h[512];
    int hl = snprintf(h, sizeof h, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, shape);
    int total = 10 + hl + 1;
    int pad = (64 - total % 64) % 64;
    FILE *f = fopen(path, "wb");
    if (!f) return wgt_fail(WGT_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    unsigned short hlen = (unsigned short)(hl + pad + 1);
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    fputc(hlen & 0xff, f);
    fputc(hlen >> 8, f);
    fwrite(h, 1, hl, f);
    for (int i = 0; i < pad; i++) fputc(' ', f);
    fputc('\n', f);
    size_t w = fwrite(a->data, 4, a->n, f);
    if (fclose(f) != 0 || w != a->n) return wgt_fail(WGT_ERR_IO, "writing '%s' failed: %s", path, strerror(errno));
    return WGT_OK;
}

void npy_free(npy_array *a) {
    free(a->data);
    a->data = NULL;
}
