// safetensors.c — .safetensors I/O on top of cJSON (Debian's libcjson) for the header.
// Reading follows the reference implementation's rules (huggingface/safetensors): the header is
// strict JSON starting with '{', each tensor has exactly dtype, shape and data_offsets, shapes
// and offsets are non-negative integers, the tensors' byte ranges are contiguous, do not
// overlap and cover the data exactly, names are unique. The data is read (not mapped: a file
// changed by someone else cannot fault us) into its own allocation, so every float is aligned
// whatever the header's length. F16 and BF16 tensors are converted exactly to float32 into an
// allocation of their own (a file of only F32 tensors is used as read).
#include "core/safetensors.h"
#include <errno.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "core/fileutil.h"
#include "core/json_strict.h"

#define ST_MAX_HEADER 100000000u  // the reference implementation's limit

struct st_file {
    float *data;  // the data section, malloc'd (aligned for floats)
    size_t data_size;
    st_tensor *t;
    int n;
    char **paths;      // the files the tensors are in (st_tensor.shard): one, or a checkpoint's shards
    uint64_t *sizes;   // their sizes when the header was read (a file changed since is refused)
    int n_paths;
    int rfd, rfd_shard;  // st_tensor_read's open file (-1: none)
};

static wgt_status st_bad(st_file *f, const char *path, const char *what) {
    wgt_status s = wgt_fail(WGT_ERR_FORMAT, "'%s' is not a valid safetensors file: %s", path, what);
    st_close(f);
    return s;
}

// Element sizes of the dtypes the format defines; 0 for an unknown name.
static int dtype_known(const char *d) {
    static const char *const known[] = {"BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "F8_E8M0", "I16", "U16", "F16",
                                        "BF16", "I32", "U32", "F32", "F64", "I64", "U64", "C64", "F4", "F6_E2M3",
                                        "F6_E3M2", NULL};
    for (int i = 0; known[i]; i++)
        if (!strcmp(d, known[i])) return 1;
    return 0;
}

// Bytes per element of the dtypes wgtrain reads (0: not one of them).
static int dtype_size(const char *d) {
    if (!strcmp(d, "F32")) return 4;
    if (!strcmp(d, "F16") || !strcmp(d, "BF16")) return 2;
    return 0;
}

// IEEE binary16 -> binary32, exactly: every half is a float (subnormals become normal floats;
// infinities and NaN keep their sign and payload).
static uint32_t f16_bits_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, ex = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (ex == 0x1f) return sign | 0x7f800000u | man << 13;
    if (ex) return sign | (ex + 112) << 23 | man << 13;
    if (!man) return sign;
    int s = 0;  // subnormal: man x 2^-24; normalise the leading 1 into bit 10
    while (!(man & 0x400u)) man <<= 1, s++;
    return sign | (uint32_t)(113 - s) << 23 | (man & 0x3ffu) << 13;
}

static void convert(float *dst, const unsigned char *src, size_t n, const char *dtype) {
    for (size_t i = 0; i < n; i++) {
        uint16_t h = (uint16_t)(src[2 * i] | src[2 * i + 1] << 8);  // little-endian
        uint32_t b = !strcmp(dtype, "BF16") ? (uint32_t)h << 16 : f16_bits_to_f32(h);
        memcpy(&dst[i], &b, 4);
    }
}

typedef struct { uint64_t b, e; int idx; } span;
static int span_cmp(const void *x, const void *y) {
    const span *a = x, *b = y;
    if (a->b != b->b) return a->b < b->b ? -1 : 1;
    if (a->e != b->e) return a->e < b->e ? -1 : 1;
    return 0;
}

