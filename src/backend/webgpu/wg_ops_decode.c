// wg_ops_decode.c — dispatch wrappers for kernels/16_decode_attention.wgsl (decode_embedding,
// kv_cache_append, decode_attention): decoding with a key/value cache. Every tensor is bound as a
// window from its view's aligned start (the row of one sequence in a batch's cache or positions
// need not be aligned); absent optional tables bind a placeholder the kernel does not read. The
// tensors must fit one storage binding each and u32 indexing (a cache is one layer's).
#include <math.h>
#include "backend/webgpu/wg_ops.h"

typedef struct {
    uint32_t B, T, NH, NKV;
    uint32_t HS, maxT, window, opt;
    uint32_t C, V, W, KV;
    uint32_t n, group;
    float scale;
    uint32_t S;
    uint32_t o[7], span;
} dec_params;  // DecParams of the WGSL, field for field

// A pipeline of 16_decode_attention.wgsl. Every entry point needs decode_attention_tiles' constants
// to compile (the module declares its workgroup tiles): defs NULL gives the smallest tile.
#define DEC_DEFINES_CAP 96
static WGPUComputePipeline dec_pipeline(wg_ctx *ctx, const char *entry, const char *defs) {
    return wg_pipeline(ctx, "16_decode_attention.wgsl", entry, defs ? defs : "const DT_HS=4u;const DT_BQ=32u;const DT_BK=8u;");
}

static wg_bind placeholder(wgt_backend *be) {
    wgt_buf *b = wg_scratch(wg_of(be), WG_SCRATCH_PLACEHOLDER, WGT_VIEW_ALIGN, "placeholder");
    WGT_ASSERT(b != NULL, "could not allocate the 256-byte placeholder buffer");
    return wg_b(wgt_view_of(b, 0, 1), 1);
}

// Binding i: a window of n elements of v (its offset into p->o[i]), or the placeholder when v is
// absent.
static wg_bind win(wgt_backend *be, dec_params *p, int i, wgt_view v, uint64_t n, const char *op) {
    if (!v.buf) {
        p->o[i] = 0;
        return placeholder(be);
    }
    wg_bind b = wg_binding_window(v, 0, n, &p->o[i]);
    WGT_ASSERT(p->o[i] + n <= wg_max_binding_elems(wg_of(be)) && p->o[i] + n <= UINT32_MAX,
               "decoding: a tensor exceeds one storage binding (or u32 indexing); use a shorter cache or fewer sequences");
    return b;
}

void wg_decode_embedding(wgt_backend *be, wgt_view out, wgt_view tokens, wgt_view wte, wgt_view wpe, wgt_view pos,
                         uint32_t B, uint32_t T, uint32_t C, uint32_t V, uint32_t maxT) {
    const uint64_t n = (uint64_t)B * T * C;
    if (!n) return;
    WGT_ASSERT(n <= UINT32_MAX, "decode_embedding: B·T·C exceeds u32 indexing");
    wg_ctx *ctx = wg_of(be);
    // wte in windows of vocabulary rows that fit one binding (a large vocabulary's embedding may
    // not: 151 936 x 1024 floats are 622 MB, and many devices bind 128 MiB); each dispatch writes
    // the elements whose token is in its window
    uint64_t rows = (wg_binding_limit(be) - WGT_VIEW_ALIGN) / C, cap = ((uint64_t)UINT32_MAX - 255) / C;
    if (rows > cap) rows = cap;
    WGT_ASSERT(rows >= 1, "decode_embedding: one embedding row is larger than a storage binding");
    for (uint64_t v0 = 0; v0 < V; v0 += rows) {
        const uint64_t nv = V - v0 < rows ? V - v0 : rows;
        dec_params p = {0};
        p.B = B, p.T = T, p.C = C, p.V = (uint32_t)nv, p.window = (uint32_t)v0, p.maxT = maxT, p.n = (uint32_t)n;
        p.opt = wpe.buf != NULL;
        wg_bind b[] = {win(be, &p, 0, out, n, "decode_embedding"),
                       win(be, &p, 1, tokens, (uint64_t)B * T, "decode_embedding"),
                       win(be, &p, 2, wgt_view_sub(wte, v0 * C, nv * C), nv * C, "decode_embedding"),
                       win(be, &p, 3, wpe, (uint64_t)maxT * C, "decode_embedding"), win(be, &p, 4, pos, B, "decode_embedding")};
        wg_dispatch(ctx, "decode_embedding", dec_pipeline(ctx, "decode_embedding", NULL), b, 5,
                    &p, sizeof p, wg_groups(n, 256));
    }
}

