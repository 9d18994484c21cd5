// wg_tune.c — the GEMM tuning run and its cache file (wg_tune.h; the design is in docs/tuning.md).
// The cache is JSON (cJSON, Debian's libcjson):
//   {"format": "wgtrain-tuning", "version": 1, "devices": [
//     {"key": "...", "adapter": "...", "driver": "...",
//      "matmul": {"big": "64x128x8/8x8", "small": "64x64x16/4x4", "big_gflops": 1.0, "small_gflops": 1.0},
//      "matmul_t": {...}, "matmul_at": {...}}, ...]}
// Only "key" and the six tiles are read back; the rest is for people.
#include "backend/webgpu/wg_tune.h"
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "backend/webgpu/wg_ops.h"
#include "backend/webgpu/wg_ops_gpt.h"
#include "backend/webgpu/wgsl_sources.h"
#include "core/clock.h"
#include "core/fileutil.h"
#include "core/json_strict.h"

// Bumped whenever the meaning of a tile, the shapes or the choice rule changes on the host side
// (the kernel's own changes are caught by the hash of its source in the key).
#define TUNE_VERSION 1
#define TUNE_FILE_MAX ((size_t)1 << 20)  // a cache larger than this is not ours
#define TUNE_MAX_DEVICES WG_TUNE_MAX_DEVICES  // entries kept per file (the oldest go first)


// ------------------------------------------------------------------ where and under which key
const char *wg_tune_cache_path(wg_ctx *ctx, char *buf, size_t cap) {
    const char *set = wg_ctx_settings(ctx)->tune_cache;
    if (!strcmp(set, "off")) return NULL;
    int n;
    if (*set) n = snprintf(buf, cap, "%s", set);
    else {
        const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
        if (xdg && *xdg == '/') n = snprintf(buf, cap, "%s/wgtrain/tuning.json", xdg);  // relative ones are invalid (XDG spec)
        else if (home && *home) n = snprintf(buf, cap, "%s/.cache/wgtrain/tuning.json", home);
        else return NULL;
    }
    return n > 0 && (size_t)n < cap ? buf : NULL;
}

static uint64_t matmul_source_hash(void) {
    for (const wgt_wgsl_source *s = wgt_wgsl_sources; s->name; s++)
        if (!strcmp(s->name, "03_matmul.wgsl")) return fnv1a64(FNV64_INIT, s->code, strlen(s->code));
    WGT_ASSERT(0, "03_matmul.wgsl is not among the embedded kernels (tools/embed_wgsl.c)");
    return 0;
}

void wg_tune_key(wg_ctx *ctx, char *buf, size_t cap) {
    const wg_device_info *d = wg_ctx_info(ctx);
    snprintf(buf, cap, "%s|%s|%s|%s|%s|k=%016llx|v%d", d->vendor, d->architecture, d->name, d->driver,
             wg_backend_type_name(d->backend), (unsigned long long)matmul_source_hash(), TUNE_VERSION);
}

// ------------------------------------------------------------------ reading
static cJSON *cache_parse_text(const char *text, size_t n, char *why, size_t cap) {
    cJSON *root;
    if (json_parse_strict(&root, text, n, 0, "it") != WGT_OK) { snprintf(why, cap, "%s", wgt_last_error()); return NULL; }
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format"), *ver = cJSON_GetObjectItemCaseSensitive(root, "version");
    const cJSON *devs = cJSON_GetObjectItemCaseSensitive(root, "devices");
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "wgtrain-tuning") || !cJSON_IsNumber(ver) ||
        ver->valuedouble != 1 || !cJSON_IsArray(devs)) {
        snprintf(why, cap, "it is not a wgtrain tuning cache of version 1 (\"format\", \"version\", \"devices\")");
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

// The text of the cache at path: 1 (free() it), 0 when there is no file, -1 when it cannot be
// read as one (*why says why: not a regular file, over TUNE_FILE_MAX, an I/O error).
static int cache_read(const char *path, char **text, size_t *n, char *why, size_t cap) {
    if (access(path, F_OK) != 0) return 0;
    if (file_read_all(path, "the tuning cache", NULL, TUNE_FILE_MAX, text, n) != WGT_OK) {
        snprintf(why, cap, "%s", wgt_last_error());
        return -1;
    }
    return 1;
}

// The entry of `key` in a parsed cache, or NULL.
static cJSON *cache_entry(cJSON *root, const char *key) {
    cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(root, "devices")) {
        const cJSON *k = cJSON_GetObjectItemCaseSensitive(e, "key");
        if (cJSON_IsString(k) && !strcmp(k->valuestring, key)) return e;
    }
    return NULL;
}

