// wg_ops_matmul.c — dispatch wrappers for kernels/03_matmul.wgsl (matmul, matmul_t, matmul_at).
// One GEMM routine serves the three ops. Per call it picks
//   - the tile shape (a pipeline variant through `defines`) from the device's workgroup memory
//     and the output's size;
//   - split-K: an output of too few tiles to fill a large GPU (the dW of every GPT-2 layer:
//     768x768 is 36 tiles of 128x128 for 132 SMs) with a long K is computed as S k-slices,
//     each into its own layer of a scratch buffer, then summed in a fixed order by a second
//     kernel that also adds the bias / accumulates (+=) into the real output: deterministic, no
//     atomics (matmul_at's dbias, the column sums of dout, is a kernel of its own: summed in
//     the split kernels it cost them more on the H200, bench/README.md);
//     By default (WGTRAIN_MM_STREAMK) those GEMMs run as stream-K instead: the GPU's workgroups
//     share the tiles' k-slices evenly and a second kernel adds each tile's pieces in order;
//   - vec4 global loads for each operand whose leading dimension and offset are multiples of 4;
//   - the raster order of the tiles (groups of row blocks, so neighbours share L2 tiles);
//   - on some GPUs, transposed copies of the operands stored along k (the forward's W, or both of
//     its operands; matmul_t's dout at wide outputs), so that the GEMM runs in matmul_t's or
//     matmul_at's faster layout (fwd_layout_pick, dx_t_pick below).
// The WGTRAIN_MM_* settings of the context (wg_settings.h) can force each choice.
// matmul_lowbit and matmul_t_lowbit (a frozen weight packed as f16, bf16 or nf4, LoRA's
// --base-precision) are matmul and matmul_t with a B operand that the kernel decodes as it loads it,
// through the same tiles, split-K and raster order.
// It also splits any operand larger than one storage binding (the lm_head's logits and wte) into
// windows (the runtime's wg_binding_window): rows of the operand's slow dimension, bound at a
// 256-byte-aligned start with the remainder passed to the kernel as an element offset. A split
// of the reduction dimension accumulates into the output.
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <stdio.h>
#include "backend/lowbit.h"
#include "backend/webgpu/wg_ops.h"
#include "backend/webgpu/wg_ops_gpt.h"

static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }
static uint64_t cdiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// ------------------------------------------------------------------ settings
// The context's WGTRAIN_MM_* settings (wg_settings.h), read on every call; the helpers below
// resolve their automatic values.
static const wg_settings *mm_settings(wg_ctx *ctx) { return wg_ctx_settings(ctx); }
// WGTRAIN_MM_SPLITK: WG_AUTO | 0 (off) | S (every GEMM through the split path with S slices)
static int splitk_setting(wg_ctx *ctx) { return mm_settings(ctx)->mm_splitk; }
// WGTRAIN_MM_VEC4: 0 (scalar loads and stores) | 1 (vec4 loads of every aligned f32 operand) | 2
// (of B alone, where it is stored along n: matmul_t's W, matmul_at's inp) | 3 (of every operand
// stored along m or n: those two and matmul_at's dout). auto = 3. On the H200, 2 took matmul_t
// from 51.5 to 48.5 ms a GPT-2 124M step, while vec4 loads of an operand stored along k lose 6-25 %
// (they land in workgroup memory as 4 scattered scalars); 3 took matmul_at a further 2-3 %
// faster once C was stored as vec4 (bench/README.md). With 1-3, C (the output or the split-K
// partials) is also bound as vec4 where its width, row stride and offset allow.
#define MM_VEC4_ALL 1
#define MM_VEC4_B_ALONG_N 2
#define MM_VEC4_ALONG_MN 3
// vec4 stores of C only where a workgroup's k-range is at most this long: on the H200 they took the
// GEMMs with short k-ranges 1-4 % faster (K = 768, and the split-K dW at 683-1170 a layer), and the
// long ones 1-3 % slower (K >= 1536 a workgroup: the 16-byte stores' register quads cost the k-loop
// more than the end of a long k-loop gains; bench/README.md). Stream-K's partials are stored as vec4
// at any k-range: there it took the split dW of a GPT-2 step 2.5-7 % faster (768 x 768's 0.242 ->
// 0.225 ms) and the split dX and forward 1-2 % (bench/README.md, "Stream-K's partials as vec4").
#define MM_C_V4_MAX_K 1024
static int vec4_on(wg_ctx *ctx) {
    int v = mm_settings(ctx)->mm_vec4;
    return v == WG_AUTO ? MM_VEC4_ALONG_MN : v;
}
// WGTRAIN_MM_STREAMK: the GEMMs that split-K takes, as stream-K instead (auto: on). On the H200
// that took the GEMMs of a GPT-2 124M step from 138.7 to 137.4 ms and seeds' from 58.6 to 57.4
// (the dW 2-5 % faster, 768 x 768's 2 % slower; bench/README.md).
static int streamk_on(wg_ctx *ctx) { return mm_settings(ctx)->mm_streamk != 0; }
// WGTRAIN_MM_GROUP: row blocks per raster group (1 = plain row-major order; auto MM_GROUP)
#define MM_GROUP 8
static uint32_t group_setting(wg_ctx *ctx) {
    int v = mm_settings(ctx)->mm_group;
    return v == WG_AUTO ? MM_GROUP : v < 1 ? 1u : (uint32_t)v;
}

// ------------------------------------------------------------------ tile shapes and split-K
// threads: (bm/tm)*(bn/tn); pf: MM_PF; wx: MM_WX, the warp layout (0 row-major, else threads of a
// 32-lane group along n; a layout that does not divide the thread grid falls back to 0); pr:
// MM_PAIR, the lane index rotated so that pairs of lanes read the same workgroup-memory vec4
typedef struct { uint32_t bm, bn, bk, tm, tn, pf, wx, pr; } mm_tile;

static const mm_tile TILE_BIG = {128, 128, 16, 8, 8, 1, 0, 0};   // 64 outputs a thread: the FLOP workhorse
static const mm_tile TILE_BIG_K8 = {128, 128, 8, 8, 8, 1, 0, 0}; // same, for 32 KiB of workgroup memory
static const mm_tile TILE_SMALL = {64, 64, 16, 4, 4, 1, 0, 0};   // more workgroups for small outputs

static size_t tile_smem(mm_tile t) { return (size_t)2 * t.bk * ((t.bm / 4 + 1) + (t.bn / 4 + 1)) * 16; }
static uint32_t tile_threads(mm_tile t) { return (t.bm / t.tm) * (t.bn / t.tn); }
static uint32_t tile_warp(mm_tile t) {
    const uint32_t tx = t.bn / t.tn, ty = t.bm / t.tm;
    return t.wx && tx % t.wx == 0 && ty % (32 / t.wx) == 0 ? t.wx : 0;
}

typedef enum { MM_NT, MM_NN, MM_TN } mm_variant;  // matmul, matmul_t, matmul_at

// The tile table: per device and per op (the operands' layouts differ: matmul reads both along
// k, matmul_at neither), the tile of large outputs ("big") and of outputs of too few big tiles to
// fill the GPU ("small"). The first row whose pattern is a case-insensitive substring of the
// adapter's vendor, architecture or name, and whose tiles fit its workgroup memory and threads,
// is used; the last row (pattern "") is the default for every other GPU. A row comes from
// `bench_matmul --sweep-tiles` on that GPU (bench/README.md). Tiles from the tuning cache
// (`wgtrain tune`, wg_tune.h) take the row's place.
typedef struct { mm_tile big, small; } mm_tile_pair;
// tcopy: the forward and dinp through transposed copies of their operands stored along k, where
// the copies pay (fwd_layout_pick, dx_t_pick); edge_first: a direct GEMM's tiles in reverse order
// (edge_first_on)
static const struct { const char *match; mm_tile_pair op[3]; int tcopy, edge_first; } mm_tile_table[] = {  // op: mm_variant
    // NVIDIA (measured on the H200): 128x128x8 with 8x8 outputs a thread (127 registers, two
    // workgroups an SM) since the slice is straight-line code. matmul_t takes 128x64x8/8x8 (128
    // threads) for outputs of fewer big tiles than fill the GPU at a short K (plan_pick), and
    // the big tile with the partial waves' split-K at K >= 2048 and unsplit below (8192 x 768
    // at K = 768: 0.235 ms against 0.249 on 128x64x8/8x8; bench/README.md); matmul keeps the
    // big tile there too (0.241 ms against 0.277 on 128x64x8/8x4). A GPT-2 124M step's GEMMs
    // 225.7 ms -> 178.8 (64x128x8/8x8) -> 169.5 (128x64x8/8x4, 128x128x4/8x8) -> 159.5 (8x8
    // straight-line) -> 155.9 (split-K of partial waves) -> see bench/README.md
    // Paired lanes (pr) took matmul_t 0.7-1.5 % faster and the GEMMs through matmul_at's
    // layout 0-1.2 %, and the forward that reads both operands along k 1.7 % slower at fcproj's
    // shape (0.876 -> 0.891 ms): matmul keeps row-major lanes.
    {"nvidia", {{{128, 128, 8, 8, 8, 1, 0, 0}, {128, 128, 8, 8, 8, 1, 0, 0}},
                {{128, 128, 8, 8, 8, 1, 0, 1}, {128, 64, 8, 8, 8, 1, 0, 1}},
                {{128, 128, 8, 8, 8, 1, 0, 1}, {128, 128, 8, 8, 8, 1, 0, 1}}}, 1, 1},
    {"", {{{128, 128, 16, 8, 8, 1, 0, 0}, {64, 64, 16, 4, 4, 1, 0, 0}},
          {{128, 128, 16, 8, 8, 1, 0, 0}, {64, 64, 16, 4, 4, 1, 0, 0}},
          {{128, 128, 16, 8, 8, 1, 0, 0}, {64, 64, 16, 4, 4, 1, 0, 0}}}, 0, 0},
};
#define MM_TILE_ROWS (sizeof mm_tile_table / sizeof mm_tile_table[0])