void wg_kv_cache_append(wgt_backend *be, wgt_view kcache, wgt_view vcache, wgt_view qkv, wgt_view cos, wgt_view sin,
                        wgt_view pos, uint32_t B, uint32_t T, uint32_t NH, uint32_t NKV, uint32_t HS, uint32_t maxT) {
    const uint64_t KV = (uint64_t)NKV * HS, W = (uint64_t)NH * HS + 2 * KV, n = (uint64_t)B * T * KV;
    if (!n) return;
    WGT_ASSERT(!cos.buf || HS % 2 == 0, "rope needs an even head size");
    wg_ctx *ctx = wg_of(be);
    dec_params p = {0};
    p.B = B, p.T = T, p.NH = NH, p.NKV = NKV, p.HS = HS, p.maxT = maxT, p.W = (uint32_t)W, p.KV = (uint32_t)KV;
    p.n = (uint32_t)n, p.opt = cos.buf != NULL;
    const uint64_t nc = (uint64_t)B * maxT * KV;
    wg_bind b[] = {win(be, &p, 0, kcache, nc, "kv_cache_append"), win(be, &p, 1, vcache, nc, "kv_cache_append"),
                   win(be, &p, 2, qkv, (uint64_t)B * T * W, "kv_cache_append"),
                   win(be, &p, 3, cos, (uint64_t)maxT * HS, "kv_cache_append"),
                   win(be, &p, 4, sin, (uint64_t)maxT * HS, "kv_cache_append"), win(be, &p, 5, pos, B, "kv_cache_append")};
    wg_dispatch(ctx, "kv_cache_append", dec_pipeline(ctx, "kv_cache_append", NULL), b, 6, &p,
                sizeof p, wg_groups(n, 256));
}

// decode_attention's key splits (split-K): with few query rows (batch · new tokens · heads) one
// workgroup per row leaves most of a GPU idle while each walks the whole cache, so the keys of
// each row are cut into S ranges of at least 64 keys, for about 256 workgroups in all (a guess
// that fills the H200's 132 SMs twice), at most 64 ranges; many rows, or a short cache (maxT
// bounds every row's keys), keep one workgroup a row, and so does a software adapter (its few
// CPU cores are busy with the rows already; the second pass only costs there).
// WGTRAIN_DECODE_SPLIT overrides.
uint32_t wg_decode_attention_splits(wgt_backend *be, uint64_t rows, uint32_t maxT) {
    const int set = wg_ctx_settings(wg_of(be))->decode_split;
    if (set != WG_AUTO) return (uint32_t)set;
    if (rows >= 128 || wg_ctx_info(wg_of(be))->type == WGPUAdapterType_CPU) return 1;
    uint64_t s = (256 + rows - 1) / rows, by_len = ((uint64_t)maxT + 63) / 64;
    if (s > by_len) s = by_len;
    return s > 64 ? 64 : s < 1 ? 1 : (uint32_t)s;
}

// decode_attention_tiles (a prefill chunk's many new tokens a sequence): the key tile streams
// through workgroup memory once for DT_BQ query rows. The tiles, largest first, that the device's
// workgroup memory holds at the head size (a multiple of 4; 32 rows x 32 keys at HS = 64 need
// 29.7 KiB); none fits: decode_attention. Automatic from DT_MIN_T new tokens a sequence (fewer
// leave most of a tile's rows idle, where one workgroup a row and the key splits do better);
// WGTRAIN_DECODE_TILES=0 never, =1 whenever a tile fits.
#define DT_MIN_T 16
typedef struct { uint32_t bq, bk; } dt_tile;
static const dt_tile DT_TILES[] = {{32, 32}, {32, 16}, {16, 16}};
static uint64_t dt_smem(dt_tile t, uint32_t HS) {
    const uint64_t hs4 = HS / 4;
    return ((uint64_t)t.bq * (hs4 + 1) + (uint64_t)t.bk * (hs4 + 1) + (uint64_t)t.bk * hs4) * 16 + (uint64_t)t.bq * (t.bk + 1) * 4;
}
static int dt_pick(wg_ctx *ctx, uint32_t T, uint32_t HS, dt_tile *out) {
    const int set = wg_ctx_settings(ctx)->decode_tiles;
    if (set == 0 || (set == WG_AUTO && T < DT_MIN_T) || HS % 4 || HS == 0) return 0;
    for (size_t i = 0; i < sizeof DT_TILES / sizeof DT_TILES[0]; i++) {
        const uint32_t lpr = 256 / DT_TILES[i].bq;
        if ((HS / 4 + lpr - 1) / lpr > 8) continue;  // the kernel's DT_CPT <= 8
        if (dt_smem(DT_TILES[i], HS) <= wg_ctx_info(ctx)->limits.maxComputeWorkgroupStorageSize) {
            *out = DT_TILES[i];
            return 1;
        }
    }
    return 0;
}

