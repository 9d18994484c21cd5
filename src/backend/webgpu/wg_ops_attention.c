// wg_ops_attention.c — dispatch wrappers for kernels/05_attention.wgsl (forward) and
// kernels/10_backward_attention.wgsl (backward, four variants). Every tile size is a compile-time
// constant of its pipeline (the `defines`), chosen here per device and head size from one table
// of defaults (attn_defaults below), which the context's settings (wg_settings.h, read from the
// environment by wg_ctx_init) can override:
//
//   WGTRAIN_ATTN_FWD_CFG="nl=8,tr=2,bc=64,sg=1"
//       nl key lanes per row group (4, 8, 16), tr query rows per thread (1, 2, 4, 8), bc keys per
//       tile (16, 32, 64, 128), sg row reductions by subgroup shuffles (1, used only where the
//       device's subgroups have at least nl lanes) or workgroup memory (0).
//   WGTRAIN_ATTN_BWD_CFG="v=fused,kv=16x64,q=64x16/4x2,st=32x32"
//       v variant (auto, stream, split, short, fused); kv the tile BQxBK of the dK/dV kernels
//       (split-dKdV's first kernel and fused), q that of split-dKdV's dQ kernel, st that of
//       streaming; each optionally /RQSxRKS, the score micro-tile of a thread (default: chosen).
//
// Keys left out keep their default. Malformed text makes wg_ctx_init fail; a setting that does
// not fit the device or head size is reported once on stderr and replaced by the default.
// bench/bench_attention --sweep times the sensible settings on a device and prints the line to
// put first in attn_defaults.
//
// Grouped-query attention (NKV < NH kv heads, GQ = NH / NKV query heads each): the forward and
// split-dKdV's dQ kernel run per query head and read their group's kv head; the kernels that own
// dK and dV (split-dKdV's first, fused, streaming, split-short) run per kv head and loop over the
// group's query heads in order, so dK and dV are summed deterministically with no atomics and no
// scratch. GQ is a pipeline constant: at GQ = 1 (NKV = NH) those loops compile away and the
// kernels are the multi-head ones.
//
// Dropout on the probabilities (p > 0, docs/kernels.md#dropout) is the pipeline constant DROP,
// with the seed, threshold and scale in the uniform; at p = 0 DROP is false and the kernels are
// those without dropout (the same code and results, nothing extra computed).
//
// The mask (docs/kernels.md#attention-mask): doc_start (u32 [B,T], optional) and window are the
// uniform's has_doc / window and one more storage binding (a placeholder when doc_start is absent);
// the kernels skip the tiles the mask empties.
//
// Backward variant rule (wg_attention_backward, variant 0 = auto):
//   1. split-short   when T <= the largest T whose T×T P and dS fit in workgroup memory
//                    (56 with 32 KiB, 64 with 48 KiB): one workgroup per (b, kv head), nothing
//                    recomputed;
//   2. streaming     when B·NKV >= WG_ATTN_STREAM_MIN_HEADS: one workgroup per (b, kv head)
//                    already fills the device, and streaming computes P and dS once;
//   3. otherwise the table's long-sequence variant (v=): fused (scores once, dQ through a scratch
//      buffer of about B·NH·T²/(2·BK)·HS floats and a deterministic reduction; 214 MB at GPT-2
//      124M's B=8, T=1024) or split-dKdV (scores twice, no scratch). Fused falls back to
//      split-dKdV when its scratch would exceed a storage binding or cannot be allocated.
//      Where subgroups have >= 32 lanes the table's rows name the register-resident pair: reg-ds
//      (the dK/dV pass stores dS in a scratch of about B·NH·T²/2 floats, 202 MB at that shape,
//      and dQ = dS·K is a causal GEMM) or reg (the dQ pass recomputes the scores); reg-ds runs as
//      reg where its scratch would pass WG_ATTN_DS_MAX_BYTES or cannot be allocated.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend/dropout.h"
#include "backend/webgpu/wg_ops.h"

// The largest head size: the row kernels' (17_attention_rows.wgsl AR_HS_MAX) one row per workgroup.
#define WG_ATTN_HS_MAX 256u

// In a GPT-2 124M step on the H200 (96 heads, T = 1024) streaming took 5.4 ms a layer against
// 1.9 ms for fused: one workgroup per head needs far more heads than that to fill the device.
#define WG_ATTN_STREAM_MIN_HEADS 1024u

// The defaults, in order of preference. For each kernel the first row whose setting fits the
// device (workgroup memory, subgroup size) and the head size is used; the long-sequence backward
// variant (v=) is the first row's. Row 1 is the guess for 48 KiB GPUs with subgroups of >= 8
// lanes (NVIDIA H200), row 2 for 32 KiB ones; the rest are fallbacks for large heads.
// To adopt a sweep's result, put the line it prints first.
// min_sg: the least subgroup size of the devices a row is meant for (0: any); max_hs: the largest
// head size it is meant for (0: any; larger heads take the next rows)
static const struct { const char *fwd, *bwd; uint32_t min_sg, max_hs; } attn_defaults[] = {
    // Register-resident kernels (v=reg), for GPUs with subgroups of >= 32 lanes (NVIDIA, AMD),
    // chosen for their loads per FMA (2 rows a thread: 1 workgroup-memory vec4 load per 8 FMAs)
    // within the table's register budget, then measured on the H200 at B=8, T=1024
    // (bench/README.md): HS 64 (4 lanes a row) the backward 2.08 (fused) -> 1.82 ms, the forward
    // with 8 lanes a row and 2 rows a thread 0.73 (shared tile) -> 0.69 ms; HS 128 (8 lanes a
    // row) forward 0.76 -> 0.65 ms, backward 3.44 -> 2.73 ms. HS <= 256 (where no shared tile
    // fits 48 KiB): 16 lanes, 16-row tiles, instead of the row kernels (not yet measured there).
    // The backward is reg-ds (the dK/dV pass stores dS, dQ = dS·K, where the scratch fits; else
    // reg): in a GPT-2 124M step on the H200 the backward's 21.5 -> 18.6 ms; HS 128 2.72 -> 2.18 ms.
    // With the lanes' reduce-scatter (the forward's scores, the dK/dV pass's s and dP), measured
    // again at B=8, T=1024 (bench/README.md): HS 64 forward 4 rows a thread 0.49 ms (2 rows:
    // 0.61), backward with 8 lanes and 4 key rows a thread 1.26 (4 lanes, 2 rows: 1.31); HS 128
    // forward 16 lanes and 4 rows 0.48 (8 lanes, 2 rows: 0.57), backward 16 lanes, 4 rows and
    // 16-row tiles 1.27 (8 lanes, 2 rows, 32-row tiles: 1.57). The forward's probabilities through
    // workgroup memory (pw=1): HS 64 0.490 -> 0.479 ms; HS 128 0.479 -> 0.574, so only the first row.
    // The dQ GEMM over the stored dS in 8-key tiles, of 64-row blocks (at HS 128 4 rows a thread):
    // 1.257 -> 1.231 ms (HS 64) and 1.271 -> 1.225 -> 1.185 (HS 128) a backward.
    {"v=reg,nl=8,tr=4,bc=16,wg=128,pw=1", "v=reg-ds,rkv=8x4x32,rq=4x2x32,rt=128,dqb=64,dqk=8", 32, 64},
    {"v=reg,nl=16,tr=4,bc=16,wg=128", "v=reg-ds,rkv=16x4x16,rq=8x2x32,rt=128,dqk=8,dqm=4", 32, 128},
    {"v=reg,nl=16,tr=2,bc=16,wg=128", "v=reg-ds,rkv=16x1x16,rq=16x2x16,rt=128", 32, 256},
    {"nl=8,tr=4,bc=16,sg=1", "v=fused,kv=16x64,q=64x16/2x4,st=32x32", 0, 0},  // H200: forward from the sweep, fused measured in-model
    // H200 at HS = 128 (the first row does not fit 48 KiB there): the forward sweep's best, 1.31 ->
    // 0.80 ms at B=8, T=1024, NH=6 (bench/README.md); the backward that of the next row
    {"nl=16,tr=4,bc=16,sg=1", "v=fused,kv=16x32,q=32x16,st=16x32", 0, 0},
    {"nl=8,tr=2,bc=32,sg=1", "v=fused,kv=16x32,q=32x16,st=16x32", 0, 0},
    {"nl=8,tr=2,bc=32,sg=0", "v=fused,kv=16x16,q=16x16,st=16x16", 0, 0},
    {"nl=8,tr=1,bc=16,sg=0", "v=fused,kv=8x16,q=16x8,st=8x16", 0, 0},
    {"nl=16,tr=1,bc=16,sg=0", "v=fused,kv=8x16,q=16x8,st=8x16", 0, 0},
};
#define N_DEFAULTS (sizeof attn_defaults / sizeof attn_defaults[0])

enum { V_AUTO = 0, V_STREAM = 1, V_SPLIT = 2, V_SHORT = 3, V_FUSED = 4, V_ROWS = 5, V_REG = 6, V_REGDS = 7, N_VARIANTS };
static const char *const variant_names[N_VARIANTS] = {"auto", "stream", "split", "short", "fused", "rows", "reg", "reg-ds"};
// the register-resident pair, with or without the dS scratch (both need the register layouts)
static int is_reg(int v) { return v == V_REG || v == V_REGDS; }

