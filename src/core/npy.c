// npy.c — reader/writer for the .npy format. Hand-written: the format is a short ASCII dict
// header plus raw data, and no Debian C library provides it.
//
// The header is parsed by the grammar NumPy writes and reads (a Python dict literal, see
// numpy/lib/format.py): exactly the keys 'descr', 'fortran_order' and 'shape', each once; a
// quoted dtype string, True or False, a tuple of non-negative integers ("(3)" is an int, not a
// tuple). Anything else is refused rather than guessed at, as is a file whose data is not
// exactly what the header describes.
#include "core/npy.h"
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/fileutil.h"

#define NPY_MAX_HEADER 10000            // NumPy's own default limit (np.load max_header_size)
// 4 TiB of data: beyond anything a kernel test needs (and a quarter of the address space where
// size_t is 32 bits, as in the browser build)
#define NPY_MAX_ELEMS ((size_t)(SIZE_MAX / 4 < (1ull << 40) ? SIZE_MAX / 4 : (1ull << 40)))

size_t npy_words(const npy_array *a) { return a->dtype == NPY_F16 ? (a->n + 1) / 2 : a->n; }
static size_t elem_bytes(npy_dtype t) { return t == NPY_F16 ? 2 : 4; }

const char *npy_dtype_name(npy_dtype t) {
    return t == NPY_F32 ? "float32" : t == NPY_I32 ? "int32" : t == NPY_U32 ? "uint32" : "float16";
}

typedef struct {
    const char *p;
    size_t n, i;
    const char *err;
} hparse;

static int hfail(hparse *s, const char *why) {
    if (!s->err) s->err = why;
    return 0;
}
static void hws(hparse *s) {
    while (s->i < s->n && (s->p[s->i] == ' ' || s->p[s->i] == '\t' || s->p[s->i] == '\n' || s->p[s->i] == '\r')) s->i++;
}
static int hpeek(hparse *s) { return s->i < s->n ? (unsigned char)s->p[s->i] : -1; }

// A Python string literal without escapes or prefixes: '...' or "..." of printable ASCII.
static int hstring(hparse *s, char *dst, size_t cap) {
    int q = hpeek(s);
    if (q != '\'' && q != '"') return hfail(s, "expected a quoted string");
    s->i++;
    size_t k = 0;
    for (;;) {
        int c = hpeek(s);
        if (c < 0) return hfail(s, "unterminated string");
        s->i++;
        if (c == q) break;
        if (c < 0x20 || c > 0x7e || c == '\\') return hfail(s, "unsupported character in a string");
        if (k + 1 >= cap) return hfail(s, "string too long");
        dst[k++] = (char)c;
    }
    dst[k] = 0;
    return 1;
}

// A decimal integer literal: "0" or digits without a leading zero.
static int hint(hparse *s, uint64_t *v) {
    int c = hpeek(s);
    if (c < '0' || c > '9') return hfail(s, "expected a non-negative integer in the shape");
    if (c == '0' && s->i + 1 < s->n && s->p[s->i + 1] >= '0' && s->p[s->i + 1] <= '9')
        return hfail(s, "integer with a leading zero");
    uint64_t x = 0;
    while ((c = hpeek(s)) >= '0' && c <= '9') {
        if (x > NPY_MAX_ELEMS) return hfail(s, "dimension too large");  // x * 10 + 9 still fits
        x = x * 10 + (uint64_t)(c - '0');
        s->i++;
    }
    if (x > NPY_MAX_ELEMS) return hfail(s, "dimension too large");
    *v = x;
    return 1;
}

static int hshape(hparse *s, npy_array *out) {
    if (hpeek(s) != '(') return hfail(s, "'shape' must be a tuple");
    s->i++;
    hws(s);
    out->ndim = 0;
    out->n = 1;
    if (hpeek(s) == ')') {
        s->i++;
        return 1;  // () : a 0-d array of one element
    }
    for (;;) {
        uint64_t v;
        if (!hint(s, &v)) return 0;
        if (out->ndim == NPY_MAX_DIMS) return hfail(s, "more dimensions than wgtrain supports (8)");
        out->shape[out->ndim++] = (size_t)v;
        if (v && out->n > NPY_MAX_ELEMS / v) return hfail(s, "array too large");
        out->n *= (size_t)v;
        hws(s);
        int c = hpeek(s);
        if (c == ')') {
            // "(3)" is the integer 3 in Python: a 1-tuple needs its comma
            if (out->ndim == 1) return hfail(s, "'shape' is an integer in parentheses, not a tuple");
            s->i++;
            return 1;
        }
        if (c != ',') return hfail(s, "expected ',' or ')' in the shape");
        s->i++;
        hws(s);
        if (hpeek(s) == ')') {
            s->i++;
            return 1;
        }
    }
}