static int ci_contains(const char *hay, const char *needle) {
    size_t n = strlen(needle);
    if (!n) return 1;
    for (; *hay; hay++)
        if (!strncasecmp(hay, needle, n)) return 1;
    return 0;
}
static uint64_t tile_count(mm_tile t, uint64_t M, uint64_t N) { return cdiv(M, t.bm) * cdiv(N, t.bn); }

// Fewer big tiles than this many means that some of a large GPU's cores would idle (an H200
// holds two 128x128 workgroups on each of its 132 SMs: 264). Such an output is split along K
// when K is long enough; otherwise it takes 64x64 tiles, 4x the workgroups at lower arithmetic
// intensity. WebGPU does not report the number of cores: the constants below are the H200's, and
// bench_matmul --sweep measures the choices.
#define MM_MIN_BIG_TILES 256
// Split-K: slices of at least MM_SPLITK_MIN_K (shorter ones would spend more on the partials'
// round trip through memory than they gain), at most MM_SPLITK_MAX. The count minimises a cost
// model in units of the ideal GEMM time: 1/efficiency of the last wave, as the workgroups of a
// split all do the same work (tiles·S against MM_GPU_SLOTS, the H200's 132 SMs x 2 workgroups:
// a multiple of its slot count at 1 a SM too), plus the partials' traffic: S layers of M·N
// floats written and read back (8 bytes each) against 2·M·N·K FLOPs, i.e. 4·S·F/(B·K) with F/B
// = MM_FLOP_PER_BYTE (FP32 FLOP/s of this kernel over memory bytes/s: ~30 T / ~3.5 T on the
// H200). An output of at least MM_MIN_BIG_TILES tiles is split only when that beats S = 1 (no
// traffic, its own last wave) by MM_SPLITK_GAIN and K is at least MM_SPLITK_WAVE_MIN_K: one of
// 1-2 partial waves, as 8192 x 768 is (384 tiles of 128², 1.45 waves: S = 2 makes 2.9). With a
// shorter K such an output takes the small tile instead (plan_pick): on the H200 at K = 768 the
// 128x64 tile ran 34.5 TFLOP/s against 30.0 split in 2 and 28.3 unsplit (matmul_t), while at
// K >= 2304 the split 128² tile won by 4-17 % (bench/README.md). In GPT-2 124M (B*T = 8192) this
// splits the dW of the four layer GEMMs (S = 7 for 768x768, 11 for 3072x768, 12 for 2304x768) and
// the 8192 x 768 outputs with K >= 2304 (S = 2; the lm_head's dX 11). WGTRAIN_MM_SPLITK=S forces S.
#define MM_SPLITK_MIN_K 256
#define MM_SPLITK_MAX 16
#define MM_GPU_SLOTS 264
#define MM_FLOP_PER_BYTE 10.0
#define MM_SPLITK_GAIN 0.9
#define MM_SPLITK_WAVE_MIN_K 2048
// The scratch of the partial tiles is capped (besides one binding): an output that would need
// more is computed without split.
#define MM_SCRATCH_MAX ((uint64_t)1 << 26)

// The workgroups of tile t that the GPU holds at once: MM_GPU_SLOTS at 256 threads a workgroup,
// more for smaller ones (the registers of a thread's 8x8 outputs bound them, not the threads).
static uint64_t tile_slots(mm_tile t) { return (uint64_t)MM_GPU_SLOTS * 256 / tile_threads(t); }
// The last wave's 1/efficiency: wgs workgroups on `slots` slots.
static double mm_waves(uint64_t wgs, uint64_t slots) { return (double)cdiv(wgs, slots) * slots / (double)wgs; }

// slots: tile_slots of the tile that the split runs on
static uint32_t splitk_auto(uint64_t tiles, uint32_t K, uint64_t slots) {
    if (K < 2 * MM_SPLITK_MIN_K || tiles == 0) return 0;
    uint32_t smax = (uint32_t)min_u64(MM_SPLITK_MAX, K / MM_SPLITK_MIN_K), best = 0;
    double best_cost = 0;
    for (uint32_t S = 2; S <= smax; S++) {
        double cost = mm_waves(tiles * S, slots) + 4.0 * S * MM_FLOP_PER_BYTE / K;
        if (!best || cost < best_cost) { best = S; best_cost = cost; }
    }
    if (tiles >= MM_MIN_BIG_TILES && (K < MM_SPLITK_WAVE_MIN_K || best_cost > MM_SPLITK_GAIN * mm_waves(tiles, slots)))
        return 0;
    return best;
}

typedef struct {
    mm_tile t;
    uint32_t splits;  // 0: direct; S >= 1: through the scratch in (up to) S slices
} mm_plan;

static int tile_fits(const wg_device_info *d, mm_tile t) {
    return tile_smem(t) <= d->limits.maxComputeWorkgroupStorageSize && tile_threads(t) <= d->limits.maxComputeInvocationsPerWorkgroup;
}
static mm_tile tile_of_spec(const wg_mm_tile_spec *q) {
    mm_tile t = {(uint32_t)q->bm, (uint32_t)q->bn, (uint32_t)q->bk, (uint32_t)q->tm, (uint32_t)q->tn, 1, 0, 0};
    return t;
}
static wg_mm_tile_spec spec_of_tile(mm_tile t) {
    wg_mm_tile_spec q = {(int)t.bm, (int)t.bn, (int)t.bk, (int)t.tm, (int)t.tn};
    return q;
}

// The row of the tile table for this device (the last, generic row when no other matches).
static size_t table_row(const wg_device_info *d, mm_variant var) {
    for (size_t i = 0; i + 1 < MM_TILE_ROWS; i++) {
        const mm_tile b = mm_tile_table[i].op[var].big, s = mm_tile_table[i].op[var].small;
        if (!ci_contains(d->vendor, mm_tile_table[i].match) && !ci_contains(d->architecture, mm_tile_table[i].match) &&
            !ci_contains(d->name, mm_tile_table[i].match))
            continue;
        if (tile_fits(d, b) && tile_fits(d, s)) return i;
    }
    return MM_TILE_ROWS - 1;
}

// The device's big and small tiles of op `var`: the tuned ones (wg_tune.h) when the context has
// them, else the table's row (fitting its workgroup memory and threads). *source says which.
static void device_tiles(wg_ctx *ctx, mm_variant var, mm_tile *big, mm_tile *small, const char **source) {
    const wg_device_info *d = wg_ctx_info(ctx);
    const wg_settings *s = mm_settings(ctx);
    const size_t i = table_row(d, var);
    if (s->mm_tuned) {  // tuned shapes, with the row's lane pairing
        mm_tile b = tile_of_spec(&s->mm_tuned_tile[var][0]), t = tile_of_spec(&s->mm_tuned_tile[var][1]);
        b.pr = mm_tile_table[i].op[var].big.pr, t.pr = mm_tile_table[i].op[var].small.pr;
        if (tile_fits(d, b) && tile_fits(d, t)) {  // wg_tune_load checked; a test may have set others
            *big = b, *small = t;
            if (source) *source = "tuned";
            return;
        }
    }
    const mm_tile b = mm_tile_table[i].op[var].big, t = mm_tile_table[i].op[var].small;
    if (tile_fits(d, b) && tile_fits(d, t)) {
        *big = b, *small = t;
        if (source) *source = i + 1 < MM_TILE_ROWS ? mm_tile_table[i].match : "default";
        return;
    }
    *big = tile_smem(TILE_BIG) <= d->limits.maxComputeWorkgroupStorageSize ? TILE_BIG : TILE_BIG_K8;  // WebGPU guarantees 16 KiB, 256 threads
    *small = TILE_SMALL;
    if (source) *source = "default";
}

int wg_mm_tile_fits(wg_ctx *ctx, const wg_mm_tile_spec *t) {
    return wg_mm_tile_spec_valid(t) && tile_fits(wg_ctx_info(ctx), tile_of_spec(t));
}

int wg_mm_table_tcopy(wg_ctx *ctx) { return mm_tile_table[table_row(wg_ctx_info(ctx), MM_NT)].tcopy; }
int wg_mm_table_edge_first(wg_ctx *ctx) { return mm_tile_table[table_row(wg_ctx_info(ctx), MM_NT)].edge_first; }

// A direct GEMM's tiles in reverse order (WGTRAIN_MM_EDGE_FIRST; auto: the table's row), so that
// its edge tiles (the last row and column blocks, which load through the tested fetch and run
// slower) start in the first wave instead of finishing the last one. On the H200 the lm_head's
// dW (2358 tiles, 8.9 waves, its last row block an edge) 13.36 -> 12.94 ms, its forward 13.34 ->
// 13.21, no other shape slower (bench/README.md, "Edge tiles first").
static int edge_first_on(wg_ctx *ctx) {
    const int s = mm_settings(ctx)->mm_edge_first;
    return s == WG_AUTO ? wg_mm_table_edge_first(ctx) : s;
}

int wg_mm_table_knows(wg_ctx *ctx) {
    for (int v = 0; v < 3; v++)
        if (table_row(wg_ctx_info(ctx), (mm_variant)v) + 1 < MM_TILE_ROWS) return 1;
    return 0;
}