// The uniform of both kernel files (AttnParams there).
typedef struct {
    uint32_t B, T, C, NH;        // C = NH·HS: width of out / dout, first k column of qkv
    uint32_t W, nblk, hs4, nkb;  // W = C + 2·NKV·HS: qkv's row; nkb: key blocks (fused), bc4 (forward)
    uint32_t ntri, bq, bk4, nkv;
    uint32_t vc, dseed, dthr, p6;  // vc = C + NKV·HS: first v column; dropout seed, threshold
    float scale_log2, scale, dscale, f1;  // dscale: 1/(1 - p)
    uint32_t has_doc, window, p7, p8;     // the mask: doc_start bound, sliding window (0: none)
} attn_params;

// v: 0 the shared-tile kernel (attention_forward), 1 the register-resident one
// (attention_forward_reg: nl lanes a row, tr rows a thread, bc keys a tile, wg threads; pw 1: the
// probabilities through workgroup memory instead of the lanes' all-gather)
typedef struct { uint32_t nl, tr, bc, sg, v, wg, pf, pw; } fwd_cfg;  // sg: as requested; pf: v=reg's prefetch
typedef struct { uint32_t bq, bk, rqs, rks; } bwd_tile;         // rqs = rks = 0: chosen
// a register-resident kernel's layout: rl lanes a row, rr resident rows a thread, rb streamed
// rows a tile (rl = 0: not given); pf 1: the next tile prefetched into registers
typedef struct { uint32_t rl, rr, rb, pf; } reg_tile;
// the blocks of attention_backward_dq_ds as given (dqb=, dqk=, dqm=: query rows a block, keys a
// tile, rows a thread; 0: its default), completed by dq_tile_of
typedef struct { uint32_t bm, bk, tm; } dq_blocks;
static const dq_blocks DQ_DEFAULT = {0, 0, 0};
typedef struct {
    int variant;
    bwd_tile kv, q, st;
    uint32_t ncp;
    int forced;            // v= given
    reg_tile rkv, rq;      // v=reg: the dK/dV kernel's and the dQ kernel's layouts
    uint32_t rt;           // rt= as given (threads of both; 0: not given)
    uint32_t pf;           // pf= as given plus 1 (0: not given)
    uint32_t rt_kv, rt_q;  // the threads each uses
    dq_blocks dq;          // the dQ GEMM's blocks (v=reg-ds)
    int tiles_ok;          // kv, q, st fit (else only v=reg can run: large heads)
} bwd_cfg;

static const wg_device_info *info_of(wg_ctx *ctx) { return wg_ctx_info(ctx); }
static uint32_t smem_limit(wg_ctx *ctx) { return info_of(ctx)->limits.maxComputeWorkgroupStorageSize; }
static uint32_t hs4_of(uint32_t HS) { return (HS + 3) / 4; }
static int is_pow2(uint32_t x) { return x && !(x & (x - 1)); }
static uint32_t pow2_ceil(uint32_t x) { uint32_t p = 1; while (p < x) p *= 2; return p; }

// Whether the loops over head columns and tile rows get constant trip counts (unrolled by the
// shader compiler). Not on the software rasterizer: there unrolling costs seconds of shader
// compilation per pipeline and gains nothing that matters. WGTRAIN_ATTN_UNROLL forces the choice
// (the software-GPU tests use it to run the unrolled form the real GPUs use).
static int unroll_ok(wg_ctx *ctx) {
    int u = wg_ctx_settings(ctx)->attn_unroll;
    if (u != WG_AUTO) return u != 0;
    return info_of(ctx)->type != WGPUAdapterType_CPU;
}

// ------------------------------------------------------------------ configuration text
// "k=v,k=v": calls fn(key, value) for each pair; 0 on a malformed pair.
static int parse_pairs(const char *s, int (*fn)(void *, const char *, const char *), void *dst) {
    char buf[256];
    if (!s || strlen(s) >= sizeof buf) return s == NULL;
    strcpy(buf, s);
    for (char *tok = strtok(buf, ", "); tok; tok = strtok(NULL, ", ")) {
        char *eq = strchr(tok, '=');
        if (!eq) return 0;
        *eq = 0;
        if (!fn(dst, tok, eq + 1)) return 0;
    }
    return 1;
}

static int parse_u(const char *v, uint32_t *out) {
    char *end;
    unsigned long x = strtoul(v, &end, 10);
    if (end == v || *end || x > 4096) return 0;
    *out = (uint32_t)x;
    return 1;
}

static int fwd_key(void *dst, const char *k, const char *v) {
    fwd_cfg *c = dst;
    if (!strcmp(k, "v")) {
        if (!strcmp(v, "tile") || !strcmp(v, "reg")) { c->v = !strcmp(v, "reg"); return 1; }
        return 0;
    }
    if (!strcmp(k, "wg")) return parse_u(v, &c->wg);
    if (!strcmp(k, "pf")) return parse_u(v, &c->pf);
    if (!strcmp(k, "pw")) return parse_u(v, &c->pw);
    if (!strcmp(k, "nl")) return parse_u(v, &c->nl);
    if (!strcmp(k, "tr")) return parse_u(v, &c->tr);
    if (!strcmp(k, "bc")) return parse_u(v, &c->bc);
    if (!strcmp(k, "sg")) return parse_u(v, &c->sg);
    return 0;
}

// "BQxBK" or "BQxBK/RQSxRKS"
static int parse_tile(const char *v, bwd_tile *t) {
    unsigned a, b, c = 0, d = 0;
    int n = 0;
    if (sscanf(v, "%ux%u%n", &a, &b, &n) != 2) return 0;
    if (v[n] == '/') {
        int m = 0;
        if (sscanf(v + n + 1, "%ux%u%n", &c, &d, &m) != 2 || v[n + 1 + m]) return 0;
    } else if (v[n]) return 0;
    bwd_tile r = {a, b, c, d};
    *t = r;
    return 1;
}

// "RLxRRxRB" (a register-resident kernel's layout)
static int parse_reg_tile(const char *v, reg_tile *t) {
    unsigned a, b, c;
    int n = 0;
    if (strspn(v, "0123456789x") != strlen(v)) return 0;
    if (sscanf(v, "%4ux%4ux%4u%n", &a, &b, &c, &n) != 3 || v[n] || !a || a > 4096 || b > 4096 || c > 4096) return 0;
    reg_tile r = {a, b, c, 0};
    *t = r;
    return 1;
}

static int bwd_key(void *dst, const char *k, const char *v) {
    bwd_cfg *c = dst;
    if (!strcmp(k, "v")) {
        for (int i = 0; i < N_VARIANTS; i++)
            if (i != V_ROWS && !strcmp(v, variant_names[i])) { c->variant = i; c->forced = i != V_AUTO; return 1; }
        return 0;
    }
    if (!strcmp(k, "rkv")) return parse_reg_tile(v, &c->rkv);
    if (!strcmp(k, "rq")) return parse_reg_tile(v, &c->rq);
    if (!strcmp(k, "rt")) return parse_u(v, &c->rt);
    if (!strcmp(k, "dqb")) return parse_u(v, &c->dq.bm) && c->dq.bm;
    if (!strcmp(k, "dqk")) return parse_u(v, &c->dq.bk) && c->dq.bk;
    if (!strcmp(k, "dqm")) return parse_u(v, &c->dq.tm) && (c->dq.tm == 4 || c->dq.tm == 8);
    if (!strcmp(k, "pf")) {
        uint32_t x;
        if (!parse_u(v, &x) || x > 1) return 0;
        c->pf = x + 1;
        return 1;
    }
    if (!strcmp(k, "kv")) return parse_tile(v, &c->kv);
    if (!strcmp(k, "q")) return parse_tile(v, &c->q);
    if (!strcmp(k, "st")) return parse_tile(v, &c->st);
    if (!strcmp(k, "ncp")) return parse_u(v, &c->ncp);
    return 0;
}

// The form of a setting text alone (wg_settings.c checks the environment with it).
int wg_attention_cfg_parses(const char *text, int backward) {
    fwd_cfg f = {0, 0, 0, 0, 0, 0, 0, 0};
    bwd_cfg b;
    memset(&b, 0, sizeof b);
    return backward ? parse_pairs(text, bwd_key, &b) : parse_pairs(text, fwd_key, &f);
}

// ------------------------------------------------------------------ what fits
static int sg_usable(wg_ctx *ctx, uint32_t nl) {
    const wg_device_info *in = info_of(ctx);
    return in->has_subgroups && in->subgroup_min >= nl;
}

// Workgroup memory of attention_forward (as declared there) with the effective sg.
static uint32_t fwd_bytes(uint32_t HS, fwd_cfg c, int sg) {
    uint32_t br = (256 / c.nl) * c.tr, hs4 = hs4_of(HS);
    uint32_t kp = c.bc * hs4 > br * c.bc / 4 ? c.bc * hs4 : br * c.bc / 4;
    return 16 * (br * hs4 + kp + c.bc * hs4) + (sg ? 0 : 4 * br * c.nl);
}

// Register-resident kernels (v=reg): what a layout keeps in registers, in floats a thread, is
// held to WG_ATTN_REG_FLOATS so that the rows of the table that do not suit a head size (and
// settings that would spill on any GPU) are refused: forward q and O (8·RC a row) and the tile's
// scores; dK/dV K, V, dK, dV (16·RC a row) and a streamed Q and dout row (8·RC); dQ q, dout, dQ
// (12·RC a row) and a streamed K and V row. 192 of NVIDIA's 255 registers a thread; a row of
// the defaults table is used only within WG_ATTN_REG_FLOATS_TABLE, which leaves room for
// addresses and temporaries (so that the layout for HS = 64 is not taken at HS = 128, where it
// would spill: the next row is).
#define WG_ATTN_REG_FLOATS 192u
#define WG_ATTN_REG_FLOATS_TABLE 160u
enum { REG_FWD = 0, REG_DKDV = 1, REG_DQ = 2 };