static wgt_status st_open_any(st_file **out, const char *path, int read_data) {
    *out = NULL;
    int fd;
    uint64_t fsize;
    WGT_TRY(file_open_read(path, NULL, NULL, &fd, &fsize));
    st_file *f = wgt_calloc(1, sizeof *f);
    f->rfd = -1;
    f->paths = wgt_calloc(1, sizeof *f->paths);
    f->sizes = wgt_calloc(1, sizeof *f->sizes);
    f->paths[0] = wgt_malloc(strlen(path) + 1);
    strcpy(f->paths[0], path);
    f->sizes[0] = fsize;
    f->n_paths = 1;
    if (fsize < 8) {
        close(fd);
        return st_bad(f, path, "shorter than its 8-byte header length");
    }
    unsigned char hb[8];
    wgt_status rs = file_pread_exact(fd, hb, 8, 0, path);
    if (rs != WGT_OK) {
        close(fd);
        st_close(f);
        return rs;
    }
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | hb[i];
    if (hlen > fsize - 8) {
        close(fd);
        return st_bad(f, path, "header length beyond the end of the file (truncated?)");
    }
    if (hlen > ST_MAX_HEADER) {
        close(fd);
        return st_bad(f, path, "header longer than 100 MB");
    }
    char *hdr = wgt_malloc((size_t)hlen + 1);
    rs = file_pread_exact(fd, hdr, (size_t)hlen, 8, path);
    if (rs != WGT_OK) {
        free(hdr);
        close(fd);
        st_close(f);
        return rs;
    }
    hdr[hlen] = 0;
    if (hlen == 0 || hdr[0] != '{') {
        free(hdr);
        close(fd);
        return st_bad(f, path, "the header does not start with '{'");
    }
    cJSON *root;
    rs = json_parse_strict(&root, hdr, (size_t)hlen, JSON_INTEGERS_ONLY, "the header");
    free(hdr);
    if (rs != WGT_OK) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", wgt_last_error());
        close(fd);
        return st_bad(f, path, msg);
    }
    f->data_size = (size_t)(fsize - 8 - hlen);
    int cap = cJSON_GetArraySize(root);
    f->t = wgt_calloc(cap ? (size_t)cap : 1, sizeof *f->t);
    span *spans = wgt_calloc(cap ? (size_t)cap : 1, sizeof *spans);
    uint64_t *off_b = wgt_calloc(cap ? (size_t)cap : 1, sizeof *off_b);
    const char *err = NULL;
    char errbuf[512];
    int any16 = 0;  // a tensor needs conversion