const char *wg_mm_tiles(wg_ctx *ctx, int op, wg_mm_tile_spec *big, wg_mm_tile_spec *small) {
    WGT_ASSERT(op >= 0 && op < 3, "wg_mm_tiles: op is 0 (matmul), 1 (matmul_t) or 2 (matmul_at)");
    mm_tile b, s;
    const char *src = "default";
    device_tiles(ctx, (mm_variant)op, &b, &s, &src);
    *big = spec_of_tile(b), *small = spec_of_tile(s);
    return src;
}

// WGTRAIN_MM_TILE=BMxBNxBK/TMxTN, when it fits the device (said once on stderr when not).
static int spec_tile(wg_ctx *ctx, mm_tile *t) {
    const wg_settings *s = mm_settings(ctx);
    if (s->mm_tile != WG_MM_TILE_SPEC) return 0;
    const wg_mm_tile_spec *q = &s->mm_spec;
    mm_tile r = tile_of_spec(q);
    if (!tile_fits(wg_ctx_info(ctx), r)) {
        static int said;
        if (!said++)
            fprintf(stderr, "webgpu: WGTRAIN_MM_TILE=%dx%dx%d/%dx%d needs %zu bytes of workgroup memory and %u threads, "
                    "more than this device has; using the default tiles\n", q->bm, q->bn, q->bk, q->tm, q->tn,
                    tile_smem(r), tile_threads(r));
        return 0;
    }
    *t = r;
    return 1;
}

static mm_plan plan_pick(wg_ctx *ctx, mm_variant var, uint32_t M, uint32_t N, uint32_t K) {
    mm_tile big, small, spec;
    device_tiles(ctx, var, &big, &small, NULL);
    const int forced = spec_tile(ctx, &spec);
    if (forced) spec.pr = big.pr, big = small = spec;  // the spec's shape with the row's lane pairing
    const int pf = mm_settings(ctx)->mm_prefetch;
    if (pf != WG_AUTO) big.pf = small.pf = (uint32_t)pf;
    const int wx = mm_settings(ctx)->mm_warp;
    if (wx != WG_AUTO) big.wx = small.wx = (uint32_t)wx;
    const int pr = mm_settings(ctx)->mm_pair;
    if (pr != WG_AUTO) big.pr = small.pr = (uint32_t)pr;
    const wg_mm_tile_choice tile = forced ? WG_MM_TILE_SPEC : mm_settings(ctx)->mm_tile;
    mm_plan p = {tile == WG_MM_TILE_SMALL ? small : big, 0};
    uint64_t tiles = tile_count(p.t, M, N);
    int s = splitk_setting(ctx);
    if (K > 0 && s > 0) p.splits = (uint32_t)s;
    else if (K > 0 && s == WG_AUTO) p.splits = splitk_auto(tiles, K, tile_slots(p.t));
    // a K too short for the partial-wave split (MM_SPLITK_WAVE_MIN_K) whose small tiles alone fill
    // the GPU: those, unsplit, rather than the big tile's split, whose partials' round trip costs
    // more than the small tile loses (H200: 4096 x 768 at K = 768, matmul_t 0.141 -> 0.127 ms)
    if (tile == WG_MM_TILE_AUTO && s == WG_AUTO && p.splits && K < MM_SPLITK_WAVE_MIN_K &&
        (small.bm != big.bm || small.bn != big.bn) && tile_count(small, M, N) >= MM_MIN_BIG_TILES) {
        p.t = small;
        p.splits = 0;
        return p;
    }
    if (tile == WG_MM_TILE_AUTO && !p.splits && tiles < MM_MIN_BIG_TILES) p.t = small;
    // partial waves of big tiles that split-K does not take (K too short): the small tile when
    // it fills the GPU better by MM_SPLITK_GAIN, each counted on its own slots (H200: 8192 x 768
    // at K = 768 is 1.45 waves both of 128² tiles and of 128x64 ones at 128 threads, 4 an SM;
    // matmul_t ran 0.249 ms on the latter, 0.235 on the former; bench/README.md)
    if (tile == WG_MM_TILE_AUTO && !p.splits && tiles >= MM_MIN_BIG_TILES &&
        mm_waves(tile_count(small, M, N), tile_slots(small)) < MM_SPLITK_GAIN * mm_waves(tiles, tile_slots(p.t)))
        p.t = small;
    return p;
}

// How an operand is bound: f32, vec4<f32>, or f16 (native array<f16> or packed pairs in u32);
// B alone may also be a packed frozen weight of bf16 pairs or nf4 codes (f16 ones are F16_PACKED).
typedef enum { MM_OP_F32, MM_OP_V4, MM_OP_F16, MM_OP_F16_PACKED, MM_OP_BF16, MM_OP_NF4 } mm_optype;

// The operand's binding type, V4 flag and accessors (x = a or b; see 03_matmul.wgsl).
static int mm_operand_defs(char *buf, size_t cap, char x, mm_optype t) {
    const char *zero = "{return vec4<f32>(0.0);}";
    switch (t) {
    case MM_OP_V4:
        return snprintf(buf, cap, "alias MM_%c_T=vec4<f32>;const MM_%c_V4=true;fn mm_%c_at(i:u32)->vec4<f32>{return mm_%c[i];}"
                        "fn mm_%c_el(i:u32)->f32{return mm_%c[i/4u][i%%4u];}", x - 32, x - 32, x, x, x, x);
    case MM_OP_F16:
        return snprintf(buf, cap, "alias MM_%c_T=f16;const MM_%c_V4=false;fn mm_%c_at(i:u32)->vec4<f32>%s"
                        "fn mm_%c_el(i:u32)->f32{return f32(mm_%c[i]);}", x - 32, x - 32, x, zero, x, x);
    case MM_OP_F16_PACKED:
        return snprintf(buf, cap, "alias MM_%c_T=u32;const MM_%c_V4=false;fn mm_%c_at(i:u32)->vec4<f32>%s"
                        "fn mm_%c_el(i:u32)->f32{return unpack2x16float(mm_%c[i>>1u])[i&1u];}", x - 32, x - 32, x, zero,
                        x, x);
    case MM_OP_BF16:  // the top 16 bits of an f32
        return snprintf(buf, cap, "alias MM_%c_T=u32;const MM_%c_V4=false;fn mm_%c_at(i:u32)->vec4<f32>%s"
                        "fn mm_%c_el(i:u32)->f32{return bitcast<f32>((mm_%c[i>>1u]>>((i&1u)*16u))<<16u);}", x - 32,
                        x - 32, x, zero, x, x);
    case MM_OP_NF4:  // a level times its block's absmax (mm_s, binding 4; the uniform moves to 5)
        return snprintf(buf, cap, "alias MM_%c_T=u32;const MM_%c_V4=false;fn mm_%c_at(i:u32)->vec4<f32>%s"
                        "@group(0) @binding(4) var<storage,read> mm_s:array<f32>;"
                        "fn mm_%c_el(i:u32)->f32{return mm_lut[(mm_%c[i>>3u]>>((i&7u)*4u))&15u]*"
                        "mm_s[mm_p.s_off+((i-mm_p.%c_off)>>6u)];}", x - 32, x - 32, x, zero, x, x, x);
    default:
        return snprintf(buf, cap, "alias MM_%c_T=f32;const MM_%c_V4=false;fn mm_%c_at(i:u32)->vec4<f32>{return vec4<f32>(mm_%c[i]);}"
                        "fn mm_%c_el(i:u32)->f32{return mm_%c[i];}", x - 32, x - 32, x, x, x, x);
    }
}

// The module's constants (every entry point of 03_matmul.wgsl needs them to compile): the tile
// and how each operand is bound. An nf4 B operand also
// brings the workgroup table of its 16 levels, filled from nf4_levels (the C reference's) bit for bit.
#define MM_DEFINES_CAP 2048
// What is left of the defines buffer after n characters (a truncated append is a broken invariant).
static size_t mm_room(int n, size_t cap) {
    WGT_ASSERT(n >= 0 && (size_t)n < cap, "matmul defines overflow their buffer");
    return cap - (size_t)n;
}
static const char *mm_defines(mm_tile t, mm_optype ta, mm_optype tb, int c_v4, int sk, char *buf, size_t cap) {
    const int lut = tb == MM_OP_NF4;
    int n = snprintf(buf, cap, "%s\n",
                     c_v4 ? "alias MM_C_T=vec4<f32>;const MM_C_V4=true;fn mm_c_get(i:u32)->f32{return mm_c[i/4u][i%4u];}"
                            "fn mm_c_put(i:u32,v:f32){mm_c[i/4u][i%4u]=v;}fn mm_c_get4(i:u32)->vec4<f32>{return mm_c[i];}"
                            "fn mm_c_put4(i:u32,v:vec4<f32>){mm_c[i]=v;}"
                          : "alias MM_C_T=f32;const MM_C_V4=false;fn mm_c_get(i:u32)->f32{return mm_c[i];}"
                            "fn mm_c_put(i:u32,v:f32){mm_c[i]=v;}fn mm_c_get4(i:u32)->vec4<f32>{return vec4<f32>(0.0);}"
                            "fn mm_c_put4(i:u32,v:vec4<f32>){}");
    n += snprintf(buf + n, mm_room(n, cap),
                     "const MM_BM=%uu;const MM_BN=%uu;const MM_BK=%uu;const MM_TM=%uu;const MM_TN=%uu;const MM_WG=%uu;"
                     "const MM_PF=%s;const MM_WX=%uu;const MM_PAIR=%s;const MM_PB=%uu;const MM_LUT=%s;const MM_SK=%s;\n",
                     t.bm, t.bn, t.bk, t.tm, t.tn, tile_threads(t), t.pf ? "true" : "false", tile_warp(t),
                     t.pr ? "true" : "false", lut ? 5u : 4u,
                     lut ? "true" : "false", sk ? "true" : "false");
    n += mm_operand_defs(buf + n, mm_room(n, cap), 'a', ta);
    n += snprintf(buf + n, mm_room(n, cap), "\n");
    n += mm_operand_defs(buf + n, mm_room(n, cap), 'b', tb);
    if (lut) {
        n += snprintf(buf + n, mm_room(n, cap), "\nvar<workgroup> mm_lut:array<f32,16>;"
                      "fn mm_lut_init(lid:u32){if(lid<16u){mm_lut[lid]=bitcast<f32>(array<u32,16>(");
        for (int i = 0; i < 16; i++) {
            uint32_t bits;
            memcpy(&bits, &nf4_levels[i], 4);
            n += snprintf(buf + n, mm_room(n, cap), "0x%08xu%s", bits, i < 15 ? "," : ")[lid]);}}");
        }
    } else {
        n += snprintf(buf + n, mm_room(n, cap), "\nfn mm_lut_init(lid:u32){}");
    }
    WGT_ASSERT(n > 0 && (size_t)n < cap, "matmul defines overflow their buffer");
    return buf;
}