// (pf: + the prefetched tile, 8 floats per vec4 pair a thread stages, and dK/dV's row statistics)
static uint32_t reg_floats(int kind, uint32_t HS, uint32_t rt, reg_tile t) {
    uint32_t rc = (hs4_of(HS) + t.rl - 1) / t.rl, rsn = (t.rb * hs4_of(HS) + rt - 1) / rt;
    uint32_t pf = t.pf ? 8 * rsn + (kind == REG_DKDV ? 4 * ((t.rb + rt - 1) / rt) : 0) : 0;
    if (kind == REG_FWD) return t.rr * (8 * rc + t.rb) + pf;
    if (kind == REG_DKDV) return 16 * t.rr * rc + 8 * rc + pf;
    return t.rr * (12 * rc + 4) + 8 * rc + pf;
}

static uint32_t reg_bytes(int kind, uint32_t HS, reg_tile t) {
    return 32 * t.rb * hs4_of(HS) + (kind == REG_DKDV ? 16 * t.rb : 0);
}

// Whether layout t with rt threads works at head size HS on this device: rl > 1 needs subgroups
// of at least rl lanes everywhere (a row's lanes then share one subgroup).
static int reg_fits_within(wg_ctx *ctx, int kind, uint32_t HS, uint32_t rt, reg_tile t, uint32_t floats) {
    if (rt != 64 && rt != 128 && rt != 256) return 0;
    if (!is_pow2(t.rl) || t.rl > 32 || t.rr < 1 || t.rr > 4 || !is_pow2(t.rb) || t.rb < 4 || t.rb > 128 || t.pf > 1)
        return 0;
    if (t.rl > 1 && !sg_usable(ctx, t.rl)) return 0;
    // the forward's lanes each finish RB/RL keys of a tile; the dK/dV pass exchanges RL streamed rows at a time
    if (kind != REG_DQ && t.rb < t.rl) return 0;
    if (reg_floats(kind, HS, rt, t) > floats) return 0;
    return reg_bytes(kind, HS, t) <= smem_limit(ctx);
}

static int reg_fits(wg_ctx *ctx, int kind, uint32_t HS, uint32_t rt, reg_tile t) {
    return reg_fits_within(ctx, kind, HS, rt, t, WG_ATTN_REG_FLOATS);
}

static reg_tile fwd_reg_tile(fwd_cfg c) { reg_tile t = {c.nl, c.tr, c.bc, c.pf}; return t; }

// v=reg,pw=1's probabilities: a float per row of the workgroup and key of the tile
static uint32_t fwd_pw_bytes(fwd_cfg c) { return c.pw ? 4 * ((c.wg ? c.wg : 128) / c.nl) * c.tr * c.bc : 0; }

static int fwd_fits(wg_ctx *ctx, uint32_t HS, fwd_cfg c) {
    if (c.v) {
        if (c.pw > 1 || !reg_fits(ctx, REG_FWD, HS, c.wg ? c.wg : 128, fwd_reg_tile(c))) return 0;
        return c.pw == 0 || reg_bytes(REG_FWD, HS, fwd_reg_tile(c)) + fwd_pw_bytes(c) <= smem_limit(ctx);
    }
    if (c.pw) return 0;  // the shared-tile kernel has no such option
    if (c.nl != 4 && c.nl != 8 && c.nl != 16) return 0;
    if (c.tr != 1 && c.tr != 2 && c.tr != 4 && c.tr != 8) return 0;
    if (!is_pow2(c.bc) || c.bc < 16 || c.bc > 128 || c.bc % c.nl) return 0;
    uint32_t kpt = c.bc / c.nl, cpt = (hs4_of(HS) + c.nl - 1) / c.nl;
    if (c.tr * kpt > 32 || c.tr * cpt > 8) return 0;  // registers: scores, output vec4s
    return fwd_bytes(HS, c, c.sg && sg_usable(ctx, c.nl)) <= smem_limit(ctx);
}

// Column groups of the backward products by default: the next power of 2 >= HS4, at most 16.
static uint32_t ncp_default(uint32_t HS) { uint32_t n = pow2_ceil(hs4_of(HS)); return n > 16 ? 16 : n; }
static int ncp_valid(uint32_t ncp) { return is_pow2(ncp) && ncp <= 64; }

// Completes t's score micro-tile when left out: RKS in {4, 2, 1, 8} (first that works) with a
// (BQ/RQS) × (BK/RKS) grid of 128 threads, the grid at most 32 wide. 0 when impossible.
static int tile_complete(bwd_tile *t) {
    static const uint32_t pref[] = {4, 2, 1, 8};
    for (int i = 0; i < 4; i++) {
        uint32_t rks = t->rks ? t->rks : pref[i];
        if (t->rks && i) break;
        if (!rks || t->bk % rks) continue;
        uint32_t nxs = t->bk / rks;
        if (!is_pow2(nxs) || nxs > 32 || 128 % nxs) continue;
        uint32_t nys = 128 / nxs;
        if (t->bq % nys) continue;
        uint32_t rqs = t->bq / nys;
        if (t->rqs && t->rqs != rqs) continue;
        t->rqs = rqs;
        t->rks = rks;
        return 1;
    }
    return 0;
}

static uint32_t bwd_bytes(uint32_t HS, bwd_tile t) {
    uint32_t hs4 = hs4_of(HS);
    return 32 * t.bq * hs4 + 32 * t.bk * hs4 + 8 * t.bq * t.bk;
}

// Whether tile t (completed in place) works for head size HS and ncp column groups on this device.
static int bwd_fits(wg_ctx *ctx, uint32_t HS, uint32_t ncp, bwd_tile *t) {
    if (!is_pow2(t->bq) || !is_pow2(t->bk) || t->bq < 4 || t->bk < 4 || t->bq > 128 || t->bk > 128) return 0;
    if (!tile_complete(t) || t->rqs > 8 || t->rks > 8 || t->rqs * t->rks > 16) return 0;
    uint32_t nkp = 256 / ncp, cp = (hs4_of(HS) + ncp - 1) / ncp;
    uint32_t rkp = (t->bk + nkp - 1) / nkp, rqp = (t->bq + nkp - 1) / nkp;
    if (rkp > 4 || rqp * cp > 8 || rkp * cp > 4) return 0;  // ab_row4 reads 4 keys; registers
    return bwd_bytes(HS, *t) <= smem_limit(ctx);
}

// One-time notice for a configuration from the environment that cannot be used.
static void notice_once(const char *what, const char *text) {
    static char seen[4][256];
    for (int i = 0; i < 4; i++) {
        if (!strcmp(seen[i], text)) return;
        if (!seen[i][0]) { snprintf(seen[i], sizeof seen[i], "%s", text); break; }
    }
    fprintf(stderr, "wgtrain: attention %s setting '%s' is malformed or does not fit this device and head size; "
            "using the default\n", what, text);
}

// The settings' WGTRAIN_ATTN_FWD_CFG / WGTRAIN_ATTN_BWD_CFG text ("" = none).
static const char *fwd_override(wg_ctx *ctx) { return wg_ctx_settings(ctx)->attn_fwd; }
static const char *bwd_override(wg_ctx *ctx) { return wg_ctx_settings(ctx)->attn_bwd; }

// Whether row i of the defaults is meant for this device and head size: min_sg, where given, is
// the subgroup size the row's register-resident settings were chosen for (a wide-SIMD GPU), max_hs
// the largest head size; elsewhere the rows after it give the defaults (its settings still run
// there when asked for).
static int row_for_device(wg_ctx *ctx, size_t i, uint32_t HS) {
    if (attn_defaults[i].max_hs && HS > attn_defaults[i].max_hs) return 0;
    return !attn_defaults[i].min_sg || sg_usable(ctx, attn_defaults[i].min_sg);
}

// The first row (only those meant for this device when `own`) whose forward setting is of kind
// v (0 shared-tile, 1 register-resident, -1 either) and fits; 0 when none.
static int fwd_row(wg_ctx *ctx, uint32_t HS, int v, int own, fwd_cfg *out) {
    for (size_t i = 0; i < N_DEFAULTS; i++) {
        fwd_cfg c = {0, 0, 0, 0, 0, 0, 0, 0};
        if (own && !row_for_device(ctx, i, HS)) continue;
        if (parse_pairs(attn_defaults[i].fwd, fwd_key, &c) && (v < 0 || (int)c.v == v) && fwd_fits(ctx, HS, c) &&
            (!c.v || reg_fits_within(ctx, REG_FWD, HS, c.wg ? c.wg : 128, fwd_reg_tile(c), WG_ATTN_REG_FLOATS_TABLE))) {
            if (c.v && !c.wg) c.wg = 128;
            *out = c;
            return 1;
        }
    }
    return 0;
}

// Setting text applied over the default d: its keys over the first row of the same kind (v=reg
// or not), or over d itself when it is of that kind. 1 when the result fits (then *out is it).
static int fwd_apply(wg_ctx *ctx, uint32_t HS, fwd_cfg d, const char *text, fwd_cfg *out) {
    fwd_cfg probe = {0, 0, 0, 0, 0, 0, 0, 0}, c = d;
    if (!parse_pairs(text, fwd_key, &probe)) return 0;
    if (probe.v != d.v) {
        fwd_cfg base = {1, 1, 16, 0, 1, 128, 0, 0};  // v=reg with no row of that kind: one lane, one row, 16 keys
        if (!fwd_row(ctx, HS, (int)probe.v, 0, &c)) {
            if (!probe.v) return 0;  // no shared-tile setting fits this head size
            c = base;
        }
    }
    if (!parse_pairs(text, fwd_key, &c)) return 0;
    if (c.v && !c.wg) c.wg = 128;
    if (!fwd_fits(ctx, HS, c)) return 0;
    *out = c;
    return 1;
}