// The six tiles of an entry, each a valid spec; 0 (and why) otherwise.
static int entry_tiles(const cJSON *e, wg_mm_tile_spec t[WG_TUNE_OPS][WG_TUNE_CLASSES], char *why, size_t cap) {
    static const char *const cls[WG_TUNE_CLASSES] = {"big", "small"};
    for (int op = 0; op < WG_TUNE_OPS; op++) {
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(e, wg_mm_op_name(op));
        for (int c = 0; c < WG_TUNE_CLASSES; c++) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, cls[c]);
            if (!cJSON_IsString(v) || !wg_mm_tile_spec_parse(v->valuestring, &t[op][c])) {
                snprintf(why, cap, "its %s.%s is not a tile BMxBNxBK/TMxTN", wg_mm_op_name(op), cls[c]);
                return 0;
            }
        }
    }
    return 1;
}

int wg_tune_parse(const char *text, size_t n, const char *key, wg_mm_tile_spec t[WG_TUNE_OPS][WG_TUNE_CLASSES],
                  char *why, size_t cap) {
    cJSON *root = cache_parse_text(text, n, why, cap);
    if (!root) return -1;
    const cJSON *e = cache_entry(root, key);
    int r = !e ? 0 : entry_tiles(e, t, why, cap) ? 1 : -2;
    cJSON_Delete(root);
    return r;
}

void wg_tune_load(wg_ctx *ctx) {
    wg_settings *s = wg_ctx_settings(ctx);
    char path[4096], key[1024], why[512] = "";
    if (!wg_tune_cache_path(ctx, path, sizeof path)) return;
    char *text;
    size_t n;
    int r = cache_read(path, &text, &n, why, sizeof why);
    if (r == 0) return;  // not tuned yet
    wg_mm_tile_spec t[WG_TUNE_OPS][WG_TUNE_CLASSES];
    if (r > 0) {
        wg_tune_key(ctx, key, sizeof key);
        r = wg_tune_parse(text, n, key, t, why, sizeof why);
        free(text);
    }
    for (int op = 0; r == 1 && op < WG_TUNE_OPS; op++)
        for (int c = 0; r == 1 && c < WG_TUNE_CLASSES; c++)
            if (!wg_mm_tile_fits(ctx, &t[op][c])) {
                snprintf(why, sizeof why, "its %s.%s does not fit this device's workgroup memory and threads",
                         wg_mm_op_name(op), c ? "small" : "big");
                r = -2;
            }
    if (r == 1) {
        memcpy(s->mm_tuned_tile, t, sizeof t);
        s->mm_tuned = 1;
    } else if (r == -1) {
        fprintf(stderr, "webgpu: ignoring the tuning cache %s: %s; `wgtrain tune` rewrites it (or set "
                "WGTRAIN_TUNE_CACHE=off)\n", path, why);
    } else if (r == -2) {
        fprintf(stderr, "webgpu: ignoring this device's entry of the tuning cache %s: %s; `wgtrain tune` rewrites it\n",
                path, why);
    }
}

// ------------------------------------------------------------------ the tuning run
// The candidates, in order of preference on ties: the shapes the tile sweeps of bench_matmul
// found worth timing (bench/README.md): 64 to 256 threads, 8x8, 8x4 or 4x4 outputs a thread, 4- to
// 16-deep k-slices.
static const char *const CANDIDATES[] = {
    "128x128x16/8x8", "128x128x8/8x8", "128x64x8/8x4", "64x128x8/8x8", "128x128x4/8x8", "64x64x16/4x4", "64x64x8/8x8",
    "128x64x8/8x8", "64x256x8/8x8", "64x128x4/8x8", "128x64x4/8x8", "64x64x4/8x8", "64x64x8/4x4",
    "32x64x8/4x4",
};
#define N_CANDIDATES (sizeof CANDIDATES / sizeof CANDIDATES[0])
#define N_QUICK 6