// Entry point `entry` of 03_matmul.wgsl compiled for tile t, operand types ta, tb, C bound as
// vec4 (c_v4) or f32, and stream-K's grid (sk) or the tiles' one.
static WGPUComputePipeline mm_pipeline(wg_ctx *ctx, const char *entry, mm_tile t, mm_optype ta, mm_optype tb, int c_v4,
                                       int sk) {
    char defs[MM_DEFINES_CAP];
    return wg_pipeline(ctx, "03_matmul.wgsl", entry, mm_defines(t, ta, tb, c_v4, sk, defs, sizeof defs));
}

static WGPUComputePipeline aux_pipeline(wg_ctx *ctx, const char *entry) {
    return mm_pipeline(ctx, entry, TILE_SMALL, MM_OP_F32, MM_OP_F32, 0, 0);
}

// ------------------------------------------------------------------ split-K scratch
// The partial tiles live in the runtime's split-K scratch slot, grown to a multiple of 1 Mi
// elements so that the similar sizes of one model settle at once.
#define SCRATCH_GRAIN ((size_t)1 << 20)

static uint64_t scratch_limit(wgt_backend *be) { return min_u64(wg_binding_limit(be), MM_SCRATCH_MAX); }

// The runtime's scratch slot `slot` of at least n elements (n <= scratch_limit), or NULL when it
// cannot be allocated.
static wgt_buf *grain_scratch(wgt_backend *be, wg_scratch_slot slot, size_t n, const char *label) {
    size_t want = (size_t)min_u64(cdiv(n, SCRATCH_GRAIN) * SCRATCH_GRAIN, scratch_limit(be));
    if (want < n) want = n;
    return wg_scratch(wg_of(be), slot, want, label);
}

// The split-K scratch of at least n elements (n <= scratch_limit).
static wgt_buf *mm_scratch(wgt_backend *be, size_t n) {
    wgt_buf *b = grain_scratch(be, WG_SCRATCH_SPLITK, n, "split-K partial tiles");
    WGT_ASSERT(b != NULL, "could not allocate the split-K scratch buffer (set WGTRAIN_MM_SPLITK=off)");
    return b;
}

// ------------------------------------------------------------------ the GEMM
// B as a packed frozen weight (matmul_lowbit, matmul_t_lowbit): one binding holds it whole, so only
// A and C are cut into chunks (of rows).
typedef struct {
    uint32_t fmt;       // WGT_LOWBIT_*
    wgt_view absmax;    // nf4's block scales
    uint64_t words, blocks;
    const char *label;  // matmul_lowbit or matmul_t_lowbit
} mm_lowbit;

static const char *const mm_entry[] = {"matmul", "matmul_t", "matmul_at"};

const char *wg_mm_op_name(int op) {
    WGT_ASSERT(op >= 0 && op < 3, "wg_mm_op_name: op is 0 (matmul), 1 (matmul_t) or 2 (matmul_at)");
    return mm_entry[op];
}

typedef struct {
    uint32_t M, N, K, flags;
    uint32_t a_off, b_off, c_off, bias_off;
    uint32_t lda, ldb, ldc, ks;
    uint32_t zs, p0, group, s_off;
} mm_params;

typedef struct {  // SKParams: P = 0 for split-K's S slices; stream-K's S = ns, P, tile and group
    uint32_t M, N, S, flags;
    uint32_t ldc, c_off, bias_off, zs;
    uint32_t P, bm, bn, group;
} sk_params;

enum { MMF_BIAS = 1, MMF_ACC = 2, MMF_EDGE_FIRST = 4 };

// Largest chunk of a dimension whose rows of length ld fit one binding (leaving room for the
// alignment remainder), rounded down to whole tiles when that leaves at least one.
static uint64_t chunk_rows(uint64_t lim, uint64_t ld, uint64_t tile) {
    uint64_t r = (lim - WGT_VIEW_ALIGN) / (ld ? ld : 1);
    WGT_ASSERT(r >= 1, "a single matrix row is larger than one storage binding");
    return r >= tile ? r / tile * tile : r;
}

// The window of rows [r0, r0+rows) x columns [c0, c0+cols) of a matrix with leading dimension ld.
// *v4 asks for a vec4 binding and says whether it was granted: the element offset and ld must be
// multiples of 4 and the binding is rounded up to whole vec4 (still inside the buffer), so the
// kernel's masked edge loads stay inside it.
static wg_bind mm_window(wgt_view v, uint64_t r0, uint64_t rows, uint64_t c0, uint64_t cols, uint64_t ld,
                         uint32_t *off, int *v4) {
    uint64_t start = r0 * ld + c0, count = rows && cols ? (rows - 1) * ld + cols : 0;
    if (*v4) {
        uint64_t abs = v.off + start, c4 = (count + 3) & ~(uint64_t)3;
        if (count == 0 || ld % 4 || abs % 4 || abs + c4 > v.buf->n_elems) *v4 = 0;
        else count = c4;
    }
    return wg_binding_window(v, start, count, off);
}

// The same window of an f16 matrix, whose view counts 4-byte words of two halves: rows, columns,
// ld and the returned *off are in halves. The window covers the words that hold the halves.
static wg_bind mm_window_h(wgt_view v, uint64_t r0, uint64_t rows, uint64_t c0, uint64_t cols, uint64_t ld,
                           uint32_t *off) {
    uint64_t start = r0 * ld + c0, count = rows && cols ? (rows - 1) * ld + cols : 0;
    uint64_t w0 = start / 2, w1 = count ? (start + count + 1) / 2 : w0;
    uint32_t rem;
    wg_bind b = wg_binding_window(v, w0, w1 - w0, &rem);
    *off = rem * 2 + (uint32_t)(start & 1);
    return b;
}

typedef struct {
    wgt_backend *be;
    mm_variant var;
    mm_plan plan;
    wgt_view a, b, c, bias;
    uint32_t lda, ldb, ldc;
    int accumulate, want_v4;
    uint32_t group;
    int a_h, b_h;                   // the operand is f16 (then mm_window_h, no vec4)
    const mm_lowbit *lb;            // B is a packed frozen weight (NULL: it is not)
    int streamk;                    // the split path as stream-K (WGTRAIN_MM_STREAMK)
    const char *label;              // the GEMM's dispatches in profiles (NULL: the variant's entry)
} mm_call;

// Stream-K's workgroups: the slots of the GPU (tile_slots), at most one a unit.
static uint64_t streamk_workgroups(mm_tile t, uint64_t units) { return min_u64(units, tile_slots(t)); }
// mm_sk_owner of 03_matmul.wgsl: the last of P workgroups over U units whose range starts at or before u.
static uint64_t sk_owner(uint64_t u, uint64_t P, uint64_t U) { return ((u + 1) * P - 1) / U; }
// The most workgroups that share one tile (the layers of partials stream-K needs).
static uint64_t streamk_layers(uint64_t tiles, uint64_t ns, uint64_t P) {
    uint64_t U = tiles * ns, most = 1;
    for (uint64_t t = 0; t < tiles; t++) {
        uint64_t k = sk_owner(t * ns + ns - 1, P, U) - sk_owner(t * ns, P, U) + 1;
        if (k > most) most = k;
    }
    return most;
}

// The bindings of the split paths' second stage (matmul_splitk_reduce for both: 0 C's
// window, 1 the n partials of the scratch, 2 the bias's window or a placeholder) and its flags and
// offsets. Returns whether it can read every binding as vec4 (N and each window's offset
// multiples of 4: its 4-column form, the same sums).
static int mm_stage2_binds(mm_call *g, wgt_view scr, uint64_t n, uint64_t m0, uint32_t mc, uint64_t n0, uint32_t nc,
                           int bias_here, int acc_here, uint32_t *flags, uint32_t *c_off, uint32_t *bias_off,
                           wg_bind rb[3]) {
    enum { S2_C, S2_PART, S2_BIAS };
    int v4 = nc % 4 == 0, v4_bias = v4;
    *flags = 0;
    *bias_off = 0;
    rb[S2_PART] = wg_b(scr, (size_t)n);
    if (bias_here) {
        *flags |= MMF_BIAS;
        rb[S2_BIAS] = mm_window(g->bias, 0, 1, n0, nc, nc, bias_off, &v4_bias);
    }
    if (acc_here) *flags |= MMF_ACC;
    rb[S2_C] = mm_window(g->c, m0, mc, n0, nc, g->ldc, c_off, &v4);
    v4 = v4 && v4_bias && *c_off % 4 == 0 && *bias_off % 4 == 0;
    if (!bias_here) rb[S2_BIAS] = wg_b(scr, v4 ? 4 : 0);  // placeholder (one vec4), read-only like the partials
    return v4;
}