// The forward setting: the first default row that fits, with the override's keys applied on top
// (over nothing where no row fits: a complete override still runs). 0 when neither gives a
// setting (then the row kernel runs).
static int fwd_choose_ok(wg_ctx *ctx, uint32_t HS, fwd_cfg *out) {
    fwd_cfg d = {0, 0, 0, 0, 0, 0, 0, 0};
    int found = fwd_row(ctx, HS, -1, 1, &d);
    const char *o = fwd_override(ctx);
    if (o && *o) {
        fwd_cfg c;
        if (fwd_apply(ctx, HS, d, o, &c)) { *out = c; return 1; }
        notice_once("forward", o);
    }
    if (found) *out = d;
    return found;
}

static fwd_cfg fwd_choose(wg_ctx *ctx, uint32_t HS) {
    fwd_cfg c;
    WGT_ASSERT(fwd_choose_ok(ctx, HS, &c), "no forward setting fits this head size in this device's workgroup "
                                           "memory (the caller checks fwd_tiles_fit)");
    return c;
}

// The first row (only those meant for this device when `own`) whose register-resident layout of
// this kind (rkv= for REG_DKDV, rq= for REG_DQ; threads rt=, default 128) fits; 0 when none.
static int reg_row(wg_ctx *ctx, uint32_t HS, int kind, int own, reg_tile *t, uint32_t *rt) {
    for (size_t i = 0; i < N_DEFAULTS; i++) {
        bwd_cfg c;
        memset(&c, 0, sizeof c);
        if (own && !row_for_device(ctx, i, HS)) continue;
        if (!parse_pairs(attn_defaults[i].bwd, bwd_key, &c)) continue;
        reg_tile r = kind == REG_DKDV ? c.rkv : c.rq;
        uint32_t n = c.rt ? c.rt : 128;
        if (c.pf) r.pf = c.pf - 1;
        if (r.rl && reg_fits_within(ctx, kind, HS, n, r, WG_ATTN_REG_FLOATS_TABLE)) {
            *t = r;
            *rt = n;
            return 1;
        }
    }
    return 0;
}

typedef struct { uint32_t bm, bk, tm, tx, cn; } dq_tile;
static int dq_tile_of(wg_ctx *ctx, uint32_t HS, dq_blocks want, dq_tile *t);
static int dq_given(dq_blocks b) { return b.bm || b.bk || b.tm; }

// Backward setting text over the default d (as fwd_apply): tiles and layouts left out keep d's
// (the register layouts: d's or, where d has none, the first row's that fits); a variant left
// out stays d's. 1 when everything the result names fits.
static int bwd_apply(wg_ctx *ctx, uint32_t HS, bwd_cfg d, const char *text, bwd_cfg *out) {
    bwd_cfg c;
    memset(&c, 0, sizeof c);
    if (!parse_pairs(text, bwd_key, &c)) return 0;
    if (!c.ncp) c.ncp = d.ncp;
    if (!ncp_valid(c.ncp)) return 0;
    bwd_tile *cs[3] = {&c.kv, &c.q, &c.st}, *ds[3] = {&d.kv, &d.q, &d.st};
    c.tiles_ok = 1;
    for (int k = 0; k < 3; k++) {
        if (!cs[k]->bq) *cs[k] = *ds[k];
        if (!cs[k]->bq && !d.tiles_ok) { c.tiles_ok = 0; continue; }  // no tile fits this head size
        if (!bwd_fits(ctx, HS, c.ncp, cs[k])) return 0;
    }
    if (!c.forced) c.variant = d.variant;
    if (!c.tiles_ok && !is_reg(c.variant)) return 0;
    if (!c.dq.bm) c.dq.bm = d.dq.bm;
    if (!c.dq.bk) c.dq.bk = d.dq.bk;
    if (!c.dq.tm) c.dq.tm = d.dq.tm;
    dq_tile qt;
    if (dq_given(c.dq) && !dq_tile_of(ctx, HS, c.dq, &qt)) return 0;
    uint32_t rt_given = c.rt;
    reg_tile *rs[2] = {&c.rkv, &c.rq}, *dr[2] = {&d.rkv, &d.rq};
    uint32_t *rts[2] = {&c.rt_kv, &c.rt_q}, drt[2] = {d.rt_kv, d.rt_q};
    for (int k = 0; k < 2; k++) {
        int kind = k ? REG_DQ : REG_DKDV;
        uint32_t rt = drt[k];
        if (!rs[k]->rl) {
            *rs[k] = *dr[k];
            if (!rs[k]->rl && !reg_row(ctx, HS, kind, 0, rs[k], &rt)) rs[k]->rl = 0;
        }
        if (rt_given) rt = rt_given;
        if (!rt) rt = 128;
        *rts[k] = rt;
        if (c.pf) rs[k]->pf = c.pf - 1;
        // a layout given (or needed: v=reg) must fit
        if ((rs[k]->rl || is_reg(c.variant)) && !(rs[k]->rl && reg_fits(ctx, kind, HS, rt, *rs[k]))) return 0;
    }
    *out = c;
    return 1;
}

// The backward setting (as fwd_choose_ok). Where no shared tile fits the head size (HS = 256)
// only the register-resident variant can run: tiles_ok is 0 and the variant reg, when its
// layouts fit; 0 when nothing does (then the row kernels run).
static int bwd_choose_ok(wg_ctx *ctx, uint32_t HS, bwd_cfg *out) {
    bwd_cfg d;
    memset(&d, 0, sizeof d);
    bwd_tile *slot[3] = {&d.kv, &d.q, &d.st};
    d.tiles_ok = 1;
    for (int k = 0; k < 3; k++) {
        size_t i = 0;
        for (; i < N_DEFAULTS; i++) {
            bwd_cfg c;
            memset(&c, 0, sizeof c);
            bwd_tile *cs[3] = {&c.kv, &c.q, &c.st};
            if (parse_pairs(attn_defaults[i].bwd, bwd_key, &c) && bwd_fits(ctx, HS, ncp_default(HS), cs[k])) {
                *slot[k] = *cs[k];
                break;
            }
        }
        if (i == N_DEFAULTS) d.tiles_ok = 0;
    }
    if (!d.tiles_ok) memset(&d.kv, 0, sizeof d.kv), memset(&d.q, 0, sizeof d.q), memset(&d.st, 0, sizeof d.st);
    int have_reg = reg_row(ctx, HS, REG_DKDV, 1, &d.rkv, &d.rt_kv);
    have_reg = reg_row(ctx, HS, REG_DQ, 1, &d.rq, &d.rt_q) && have_reg;
    if (!have_reg) memset(&d.rkv, 0, sizeof d.rkv), memset(&d.rq, 0, sizeof d.rq), d.rt_kv = d.rt_q = 0;
    // the long-sequence default: v= of the first row meant for this device, skipping v=reg rows
    // where the register layouts do not fit
    d.variant = V_SPLIT;
    for (size_t i = 0; i < N_DEFAULTS; i++) {
        bwd_cfg c;
        memset(&c, 0, sizeof c);
        if (!row_for_device(ctx, i, HS) || !parse_pairs(attn_defaults[i].bwd, bwd_key, &c)) continue;
        if (is_reg(c.variant) && !have_reg) continue;
        d.variant = c.variant == V_FUSED || is_reg(c.variant) ? c.variant : V_SPLIT;
        dq_tile qt;  // the dQ GEMM's blocks of the same row, where they fit
        if (dq_given(c.dq) && dq_tile_of(ctx, HS, c.dq, &qt)) d.dq = c.dq;
        break;
    }
    if (!d.tiles_ok && !is_reg(d.variant)) d.variant = V_REG;  // the only ones that can run (if have_reg)
    d.forced = 0;
    d.ncp = ncp_default(HS);
    const char *o = bwd_override(ctx);
    if (o && *o) {
        bwd_cfg c;
        if (bwd_apply(ctx, HS, d, o, &c)) { *out = c; return 1; }
        notice_once("backward", o);
    }
    if (!d.tiles_ok && !have_reg) return 0;
    *out = d;
    return 1;
}

static bwd_cfg bwd_choose(wg_ctx *ctx, uint32_t HS) {
    bwd_cfg c;
    WGT_ASSERT(bwd_choose_ok(ctx, HS, &c), "no backward setting fits this head size in this device's workgroup "
                                           "memory (the caller checks bwd_tiles_fit)");
    return c;
}

// ------------------------------------------------------------------ scratch of the fused variant
// The runtime's attention scratch slot, grown on demand; NULL when the device cannot hold it
// (then the caller uses `instead`: split-dKdV for fused, reg for reg-ds).
static wgt_buf *scratch_get(wgt_backend *be, size_t n, const char *instead) {
    wgt_buf *b = wg_scratch(wg_of(be), WG_SCRATCH_ATTN, n, "attention dQ scratch");
    if (!b) {
        static int told = 0;
        if (!told++) fprintf(stderr, "wgtrain: attention backward: %s; using %s instead\n", wgt_last_error(), instead);
    }
    return b;
}

// Scratch rows per (b, h) for key blocks of bk rows: Σ_kb (T - kb·bk).
static uint64_t fused_rows(uint32_t T, uint32_t bk) {
    uint64_t nkb = (T + bk - 1) / bk;
    return nkb * T - (uint64_t)bk * (nkb * (nkb - 1) / 2);
}