// One GEMM of the run: rows, C, OC as the ops take them (backend.h), with or without the bias.
typedef struct { uint32_t N, C, OC; int bias; } tune_shape;
// Per op, per class: a GPT-2 124M-like layer GEMM at 4096 rows (matmul_at's dW takes split-K,
// as in training) and an output of few tiles with a short K (where the small tile applies).
static const tune_shape SHAPES[WG_TUNE_OPS][WG_TUNE_CLASSES] = {
    {{4096, 768, 3072, 1}, {512, 256, 512, 0}},
    {{4096, 3072, 768, 0}, {512, 512, 256, 0}},
    {{4096, 768, 3072, 1}, {256, 512, 512, 0}},
};

typedef struct {
    tune_shape s;
    float *hx, *hw, *hb, *hd;
    wgt_buf *x, *w, *b, *d, *out;
} tune_data;

static float *rand_host(size_t n, uint64_t seed) {
    float *h = wgt_malloc(n * sizeof *h);
    uint64_t s = 0x9e3779b97f4a7c15ull ^ seed;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        h[i] = (float)(s >> 40) / 16777216.0f * 2.0f - 1.0f;
    }
    return h;
}

static wgt_status dev_buf(wgt_backend *be, wgt_buf **b, const float *h, size_t n, const char *label) {
    WGT_TRY(be->buf_alloc(be, b, n, label));
    if (h) return be->upload(be, wgt_view_of(*b, 0, n), h, n);
    return WGT_OK;
}

static void data_free(wgt_backend *be, tune_data *D) {
    wgt_buf *all[] = {D->x, D->w, D->b, D->d, D->out};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i]) be->buf_free(be, all[i]);
    free(D->hx), free(D->hw), free(D->hb), free(D->hd);
    memset(D, 0, sizeof *D);
}

static wgt_status data_init(wgt_backend *be, tune_data *D, tune_shape s, int op) {
    memset(D, 0, sizeof *D);
    D->s = s;
    const size_t N = s.N, C = s.C, OC = s.OC;
    D->hx = rand_host(N * C, 1), D->hw = rand_host(OC * C, 2), D->hb = rand_host(OC, 3), D->hd = rand_host(N * OC, 4);
    size_t out_n = op == 0 ? N * OC : op == 1 ? N * C : OC * C;
    wgt_status st = dev_buf(be, &D->x, D->hx, N * C, "tune inp");
    if (st == WGT_OK) st = dev_buf(be, &D->w, D->hw, OC * C, "tune weight");
    if (st == WGT_OK) st = dev_buf(be, &D->b, D->hb, OC, "tune bias");
    if (st == WGT_OK) st = dev_buf(be, &D->d, D->hd, N * OC, "tune dout");
    if (st == WGT_OK) st = dev_buf(be, &D->out, NULL, out_n, "tune out");
    if (st != WGT_OK) data_free(be, D);
    return st;
}

static void call_op(wgt_backend *be, tune_data *D, int op) {
    const tune_shape *s = &D->s;
    wgt_view out = wgt_view_of(D->out, 0, D->out->n_elems), none = wgt_view_none();
    if (op == 0) be->matmul(be, out, wgt_view_of(D->x, 0, D->x->n_elems), wgt_view_of(D->w, 0, D->w->n_elems),
                            s->bias ? wgt_view_of(D->b, 0, s->OC) : none, s->N, s->C, s->OC);
    else if (op == 1) be->matmul_t(be, out, wgt_view_of(D->d, 0, D->d->n_elems), wgt_view_of(D->w, 0, D->w->n_elems),
                                   s->N, s->C, s->OC);
    else be->matmul_at(be, out, none, wgt_view_of(D->d, 0, D->d->n_elems), wgt_view_of(D->x, 0, D->x->n_elems), s->N, s->C,
                       s->OC);
}

// Output element (r, c) in double from the host inputs.
static double ref_elem(const tune_data *D, int op, size_t r, size_t c) {
    const tune_shape *s = &D->s;
    double acc = 0;
    if (op == 0) {
        for (size_t k = 0; k < s->C; k++) acc += (double)D->hx[r * s->C + k] * D->hw[c * s->C + k];
        if (s->bias) acc += D->hb[c];
    } else if (op == 1) {
        for (size_t o = 0; o < s->OC; o++) acc += (double)D->hd[r * s->OC + o] * D->hw[o * s->C + c];
    } else {
        for (size_t n = 0; n < s->N; n++) acc += (double)D->hd[n * s->OC + r] * D->hx[n * s->C + c];
    }
    return acc;
}