// The split path as stream-K (mm_streamk of 03_matmul.wgsl, then matmul_splitk_reduce over each
// tile's pieces, labelled matmul_streamk_fixup in profiles): p and bd
// are mm_chunk's, set up for the partials but for C. Returns 0, having dispatched nothing, where
// the partials would not fit the scratch or the kernel's u32 unit arithmetic (then split-K runs).
static int mm_streamk_chunk(mm_call *g, mm_params *p, wg_bind *bd, int nbind, mm_optype ta, mm_optype tb,
                            const char *label, uint64_t m0, uint32_t mc, uint64_t n0, uint32_t nc, uint32_t kc,
                            int bias_here, int acc_here) {
    wg_ctx *ctx = wg_of(g->be);
    const mm_tile t = g->plan.t;
    const uint64_t tiles = tile_count(t, mc, nc), ns = cdiv(kc, t.bk), U = tiles * ns;
    if (U == 0) return 0;
    const uint64_t P = streamk_workgroups(t, U);
    if (P * U + P > UINT32_MAX) return 0;  // (u + 1)·P for every unit u < U
    const uint64_t per = (uint64_t)mc * nc, J = streamk_layers(tiles, ns, P);
    if (J * per > scratch_limit(g->be)) return 0;
    wgt_view scr = wgt_view_of(mm_scratch(g->be, (size_t)(J * per)), 0, (size_t)(J * per));
    p->ks = (uint32_t)ns;
    p->p0 = (uint32_t)P;
    p->ldc = nc;
    p->zs = (uint32_t)per;
    bd[0] = wg_b(scr, (size_t)(J * per));  // C: binding 0
    // the partials as vec4 wherever their width allows, whatever a workgroup's k-range (MM_C_V4_MAX_K)
    const int v4c = g->want_v4 && nc % 4 == 0;
    wg_dispatch3(ctx, label, mm_pipeline(ctx, mm_entry[g->var], t, ta, tb, v4c, 1), bd, nbind, p, sizeof *p,
                 (uint32_t)P, 1, 1);

    sk_params q = {mc, nc, (uint32_t)ns, 0, g->ldc, 0, 0, (uint32_t)per, (uint32_t)P, t.bm, t.bn, g->group};
    wg_bind rb[3];
    const int v4 = mm_stage2_binds(g, scr, J * per, m0, mc, n0, nc, bias_here, acc_here, &q.flags, &q.c_off, &q.bias_off, rb);
    const char *entry = v4 ? "matmul_splitk_reduce4" : "matmul_splitk_reduce";
    wg_dispatch(ctx, "matmul_streamk_fixup", aux_pipeline(ctx, entry), rb, 3, &q, sizeof q, wg_groups(per / (v4 ? 4 : 1), 256));
    return 1;
}

// One chunk: C[m0:+mc, n0:+nc] (+)= A[m0:+mc, k0:+kc]·B[k0:+kc, n0:+nc]
static void mm_chunk(mm_call *g, uint64_t m0, uint32_t mc, uint64_t n0, uint32_t nc, uint64_t k0, uint32_t kc) {
    wg_ctx *ctx = wg_of(g->be);
    const mm_tile t = g->plan.t;
    const int a_kc = g->var != MM_TN, b_kc = g->var == MM_NT, first_k = k0 == 0;
    const int bias_here = first_k && g->bias.buf != NULL;
    const int acc_here = g->accumulate || !first_k;
    mm_params p = {mc, nc, kc, 0, 0, 0, 0, 0, g->lda, g->ldb, g->ldc, kc, 0, 0, g->group, 0};
    enum { MM_C, MM_A, MM_B, MM_BIAS, MM_S };  // 03_matmul.wgsl bindings: outputs first; MM_S: nf4's absmax
    wg_bind bd[5];
    const int v4ok = g->want_v4 && t.bk % 8 == 0;  // vec4 slots need 8-deep k-slices
    const int along_mn = g->want_v4 == MM_VEC4_ALONG_MN;  // only operands stored along m or n
    int v4a = v4ok && !g->a_h && g->want_v4 != MM_VEC4_B_ALONG_N && (!along_mn || !a_kc),
        v4b = v4ok && !g->b_h && (g->want_v4 == MM_VEC4_ALL || !b_kc);
    if (g->a_h) bd[MM_A] = a_kc ? mm_window_h(g->a, m0, mc, k0, kc, g->lda, &p.a_off)
                                : mm_window_h(g->a, k0, kc, m0, mc, g->lda, &p.a_off);
    else if (a_kc) bd[MM_A] = mm_window(g->a, m0, mc, k0, kc, g->lda, &p.a_off, &v4a);
    else bd[MM_A] = mm_window(g->a, k0, kc, m0, mc, g->lda, &p.a_off, &v4a);
    const mm_lowbit *lb = g->lb;
    if (lb) {  // a packed weight, bound whole (mm_gemm keeps it one chunk): i = b_off + element
        uint32_t rem;
        bd[MM_B] = wg_binding_window(g->b, 0, lb->words, &rem);
        p.b_off = rem * (lb->fmt == WGT_LOWBIT_NF4 ? 8u : 2u);
        if (lb->fmt == WGT_LOWBIT_NF4) bd[MM_S] = wg_binding_window(lb->absmax, 0, lb->blocks, &p.s_off);
    } else if (g->b_h) bd[MM_B] = b_kc ? mm_window_h(g->b, n0, nc, k0, kc, g->ldb, &p.b_off)
                                : mm_window_h(g->b, k0, kc, n0, nc, g->ldb, &p.b_off);
    else if (b_kc) bd[MM_B] = mm_window(g->b, n0, nc, k0, kc, g->ldb, &p.b_off, &v4b);
    else bd[MM_B] = mm_window(g->b, k0, kc, n0, nc, g->ldb, &p.b_off, &v4b);
    bd[MM_BIAS] = wg_b(bd[MM_A].v, 0);  // an unread placeholder; read-only like A, so no usage conflict
    const mm_optype h = wg_f16_native(ctx) ? MM_OP_F16 : MM_OP_F16_PACKED;
    static const mm_optype lowbit_type[] = {MM_OP_F16_PACKED, MM_OP_BF16, MM_OP_NF4};  // by WGT_LOWBIT_*
    const mm_optype ta = g->a_h ? h : v4a ? MM_OP_V4 : MM_OP_F32,
                    tb = lb ? lowbit_type[lb->fmt] : g->b_h ? h : v4b ? MM_OP_V4 : MM_OP_F32;
    const uint32_t gx = (nc + t.bn - 1) / t.bn, gy = (mc + t.bm - 1) / t.bm;
    const int nbind = tb == MM_OP_NF4 ? 5 : 4;  // with the absmax the uniform follows at binding 5
    const char *label = lb ? lb->label : g->label ? g->label : mm_entry[g->var];
    // C, the output or the split-K partials, as vec4 where its width allows (and, for the output,
    // its row stride and offset: mm_window), for workgroups of a short k-range (MM_C_V4_MAX_K)
    const int v4c_width = g->want_v4 && nc % 4 == 0;

    if (!g->plan.splits) {  // direct: the kernel writes C
        if (bias_here) { p.flags |= MMF_BIAS; bd[MM_BIAS] = wg_binding_window(g->bias, n0, nc, &p.bias_off); }
        if (acc_here) p.flags |= MMF_ACC;
        if (edge_first_on(ctx)) p.flags |= MMF_EDGE_FIRST;  // the edge tiles in the first wave
        int v4c = v4c_width && kc <= MM_C_V4_MAX_K;
        bd[MM_C] = mm_window(g->c, m0, mc, n0, nc, g->ldc, &p.c_off, &v4c);
        wg_dispatch3(ctx, label, mm_pipeline(ctx, mm_entry[g->var], t, ta, tb, v4c, 0), bd, nbind, &p, sizeof p, gx, gy, 1);
        return;
    }
    if (g->streamk && mm_streamk_chunk(g, &p, bd, nbind, ta, tb, label, m0, mc, n0, nc, kc, bias_here, acc_here)) return;

    // split-K: S layers of partial tiles [S, mc, nc] in the scratch
    const uint64_t per = (uint64_t)mc * nc;
    uint64_t ktiles = cdiv(kc, t.bk), S = min_u64(g->plan.splits, ktiles);
    S = min_u64(S, scratch_limit(g->be) / per);  // >= 1: checked for the largest chunk
    const uint64_t ks = cdiv(ktiles, S) * t.bk;
    S = cdiv(kc, ks);  // no empty slices
    wgt_view scr = wgt_view_of(mm_scratch(g->be, (size_t)(S * per)), 0, (size_t)(S * per));
    p.ks = (uint32_t)ks;
    p.ldc = nc;
    p.zs = mc * nc;
    bd[MM_C] = wg_b(scr, (size_t)(S * per));  // at offset 0, S·per a multiple of 4 when nc is
    const int v4c = v4c_width && ks <= MM_C_V4_MAX_K;
    wg_dispatch3(ctx, label, mm_pipeline(ctx, mm_entry[g->var], t, ta, tb, v4c, 0), bd, nbind, &p, sizeof p, gx, gy,
                 (uint32_t)S);

    // the reduction 4 columns a thread where N and every window's offset allow it (same sums)
    sk_params q = {mc, nc, (uint32_t)S, 0, g->ldc, 0, 0, p.zs, 0, 0, 0, 0};
    wg_bind rb[3];
    const int v4 = mm_stage2_binds(g, scr, S * per, m0, mc, n0, nc, bias_here, acc_here, &q.flags, &q.c_off, &q.bias_off, rb);
    const char *entry = v4 ? "matmul_splitk_reduce4" : "matmul_splitk_reduce";
    wg_dispatch(ctx, "matmul_splitk_reduce", aux_pipeline(ctx, entry), rb, 3, &q, sizeof q,
                wg_groups((uint64_t)mc * nc / (v4 ? 4 : 1), 256));
}