#define BAD(...) do { snprintf(errbuf, sizeof errbuf, __VA_ARGS__); err = errbuf; } while (0)
    for (cJSON *it = root->child; it && !err; it = it->next) {
        if (!strcmp(it->string, "__metadata__")) {
            if (!cJSON_IsObject(it)) { BAD("__metadata__ is not an object"); break; }
            for (cJSON *m = it->child; m; m = m->next)
                if (!cJSON_IsString(m)) { BAD("__metadata__ value '%.64s' is not a string", m->string); break; }
            continue;
        }
        st_tensor *t = &f->t[f->n];
        if (strlen(it->string) >= sizeof t->name) { BAD("tensor name '%.64s...' too long", it->string); break; }
        if (!it->string[0]) { BAD("a tensor has an empty name"); break; }
        strcpy(t->name, it->string);
        if (!cJSON_IsObject(it)) { BAD("tensor '%s' is not an object", t->name); break; }
        const cJSON *dt = NULL, *sh = NULL, *off = NULL;
        for (const cJSON *k = it->child; k && !err; k = k->next) {
            if (!strcmp(k->string, "dtype")) dt = k;
            else if (!strcmp(k->string, "shape")) sh = k;
            else if (!strcmp(k->string, "data_offsets")) off = k;
            else BAD("tensor '%s' has an unknown field '%.64s'", t->name, k->string);
        }
        if (err) break;
        if (!cJSON_IsString(dt) || !cJSON_IsArray(sh) || !cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2) {
            BAD("tensor '%s' lacks dtype, shape or data_offsets", t->name);
            break;
        }
        if (!dtype_known(dt->valuestring)) { BAD("tensor '%s' has the unknown dtype '%.32s'", t->name, dt->valuestring); break; }
        const int esz = dtype_size(dt->valuestring);
        if (!esz) {
            BAD("tensor '%s' has dtype %s; wgtrain reads F32, F16 or BF16 weights (convert with tensor.float() before "
                "saving)", t->name, dt->valuestring);
            break;
        }
        snprintf(t->dtype, sizeof t->dtype, "%s", dt->valuestring);
        if (esz != 4) any16 = 1;
        int nd = cJSON_GetArraySize(sh);
        if (nd > ST_MAX_DIMS) { BAD("tensor '%s' has %d dimensions; wgtrain reads at most %d", t->name, nd, ST_MAX_DIMS); break; }
        t->ndim = nd;
        // shape product and byte count, overflow-checked (the JSON numbers are integers <= 2^53)
        uint64_t n = 1;
        int k = 0, zero = 0;
        for (cJSON *d = sh->child; d; d = d->next, k++) {
            int64_t v;
            if (!json_int_in(d, 0, JSON_MAX_SAFE_INT, &v)) { BAD("tensor '%s' has a shape entry that is not a non-negative integer", t->name); break; }
            t->shape[k] = (size_t)v;
            if (v == 0) zero = 1;
            else if (!zero && n > (UINT64_MAX / 4) / (uint64_t)v) { BAD("tensor '%s': the shape's product overflows", t->name); break; }
            else if (!zero) n *= (uint64_t)v;
        }
        if (err) break;
        if (zero) n = 0;
        int64_t b, e;
        if (!json_int_in(cJSON_GetArrayItem(off, 0), 0, JSON_MAX_SAFE_INT, &b) ||
            !json_int_in(cJSON_GetArrayItem(off, 1), 0, JSON_MAX_SAFE_INT, &e)) {
            BAD("tensor '%s' has data_offsets that are not non-negative integers", t->name);
            break;
        }
        if (e < b || (uint64_t)(e - b) != n * (uint64_t)esz) {
            BAD("tensor '%s' has data offsets [%lld, %lld) that do not match its shape (%llu bytes)", t->name, (long long)b,
                (long long)e, (unsigned long long)(n * (uint64_t)esz));
            break;
        }
        if ((uint64_t)e > f->data_size) {
            BAD("tensor '%s' has data offsets [%lld, %lld) beyond the file's %zu data bytes (truncated file?)", t->name,
                (long long)b, (long long)e, f->data_size);
            break;
        }
        t->n = (size_t)n;
        t->shard = 0;
        t->file_off = 8 + hlen + (uint64_t)b;
        spans[f->n] = (span){(uint64_t)b, (uint64_t)e, f->n};
        off_b[f->n] = (uint64_t)b;
        f->n++;
    }
    cJSON_Delete(root);
    // the byte ranges, in order, must tile the data section exactly
    if (!err) {
        qsort(spans, (size_t)f->n, sizeof *spans, span_cmp);
        uint64_t at = 0;
        for (int i = 0; i < f->n && !err; i++) {
            if (spans[i].b != at)
                BAD("tensor '%s' starts at byte %llu but the previous tensor ends at %llu (%s)", f->t[spans[i].idx].name,
                    (unsigned long long)spans[i].b, (unsigned long long)at, spans[i].b < at ? "overlapping tensors" : "a gap");
            at = spans[i].e;
        }
        if (!err && at != f->data_size)
            BAD("the tensors cover %llu data bytes but the file holds %zu", (unsigned long long)at, f->data_size);
    }
    free(spans);
    if (!err && read_data) {
        void *raw = wgt_malloc(f->data_size ? f->data_size : 1);
        rs = file_pread_exact(fd, raw, f->data_size, 8 + hlen, path);
        if (rs != WGT_OK) {
            free(raw);
            free(off_b);
            close(fd);
            st_close(f);
            return rs;
        }
        if (!any16) {
            f->data = raw;
            for (int i = 0; i < f->n; i++) f->t[i].data = f->data + off_b[i] / 4;  // offsets are multiples of 4 (F32 only)
        } else {
            // every tensor as float32, one after the other (a mix of dtypes leaves F32 data unaligned)
            size_t total = 0;
            for (int i = 0; i < f->n; i++) total += f->t[i].n;
            f->data = wgt_malloc((total ? total : 1) * sizeof(float));
            size_t at = 0;
            for (int i = 0; i < f->n; i++) {
                st_tensor *t = &f->t[i];
                const unsigned char *src = (const unsigned char *)raw + off_b[i];
                if (!strcmp(t->dtype, "F32")) memcpy(f->data + at, src, t->n * 4);
                else convert(f->data + at, src, t->n, t->dtype);
                t->data = f->data + at;
                at += t->n;
            }
            free(raw);
        }
    }