// One call from zero, then 8 random elements against the host: 1 when all agree to f32 rounding
// (inputs uniform in [-1, 1): an element's error is ~1e-7·sqrt(K)·(a few)).
static wgt_status verify(wgt_backend *be, tune_data *D, int op, uint64_t *rng, int *ok) {
    const tune_shape *s = &D->s;
    size_t rows = op == 2 ? s->OC : s->N, cols = op == 0 ? s->OC : s->C, K = op == 0 ? s->C : op == 1 ? s->OC : s->N;
    be->fill_zero(be, wgt_view_of(D->out, 0, D->out->n_elems), D->out->n_elems);
    call_op(be, D, op);
    WGT_TRY(be->sync(be));
    *ok = 1;
    for (int i = 0; i < 8; i++) {
        *rng ^= *rng << 13; *rng ^= *rng >> 7; *rng ^= *rng << 17;
        size_t r = (size_t)(*rng % rows), c = (size_t)((*rng >> 32) % cols);
        float got = NAN;
        WGT_TRY(be->download(be, &got, wgt_view_of(D->out, r * cols + c, 1), 1));
        if (!(fabs(got - ref_elem(D, op, r, c)) <= 1e-4 * sqrt((double)K))) *ok = 0;
    }
    return WGT_OK;
}

// GFLOP/s of the current settings on D: a warm-up call, a timed one, then as many calls in one
// submit as last about target_s.
static wgt_status time_op(wgt_backend *be, tune_data *D, int op, double target_s, double *gflops) {
    const double flop = 2.0 * D->s.N * D->s.C * D->s.OC;
    call_op(be, D, op);
    WGT_TRY(be->sync(be));
    double t0 = wgt_now_s();
    call_op(be, D, op);
    WGT_TRY(be->sync(be));
    double one = wgt_now_s() - t0;
    int reps = one > 0 ? (int)fmin(512.0, fmax(2.0, ceil(target_s / one))) : 512;
    t0 = wgt_now_s();
    for (int r = 0; r < reps; r++) call_op(be, D, op);
    WGT_TRY(be->sync(be));
    double each = (wgt_now_s() - t0) / reps;
    *gflops = each > 0 ? flop / each * 1e-9 : 0;
    return WGT_OK;
}

static void progress(const wg_tune_opts *o, int tty, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void progress(const wg_tune_opts *o, int tty, const char *fmt, ...) {
    if (!o->progress) return;
    va_list ap;
    va_start(ap, fmt);
    if (tty) fputs("\r\033[K", o->progress);
    vfprintf(o->progress, fmt, ap);
    if (!tty) fputc('\n', o->progress);
    fflush(o->progress);
    va_end(ap);
}

// A comma-separated list of 1..cap tiles into out, each valid and fitting the device: how many,
// or 0 with the first one that is not in *bad.
static int tiles_parse(wg_ctx *ctx, const char *list, wg_mm_tile_spec *out, int cap, char *bad, size_t badcap) {
    char buf[1024];
    if (strlen(list) >= sizeof buf) { snprintf(bad, badcap, "(the list is longer than %zu bytes)", sizeof buf - 1); return 0; }
    snprintf(buf, sizeof buf, "%s", list);
    int n = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save), n++) {
        if (n == cap) { snprintf(bad, badcap, "(more than %d tiles)", cap); return 0; }
        if (!wg_mm_tile_spec_parse(t, &out[n]) || !wg_mm_tile_fits(ctx, &out[n])) { snprintf(bad, badcap, "%s", t); return 0; }
    }
    if (!n) snprintf(bad, badcap, "(no tile)");
    return n;
}

int wg_tune_tiles_valid(wg_ctx *ctx, const char *list, char *bad, size_t cap) {
    wg_mm_tile_spec t[64];
    return tiles_parse(ctx, list, t, 64, bad, cap) > 0;
}