// C[M,N] (=|+=) A[M,K]·B[K,N] (+ bias[N]). a_kc/b_kc follow from the variant. The kernel indexes
// each binding window with u32, which every window (at most one binding) satisfies.
// a_h, b_h: that operand is f16 (its view counts words of two halves; chunks of it fit a binding
// whenever the f32 chunks below do). lb: B is a packed frozen weight (NULL: it is not).
static void mm_gemm(wgt_backend *be, mm_variant var, wgt_view c, wgt_view a, wgt_view b, wgt_view bias, uint32_t M,
                    uint32_t N, uint32_t K, uint32_t lda, uint32_t ldb, uint32_t ldc, int accumulate, int a_h, int b_h,
                    const mm_lowbit *lb, const char *label) {
    wg_ctx *ctx = wg_of(be);
    if (M == 0 || N == 0) return;
    const int a_kc = var != MM_TN, b_kc = var == MM_NT;
    mm_call g = {be, var, plan_pick(ctx, var, M, N, K), a, b, c, bias, lda, ldb, ldc, accumulate, vec4_on(ctx),
                 group_setting(ctx), a_h, b_h, lb, streamk_on(ctx), label};
    const mm_tile t = g.plan.t;

    // chunk sizes: every operand's window must fit one binding; grids stay within 65535 a side
    uint64_t lim = wg_binding_limit(be);
    uint64_t maxd = wg_ctx_info(ctx)->limits.maxComputeWorkgroupsPerDimension;
    uint64_t cM = min_u64(M, maxd * t.bm), cN = min_u64(N, maxd * t.bn), cK = K ? K : 1;
    cM = min_u64(cM, chunk_rows(lim, ldc, t.bm));
    if (a_kc) cM = min_u64(cM, chunk_rows(lim, lda, t.bm));
    else cK = min_u64(cK, chunk_rows(lim, lda, t.bk));
    if (lb) WGT_ASSERT(cN == N && lb->words + WGT_VIEW_ALIGN <= lim && lb->blocks + WGT_VIEW_ALIGN <= lim,
                       "lowbit GEMM: the packed weight must be one chunk within one storage binding");
    else if (b_kc) cN = min_u64(cN, chunk_rows(lim, ldb, t.bn));
    else cK = min_u64(cK, chunk_rows(lim, ldb, t.bk));

    // the split path needs room for one layer of the largest chunk
    if (g.plan.splits && cM * cN > scratch_limit(be)) g.plan.splits = 0;

    for (uint64_t m0 = 0; m0 < M; m0 += cM) {
        uint32_t mc = (uint32_t)min_u64(cM, M - m0);
        for (uint64_t n0 = 0; n0 < N; n0 += cN) {
            uint32_t nc = (uint32_t)min_u64(cN, N - n0);
            uint64_t k0 = 0;
            do {
                uint32_t kc = (uint32_t)min_u64(cK, K - k0);
                mm_chunk(&g, m0, mc, n0, nc, k0, kc);
                k0 += kc;
            } while (k0 < K);
        }
    }
}

// ------------------------------------------------------------------ GEMMs on a packed frozen weight
// W [OC, C] as WW words (and NB absmax values for nf4): out = inp·Wᵀ + bias, dinp = dout·W.
static void lowbit_gemm(wgt_backend *be, mm_variant var, const char *label, wgt_view c, wgt_view a, wgt_view weight,
                        wgt_view absmax, wgt_view bias, uint32_t N, uint32_t C, uint32_t OC, uint32_t fmt, uint32_t WW,
                        uint32_t NB) {
    const uint64_t n = (uint64_t)C * OC, words = wgt_lowbit_words(fmt, n), blocks = wgt_lowbit_blocks(fmt, n);
    WGT_ASSERT(fmt <= WGT_LOWBIT_NF4, "lowbit GEMM: fmt must be 0 (f16), 1 (bf16) or 2 (nf4)");
    WGT_ASSERT(words <= WW, "lowbit GEMM: the weight's WW words hold fewer than OC x C values");
    WGT_ASSERT(fmt != WGT_LOWBIT_NF4 || (absmax.buf && blocks <= NB),
               "lowbit GEMM: an nf4 weight needs absmax, NB >= ceil(OC x C / 64)");
    // the kernel's element index b_off + e (b_off < 512) stays within u32
    WGT_ASSERT(n <= UINT32_MAX - 1024, "lowbit GEMM: a weight above 2^32 elements");
    mm_lowbit lb = {fmt, absmax, words, blocks, label};
    wgt_view none = wgt_view_none();
    if (var == MM_NT) mm_gemm(be, MM_NT, c, a, weight, bias, N, OC, C, C, C, OC, 0, 0, 0, &lb, NULL);
    else mm_gemm(be, MM_NN, c, a, weight, none, N, C, OC, OC, C, C, 0, 0, 0, &lb, NULL);
}

void wg_matmul_lowbit(wgt_backend *be, wgt_view out, wgt_view inp, wgt_view weight, wgt_view absmax, wgt_view bias,
                      uint32_t N, uint32_t C, uint32_t OC, uint32_t fmt, uint32_t WW, uint32_t NB) {
    lowbit_gemm(be, MM_NT, "matmul_lowbit", out, inp, weight, absmax, bias, N, C, OC, fmt, WW, NB);
}

void wg_matmul_t_lowbit(wgt_backend *be, wgt_view dinp, wgt_view dout, wgt_view weight, wgt_view absmax, uint32_t N,
                        uint32_t C, uint32_t OC, uint32_t fmt, uint32_t WW, uint32_t NB) {
    lowbit_gemm(be, MM_NN, "matmul_t_lowbit", dinp, dout, weight, absmax, wgt_view_none(), N, C, OC, fmt, WW, NB);
}

// ------------------------------------------------------------------ the forward and matmul_t through transposed copies
// The kernel reads an operand stored along m or n as one 16-byte load a vec4 of the tile, which
// lands in workgroup memory as it is; one stored along k (both of the forward's: inp [M, K] and
// W [N, K]) as 4 scalar loads a vec4. So the forward has three layouts (bench/README.md, "The
// forward with its weight alone transposed"):
//   direct       inp and W along k (matmul's own)
//   W copied     inp along k, Wᵀ along n: matmul_t's layout, after a copy of W
//   both copied  inpᵀ along m, Wᵀ along n: matmul_at's layout, after copies of both
// each copy into a scratch (matmul_transpose, rows padded to multiples of 4 so that they load as
// vec4): the same products, added in the same k order. Against the direct GEMM's time, the copy
// of W [N, K] moves 8·N·K bytes against the GEMM's 2·M·N·K FLOPs, 4·F/B/M of its time, and inp's
// 4·F/B/N (F/B: MM_FLOP_PER_BYTE). Where the tile table's row says so (tcopy), auto takes W's copy
// where it costs less than matmul_t's layout gains (MM_FWD_W_GAIN, measured on the H200), and
// inp's too where that costs less than matmul_at's layout gains over matmul_t's (MM_FWD_TW_GAIN:
// the wide outputs, where the lm_head and 4096³ ran faster with both copies, and qkv, fc and
// attproj faster with W's alone). MM_FWD_T_GAIN: both copies against the direct GEMM, where W's
// copy alone is not taken.
#define MM_FWD_W_GAIN 0.05
#define MM_FWD_TW_GAIN 0.011
#define MM_FWD_T_GAIN 0.05
#define TR_BLOCK 32  // TR_B of 03_matmul.wgsl: one workgroup transposes a 32 x 32 block (64 x 64 as vec4)

typedef struct { uint32_t R, C, ldi, ldo, x_off, out_off, p0, p1; } tr_params;
typedef struct { uint32_t R1, R2, C, ldi, ldo1, ldo2, nb1, x1_off, x2_off, out1_off, out2_off, p0; } tr4_params;

static uint64_t round4(uint64_t x) { return (x + 3) & ~(uint64_t)3; }

// Whether copies of an [M, K] and an [N2, K] operand (N2 = 0: the first alone) fit: the scratch
// (one binding), each input one binding window, the grids a dimension.
static int tcopy_fits(wgt_backend *be, uint32_t M, uint32_t N2, uint32_t K) {
    wg_ctx *ctx = wg_of(be);
    if (M == 0 || K == 0) return 0;
    const uint64_t lim = wg_binding_limit(be), maxd = wg_ctx_info(ctx)->limits.maxComputeWorkgroupsPerDimension;
    if ((uint64_t)M * K + WGT_VIEW_ALIGN > lim || (uint64_t)N2 * K + WGT_VIEW_ALIGN > lim) return 0;
    if ((round4(M) + round4(N2)) * K > scratch_limit(be)) return 0;  // no overflow: M·K, N2·K within a binding
    return cdiv(K, TR_BLOCK) <= maxd && cdiv(M, TR_BLOCK) <= maxd && cdiv(N2, TR_BLOCK) <= maxd;  // (the 64-blocks' fewer)
}

typedef enum { MM_FWD_DIRECT, MM_FWD_BOTH, MM_FWD_W } mm_fwd_layout;