#undef BAD
    free(off_b);
    close(fd);
    if (err) return st_bad(f, path, err);
    *out = f;
    return WGT_OK;
}

wgt_status st_open(st_file **out, const char *path) { return st_open_any(out, path, 1); }
wgt_status st_open_header(st_file **out, const char *path) { return st_open_any(out, path, 0); }

void st_close(st_file *f) {
    if (!f) return;
    if (f->rfd >= 0) close(f->rfd);
    for (int i = 0; i < f->n_paths; i++) free(f->paths[i]);
    free(f->paths);
    free(f->sizes);
    free(f->data);
    free(f->t);
    free(f);
}

int st_shard_count(const st_file *f) { return f->n_paths; }
const char *st_shard_path(const st_file *f, int shard) {
    WGT_ASSERT(shard >= 0 && shard < f->n_paths, "st_shard_path: no such shard");
    return f->paths[shard];
}

int st_is_index_path(const char *path) {
    size_t n = strlen(path), k = strlen(".index.json");
    return n >= k && !strcmp(path + n - k, ".index.json");
}

wgt_status st_tensor_read(st_file *f, const st_tensor *t, float *dst) {
    WGT_ASSERT(t->shard >= 0 && t->shard < f->n_paths, "st_tensor_read: a tensor of no file");
    const char *path = f->paths[t->shard];
    if (f->rfd_shard != t->shard || f->rfd < 0) {
        if (f->rfd >= 0) close(f->rfd);
        f->rfd = -1;
        uint64_t size;
        WGT_TRY(file_open_read(path, "safetensors file", NULL, &f->rfd, &size));
        f->rfd_shard = t->shard;
        if (size != f->sizes[t->shard]) {
            close(f->rfd);
            f->rfd = -1;
            return wgt_fail(WGT_ERR_IO, "'%s' changed size (%llu -> %llu bytes) while it was being read; was it "
                            "rewritten?", path, (unsigned long long)f->sizes[t->shard], (unsigned long long)size);
        }
    }
    if (!strcmp(t->dtype, "F32")) return file_pread_exact(f->rfd, dst, t->n * 4, t->file_off, path);
    unsigned char *raw = wgt_malloc(t->n ? t->n * 2 : 1);
    wgt_status st = file_pread_exact(f->rfd, raw, t->n * 2, t->file_off, path);
    if (st == WGT_OK) convert(dst, raw, t->n, t->dtype);
    free(raw);
    return st;
}

// ---- sharded checkpoints (model.safetensors.index.json)

#define ST_MAX_INDEX_BYTES ((size_t)64 << 20)  // an index of a million tensors is ~100 MB; ours are KBs
#define ST_MAX_SHARDS 100000

// A weight_map value names a file in the index's directory: no directory part, not "." or "..".
static int shard_name_ok(const char *s) {
    return s[0] && strlen(s) < 1024 && !strchr(s, '/') && !strchr(s, '\\') && strcmp(s, ".") && strcmp(s, "..");
}

typedef struct { const char *name; int shard; } st_entry_ref;
static int ref_cmp(const void *x, const void *y) {
    return strcmp(((const st_entry_ref *)x)->name, ((const st_entry_ref *)y)->name);
}