// The candidates of this run: the opts' list, or the built-in one (quick: its first N_QUICK),
// leaving out what the device cannot run. n: how many.
static int candidate_list(wg_ctx *ctx, const wg_tune_opts *o, wg_mm_tile_spec *out, int cap) {
    char bad[1100];
    if (o->tiles) return tiles_parse(ctx, o->tiles, out, cap, bad, sizeof bad);
    int n = 0;
    const int want = o->max_candidates > 0 ? o->max_candidates : o->quick ? N_QUICK : (int)N_CANDIDATES;
    for (size_t i = 0; i < N_CANDIDATES && n < cap && n < want; i++) {
        WGT_ASSERT(wg_mm_tile_spec_parse(CANDIDATES[i], &out[n]), "a tuning candidate is not a valid tile");
        if (wg_mm_tile_fits(ctx, &out[n])) n++;
    }
    return n;
}

static int spec_eq(const wg_mm_tile_spec *a, const wg_mm_tile_spec *b) {
    return a->bm == b->bm && a->bn == b->bn && a->bk == b->bk && a->tm == b->tm && a->tn == b->tn;
}

wgt_status wg_tune_run(wgt_backend *be, const wg_tune_opts *o, wg_tune_result *r) {
    wg_ctx *ctx = wg_of(be);
    wg_settings *set = wg_ctx_settings(ctx);
    const wg_settings saved = *set;
    memset(r, 0, sizeof *r);
    const int tty = o->progress && isatty(fileno(o->progress));
    // a software adapter times shapes 8x smaller: its figures say little about a GPU anyway
    const uint32_t div = wg_ctx_info(ctx)->type == WGPUAdapterType_CPU ? 8 : 1;
    const double target = o->quick ? 0.01 : 0.03;
    const int rounds = o->quick ? 1 : 2;  // every candidate timed once a round; the best round counts
    uint64_t rng = 0x243F6A8885A308D3ull;
    wg_mm_tile_spec list[65];
    const int nlist = candidate_list(ctx, o, list + 1, 64);
    wgt_status st = WGT_OK;
    // the baseline and the candidates run without the context's tuned tiles, and each op in its
    // own layout (no transposed copies: those run in matmul_t's or matmul_at's layout, whose tiles are
    // tuned as their own)
    set->mm_tuned = 0;
    set->mm_tcopy = 0;
    for (int op = 0; op < WG_TUNE_OPS && st == WGT_OK; op++) {
        for (int c = 0; c < WG_TUNE_CLASSES && st == WGT_OK; c++) {
            tune_shape s = SHAPES[op][c];
            s.N = s.N / div ? s.N / div : 1, s.C = s.C / div ? s.C / div : 1, s.OC = s.OC / div ? s.OC / div : 1;
            tune_data D;
            if ((st = data_init(be, &D, s, op)) != WGT_OK) break;
            // candidate 0 is the table's (or the default) tile: the baseline, and the answer on ties
            wg_mm_tile_spec big, small;
            set->mm_tile = WG_MM_TILE_AUTO;
            wg_mm_tiles(ctx, op, &big, &small);
            list[0] = c == 0 ? big : small;
            int n = 1;
            wg_mm_tile_spec cand[65];
            double g[65];
            int ok[65];
            cand[0] = list[0];
            for (int i = 1; i <= nlist; i++)
                if (!spec_eq(&list[i], &list[0])) cand[n++] = list[i];
            for (int i = 0; i < n; i++) g[i] = 0, ok[i] = 1;
            for (int round = 0; round < rounds && st == WGT_OK; round++) {
                for (int i = 0; i < n && st == WGT_OK; i++) {
                    if (!ok[i]) continue;
                    set->mm_tile = WG_MM_TILE_SPEC;
                    set->mm_spec = cand[i];
                    double gi = 0;
                    if ((st = time_op(be, &D, op, target, &gi)) != WGT_OK) break;
                    if (round == 0 && (st = verify(be, &D, op, &rng, &ok[i])) != WGT_OK) break;
                    if (gi > g[i]) g[i] = gi;
                    char t[32];
                    wg_mm_tile_spec_text(&cand[i], t, sizeof t);
                    if (tty)
                        progress(o, tty, "tune: %-9s %-5s round %d/%d  %2d/%d  %-14s %9.1f GFLOP/s%s", wg_mm_op_name(op),
                                 c ? "small" : "large", round + 1, rounds, i + 1, n, t, gi, ok[i] ? "" : "  (wrong results: left out)");
                }
            }
            int best = 0;
            for (int i = 1; i < n; i++)
                if (ok[i] && g[i] > g[best] * 1.02) best = i;  // 2% over the baseline: a real win, not noise
            if (!ok[0]) best = -1;
            for (int i = 0; best < 0 && i < n; i++)
                if (ok[i]) best = i;
            if (st == WGT_OK && best < 0)
                st = wgt_fail(WGT_ERR_DEVICE, "every %s tile gave wrong results on this device: its driver miscompiles the "
                              "GEMM kernel", wg_mm_op_name(op));
            if (st == WGT_OK) {
                r->tile[op][c] = cand[best], r->gflops[op][c] = g[best];
                r->table_tile[op][c] = cand[0], r->table_gflops[op][c] = g[0];
                if (n > r->candidates) r->candidates = n;
                char t[32], was[32];
                wg_mm_tile_spec_text(&cand[best], t, sizeof t), wg_mm_tile_spec_text(&cand[0], was, sizeof was);
                progress(o, tty, "tune: %-9s %-5s %-14s %9.1f GFLOP/s (before: %s, %.1f)", wg_mm_op_name(op), c ? "small" : "large",
                         t, g[best], was, g[0]);
                if (tty) fputc('\n', o->progress);
            }
            data_free(be, &D);
        }
    }
    *set = saved;
    if (st != WGT_OK) return st;
    memcpy(set->mm_tuned_tile, r->tile, sizeof r->tile);
    set->mm_tuned = 1;
    return WGT_OK;
}