static uint64_t fused_elems(uint32_t B, uint32_t T, uint32_t NH, uint32_t HS, uint32_t bk) {
    return (uint64_t)B * NH * fused_rows(T, bk) * hs4_of(HS) * 4;
}

// ------------------------------------------------------------------ the dS scratch of reg-ds
// attention_backward_dkdv_reg stores dS in B·NH padded triangles (row t: keys 0..t rounded up to
// a multiple of 4, from element ds_tri(t)), which attention_backward_dq_ds multiplies by K. The
// scratch is held to WG_ATTN_DS_MAX_BYTES (and one storage binding, and u32 indices); above it
// reg-ds runs as reg (dQ recomputed from the scores), which needs no scratch. 202 MB at GPT-2
// 124M's B=8, T=1024, NH=12. The memory plan leaves the runtime's scratch out (docs/memory.md),
// so the limit is what a run near its --memory-limit can afford on top: a 1B LLaMA's B=1, T=2048
// (NH=32, 270 MB) runs reg.
#define WG_ATTN_DS_MAX_BYTES ((uint64_t)256 << 20)

static uint64_t ds_tri(uint64_t t) { uint64_t a = t / 4; return 4 * (a + 1) * (2 * a + t % 4); }  // as ab_tri
static uint64_t ds_elems(uint32_t B, uint32_t T, uint32_t NH) { return (uint64_t)B * NH * ds_tri(T); }

// attention_backward_dq_ds's layout at a head size: DQ_CN vec4 columns a thread (2 above 16 of
// them), DQ_TX threads along the columns (the power of 2 that covers them), DQ_TM rows a thread
// (tm when given, 4 or 8; else 8 with at least 16 column threads, else 4), DQ_BM rows a block (bm
// when given, a power of 2 from DQ_TM whose threads, DQ_TX·DQ_BM/DQ_TM, are at most 256; else the
// larger of 64 and 128 that keeps within 256 threads), DQ_BK keys a tile (bk when given, a multiple
// of 4 up to 64; else 16, or the largest multiple of 4 whose tiles fit the workgroup memory). The
// device's row of attn_defaults may give bm, bk, tm (dqb, dqk, dqm). 0 when none fits.
static int dq_tile_of(wg_ctx *ctx, uint32_t HS, dq_blocks want, dq_tile *t) {
    uint32_t hs4 = hs4_of(HS), bm = want.bm, bk = want.bk, tm = want.tm;
    t->cn = hs4 > 16 ? 2 : 1;
    t->tx = pow2_ceil((hs4 + t->cn - 1) / t->cn);
    t->tm = tm ? tm : t->tx >= 16 ? 8 : 4;
    t->bm = bm ? bm : t->tx * (128 / t->tm) <= 256 ? 128 : 64;
    if (!is_pow2(t->bm) || t->bm < t->tm || t->tx * (t->bm / t->tm) > 256) return 0;
    uint32_t per_key = 16 * (t->bm / 4 + 1) + 16 * hs4;  // workgroup memory a key of the tile
    if (bk) {
        t->bk = bk;
        return bk % 4 == 0 && bk <= 64 && bk * per_key <= smem_limit(ctx);
    }
    for (t->bk = 16; t->bk >= 4; t->bk -= 4)
        if (t->bk * per_key <= smem_limit(ctx)) return 1;
    return 0;
}

// Whether reg-ds can run this shape: its dQ tile fits and the scratch stays within its limits.
static int regds_fits(wg_ctx *ctx, uint32_t B, uint32_t T, uint32_t NH, uint32_t HS) {
    dq_tile t;
    uint64_t n = ds_elems(B, T, NH);
    return dq_tile_of(ctx, HS, DQ_DEFAULT, &t) && n <= UINT32_MAX && n <= wg_max_binding_elems(ctx) && n * 4 <= WG_ATTN_DS_MAX_BYTES;
}

// ------------------------------------------------------------------ pipelines and dispatch
static attn_params make_params(uint32_t B, uint32_t T, uint32_t NH, uint32_t NKV, uint32_t HS, uint32_t nblk) {
    attn_params p;
    memset(&p, 0, sizeof p);
    p.B = B; p.T = T; p.C = NH * HS; p.NH = NH; p.W = (NH + 2 * NKV) * HS; p.nblk = nblk; p.hs4 = hs4_of(HS);
    p.nkv = NKV; p.vc = (NH + NKV) * HS;
    p.scale = 1.0f / sqrtf((float)HS);  // as the C reference
    p.scale_log2 = p.scale * 1.4426950408889634f;
    p.dscale = 1.0f;
    return p;
}

// The dropout fields of the uniform (DROP in the pipelines is p.dthr != 0).
static void set_dropout(attn_params *p, float drop, uint32_t seed) {
    p->dseed = seed;
    p->dthr = wgt_dropout_threshold(drop);
    p->dscale = wgt_dropout_scale(drop);
}
static const char *drop_def(int drop) { return drop ? "const DROP=true;" : "const DROP=false;"; }

// The mask fields of the uniform and the doc_start binding (a placeholder the kernels do not read
// when doc_start is absent).
static wg_bind set_mask(wgt_backend *be, attn_params *p, wgt_view doc_start, size_t bt, uint32_t window) {
    p->window = window;
    p->has_doc = doc_start.buf != NULL;
    if (doc_start.buf) return wg_b(doc_start, bt);
    wgt_buf *b = wg_scratch(wg_of(be), WG_SCRATCH_PLACEHOLDER, WGT_VIEW_ALIGN, "placeholder");
    WGT_ASSERT(b != NULL, "could not allocate the 256-byte placeholder buffer");
    return wg_b(wgt_view_of(b, 0, 1), 1);
}

static void check_shapes(wgt_backend *be, uint32_t B, uint32_t T, uint32_t NH, uint32_t NKV, uint32_t HS, float drop) {
    WGT_ASSERT(drop >= 0.0f && drop < 1.0f, "attention dropout needs p in [0, 1)");
    WGT_ASSERT(NH > 0 && NKV > 0 && NH % NKV == 0, "attention needs NKV (kv heads) dividing NH (query heads)");
    WGT_ASSERT(HS > 0 && HS <= WG_ATTN_HS_MAX, "attention kernels support head sizes 1..256");
    uint64_t n = (uint64_t)B * T * ((uint64_t)NH + 2 * (uint64_t)NKV) * HS;
    WGT_ASSERT(n <= UINT32_MAX, "attention kernels index qkv with u32");
    WGT_ASSERT(n <= wg_max_binding_elems(wg_of(be)),
               "qkv [B,T,(NH+2NKV)HS] exceeds the device's storage binding limit; run attention on fewer sequences at a "
               "time");
}

// qkv / dout / out are bound as vec4 arrays when every head row starts 16-byte aligned.
static const char *qkv_type(uint32_t HS) {
    return HS % 4 == 0 ? "alias QT=vec4<f32>;const QV4=true;" : "alias QT=f32;const QV4=false;";
}

// The register-resident kernels' constants, their lane sum `name` (x summed over the RL lanes
// of a row by subgroupShuffleXor butterflies, the same bits in every lane since each step adds
// the same two values) and reg_xor(x, m) (x of the lane whose index differs by m). Both use
// shuffles only where rl > 1, which reg_fits allows only with subgroups of >= rl lanes. For the
// lanes' exchange (05_attention.wgsl, 10_backward_attention.wgsl): RL_LOG = log2(RL), its steps,
// and RL_POW2, whether head rows (HS4 vec4) have a power-of-2 stride of whole lane columns, so
// that a lane's permuted row is addressed with one xor.
static void reg_defs(char *buf, size_t cap, const char *name, uint32_t HS, uint32_t rt, reg_tile t) {
    uint32_t hs4 = hs4_of(HS), lg = 0;
    while ((1u << lg) < t.rl) lg++;
    int n = snprintf(buf, cap, "const RT=%uu;const RL=%uu;const RR=%uu;const RB=%uu;const PF=%s;const RL_LOG=%uu;"
                     "const RL_POW2=%s;",
                     rt, t.rl, t.rr, t.rb, t.pf ? "true" : "false", lg, is_pow2(hs4) && hs4 % t.rl == 0 ? "true" : "false");
    WGT_ASSERT(n > 0 && (size_t)n < cap, "register kernel constants overflow their buffer");
    int m = t.rl > 1 ? snprintf(buf + n, cap - (size_t)n,
                                "fn %s(x:f32)->f32{var y=x;for(var i=1u;i<RL;i=i<<1u){y=y+subgroupShuffleXor(y,i);}"
                                "return y;}fn reg_xor(x:f32,m:u32)->f32{return subgroupShuffleXor(x,m);}",
                                name)
                     : snprintf(buf + n, cap - (size_t)n, "fn %s(x:f32)->f32{return x;}fn reg_xor(x:f32,m:u32)->f32{return x;}",
                                name);
    WGT_ASSERT(m > 0 && (size_t)m < cap - (size_t)n, "register kernel functions overflow their buffer");
}