// The layout of out[M,N] = inp[M,K]·W[N,K]ᵀ (WGTRAIN_MM_TCOPY: 1 both copies wherever they fit,
// w W's alone wherever it fits, 0 neither, auto by the table's row and the cost model above).
static mm_fwd_layout fwd_layout_pick(wgt_backend *be, uint32_t M, uint32_t N, uint32_t K) {
    wg_ctx *ctx = wg_of(be);
    const int s = mm_settings(ctx)->mm_tcopy;
    if (s == 0 || M == 0 || N == 0) return MM_FWD_DIRECT;
    const int both = tcopy_fits(be, M, N, K), w = tcopy_fits(be, N, 0, K);
    if (s == 1) return both ? MM_FWD_BOTH : MM_FWD_DIRECT;
    if (s == WG_TCOPY_W) return w ? MM_FWD_W : MM_FWD_DIRECT;
    if (!wg_mm_table_tcopy(ctx)) return MM_FWD_DIRECT;
    const double cw = 4.0 * MM_FLOP_PER_BYTE / M, ca = 4.0 * MM_FLOP_PER_BYTE / N;  // W's copy, inp's
    if (w && cw < MM_FWD_W_GAIN) return both && ca < MM_FWD_TW_GAIN ? MM_FWD_BOTH : MM_FWD_W;
    return both && cw + ca < MM_FWD_T_GAIN ? MM_FWD_BOTH : MM_FWD_DIRECT;
}

// out[c, r] = x[r, c]: x [R, C] dense, out [C, ldo] (ldo >= R, a multiple of 4; its columns from
// R are not written).
static void mm_transpose(wg_ctx *ctx, wgt_view out, uint64_t ldo, wgt_view x, uint32_t R, uint32_t C) {
    tr_params p = {R, C, C, (uint32_t)ldo, 0, 0, 0, 0};
    wg_bind bd[2] = {wg_binding_window(out, 0, (uint64_t)C * ldo, &p.out_off),
                     wg_binding_window(x, 0, (uint64_t)R * C, &p.x_off)};
    wg_dispatch3(ctx, "matmul_transpose", aux_pipeline(ctx, "matmul_transpose"), bd, 2, &p, sizeof p,
                 (uint32_t)cdiv(C, TR_BLOCK), (uint32_t)cdiv(R, TR_BLOCK), 1);
}

// Both copies in one dispatch, as vec4 (matmul_transpose4): inpᵀ [K, lda] at the start of out,
// then Wᵀ [K, ldb] (none when N = 0), each row's columns from M (N) to the next multiple of 4
// zeros. 0, having dispatched nothing, where K or an input window's offset is not a multiple of 4.
static int mm_transpose_pair(wg_ctx *ctx, wgt_view out, uint64_t lda, uint64_t ldb, wgt_view inp, uint32_t M,
                             wgt_view w, uint32_t N, uint32_t K) {
    const uint64_t na = lda * K, nb1 = cdiv(M, 2 * TR_BLOCK), nb2 = cdiv(N, 2 * TR_BLOCK);
    if (K % 4 || nb1 + nb2 > wg_ctx_info(ctx)->limits.maxComputeWorkgroupsPerDimension) return 0;
    tr4_params p = {M, N, K, K, (uint32_t)lda, (uint32_t)ldb, (uint32_t)nb1, 0, 0, 0, 0, 0};
    int v4o = 1, v4a = 1, v4b = 1;
    wg_bind bd[3];
    bd[0] = mm_window(out, 0, 1, 0, na + ldb * K, na + ldb * K, &p.out1_off, &v4o);
    bd[1] = mm_window(inp, 0, M, 0, K, K, &p.x1_off, &v4a);
    if (N) bd[2] = mm_window(w, 0, N, 0, K, K, &p.x2_off, &v4b);
    else bd[2] = bd[1], p.x2_off = p.x1_off;  // one copy: x2 is a read-only stand-in, never read
    if (!v4o || !v4a || !v4b || p.out1_off % 4 || p.x1_off % 4 || p.x2_off % 4) return 0;
    p.out2_off = p.out1_off + (uint32_t)na;
    wg_dispatch3(ctx, "matmul_transpose", aux_pipeline(ctx, "matmul_transpose4"), bd, 3, &p, sizeof p,
                 (uint32_t)cdiv(K, 2 * TR_BLOCK), (uint32_t)(nb1 + nb2), 1);
    return 1;
}

// 0, having dispatched nothing, when the scratch could not be allocated (the direct path runs).
static int matmul_fwd_t(wgt_backend *be, wgt_view out, wgt_view inp, wgt_view weight, wgt_view bias, uint32_t M,
                        uint32_t K, uint32_t N) {
    wg_ctx *ctx = wg_of(be);
    const uint64_t lda = round4(M), ldb = round4(N), na = lda * K, nb = ldb * K;
    wgt_buf *scr = grain_scratch(be, WG_SCRATCH_TCOPY, (size_t)(na + nb), "the GEMMs' transposed operands");
    if (!scr) return 0;
    wgt_view at = wgt_view_of(scr, 0, (size_t)na), bt = wgt_view_of(scr, (size_t)na, (size_t)nb);
    if (!mm_transpose_pair(ctx, wgt_view_of(scr, 0, (size_t)(na + nb)), lda, ldb, inp, M, weight, N, K)) {
        mm_transpose(ctx, at, lda, inp, M, K);     // inpᵀ [K, lda]
        mm_transpose(ctx, bt, ldb, weight, N, K);  // Wᵀ [K, ldb]
    }
    mm_gemm(be, MM_TN, out, at, bt, bias, M, N, K, (uint32_t)lda, (uint32_t)ldb, N, 0, 0, 0, NULL, "matmul");
    return 1;
}

// dinp = dout·W with dout copied transposed (matmul_transpose4 with no second operand): the GEMM
// in matmul_at's layout with W as it is (stored along n). The copy moves 8·M·K bytes against
// 2·M·N·K FLOPs, 4·F/B/N of the GEMM's time. matmul_t reads W as vec4 already, so the layouts
// differ by less than for the forward: on the H200 2 % at K = 768 (GPT-2's fcproj dX, N = 3072,
// lost 0.3-1.4 % with the copy) and 5 % at 4096³ (4 % faster with it). Hence a bound of its own:
// the copy under 1 % by the model, N >= 4000.
#define MM_DX_T_GAIN 0.01
// (WGTRAIN_MM_TCOPY: 1 wherever it fits, 0 and w never, auto by the table's row and the model)
static int dx_t_pick(wgt_backend *be, uint32_t M, uint32_t N, uint32_t K) {
    wg_ctx *ctx = wg_of(be);
    const int s = mm_settings(ctx)->mm_tcopy;
    if (N == 0 || s == 0 || s == WG_TCOPY_W || !tcopy_fits(be, M, 0, K)) return 0;
    return s == 1 || (wg_mm_table_tcopy(ctx) && 4.0 * MM_FLOP_PER_BYTE / N < MM_DX_T_GAIN);
}

// x [R, K] copied transposed into the scratch: xᵀ [K, round4(R)] (rows padded with zeros); a view
// without a buffer, having dispatched nothing, when the scratch could not be allocated.
static wgt_view transposed_copy(wgt_backend *be, wgt_view x, uint32_t R, uint32_t K) {
    wg_ctx *ctx = wg_of(be);
    const uint64_t ld = round4(R), n = ld * K;
    wgt_buf *scr = grain_scratch(be, WG_SCRATCH_TCOPY, (size_t)n, "the GEMMs' transposed operands");
    if (!scr) return wgt_view_none();
    wgt_view xt = wgt_view_of(scr, 0, (size_t)n);
    if (!mm_transpose_pair(ctx, xt, ld, 0, x, R, x, 0, K)) mm_transpose(ctx, xt, ld, x, R, K);
    return xt;
}

static int matmul_t_t(wgt_backend *be, wgt_view dinp, wgt_view dout, wgt_view weight, uint32_t M, uint32_t N,
                      uint32_t K) {
    wgt_view at = transposed_copy(be, dout, M, K);  // doutᵀ [K, lda]
    if (!at.buf) return 0;
    mm_gemm(be, MM_TN, dinp, at, weight, wgt_view_none(), M, N, K, (uint32_t)round4(M), N, N, 0, 0, 0, NULL, "matmul_t");
    return 1;
}

// The forward in matmul_t's layout: W copied transposed (Wᵀ [K, ldb]), inp read as it is. 0,
// having dispatched nothing, when the scratch could not be allocated (the direct path runs).
static int matmul_fwd_w(wgt_backend *be, wgt_view out, wgt_view inp, wgt_view weight, wgt_view bias, uint32_t M,
                        uint32_t K, uint32_t N) {
    wgt_view bt = transposed_copy(be, weight, N, K);  // Wᵀ [K, ldb]
    if (!bt.buf) return 0;
    mm_gemm(be, MM_NN, out, inp, bt, bias, M, N, K, K, (uint32_t)round4(N), N, 0, 0, 0, NULL, "matmul");
    return 1;
}

static void matmul_fwd(wgt_backend *be, wgt_view out, wgt_view inp, wgt_view weight, wgt_view bias, uint32_t N,
                       uint32_t C, uint32_t OC, int h) {
    const mm_fwd_layout lay = h ? MM_FWD_DIRECT : fwd_layout_pick(be, N, OC, C);
    if (lay == MM_FWD_W && matmul_fwd_w(be, out, inp, weight, bias, N, C, OC)) return;
    if (lay == MM_FWD_BOTH && matmul_fwd_t(be, out, inp, weight, bias, N, C, OC)) return;
    mm_gemm(be, MM_NT, out, inp, weight, bias, N, OC, C, C, C, OC, 0, h, h, NULL, NULL);
}
void wg_matmul(wgt_backend *be, wgt_view out, wgt_view inp, wgt_view weight, wgt_view bias, uint32_t N, uint32_t C,
               uint32_t OC) {
    matmul_fwd(be, out, inp, weight, bias, N, C, OC, 0);
}
void wg_matmul_f16(wgt_backend *be, wgt_view out, wgt_view inp, wgt_view weight, wgt_view bias, uint32_t N, uint32_t C,
                   uint32_t OC) {
    matmul_fwd(be, out, inp, weight, bias, N, C, OC, 1);
}