// ------------------------------------------------------------------ writing
static cJSON *entry_new(wg_ctx *ctx, const char *key, const wg_tune_result *r) {
    const wg_device_info *d = wg_ctx_info(ctx);
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "key", key);
    cJSON_AddStringToObject(e, "adapter", d->name);
    cJSON_AddStringToObject(e, "driver", d->driver);
    for (int op = 0; op < WG_TUNE_OPS; op++) {
        cJSON *o = cJSON_AddObjectToObject(e, wg_mm_op_name(op));
        char t[32];
        wg_mm_tile_spec_text(&r->tile[op][0], t, sizeof t);
        cJSON_AddStringToObject(o, "big", t);
        wg_mm_tile_spec_text(&r->tile[op][1], t, sizeof t);
        cJSON_AddStringToObject(o, "small", t);
        cJSON_AddNumberToObject(o, "big_gflops", round(r->gflops[op][0] * 10) / 10);
        cJSON_AddNumberToObject(o, "small_gflops", round(r->gflops[op][1] * 10) / 10);
    }
    return e;
}

// Whether the text of an existing file may be replaced by a cache: an empty file, or one that
// names itself a tuning cache (a malformed or truncated cache of ours is rewritten whole); any
// other file is somebody else's and is refused.
static int cache_replaceable(const char *text, size_t n) {
    size_t i = 0;
    while (i < n && (text[i] == ' ' || text[i] == '\n' || text[i] == '\r' || text[i] == '\t')) i++;
    if (i == n) return 1;
    const char *mark = "\"wgtrain-tuning\"";
    size_t head = n < 4096 ? n : 4096, k = strlen(mark);
    for (size_t j = 0; j + k <= head; j++)
        if (!memcmp(text + j, mark, k)) return 1;
    return 0;
}

// The text of the file at path when a cache may replace it (*have: 1 with the text, 0: no file).
static wgt_status cache_old_text(const char *path, int *have, char **text, size_t *n) {
    char why[512] = "";
    *text = NULL;
    *n = 0;
    *have = cache_read(path, text, n, why, sizeof why);
    if (*have < 0)
        return wgt_fail(WGT_ERR_IO, "%s cannot be replaced by the tuning cache: %s; remove it or give another --cache",
                        path, why);
    if (*have > 0 && !cache_replaceable(*text, *n)) {
        free(*text);
        *text = NULL;
        return wgt_fail(WGT_ERR_ARG, "%s is not a wgtrain tuning cache (it does not name its format \"wgtrain-tuning\"), so "
                        "it is not replaced; remove it or give another --cache", path);
    }
    return WGT_OK;
}