static WGPUComputePipeline fwd_pipeline(wg_ctx *ctx, uint32_t HS, uint32_t gq, fwd_cfg c, int drop) {
    int sg = !c.v && c.sg && sg_usable(ctx, c.nl);
    char defs[1024], rdefs[512];
    reg_tile none = {1, 1, 4, 0};
    fwd_cfg tile = c;
    if (c.v) tile.nl = 8, tile.tr = 1, tile.bc = 16;  // the shared-tile kernel's constants, unused
    reg_defs(rdefs, sizeof rdefs, "fa_rsum", HS, c.v ? c.wg : 64, c.v ? fwd_reg_tile(c) : none);
    snprintf(defs, sizeof defs,
             "const HS=%uu;const GQ=%uu;const NL=%uu;const TR=%uu;const BC=%uu;const SG=%s;const UNROLL=%s;const PW=%s;"
             "%s%s%s%s",
             HS, gq, tile.nl, tile.tr, tile.bc, sg ? "true" : "false", unroll_ok(ctx) ? "true" : "false",
             c.v && c.pw ? "true" : "false", qkv_type(HS),
             drop_def(drop),
             sg ? "fn fa_sg(x:f32,mx:bool)->f32{var y=x;for(var i=1u;i<NL;i=i<<1u){let z=subgroupShuffleXor(y,i);"
                  "y=select(y+z,max(y,z),mx);}return y;}"
                : "fn fa_sg(x:f32,mx:bool)->f32{return x;}",
             rdefs);
    return wg_pipeline(ctx, "05_attention.wgsl", c.v ? "attention_forward_reg" : "attention_forward", defs);
}

// ------------------------------------------------------------------ row kernels (large heads)
// Whether the defaults (or the override) give the forward (the backward: its three tiles, or the
// register-resident layouts) a setting that fits this device at head size HS. Where none does
// (HS = 256 in 32 or 48 KiB of workgroup memory without a register-resident row for the device),
// 17_attention_rows.wgsl computes the op one row per workgroup.
static int fwd_tiles_fit(wg_ctx *ctx, uint32_t HS) {
    fwd_cfg c;
    return fwd_choose_ok(ctx, HS, &c);
}
static int bwd_tiles_fit(wg_ctx *ctx, uint32_t HS) {
    bwd_cfg c;
    return bwd_choose_ok(ctx, HS, &c);
}

typedef struct {
    uint32_t B, T, NH, NKV, HS, W, C, vc, GQ, dseed, dthr, drop;
    float scale, dscale;
    uint32_t has_doc, window;  // the mask
} rows_params;  // RowParams of 17_attention_rows.wgsl

static rows_params rows_make(uint32_t B, uint32_t T, uint32_t NH, uint32_t NKV, uint32_t HS, float p_drop,
                             uint32_t seed, uint32_t window) {
    rows_params p = {B, T, NH, NKV, HS, (NH + 2 * NKV) * HS, NH * HS, (NH + NKV) * HS, NH / NKV, seed,
                     wgt_dropout_threshold(p_drop), 0, 1.0f / sqrtf((float)HS), wgt_dropout_scale(p_drop), 0, window};
    p.drop = p.dthr != 0;
    if (!p.drop) p.dscale = 1.0f;
    return p;
}

void wg_attention_rows_forward(wgt_backend *be, wgt_view out, wgt_view lse, wgt_view qkv, wgt_view doc_start,
                               uint32_t B, uint32_t T, uint32_t NH, uint32_t NKV, uint32_t HS, float p_drop,
                               uint32_t seed, uint32_t window) {
    if (!B || !T) return;
    check_shapes(be, B, T, NH, NKV, HS, p_drop);
    wg_ctx *ctx = wg_of(be);
    rows_params p = rows_make(B, T, NH, NKV, HS, p_drop, seed, window);
    size_t bt = (size_t)B * T;
    attn_params pm = make_params(B, T, NH, NKV, HS, 1);
    wg_bind b[] = {wg_b(out, bt * p.C), wg_b(lse, (size_t)B * NH * T), wg_b(qkv, bt * p.W),
                   set_mask(be, &pm, doc_start, bt, window)};
    p.has_doc = pm.has_doc;
    wg_dispatch(ctx, "attention_rows_forward",
                wg_pipeline(ctx, "17_attention_rows.wgsl", "attention_rows_forward", NULL), b, 4, &p, sizeof p,
                (uint64_t)B * NH * T);
}

static void rows_backward(wgt_backend *be, wgt_view dqkv, wgt_view dout, wgt_view qkv, wgt_view out, wgt_view lse,
                          wgt_view doc_start, uint32_t B, uint32_t T, uint32_t NH, uint32_t NKV, uint32_t HS,
                          float p_drop, uint32_t seed, uint32_t window) {
    wg_ctx *ctx = wg_of(be);
    rows_params p = rows_make(B, T, NH, NKV, HS, p_drop, seed, window);
    size_t bt = (size_t)B * T, n3 = bt * p.W;
    attn_params pm = make_params(B, T, NH, NKV, HS, 1);
    wg_bind bd[] = {wg_b(dqkv, n3), wg_b(dout, bt * p.C), wg_b(out, bt * p.C)};
    wg_bind b[] = {wg_b(dqkv, n3), wg_b(dout, bt * p.C), wg_b(qkv, n3), wg_b(lse, (size_t)B * NH * T),
                   set_mask(be, &pm, doc_start, bt, window)};
    p.has_doc = pm.has_doc;
    const char *f = "17_attention_rows.wgsl";
    // D into the dQ slots, then dK and dV (which read every D), then dQ (each reads its own D first)
    wg_dispatch(ctx, "attention_rows_dsum", wg_pipeline(ctx, f, "attention_rows_dsum", NULL), bd, 3, &p, sizeof p,
                (uint64_t)bt * NH);
    wg_dispatch(ctx, "attention_rows_backward_dkdv", wg_pipeline(ctx, f, "attention_rows_backward_dkdv", NULL), b, 5,
                &p, sizeof p, (uint64_t)B * NKV * T);
    wg_dispatch(ctx, "attention_rows_backward_dq", wg_pipeline(ctx, f, "attention_rows_backward_dq", NULL), b, 5, &p,
                sizeof p, (uint64_t)B * NH * T);
}

void wg_attention_forward(wgt_backend *be, wgt_view out, wgt_view lse, wgt_view qkv, wgt_view doc_start, uint32_t B,
                          uint32_t T, uint32_t NH, uint32_t NKV, uint32_t HS, float p_drop, uint32_t seed,
                          uint32_t window) {
    if (!B || !T) return;
    check_shapes(be, B, T, NH, NKV, HS, p_drop);
    wg_ctx *ctx = wg_of(be);
    if (!fwd_tiles_fit(ctx, HS)) {
        wg_attention_rows_forward(be, out, lse, qkv, doc_start, B, T, NH, NKV, HS, p_drop, seed, window);
        return;
    }
    fwd_cfg c = fwd_choose(ctx, HS);
    // rows of a workgroup: 256/nl row groups of tr rows, or (v=reg) wg/nl row groups of tr rows
    uint32_t br = ((c.v ? c.wg : 256) / c.nl) * c.tr, nblk = (T + br - 1) / br;
    attn_params p = make_params(B, T, NH, NKV, HS, nblk);
    p.nkb = c.bc / 4;  // the forward's params name this slot bc4: keys / 4 per tile
    p.ntri = c.bc;     // and this one rb: keys per tile (attention_forward_reg)
    set_dropout(&p, p_drop, seed);
    size_t bt = (size_t)B * T;
    wg_bind b[] = {wg_b(out, bt * p.C), wg_b(lse, (size_t)B * NH * T), wg_b(qkv, bt * p.W),
                   set_mask(be, &p, doc_start, bt, window)};
    wg_dispatch(ctx, c.v ? "attention_forward_reg" : "attention_forward", fwd_pipeline(ctx, HS, NH / NKV, c, p.dthr != 0),
                b, 4, &p, sizeof p, (uint64_t)nblk * B * NH);
}

// Largest T handled by split-short: P and dS (SS² floats each) plus lse and D (SS each).
static uint32_t short_max_t(wg_ctx *ctx) {
    uint32_t lim = smem_limit(ctx), best = 0;
    for (uint32_t ss = 8; ss <= 64; ss += 8)
        if (8 * ss * ss + 8 * ss <= lim) best = ss;
    return best;
}

// gq: query heads per kv head (1 for the kernels that do not loop over a group: one pipeline
// serves every group size); drop: dropout (0 for the kernels that do not depend on it)
// ds: attention_backward_dkdv_reg stores dS (DSW; its params at binding 6). The dQ-from-dS
// kernel's constants are in every pipeline of the file: its blocks dq (zeros where no setting
// names them: the default for the head size).
static WGPUComputePipeline bwd_pipeline_reg(wg_ctx *ctx, const char *entry, uint32_t HS, uint32_t gq, uint32_t ncp,
                                            bwd_tile t, uint32_t ss, int drop, uint32_t rt, reg_tile r, int ds,
                                            dq_blocks dq) {
    char defs[1536], rdefs[512];
    reg_defs(rdefs, sizeof rdefs, "ar_sum", HS, rt, r);
    dq_tile q = {128, 4, 4, 1, 1};  // a placeholder where no tile fits (the kernel is then never used)
    if (!dq_tile_of(ctx, HS, dq, &q)) dq_tile_of(ctx, HS, DQ_DEFAULT, &q);
    snprintf(defs, sizeof defs,
             "const HS=%uu;const GQ=%uu;const BQ=%uu;const BK=%uu;const RQS=%uu;const RKS=%uu;const NCP=%uu;"
             "const SS=%uu;const UNROLL=%s;%s%s%s"
             "const DSW=%s;fn ar_params()->AttnParams{return %s;}fn ar_ds_put(i:u32,v:f32){%s}"
             "const DQ_BM=%uu;const DQ_BK=%uu;const DQ_TM=%uu;const DQ_TX=%uu;const DQ_CN=%uu;",
             HS, gq, t.bq, t.bk, t.rqs, t.rks, ncp, ss, unroll_ok(ctx) ? "true" : "false", qkv_type(HS),
             drop_def(drop), rdefs, ds ? "true" : "false", ds ? "ab_pf" : "ab_p", ds ? "ab_dsw[i]=v;" : "", q.bm, q.bk,
             q.tm, q.tx, q.cn);
    return wg_pipeline(ctx, "10_backward_attention.wgsl", entry, defs);
}