static wgt_status st_open_index(st_file **out, const char *path) {
    *out = NULL;
    char *text;
    size_t tn;
    WGT_TRY(file_read_all(path, "checkpoint index", NULL, ST_MAX_INDEX_BYTES, &text, &tn));
    cJSON *root;
    wgt_status st = json_parse_strict(&root, text, tn, 0, path);
    free(text);
    WGT_TRY(st);
    st_file *f = wgt_calloc(1, sizeof *f);
    f->rfd = -1;
    st_entry_ref *map = NULL, *have = NULL;
    int n_map = 0, n_have = 0;
    const cJSON *wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    const cJSON *md = cJSON_GetObjectItemCaseSensitive(root, "metadata");
    char dir[4096];
    const char *slash = strrchr(path, '/');
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
    if (slash == path) snprintf(dir, sizeof dir, "/");
    if (!cJSON_IsObject(root) || !cJSON_IsObject(wm) || !wm->child) {
        st = wgt_fail(WGT_ERR_FORMAT, "'%s' is not a safetensors index: it needs a non-empty \"weight_map\" object "
                      "of tensor name -> shard file", path);
        goto done;
    }
    if (md && !cJSON_IsNull(md) && !cJSON_IsObject(md)) {
        st = wgt_fail(WGT_ERR_FORMAT, "'%s': \"metadata\" must be an object", path);
        goto done;
    }
    for (const cJSON *it = root->child; it; it = it->next)
        if (strcmp(it->string, "weight_map") && strcmp(it->string, "metadata")) {
            st = wgt_fail(WGT_ERR_FORMAT, "'%s' has an unknown key \"%.64s\" (an index holds \"metadata\" and "
                          "\"weight_map\")", path, it->string);
            goto done;
        }
    n_map = cJSON_GetArraySize(wm);
    map = wgt_calloc((size_t)n_map, sizeof *map);
    f->paths = wgt_calloc(1, sizeof *f->paths);  // grown below
    int cap_paths = 1;
    int k = 0;
    for (const cJSON *it = wm->child; it; it = it->next, k++) {
        if (!cJSON_IsString(it) || !shard_name_ok(it->valuestring)) {
            st = wgt_fail(WGT_ERR_FORMAT, "'%s': the shard of tensor '%.128s' must be a file name in the index's "
                          "directory (no '/', '\\' or '..'), got %s%.128s%s", path, it->string,
                          cJSON_IsString(it) ? "'" : "", cJSON_IsString(it) ? it->valuestring : "another JSON value",
                          cJSON_IsString(it) ? "'" : "");
            goto done;
        }
        if (strlen(it->string) >= sizeof f->t[0].name) {
            st = wgt_fail(WGT_ERR_FORMAT, "'%s': tensor name '%.64s...' too long", path, it->string);
            goto done;
        }
        char full[4096 + 1100];
        snprintf(full, sizeof full, "%s/%s", dir, it->valuestring);
        int s = 0;
        while (s < f->n_paths && strcmp(f->paths[s], full)) s++;
        if (s == f->n_paths) {
            if (f->n_paths == ST_MAX_SHARDS) {
                st = wgt_fail(WGT_ERR_FORMAT, "'%s' lists more than %d shards", path, ST_MAX_SHARDS);
                goto done;
            }
            if (f->n_paths == cap_paths) {
                cap_paths *= 2;
                char **np = wgt_calloc((size_t)cap_paths, sizeof *np);
                memcpy(np, f->paths, (size_t)f->n_paths * sizeof *np);
                free(f->paths);
                f->paths = np;
            }
            f->paths[f->n_paths] = wgt_malloc(strlen(full) + 1);
            strcpy(f->paths[f->n_paths++], full);
        }
        map[k] = (st_entry_ref){it->string, s};
    }
    qsort(map, (size_t)n_map, sizeof *map, ref_cmp);
    f->sizes = wgt_calloc((size_t)f->n_paths, sizeof *f->sizes);
    f->t = wgt_calloc((size_t)n_map, sizeof *f->t);
    // every shard's header; each of its tensors must be one the index puts there
    for (int s = 0; s < f->n_paths && st == WGT_OK; s++) {
        st_file *h;
        struct stat sb;
        if (stat(f->paths[s], &sb) != 0) {
            st = wgt_fail(WGT_ERR_IO, "'%s' lists the shard '%s', which is missing (%s); the checkpoint is incomplete",
                          path, f->paths[s], strerror(errno));
            break;
        }
        st = st_open_header(&h, f->paths[s]);
        if (st != WGT_OK) break;
        f->sizes[s] = h->sizes[0];
        for (int i = 0; i < h->n && st == WGT_OK; i++) {
            st_entry_ref key = {h->t[i].name, 0};
            const st_entry_ref *e = bsearch(&key, map, (size_t)n_map, sizeof *map, ref_cmp);
            if (!e)
                st = wgt_fail(WGT_ERR_FORMAT, "shard '%s' holds tensor '%s', which its index '%s' does not list",
                              f->paths[s], h->t[i].name, path);
            else if (e->shard != s)
                st = wgt_fail(WGT_ERR_FORMAT, "tensor '%s' is in shard '%s' but the index '%s' puts it in '%s' (a "
                              "tensor is in exactly one shard, the one its index names)", h->t[i].name, f->paths[s],
                              path, f->paths[e->shard]);
            else if (f->n == n_map)  // cannot happen: each tensor of a shard is one index entry
                st = wgt_fail(WGT_ERR_FORMAT, "'%s': more shard tensors than index entries", path);
            else {
                f->t[f->n] = h->t[i];
                f->t[f->n++].shard = s;
            }
        }
        st_close(h);
    }
    if (st != WGT_OK) goto done;
    // an index entry that no shard holds (a name in two shards was refused above: one of the two
    // is not where the index puts it)
    have = wgt_calloc((size_t)(f->n ? f->n : 1), sizeof *have);
    for (int i = 0; i < f->n; i++) have[n_have++] = (st_entry_ref){f->t[i].name, f->t[i].shard};
    qsort(have, (size_t)n_have, sizeof *have, ref_cmp);
    for (int i = 0; i < n_map && st == WGT_OK; i++)
        if (!bsearch(&map[i], have, (size_t)n_have, sizeof *have, ref_cmp))
            st = wgt_fail(WGT_ERR_FORMAT, "the index '%s' puts tensor '%s' in shard '%s', which does not hold it", path,
                          map[i].name, f->paths[map[i].shard]);
done:
    free(map);
    free(have);
    cJSON_Delete(root);
    if (st != WGT_OK) {
        st_close(f);
        return st;
    }
    *out = f;
    return WGT_OK;
}