int wg_decode_attention_tiled(wgt_backend *be, uint32_t T, uint32_t HS) {
    dt_tile t;
    return dt_pick(wg_of(be), T, HS, &t);
}

void wg_decode_attention(wgt_backend *be, wgt_view out, wgt_view qkv, wgt_view kcache, wgt_view vcache, wgt_view cos,
                         wgt_view sin, wgt_view pos, uint32_t B, uint32_t T, uint32_t NH, uint32_t NKV, uint32_t HS,
                         uint32_t maxT, uint32_t window) {
    const uint64_t KV = (uint64_t)NKV * HS, W = (uint64_t)NH * HS + 2 * KV, rows = (uint64_t)B * T * NH;
    if (!rows) return;
    WGT_ASSERT(NH % NKV == 0, "attention needs NKV (kv heads) dividing NH (query heads)");
    WGT_ASSERT(HS <= 256, "decode_attention: head size above 256");
    WGT_ASSERT(!cos.buf || HS % 2 == 0, "rope needs an even head size");
    wg_ctx *ctx = wg_of(be);
    dec_params p = {0};
    p.B = B, p.T = T, p.NH = NH, p.NKV = NKV, p.HS = HS, p.maxT = maxT, p.window = window, p.W = (uint32_t)W;
    p.KV = (uint32_t)KV, p.n = (uint32_t)rows, p.group = NH / NKV, p.opt = cos.buf != NULL;
    p.scale = 1.0f / sqrtf((float)HS);  // as the C reference
    const uint64_t nc = (uint64_t)B * maxT * KV;
    dt_tile dt;
    const int tiled = dt_pick(ctx, T, HS, &dt);
    uint32_t S = tiled ? 1 : wg_decode_attention_splits(be, rows, maxT);
    wgt_buf *part = NULL;
    if (S > 1) {  // the partials (HS sums, the maximum, the sum of exponentials a split) in a scratch slot
        const uint64_t np = rows * S * (HS + 2);
        if (np > wg_max_binding_elems(ctx) || np > UINT32_MAX ||
            !(part = wg_scratch(ctx, WG_SCRATCH_DECODE, (size_t)np, "decode attention partials")))
            S = 1;  // (too many partials for one binding, or no memory for them: unsplit)
    }
    p.S = S;
    p.span = wg_ctx_settings(ctx)->decode_split == WG_AUTO ? 64 : 1;  // a forced S splits short caches too
    const wgt_view dst = S > 1 ? wgt_view_of(part, 0, rows * S * (HS + 2)) : out;
    wg_bind b[] = {win(be, &p, 0, dst, S > 1 ? rows * S * (HS + 2) : rows * HS, "decode_attention"),
                   win(be, &p, 1, qkv, (uint64_t)B * T * W, "decode_attention"),
                   win(be, &p, 2, kcache, nc, "decode_attention"), win(be, &p, 3, vcache, nc, "decode_attention"),
                   win(be, &p, 4, cos, (uint64_t)maxT * HS, "decode_attention"),
                   win(be, &p, 5, sin, (uint64_t)maxT * HS, "decode_attention"), win(be, &p, 6, pos, B, "decode_attention")};
    if (tiled) {
        const uint64_t wgs = (uint64_t)B * NH * ((T + dt.bq - 1) / dt.bq);
        char defs[DEC_DEFINES_CAP];
        snprintf(defs, sizeof defs, "const DT_HS=%uu;const DT_BQ=%uu;const DT_BK=%uu;", HS, dt.bq, dt.bk);
        wg_dispatch(ctx, "decode_attention", dec_pipeline(ctx, "decode_attention_tiles", defs), b, 7, &p, sizeof p, wgs);
        return;
    }
    wg_dispatch(ctx, "decode_attention", dec_pipeline(ctx, "decode_attention", NULL), b, 7, &p, sizeof p, rows * S);
    if (S == 1) return;
    dec_params c = p;  // the combine: out, the partials, the positions (a skipped row stays as it was)
    wg_bind cb[] = {win(be, &c, 0, out, rows * HS, "decode_attention"), win(be, &c, 1, dst, rows * S * (HS + 2),
                    "decode_attention"), win(be, &c, 2, pos, B, "decode_attention")};
    wg_dispatch(ctx, "decode_attention_combine",
                dec_pipeline(ctx, "decode_attention_combine", NULL), cb, 3, &c, sizeof c, rows);
}