// The shared-tile kernels (the register-resident kernels' constants at a placeholder).
static WGPUComputePipeline bwd_pipeline(wg_ctx *ctx, const char *entry, uint32_t HS, uint32_t gq, uint32_t ncp,
                                        bwd_tile t, uint32_t ss, int drop) {
    reg_tile none = {1, 1, 4, 0};
    return bwd_pipeline_reg(ctx, entry, HS, gq, ncp, t, ss, drop, 64, none, 0, DQ_DEFAULT);
}

// The register-resident layouts of c, completed from the rows of the defaults (any device's)
// where c has none; 0 when some layout does not fit this device and head size.
static int reg_layouts(wg_ctx *ctx, uint32_t HS, bwd_cfg *c) {
    if (!c->rkv.rl && !reg_row(ctx, HS, REG_DKDV, 0, &c->rkv, &c->rt_kv)) return 0;
    if (!c->rq.rl && !reg_row(ctx, HS, REG_DQ, 0, &c->rq, &c->rt_q)) return 0;
    return reg_fits(ctx, REG_DKDV, HS, c->rt_kv, c->rkv) && reg_fits(ctx, REG_DQ, HS, c->rt_q, c->rq);
}

// The variant the automatic rule picks (see the top of this file): 1 streaming, 2 split-dKdV,
// 3 split-short, 4 fused. With a variant forced by the configuration, that one.
int wg_attention_backward_auto_variant(wgt_backend *be, uint32_t B, uint32_t T, uint32_t NH, uint32_t NKV,
                                       uint32_t HS) {
    wg_ctx *ctx = wg_of(be);
    if (!bwd_tiles_fit(ctx, HS)) return V_ROWS;
    bwd_cfg c = bwd_choose(ctx, HS);
    if (!c.tiles_ok) {
        if (!reg_layouts(ctx, HS, &c)) return V_ROWS;
        return c.variant == V_REGDS && regds_fits(ctx, B, T, NH, HS) ? V_REGDS : V_REG;
    }
    int v;
    if (c.forced) v = c.variant;
    else if (T <= short_max_t(ctx)) v = V_SHORT;
    else if ((uint64_t)B * NKV >= WG_ATTN_STREAM_MIN_HEADS) v = V_STREAM;  // streaming's workgroups
    else v = c.variant == V_AUTO ? V_SPLIT : c.variant;
    if (v == V_SHORT && T > short_max_t(ctx)) v = V_SPLIT;
    if (v == V_FUSED) {
        uint64_t n = fused_elems(B, T, NH, HS, c.kv.bk);
        if (n > wg_max_binding_elems(ctx) || n / 4 > UINT32_MAX) v = V_SPLIT;
    }
    if (is_reg(v) && !reg_layouts(ctx, HS, &c)) v = V_SPLIT;
    if (v == V_REGDS && !regds_fits(ctx, B, T, NH, HS)) v = V_REG;
    return v;
}

// Backward with an explicit variant: 0 auto, 1 streaming, 2 split-dKdV, 3 split-short, 4 fused,
// 6 register-resident split (5, the row kernels, is taken where no tile fits).
// A variant that cannot run on this shape (split-short above its T limit, fused whose scratch
// does not fit) falls back to split-dKdV. Returns the variant that ran. Tests and benchmarks use
// it to run each variant; the model calls wg_attention_backward.
int wg_attention_backward_with(wgt_backend *be, int variant, wgt_view dqkv, wgt_view dout, wgt_view qkv,
                               wgt_view out, wgt_view lse, wgt_view doc_start, uint32_t B, uint32_t T, uint32_t NH,
                               uint32_t NKV, uint32_t HS, float p_drop, uint32_t seed, uint32_t window) {
    if (!B || !T) return variant;
    check_shapes(be, B, T, NH, NKV, HS, p_drop);
    const int drop = wgt_dropout_threshold(p_drop) != 0;
    wg_ctx *ctx = wg_of(be);
    if (variant == V_ROWS || !bwd_tiles_fit(ctx, HS)) {
        rows_backward(be, dqkv, dout, qkv, out, lse, doc_start, B, T, NH, NKV, HS, p_drop, seed, window);
        return V_ROWS;
    }
    bwd_cfg cfg = bwd_choose(ctx, HS);
    const int reg_ok = reg_layouts(ctx, HS, &cfg);  // (completes cfg's register layouts)
    // an invalid variant, or one that cannot run at this head size (no tile, or no register
    // layout, fits): the automatic choice
    if (variant < 1 || variant >= N_VARIANTS || variant == V_ROWS || (!cfg.tiles_ok && !is_reg(variant)) ||
        (is_reg(variant) && !reg_ok))
        variant = wg_attention_backward_auto_variant(be, B, T, NH, NKV, HS);
    if (variant == V_ROWS) {  // no tile fits and the register layouts do not either
        rows_backward(be, dqkv, dout, qkv, out, lse, doc_start, B, T, NH, NKV, HS, p_drop, seed, window);
        return V_ROWS;
    }
    if (variant == V_SHORT && T > short_max_t(ctx)) variant = V_SPLIT;
    if (is_reg(variant) && !reg_ok) variant = V_SPLIT;
    if (variant == V_REGDS && !regds_fits(ctx, B, T, NH, HS)) variant = V_REG;
    const uint32_t C = NH * HS, gq = NH / NKV;
    size_t bt = (size_t)B * T, n3 = bt * ((size_t)NH + 2 * (size_t)NKV) * HS;
    uint64_t bnh = (uint64_t)B * NH, bnk = (uint64_t)B * NKV;  // query heads, kv heads
    wgt_buf *scr = NULL;
    if (variant == V_FUSED) {
        uint64_t n = fused_elems(B, T, NH, HS, cfg.kv.bk);
        if (n <= wg_max_binding_elems(ctx) && n / 4 <= UINT32_MAX) scr = scratch_get(be, (size_t)n, "split-dKdV");
        if (!scr) variant = V_SPLIT;
    }
    if (variant == V_REGDS && !(scr = scratch_get(be, (size_t)ds_elems(B, T, NH), "reg"))) variant = V_REG;
    bwd_tile small = {16, 16, 0, 0};  // dsum and short use no tile; one pipeline per head size
    tile_complete(&small);
    uint32_t ncp0 = ncp_default(HS);
    const char *dsum = "attention_backward_dsum", *shrt = "attention_backward_short";
    const char *strm = "attention_backward_stream", *fusd = "attention_backward_fused";
    const char *redu = "attention_backward_dq_reduce", *dkdv = "attention_backward_dkdv", *dq = "attention_backward_dq";

    // D_t = dout_t · out_t into the dQ slots (read by every variant)
    attn_params pd = make_params(B, T, NH, NKV, HS, 0);
    uint32_t npr = pow2_ceil(hs4_of(HS));  // dsum: threads per row
    wg_bind bd[] = {wg_b(dqkv, n3), wg_b(dout, bt * C), wg_b(out, bt * C)};
    wg_dispatch(ctx, dsum, bwd_pipeline(ctx, dsum, HS, 1, ncp0, small, 8, 0), bd, 3, &pd, sizeof pd,
                wg_groups(bt * NH, 256 / npr));

    // the kernels that own dK, dV run one workgroup (per key block) per kv head
    attn_params pm = make_params(B, T, NH, NKV, HS, 0);
    const wg_bind doc = set_mask(be, &pm, doc_start, bt, window);
    wg_bind b[] = {wg_b(dqkv, n3), wg_b(dout, bt * C), wg_b(qkv, n3), wg_b(lse, (size_t)B * NH * T), doc};
    if (variant == V_SHORT) {
        uint32_t ss = (T + 7) / 8 * 8;
        attn_params p = make_params(B, T, NH, NKV, HS, 1);
        set_dropout(&p, p_drop, seed);
        p.has_doc = pm.has_doc, p.window = window;
        wg_dispatch(ctx, shrt, bwd_pipeline(ctx, shrt, HS, gq, ncp0, small, ss, drop), b, 5, &p, sizeof p, bnk);
    } else if (variant == V_STREAM) {
        bwd_tile t = cfg.st;
        attn_params p = make_params(B, T, NH, NKV, HS, 1);
        p.bq = t.bq;
        p.bk4 = t.bk / 4;
        set_dropout(&p, p_drop, seed);
        p.has_doc = pm.has_doc, p.window = window;
        wg_dispatch(ctx, strm, bwd_pipeline(ctx, strm, HS, gq, cfg.ncp, t, 8, drop), b, 5, &p, sizeof p, bnk);
    } else if (variant == V_FUSED) {
        bwd_tile t = cfg.kv;
        attn_params p = make_params(B, T, NH, NKV, HS, (T + t.bk - 1) / t.bk);
        p.nkb = p.nblk;
        p.ntri = (uint32_t)fused_rows(T, t.bk);
        p.bq = t.bq;
        p.bk4 = t.bk / 4;
        set_dropout(&p, p_drop, seed);
        p.has_doc = pm.has_doc, p.window = window;
        size_t ns = (size_t)fused_elems(B, T, NH, HS, t.bk);
        wgt_view sv = wgt_view_of(scr, 0, ns);
        wg_bind bf[] = {wg_b(dqkv, n3), wg_b(dout, bt * C), wg_b(qkv, n3), wg_b(lse, (size_t)B * NH * T), doc,
                        wg_b(sv, ns)};
        wg_dispatch(ctx, fusd, bwd_pipeline(ctx, fusd, HS, gq, cfg.ncp, t, 8, drop), bf, 6, &p, sizeof p,
                    (uint64_t)p.nblk * bnk);
        wg_bind br[] = {wg_b(dqkv, n3), wg_b(sv, ns), doc};
        wg_dispatch(ctx, redu, bwd_pipeline(ctx, redu, HS, 1, cfg.ncp, t, 8, 0), br, 3, &p, sizeof p,
                    wg_groups(bnh * T * hs4_of(HS), 256));
    } else if (variant == V_REGDS) {
        // dK, dV and the stored dS (reading every row's D in the dQ slots), then dQ = scale·dS·K
        const char *rkv = "attention_backward_dkdv_reg", *rq = "attention_backward_dq_ds";
        uint32_t bk = cfg.rt_kv / cfg.rkv.rl * cfg.rkv.rr;
        size_t ns = (size_t)ds_elems(B, T, NH);
        wgt_view sv = wgt_view_of(scr, 0, ns);
        attn_params pk = make_params(B, T, NH, NKV, HS, (T + bk - 1) / bk);
        pk.bq = cfg.rkv.rb;
        pk.ntri = (uint32_t)ds_tri(T);
        set_dropout(&pk, p_drop, seed);
        pk.has_doc = pm.has_doc, pk.window = window;
        wg_bind bk6[] = {wg_b(dqkv, n3), wg_b(dout, bt * C), wg_b(qkv, n3), wg_b(lse, (size_t)B * NH * T), doc,
                         wg_b(sv, ns)};
        wg_dispatch(ctx, rkv, bwd_pipeline_reg(ctx, rkv, HS, gq, ncp0, small, 8, drop, cfg.rt_kv, cfg.rkv, 1, cfg.dq), bk6, 6,
                    &pk, sizeof pk, (uint64_t)pk.nblk * bnk);
        dq_tile qt;
        WGT_ASSERT(dq_tile_of(ctx, HS, cfg.dq, &qt), "reg-ds chosen where its dQ tile does not fit (regds_fits, bwd_apply)");
        attn_params pq = make_params(B, T, NH, NKV, HS, (T + qt.bm - 1) / qt.bm);
        pq.ntri = pk.ntri;
        pq.has_doc = pm.has_doc, pq.window = window;
        wg_bind bq4[] = {wg_b(dqkv, n3), wg_b(sv, ns), wg_b(qkv, n3), doc};
        wg_dispatch(ctx, rq, bwd_pipeline_reg(ctx, rq, HS, gq, ncp0, small, 8, 0, cfg.rt_q, cfg.rq, 0, cfg.dq), bq4, 4, &pq,
                    sizeof pq, (uint64_t)pq.nblk * bnh);
    } else if (variant == V_REG) {
        // dK, dV (reading every row's D in the dQ slots), then dQ over them
        const char *rkv = "attention_backward_dkdv_reg", *rq = "attention_backward_dq_reg";
        uint32_t bk = cfg.rt_kv / cfg.rkv.rl * cfg.rkv.rr, bq = cfg.rt_q / cfg.rq.rl * cfg.rq.rr;
        attn_params pk = make_params(B, T, NH, NKV, HS, (T + bk - 1) / bk);
        pk.bq = cfg.rkv.rb;  // streamed rows a tile (the loops' trip count without UNROLL)
        set_dropout(&pk, p_drop, seed);
        pk.has_doc = pm.has_doc, pk.window = window;
        wg_dispatch(ctx, rkv, bwd_pipeline_reg(ctx, rkv, HS, gq, ncp0, small, 8, drop, cfg.rt_kv, cfg.rkv, 0, DQ_DEFAULT), b, 5, &pk,
                    sizeof pk, (uint64_t)pk.nblk * bnk);
        attn_params pq = make_params(B, T, NH, NKV, HS, (T + bq - 1) / bq);
        pq.bq = cfg.rq.rb;
        set_dropout(&pq, p_drop, seed);
        pq.has_doc = pm.has_doc, pq.window = window;
        wg_dispatch(ctx, rq, bwd_pipeline_reg(ctx, rq, HS, gq, ncp0, small, 8, drop, cfg.rt_q, cfg.rq, 0, DQ_DEFAULT), b, 5, &pq,
                    sizeof pq, (uint64_t)pq.nblk * bnh);
    } else {
        bwd_tile tk = cfg.kv;
        attn_params pk = make_params(B, T, NH, NKV, HS, (T + tk.bk - 1) / tk.bk);
        pk.bq = tk.bq;
        pk.bk4 = tk.bk / 4;
        set_dropout(&pk, p_drop, seed);
        pk.has_doc = pm.has_doc, pk.window = window;
        wg_dispatch(ctx, dkdv, bwd_pipeline(ctx, dkdv, HS, gq, cfg.ncp, tk, 8, drop), b, 5, &pk, sizeof pk,
                    (uint64_t)pk.nblk * bnk);
        bwd_tile tq = cfg.q;
        attn_params pq = make_params(B, T, NH, NKV, HS, (T + tq.bq - 1) / tq.bq);
        pq.bq = tq.bq;
        pq.bk4 = tq.bk / 4;
        set_dropout(&pq, p_drop, seed);
        pq.has_doc = pm.has_doc, pq.window = window;
        wg_dispatch(ctx, dq, bwd_pipeline(ctx, dq, HS, gq, cfg.ncp, tq, 8, drop), b, 5, &pq, sizeof pq,
                    (uint64_t)pq.nblk * bnh);
    }
    return variant;
}