// Parses the header dict into out (dtype, ndim, shape, n). descr receives the dtype string for
// messages. Returns 1 on success; on failure s->err says why.
static int parse_header(hparse *s, npy_array *out, char *descr, size_t dcap, int *fortran) {
    int have_d = 0, have_f = 0, have_s = 0;
    hws(s);
    if (hpeek(s) != '{') return hfail(s, "the header is not a dict literal");
    s->i++;
    hws(s);
    if (hpeek(s) == '}') return hfail(s, "the header dict is empty");
    for (;;) {
        char key[32];
        if (!hstring(s, key, sizeof key)) return 0;
        hws(s);
        if (hpeek(s) != ':') return hfail(s, "expected ':' after a key");
        s->i++;
        hws(s);
        if (!strcmp(key, "descr")) {
            if (have_d++) return hfail(s, "the key 'descr' appears twice");
            if (!hstring(s, descr, dcap)) return 0;
        } else if (!strcmp(key, "fortran_order")) {
            if (have_f++) return hfail(s, "the key 'fortran_order' appears twice");
            if (s->n - s->i >= 4 && !memcmp(s->p + s->i, "True", 4)) *fortran = 1, s->i += 4;
            else if (s->n - s->i >= 5 && !memcmp(s->p + s->i, "False", 5)) *fortran = 0, s->i += 5;
            else return hfail(s, "'fortran_order' must be True or False");
        } else if (!strcmp(key, "shape")) {
            if (have_s++) return hfail(s, "the key 'shape' appears twice");
            if (!hshape(s, out)) return 0;
        } else {
            return hfail(s, "unexpected key (a .npy header has exactly 'descr', 'fortran_order' and 'shape')");
        }
        hws(s);
        int c = hpeek(s);
        if (c == ',') {
            s->i++;
            hws(s);
            if (hpeek(s) == '}') {
                s->i++;
                break;
            }
            continue;
        }
        if (c == '}') {
            s->i++;
            break;
        }
        return hfail(s, "expected ',' or '}'");
    }
    if (!have_d || !have_f || !have_s) return hfail(s, "a key is missing (a .npy header has 'descr', 'fortran_order' and 'shape')");
    hws(s);
    if (s->i != s->n) return hfail(s, "data after the header dict");
    return 1;
}