wgt_status st_open_checkpoint(st_file **out, const char *path) {
    return st_is_index_path(path) ? st_open_index(out, path) : st_open_header(out, path);
}
int st_count(const st_file *f) { return f->n; }
const st_tensor *st_at(const st_file *f, int i) { return &f->t[i]; }
const st_tensor *st_find(const st_file *f, const char *name) {
    for (int i = 0; i < f->n; i++) if (!strcmp(f->t[i].name, name)) return &f->t[i];
    return NULL;
}

typedef struct { char name[128]; int ndim; size_t shape[ST_MAX_DIMS]; size_t n; const float *data; } st_entry;
#define ST_MAX_META 8
struct st_writer { st_entry *e; int n, cap; char *meta_k[ST_MAX_META], *meta_v[ST_MAX_META]; int n_meta; };

static char *dup_str(const char *s) {
    char *d = wgt_malloc(strlen(s) + 1);
    strcpy(d, s);
    return d;
}

void st_writer_set_metadata(st_writer *w, const char *key, const char *value) {
    WGT_ASSERT(w->n_meta < ST_MAX_META, "too many safetensors metadata entries");
    w->meta_k[w->n_meta] = dup_str(key);
    w->meta_v[w->n_meta++] = dup_str(value);
}

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

void st_writer_discard(st_writer *w) {
    for (int i = 0; i < w->n_meta; i++) {
        free(w->meta_k[i]);
        free(w->meta_v[i]);
    }
    free(w->e);
    free(w);
}

wgt_status st_writer_finish(st_writer *w, const char *path) {
    cJSON *root = cJSON_CreateObject();
    size_t off = 0;
    if (w->n_meta) {
        cJSON *md = cJSON_AddObjectToObject(root, "__metadata__");
        for (int i = 0; i < w->n_meta; i++) cJSON_AddStringToObject(md, w->meta_k[i], w->meta_v[i]);
    }
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
    for (int i = 0; i < w->n_meta; i++) {
        free(w->meta_k[i]);
        free(w->meta_v[i]);
    }
    free(w->e);
    free(w);
    return st;
}