wgt_status wg_tune_cache_check(const char *path) {
    int have;
    char *text;
    size_t n;
    WGT_TRY(cache_old_text(path, &have, &text, &n));
    free(text);
    return WGT_OK;
}

wgt_status wg_tune_save(wg_ctx *ctx, const char *path, const wg_tune_result *r) {
    char key[1024], why[512] = "";
    wg_tune_key(ctx, key, sizeof key);
    char *old_text = NULL;
    size_t old_n = 0;
    int have;
    WGT_TRY(cache_old_text(path, &have, &old_text, &old_n));
    cJSON *old = have > 0 ? cache_parse_text(old_text, old_n, why, sizeof why) : NULL;
    free(old_text);
    // a new file of the entries kept: one pass over the old ones (each detached, O(1)), the
    // newest TUNE_MAX_DEVICES - 1 other devices' and then this device's new entry. A malformed
    // cache holds nothing worth keeping and starts afresh.
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "format", "wgtrain-tuning");
    cJSON_AddNumberToObject(root, "version", 1);
    cJSON *devs = cJSON_AddArrayToObject(root, "devices");
    cJSON *old_devs = old ? cJSON_GetObjectItemCaseSensitive(old, "devices") : NULL;
    size_t others = 0;
    for (const cJSON *e = old_devs ? old_devs->child : NULL; e; e = e->next) {
        const cJSON *k = cJSON_GetObjectItemCaseSensitive(e, "key");
        others += !(cJSON_IsString(k) && !strcmp(k->valuestring, key));
    }
    size_t skip = others > TUNE_MAX_DEVICES - 1 ? others - (TUNE_MAX_DEVICES - 1) : 0;
    for (cJSON *e = old_devs ? old_devs->child : NULL, *next; e; e = next) {
        next = e->next;
        const cJSON *k = cJSON_GetObjectItemCaseSensitive(e, "key");
        if (cJSON_IsString(k) && !strcmp(k->valuestring, key)) continue;  // this device's old entry goes
        if (skip) {  // the oldest go first
            skip--;
            continue;
        }
        cJSON_AddItemToArray(devs, cJSON_DetachItemViaPointer(old_devs, e));
    }
    cJSON_Delete(old);
    cJSON_AddItemToArray(devs, entry_new(ctx, key, r));
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    WGT_ASSERT(text != NULL, "out of memory printing the tuning cache");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    wgt_status st = WGT_OK;
    if (slash && slash != dir) {
        *slash = 0;
        st = dir_make(dir);
    }
    if (st == WGT_OK) st = atomic_write_file(path, text, strlen(text));
    free(text);
    return st;
}

wgt_status wg_tune_auto(wgt_backend *be) {
    wg_ctx *ctx = wg_of(be);
    const wg_settings *s = wg_ctx_settings(ctx);
    const int software = wg_ctx_info(ctx)->type == WGPUAdapterType_CPU;
    if (s->autotune == 0 || s->mm_tuned || s->mm_tile != WG_MM_TILE_AUTO) return WGT_OK;
    if (s->autotune == WG_AUTO && (software || wg_mm_table_knows(ctx))) return WGT_OK;
    char path[4096];
    if (!wg_tune_cache_path(ctx, path, sizeof path)) return WGT_OK;  // nowhere to keep it: not worth a run each time
    fprintf(stderr, "webgpu: tuning the GEMM tiles for %s once (cached in %s; WGTRAIN_AUTOTUNE=0 skips this)\n",
            wg_ctx_info(ctx)->name, path);
    // a software adapter (only with WGTRAIN_AUTOTUNE=1) times 2 candidates: its figures say
    // little, and its shader compiles are slow
    wg_tune_opts o = {1, software ? 2 : 0, NULL, stderr};
    wg_tune_result r;
    double t0 = wgt_now_s();
    WGT_TRY(wg_tune_run(be, &o, &r));
    if (wg_tune_save(ctx, path, &r) != WGT_OK)
        fprintf(stderr, "webgpu: the tuned tiles apply to this run but could not be cached: %s\n", wgt_last_error());
    else
        fprintf(stderr, "webgpu: tuned in %.1f s\n", wgt_now_s() - t0);
    return WGT_OK;
}