void wg_matmul_t(wgt_backend *be, wgt_view dinp, wgt_view dout, wgt_view weight, uint32_t N, uint32_t C, uint32_t OC) {
    if (dx_t_pick(be, N, C, OC) && matmul_t_t(be, dinp, dout, weight, N, C, OC)) return;
    wgt_view none = wgt_view_none();
    mm_gemm(be, MM_NN, dinp, dout, weight, none, N, C, OC, OC, C, C, 0, 0, 0, NULL, NULL);
}
void wg_matmul_t_f16(wgt_backend *be, wgt_view dinp, wgt_view dout, wgt_view weight, uint32_t N, uint32_t C, uint32_t OC) {
    wgt_view none = wgt_view_none();
    mm_gemm(be, MM_NN, dinp, dout, weight, none, N, C, OC, OC, C, C, 0, 0, 1, NULL, NULL);
}

typedef struct { uint32_t R, N, ld, x_off, out_off, p0, p1, p2; } colsum_params;

static void matmul_at_any(wgt_backend *be, wgt_view dweight, wgt_view dbias, wgt_view dout, wgt_view inp, uint32_t N,
                          uint32_t C, uint32_t OC, int h);
void wg_matmul_at(wgt_backend *be, wgt_view dweight, wgt_view dbias, wgt_view dout, wgt_view inp, uint32_t N,
                  uint32_t C, uint32_t OC) {
    matmul_at_any(be, dweight, dbias, dout, inp, N, C, OC, 0);
}
void wg_matmul_at_f16(wgt_backend *be, wgt_view dweight, wgt_view dbias, wgt_view dout, wgt_view inp, uint32_t N,
                      uint32_t C, uint32_t OC) {
    matmul_at_any(be, dweight, dbias, dout, inp, N, C, OC, 1);
}

// ------------------------------------------------------------------ column sums in two stages
typedef struct { uint32_t R, N, ld, x_off, out_off, nchunk, part_off, p0; } cs4_params;

wgt_buf *wg_colsum_scratch(wgt_backend *be, uint64_t n) {
    if (n == 0 || n > wg_binding_limit(be)) return NULL;
    return wg_scratch(wg_of(be), WG_SCRATCH_COLSUM, (size_t)n, "column-sum partials");
}

void wg_colsum_finish(wgt_backend *be, const char *label, wgt_view out, wgt_view part, uint32_t N, uint32_t nchunk,
                      uint32_t part_off) {
    wg_ctx *ctx = wg_of(be);
    cs4_params p = {0, N, 0, 0, 0, nchunk, part_off, 0};
    wg_bind bd[2] = {wg_binding_window(out, 0, N, &p.out_off), wg_b(part, (size_t)part_off + (size_t)nchunk * N)};
    WGT_ASSERT(N % 4 == 0 && part_off % 4 == 0 && p.out_off % 4 == 0, "two-stage column sums need vec4-aligned widths");
    WGT_ASSERT(cdiv(N, 64) <= wg_ctx_info(ctx)->limits.maxComputeWorkgroupsPerDimension,
               "two-stage column sums: the callers check the 64-column blocks against the grid limit");
    wg_dispatch3(ctx, label, aux_pipeline(ctx, "matmul_colsum_finish"), bd, 2, &p, sizeof p, (uint32_t)cdiv(N, 64), 1, 1);
}

// dbias[OC] += the column sums of dout[rc, OC] (a window of rows r0..): in two stages where OC and
// the windows are vec4-aligned and the partials fit, else by matmul_at_dbias. 1 when it ran.
static int dbias_two_stage(wgt_backend *be, wgt_view dbias, wgt_view dout, uint64_t r0, uint32_t rc, uint32_t OC) {
    wg_ctx *ctx = wg_of(be);
    const uint64_t nchunk = cdiv(rc, WG_COLSUM_ROWS), blocks = cdiv(OC, 64);
    const uint32_t maxd = wg_ctx_info(ctx)->limits.maxComputeWorkgroupsPerDimension;
    if (OC % 4 || nchunk > maxd || blocks > maxd) return 0;
    cs4_params p = {rc, OC, OC, 0, 0, (uint32_t)nchunk, 0, 0};
    wg_bind bx = wg_binding_window(dout, r0 * OC, (uint64_t)rc * OC, &p.x_off);
    uint32_t out_off;
    wg_binding_window(dbias, 0, OC, &out_off);
    if (p.x_off % 4 || out_off % 4) return 0;
    wgt_buf *part = wg_colsum_scratch(be, nchunk * OC);
    if (!part) return 0;
    wgt_view pv = wgt_view_of(part, 0, (size_t)(nchunk * OC));
    wg_bind bd[2] = {wg_b(pv, (size_t)(nchunk * OC)), bx};
    wg_dispatch3(ctx, "matmul_at_dbias", aux_pipeline(ctx, "matmul_colsum_part"), bd, 2, &p, sizeof p, (uint32_t)blocks,
                 (uint32_t)nchunk, 1);
    wg_colsum_finish(be, "matmul_at_dbias", dbias, pv, OC, (uint32_t)nchunk, 0);
    return 1;
}

static void matmul_at_any(wgt_backend *be, wgt_view dweight, wgt_view dbias, wgt_view dout, wgt_view inp, uint32_t N,
                          uint32_t C, uint32_t OC, int h) {
    wgt_view none = wgt_view_none();
    mm_gemm(be, MM_TN, dweight, dout, inp, none, OC, C, N, OC, C, C, 1, 0, h, NULL, NULL);
    if (dbias.buf) wg_matmul_at_dbias(be, dbias, dout, N, OC);
}

void wg_matmul_at_dbias(wgt_backend *be, wgt_view dbias, wgt_view dout, uint32_t N, uint32_t OC) {
    if (N == 0 || OC == 0) return;
    // dbias[OC] += column sums of dout[N,OC], over row chunks that fit one binding
    wg_ctx *ctx = wg_of(be);
    WGPUComputePipeline pipe = aux_pipeline(ctx, "matmul_at_dbias");
    uint64_t rows = chunk_rows(wg_binding_limit(be), OC, 1);
    for (uint64_t r0 = 0; r0 < N; r0 += rows) {
        uint32_t rc = (uint32_t)min_u64(rows, N - r0);
        if (dbias_two_stage(be, dbias, dout, r0, rc, OC)) continue;
        colsum_params p = {rc, OC, OC, 0, 0, 0, 0, 0};
        wg_bind bd[2] = {wg_binding_window(dbias, 0, OC, &p.out_off), wg_binding_window(dout, r0 * OC, (uint64_t)rc * OC, &p.x_off)};
        wg_dispatch(ctx, "matmul_at_dbias", pipe, bd, 2, &p, sizeof p, wg_groups(OC, 8));
    }
}

typedef struct { uint32_t iters, n; float x, y; } peak_params;

void wg_matmul_peak(wgt_backend *be, wgt_view out, uint32_t groups, uint32_t iters) {
    wg_ctx *ctx = wg_of(be);
    peak_params p = {iters, groups * 256u, 0.999999f, 1e-6f};
    wg_bind b[] = {wg_b(out, (size_t)groups * 256)};
    wg_dispatch(ctx, "matmul_peak", aux_pipeline(ctx, "matmul_peak"), b, 1, &p, sizeof p, groups);
}

// ------------------------------------------------------------------ bench/test introspection
const char *wg_mm_describe(wgt_backend *be, int op, uint32_t N, uint32_t C, uint32_t OC, char *buf, size_t cap) {
    uint32_t M = op == 2 ? OC : N, Nn = op == 0 ? OC : C, K = op == 0 ? C : op == 1 ? OC : N;
    const mm_fwd_layout lay = op == 0 ? fwd_layout_pick(be, M, Nn, K) : MM_FWD_DIRECT;
    const int fwd_w = lay == MM_FWD_W, fwd_t = lay == MM_FWD_BOTH || (op == 1 && dx_t_pick(be, M, Nn, K));
    mm_plan p = plan_pick(wg_of(be), fwd_w ? MM_NN : fwd_t ? MM_TN : (mm_variant)op, M, Nn, K);
    uint64_t tiles = tile_count(p.t, M, Nn);
    uint64_t S = p.splits ? min_u64(p.splits, cdiv(K, p.t.bk)) : 0;
    if (S) S = cdiv(K, cdiv(cdiv(K, p.t.bk), S) * p.t.bk);
    snprintf(buf, cap, "%ux%ux%u/%ux%u%s warp %u%s tiles %llu split %llu%s vec4 %d group %u%s%s", p.t.bm, p.t.bn,
             p.t.bk, p.t.tm, p.t.tn, p.t.pf ? "" : " no-prefetch", tile_warp(p.t), p.t.pr ? " paired" : "",
             (unsigned long long)tiles,
             (unsigned long long)S, S && streamk_on(wg_of(be)) ? " (stream-K)" : "", vec4_on(wg_of(be)),
             group_setting(wg_of(be)), !p.splits && edge_first_on(wg_of(be)) ? " edge-first" : "",  // as mm_chunk
             fwd_w ? " W transposed" : fwd_t ? " transposed" : "");
    return buf;
}