wgt_status npy_load(npy_array *out, const char *path) {
    memset(out, 0, sizeof *out);
    FILE *f;
    uint64_t fsize;
    WGT_TRY(file_fopen_read(path, NULL, NULL, &f, &fsize));
    unsigned char pre[12];
    wgt_status st = WGT_OK;
    char *h = NULL;
    if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6)) {
        fclose(f);
        return wgt_fail(WGT_ERR_FORMAT, "'%s' is not a .npy file (bad magic); save arrays with numpy.save", path);
    }
    int major = pre[6], minor = pre[7];
    size_t hlen, pre_len = 10;
    if ((major != 1 && major != 2 && major != 3) || minor != 0) {
        fclose(f);
        return wgt_fail(WGT_ERR_FORMAT, "'%s': unsupported .npy format version %d.%d (NumPy writes 1.0, 2.0 or 3.0)", path,
                        major, minor);
    }
    if (major == 1) {
        hlen = (size_t)pre[8] | (size_t)pre[9] << 8;
    } else {
        if (fread(pre + 10, 1, 2, f) != 2) { fclose(f); return wgt_fail(WGT_ERR_FORMAT, "'%s': truncated .npy header", path); }
        hlen = (size_t)pre[8] | (size_t)pre[9] << 8 | (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
        pre_len = 12;
    }
    if (hlen > NPY_MAX_HEADER) {
        fclose(f);
        return wgt_fail(WGT_ERR_FORMAT, "'%s': .npy header of %zu bytes, more than the %d NumPy reads", path, hlen, NPY_MAX_HEADER);
    }
    h = wgt_malloc(hlen + 1);
    if (fread(h, 1, hlen, f) != hlen) {
        st = wgt_fail(WGT_ERR_FORMAT, "'%s': truncated .npy header", path);
        goto done;
    }
    h[hlen] = 0;
    if (hlen == 0 || h[hlen - 1] != '\n') {
        st = wgt_fail(WGT_ERR_FORMAT, "'%s': malformed .npy header (it must end with a newline)", path);
        goto done;
    }
    char descr[32] = "";
    int fortran = 0;
    hparse s = {h, hlen, 0, NULL};
    if (!parse_header(&s, out, descr, sizeof descr, &fortran)) {
        st = wgt_fail(WGT_ERR_FORMAT, "'%s': malformed .npy header: %s (at byte %zu of the header)", path, s.err, s.i);
        goto done;
    }
    if (!strcmp(descr, "<f4")) out->dtype = NPY_F32;
    else if (!strcmp(descr, "<i4")) out->dtype = NPY_I32;
    else if (!strcmp(descr, "<u4")) out->dtype = NPY_U32;
    else if (!strcmp(descr, "<f2")) out->dtype = NPY_F16;
    else {
        st = wgt_fail(WGT_ERR_FORMAT, "'%s' has dtype '%s'; wgtrain reads float32 ('<f4'), int32 ('<i4'), uint32 ('<u4') or "
                      "float16 ('<f2'): convert with arr.astype(numpy.float32) / numpy.int32", path, descr);
        goto done;
    }
    if (fortran) {
        st = wgt_fail(WGT_ERR_FORMAT, "'%s' is in Fortran order; save a C-ordered array (numpy.ascontiguousarray)", path);
        goto done;
    }
    // the file's size must be exactly header + data: checked before allocating, so a corrupt
    // header cannot ask for terabytes
    uint64_t data_at = pre_len + hlen, want = (uint64_t)out->n * elem_bytes(out->dtype);
    if (fsize < data_at || fsize - data_at < want) {
        st = wgt_fail(WGT_ERR_FORMAT, "'%s' is truncated: the header promises %zu elements (%llu bytes) but %llu bytes "
                      "follow it", path, out->n, (unsigned long long)want,
                      (unsigned long long)(fsize >= data_at ? fsize - data_at : 0));
        goto done;
    }
    if (fsize - data_at > want) {
        st = wgt_fail(WGT_ERR_FORMAT, "'%s' has %llu bytes after the %zu elements its header describes; save one array "
                      "per file", path, (unsigned long long)(fsize - data_at - want), out->n);
        goto done;
    }
    out->data = wgt_calloc(npy_words(out) ? npy_words(out) : 1, 4);
    if (fread(out->data, elem_bytes(out->dtype), out->n, f) != out->n) {
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
    WGT_ASSERT(a->ndim >= 0 && a->ndim <= NPY_MAX_DIMS, "npy_save: bad ndim");
    char shape[256] = "";
    size_t len = 0;
    for (int i = 0; i < a->ndim; i++) len += snprintf(shape + len, sizeof shape - len, "%zu,%s", a->shape[i], (i + 1 < a->ndim) ? " " : "");
    if (a->ndim > 1) shape[len - 1] = 0;  // "(3, 4)" not "(3, 4,)"; a 1-d shape keeps "(3,)"
    const char *descr = a->dtype == NPY_F32 ? "<f4" : a->dtype == NPY_I32 ? "<i4" : a->dtype == NPY_U32 ? "<u4" : "<f2";
    char h[512];
    int hl = snprintf(h, sizeof h, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, shape);
    int total = 10 + hl + 1;
    int pad = (64 - total % 64) % 64;
    unsigned short hlen = (unsigned short)(hl + pad + 1);
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hlen & 0xff), (unsigned char)(hlen >> 8)};
    atomic_file af;
    WGT_TRY(atomic_file_open(&af, path));
    atomic_file_write(&af, pre, sizeof pre);
    atomic_file_write(&af, h, (size_t)hl);
    for (int i = 0; i < pad; i++) atomic_file_write(&af, " ", 1);
    atomic_file_write(&af, "\n", 1);
    atomic_file_write(&af, a->data, a->n * elem_bytes(a->dtype));
    return atomic_file_commit(&af);
}

void npy_free(npy_array *a) {
    free(a->data);
    a->data = NULL;
}