void wg_attention_backward(wgt_backend *be, wgt_view dqkv, wgt_view dout, wgt_view qkv, wgt_view out, wgt_view lse,
                           wgt_view doc_start, uint32_t B, uint32_t T, uint32_t NH, uint32_t NKV, uint32_t HS, float p,
                           uint32_t seed, uint32_t window) {
    wg_attention_backward_with(be, 0, dqkv, dout, qkv, out, lse, doc_start, B, T, NH, NKV, HS, p, seed, window);
}

// ------------------------------------------------------------------ test / bench hooks
// Whether a forward (backward) setting, complete or partial, parses and fits this device at head
// size HS, i.e. whether it would be used as given rather than replaced by the default.
int wg_attention_fwd_cfg_ok(wgt_backend *be, uint32_t HS, const char *cfg) {
    fwd_cfg d = {0, 0, 0, 0, 0, 0, 0, 0}, c;  // over nothing where no setting fits (large heads)
    fwd_choose_ok(wg_of(be), HS, &d);
    return fwd_apply(wg_of(be), HS, d, cfg, &c);
}

int wg_attention_bwd_cfg_ok(wgt_backend *be, uint32_t HS, const char *cfg) {
    bwd_cfg d, c;
    memset(&d, 0, sizeof d);
    if (!bwd_choose_ok(wg_of(be), HS, &d)) d.ncp = ncp_default(HS);  // nothing fits: d has no tiles
    return bwd_apply(wg_of(be), HS, d, cfg, &c);
}

// The settings the wrappers use now for head size HS (defaults, overrides applied), as text:
// "fwd nl=8,tr=2,bc=64,sg=1 | bwd v=fused,kv=16x64/2x4,q=64x16/2x4,st=32x32/2x4", sg as in effect.
const char *wg_attention_describe(wgt_backend *be, uint32_t HS, char *buf, size_t cap) {
    wg_ctx *ctx = wg_of(be);
    if (!fwd_tiles_fit(ctx, HS) || !bwd_tiles_fit(ctx, HS)) {
        snprintf(buf, cap, "fwd %s | bwd %s (no tile fits head size %u)", fwd_tiles_fit(ctx, HS) ? "tiled" : "rows",
                 bwd_tiles_fit(ctx, HS) ? "tiled" : "rows", HS);
        return buf;
    }
    fwd_cfg f = fwd_choose(ctx, HS);
    bwd_cfg c = bwd_choose(ctx, HS);
    size_t n = 0;
    if (f.v)
        n = (size_t)snprintf(buf, cap, "fwd v=reg,nl=%u,tr=%u,bc=%u,wg=%u,pf=%u,pw=%u", f.nl, f.tr, f.bc, f.wg, f.pf,
                             f.pw);
    else
        n = (size_t)snprintf(buf, cap, "fwd nl=%u,tr=%u,bc=%u,sg=%d", f.nl, f.tr, f.bc, f.sg && sg_usable(ctx, f.nl));
    if (n < cap)
        n += (size_t)snprintf(buf + n, cap - n, " | bwd v=%s,kv=%ux%u/%ux%u,q=%ux%u/%ux%u,st=%ux%u/%ux%u,ncp=%u",
                              variant_names[c.variant], c.kv.bq, c.kv.bk, c.kv.rqs, c.kv.rks, c.q.bq, c.q.bk, c.q.rqs,
                              c.q.rks, c.st.bq, c.st.bk, c.st.rqs, c.st.rks, c.ncp);
    if (n < cap && c.rkv.rl && c.rq.rl)
        n += (size_t)snprintf(buf + n, cap - n, ",rkv=%ux%ux%u,rq=%ux%ux%u,rt=%u/%u,pf=%u/%u", c.rkv.rl, c.rkv.rr,
                              c.rkv.rb, c.rq.rl, c.rq.rr, c.rq.rb, c.rt_kv, c.rt_q, c.rkv.pf, c.rq.pf);
    dq_tile qt;
    if (n < cap && c.variant == V_REGDS && dq_tile_of(ctx, HS, c.dq, &qt))
        snprintf(buf + n, cap - n, ",dqb=%u,dqk=%u,dqm=%u", qt.bm, qt.bk, qt.tm);
    return buf;
}
