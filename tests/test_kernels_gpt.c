// test_kernels_gpt.c — every WGSL kernel of the GPT-2 ops (except attention) against the C
// reference: embedding, layernorm, the matmul family, residual, gradient norm, clipping, AdamW.
// Sizes are deliberately not multiples of the tiles; gradients are accumulated twice to check
// the += contract; the binding-split paths run on small tensors through the test-only binding
// limit; the GEMM's choices (split-K, vec4 loads, raster groups, tiles) are forced through the
// context's settings (wg_settings.h, changed between ops); large-mean rows check the
// layernorm's numerics; some dispatches exceed 65535 workgroups.
#include <math.h>
#include <stdint.h>
#include <time.h>
#include "backend_pair.h"
#include "backend/cpu/ops.h"
#include "backend/opt_status.h"
#include "backend/webgpu/wg_ops_gpt.h"
#include "backend/half.h"
#include "core/clock.h"

static bpair P;
static wg_settings *S;  // the settings of P's webgpu context


static btensor bt_rand(size_t n, float scale) {
    float *x = trand_normal(n, scale);
    btensor t = bt_new(&P, n, x);
    free(x);
    return t;
}
static btensor bt_zero(size_t n) { return bt_new(&P, n, NULL); }
static btensor bt_tokens(size_t n, uint32_t V) {
    int32_t *t = malloc(n * 4 + 4);
    for (size_t i = 0; i < n; i++) t[i] = (int32_t)(trng_u32() % V);
    btensor r = bt_new(&P, n, t);
    free(t);
    return r;
}
static wgt_view nov(void) { return wgt_view_none(); }

// ------------------------------------------------------------------ matmul family
// f32 GEMM vs BLAS: both round each product-sum, in different orders; for unit-normal inputs
// the error grows like sqrt(K) ulps of sums of magnitude sqrt(K): atol 2e-6·K covers it.
static double mm_atol(uint32_t K) { return 2e-6 * (K + 8); }

static void test_matmul_fwd(uint32_t N, uint32_t C, uint32_t OC, int with_bias, const char *what) {
    btensor inp = bt_rand((size_t)N * C, 1), w = bt_rand((size_t)OC * C, 1), b = bt_rand(OC, 1);
    btensor out = bt_rand((size_t)N * OC, 1);  // garbage to be overwritten
    P.cpu->matmul(P.cpu, bt_c(out), bt_c(inp), bt_c(w), with_bias ? bt_c(b) : nov(), N, C, OC);
    P.gpu->matmul(P.gpu, bt_g(out), bt_g(inp), bt_g(w), with_bias ? bt_g(b) : nov(), N, C, OC);
    char name[160];
    snprintf(name, sizeof name, "matmul %s N=%u C=%u OC=%u bias=%d", what, N, C, OC, with_bias);
    bt_check(&P, name, out, mm_atol(C), 1e-5);
    bt_free(&P, &inp); bt_free(&P, &w); bt_free(&P, &b); bt_free(&P, &out);
}

static void test_matmul_t(uint32_t N, uint32_t C, uint32_t OC, const char *what) {
    btensor dout = bt_rand((size_t)N * OC, 1), w = bt_rand((size_t)OC * C, 1), dinp = bt_rand((size_t)N * C, 1);
    P.cpu->matmul_t(P.cpu, bt_c(dinp), bt_c(dout), bt_c(w), N, C, OC);
    P.gpu->matmul_t(P.gpu, bt_g(dinp), bt_g(dout), bt_g(w), N, C, OC);
    char name[160];
    snprintf(name, sizeof name, "matmul_t %s N=%u C=%u OC=%u", what, N, C, OC);
    bt_check(&P, name, dinp, mm_atol(OC), 1e-5);
    bt_free(&P, &dout); bt_free(&P, &w); bt_free(&P, &dinp);
}

// run twice: parameter gradients accumulate, so the second result is the first doubled (plus
// the random initial value)
static void test_matmul_at(uint32_t N, uint32_t C, uint32_t OC, int with_bias, const char *what) {
    btensor dout = bt_rand((size_t)N * OC, 1), inp = bt_rand((size_t)N * C, 1);
    btensor dw = bt_rand((size_t)OC * C, 1), db = bt_rand(OC, 1);
    for (int rep = 0; rep < 2; rep++) {
        P.cpu->matmul_at(P.cpu, bt_c(dw), with_bias ? bt_c(db) : nov(), bt_c(dout), bt_c(inp), N, C, OC);
        P.gpu->matmul_at(P.gpu, bt_g(dw), with_bias ? bt_g(db) : nov(), bt_g(dout), bt_g(inp), N, C, OC);
    }
    char name[160];
    snprintf(name, sizeof name, "matmul_at dweight x2 %s N=%u C=%u OC=%u bias=%d", what, N, C, OC, with_bias);
    bt_check(&P, name, dw, 2 * mm_atol(N), 1e-5);
    snprintf(name, sizeof name, "matmul_at dbias x2 %s N=%u C=%u OC=%u bias=%d", what, N, C, OC, with_bias);
    bt_check(&P, name, db, 2 * mm_atol(N), 1e-5);  // untouched (exactly equal) without bias
    bt_free(&P, &dout); bt_free(&P, &inp); bt_free(&P, &dw); bt_free(&P, &db);
}

// Scalar global loads here (vec4 loads have their own section below): every distinct pipeline
// costs seconds of shader compilation on the software GPU, so the variants are spread thinly.
static void test_matmuls(void) {
    S->mm_vec4 = 0;
    static const struct { uint32_t N, C, OC; } shapes[] = {
        {67, 45, 130}, {1, 1, 1}, {5, 3, 7}, {130, 67, 45}, {200, 129, 300}, {64, 64, 64}, {3, 300, 2},
        {4, 0, 9}, {0, 5, 3}};  // empty K: out = bias (or 0); no rows: nothing, dW += 0
    const wg_mm_tile_choice tiles[] = {WG_MM_TILE_BIG, WG_MM_TILE_SMALL};
    const char *tname[] = {"big tiles", "small tiles"};
    for (int ti = 0; ti < 2; ti++) {
        S->mm_tile = tiles[ti];
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            uint32_t N = shapes[s].N, C = shapes[s].C, OC = shapes[s].OC;
            test_matmul_fwd(N, C, OC, 1, tname[ti]);
            test_matmul_fwd(N, C, OC, 0, tname[ti]);
            test_matmul_t(N, C, OC, tname[ti]);
            test_matmul_at(N, C, OC, 1, tname[ti]);
            test_matmul_at(N, C, OC, 0, tname[ti]);
        }
    }
    S->mm_tile = WG_MM_TILE_AUTO;
    test_matmul_fwd(67, 45, 130, 1, "auto tiles");
    // split paths: a 3000-element binding limit forces windows over M, N and K in all three ops
    // (out columns written with a row stride wider than the window; K chunks accumulating)
    S->binding_limit = 3000;
    for (int ti = 0; ti < 2; ti++) {
        S->mm_tile = tiles[ti];
        test_matmul_fwd(67, 45, 130, 1, "split");
        test_matmul_fwd(150, 70, 300, 0, "split");
        test_matmul_t(67, 45, 130, "split");
        test_matmul_t(150, 300, 70, "split");
        test_matmul_at(67, 45, 130, 1, "split");
        test_matmul_at(300, 70, 150, 1, "split");
    }
    S->binding_limit = 0;
    S->mm_tile = WG_MM_TILE_AUTO;
    S->mm_vec4 = WG_AUTO;
}

// Split-K, forced to S = 1, 2, 3, 7 slices (1: the scratch + reduce path with one slice), with
// scalar and vec4 global loads. Every K is 209..224: 14 k-tiles of 16, or 27-28 of 8 in the big
// tile where workgroup memory is 32 KiB (here), so S = 2, 3, 7 give exactly that many slices, the
// last one partial; the first shape's odd sizes take scalar loads and the scalar reduction, the
// second's multiples of 4 vec4 loads when they are on and the vec4 reduction (edge tiles in M
// and N in both). Each distinct pipeline costs
// seconds of shader compilation on the software GPU, so the variants are spread thinly: scalar
// loads with the big tile (the production split-K path), vec4 loads with the small tile (whose
// 16-deep k-slices are those of the big tile on a 48 KiB GPU).
static void test_matmul_splitk_pass(const char *tiles, size_t first_shape) {
    static const struct { uint32_t N, C, OC; } shapes[] = {{211, 209, 213}, {212, 216, 220}};
    static const int splits[] = {1, 2, 3, 7};
    char what[96];
    for (size_t si = 0; si < sizeof splits / sizeof splits[0]; si++) {
        S->mm_splitk = splits[si];
        snprintf(what, sizeof what, "split-K %d %s vec4 %d", splits[si], tiles, S->mm_vec4);
        for (size_t s = first_shape; s < sizeof shapes / sizeof shapes[0]; s++) {
            uint32_t N = shapes[s].N, C = shapes[s].C, OC = shapes[s].OC;
            test_matmul_fwd(N, C, OC, 1, what);
            test_matmul_t(N, C, OC, what);
            test_matmul_at(N, C, OC, 1, what);
            test_matmul_at(N, C, OC, 0, what);
        }
    }
}

// The tiles in reverse order (WGTRAIN_MM_EDGE_FIRST=1: the edge tiles in the first wave): the
// same results, every GEMM with edges in both dimensions, both tiles, raster groups 8 and 1.
static void test_matmul_edge_first(void) {
    char what[96];
    S->mm_edge_first = 1;
    const wg_mm_tile_choice tiles[] = {WG_MM_TILE_BIG, WG_MM_TILE_SMALL};
    static const int groups[] = {WG_AUTO, 1};
    for (int ti = 0; ti < 2; ti++)
        for (int gi = 0; gi < 2; gi++) {
            S->mm_tile = tiles[ti];
            S->mm_group = groups[gi];
            snprintf(what, sizeof what, "edge tiles first, %s tiles, group %d", ti ? "small" : "big", groups[gi]);
            test_matmul_fwd(260, 132, 300, 1, what);
            test_matmul_t(300, 130, 261, what);
            test_matmul_at(261, 132, 300, 1, what);
        }
    S->mm_tile = WG_MM_TILE_AUTO;
    S->mm_group = WG_AUTO;
    // which GEMMs run so: direct ones alone (a split's tiles are dealt out otherwise), under 1
    // always, under 0 never, under auto where the device's row of the tile table says so (the
    // lm_head's dW and forward unsplit, 4096³ too; GPT-2's dW of the layers split)
    const int row = wg_mm_table_edge_first(wg_of(P.gpu));
    static const struct { int op; uint32_t N, C, OC; } shape[] = {
        {2, 8192, 768, 50257}, {0, 8192, 768, 50257}, {2, 4096, 4096, 4096}, {2, 8192, 768, 768}, {2, 8192, 768, 2304}};
    static const int settings[] = {1, 0, WG_AUTO};
    char desc[256];
    int direct = 0;
    for (size_t si = 0; si < 3; si++)
        for (size_t i = 0; i < sizeof shape / sizeof shape[0]; i++) {
            S->mm_edge_first = settings[si];
            wg_mm_describe(P.gpu, shape[i].op, shape[i].N, shape[i].C, shape[i].OC, desc, sizeof desc);
            const int split = strstr(desc, "split 0 ") == NULL;
            direct += !split;
            const int on = settings[si] == WG_AUTO ? row : settings[si];
            const int want = on && !split, got = strstr(desc, " edge-first") != NULL;
            CHECK(got == want, "edge tiles first under %d (row %d): %s N=%u C=%u OC=%u: %d, expected %d: %s", settings[si],
                  row, wg_mm_op_name(shape[i].op), shape[i].N, shape[i].C, shape[i].OC, got, want, desc);
        }
    CHECK(direct > 0, "edge tiles first: none of the shapes runs directly, so the rule went untested");
    S->mm_edge_first = WG_AUTO;
}

// Stream-K (WGTRAIN_MM_STREAMK=1), through the forced split path: the GPU's workgroups (264 at
// 256 threads) deal out the tiles' k-slices evenly. Shapes where a workgroup's range crosses into
// the next tiles (more small tiles than workgroups: 18 x 17 tiles of 64 at K = 40, 3 slices of 16,
// the last partial) with the scalar fixup (N odd) and the vec4 one, raster groups 8 (a short last
// group of 2 row blocks) and 1; the dW pattern (12 tiles at K = 2000: about 23 workgroups a tile,
// accumulating); one unit a workgroup (fewer units than workgroups); the big tile; and the 8x8
// tile whose interior fetch carries its load index.
static void test_matmul_streamk(void) {
    char what[96];
    S->mm_streamk = 1;
    S->mm_splitk = 2;
    S->mm_tile = WG_MM_TILE_SMALL;
    static const int groups[] = {WG_AUTO, 1};
    for (int gi = 0; gi < 2; gi++) {
        S->mm_group = groups[gi];
        snprintf(what, sizeof what, "stream-K small tiles group %d", groups[gi]);
        test_matmul_fwd(1090, 40, 1031, 1, what);
        test_matmul_t(1092, 1028, 40, what);
    }
    S->mm_group = WG_AUTO;
    test_matmul_at(2000, 132, 200, 1, "stream-K small tiles");
    test_matmul_at(150, 68, 70, 0, "stream-K one unit a workgroup");
    // under a 3000-element binding limit, which also caps the scratch: chunks of every operand,
    // and stream-K's partials that do not fit fall back to split-K's slices
    S->binding_limit = 3000;
    test_matmul_fwd(68, 44, 132, 1, "stream-K split binding");
    test_matmul_at(300, 72, 152, 1, "stream-K split binding");
    S->binding_limit = 0;
    S->mm_tile = WG_MM_TILE_BIG;
    test_matmul_at(3000, 260, 300, 1, "stream-K big tile");
    char desc[160];
    CHECK(strstr(wg_mm_describe(P.gpu, 2, 3000, 260, 300, desc, sizeof desc), "stream-K") != NULL,
          "the plan says stream-K: %s", desc);
    // the 8x8 tile's interior fetch with stream-K's carried load index (MM_SK): interior tiles
    // over many slices, ranges that start and end inside a tile's k; vec4 operands (K, C multiples
    // of 4) and scalar ones
    wg_settings_set(S, "WGTRAIN_MM_TILE", "128x128x8/8x8");
    test_matmul_t(520, 260, 1000, "stream-K 128x128x8/8x8, vec4");
    test_matmul_t(520, 261, 999, "stream-K 128x128x8/8x8, scalar");
    test_matmul_at(1000, 260, 264, 1, "stream-K 128x128x8/8x8, vec4");
    test_matmul_fwd(300, 999, 261, 1, "stream-K 128x128x8/8x8, scalar");
    wg_settings_set(S, "WGTRAIN_MM_TILE", NULL);
    S->mm_tile = WG_MM_TILE_AUTO;
    S->mm_splitk = WG_AUTO;
    S->mm_streamk = WG_AUTO;
}

// The forward and matmul_t through transposed copies of their operands stored along k
// (WGTRAIN_MM_TCOPY=1: matmul_transpose4 or matmul_transpose, then the GEMM in matmul_at's
// layout; =w: the forward's W alone copied, the GEMM in matmul_t's layout): edges in every
// dimension, rows not multiples of 4 (the copies' padded rows) and multiples of 4 (vec4 loads),
// one row, one column, K = 1, a K that is not a multiple of the transpose's blocks; with and
// without bias, both tiles. Under a 3000-element binding limit the copies of a small GEMM still
// fit while its output is cut into windows, and a GEMM whose copies do not fit runs the direct
// path. The plan text says which.
static void test_matmul_fwd_transposed(void) {
    static const struct { uint32_t N, C, OC; } shapes[] = {
        {67, 45, 130}, {1, 1, 1}, {5, 3, 7}, {130, 67, 45}, {260, 132, 300}, {130, 68, 45}, {3, 300, 2}, {64, 1, 33},
        {4, 0, 9}};
    const wg_mm_tile_choice tiles[] = {WG_MM_TILE_BIG, WG_MM_TILE_SMALL};
    const char *tname[] = {"transposed big tiles", "transposed small tiles"};
    char desc[160];
    S->mm_tcopy = 0;
    CHECK(strstr(wg_mm_describe(P.gpu, 0, 260, 132, 300, desc, sizeof desc), "transposed") == NULL,
          "WGTRAIN_MM_TCOPY=0: the forward runs directly: %s", desc);
    S->mm_tcopy = 1;
    CHECK(strstr(wg_mm_describe(P.gpu, 0, 260, 132, 300, desc, sizeof desc), "transposed") != NULL,
          "WGTRAIN_MM_TCOPY=1: the forward runs through the transposed copies: %s", desc);
    CHECK(strstr(wg_mm_describe(P.gpu, 1, 260, 132, 300, desc, sizeof desc), "transposed") != NULL,
          "WGTRAIN_MM_TCOPY=1: matmul_t runs through the transposed copy: %s", desc);
    for (int ti = 0; ti < 2; ti++) {
        S->mm_tile = tiles[ti];
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            test_matmul_fwd(shapes[s].N, shapes[s].C, shapes[s].OC, 1, tname[ti]);
            if (s < 2) test_matmul_fwd(shapes[s].N, shapes[s].C, shapes[s].OC, 0, tname[ti]);
            test_matmul_t(shapes[s].N, shapes[s].C, shapes[s].OC, tname[ti]);  // dout [N, OC] copied
        }
    }
    S->mm_tcopy = WG_TCOPY_W;
    CHECK(strstr(wg_mm_describe(P.gpu, 0, 260, 132, 300, desc, sizeof desc), " W transposed") != NULL,
          "WGTRAIN_MM_TCOPY=w: the forward runs through W's transposed copy: %s", desc);
    CHECK(strstr(wg_mm_describe(P.gpu, 1, 4096, 4096, 4096, desc, sizeof desc), "transposed") == NULL,
          "WGTRAIN_MM_TCOPY=w: matmul_t runs directly: %s", desc);
    for (int ti = 0; ti < 2; ti++) {
        S->mm_tile = tiles[ti];
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            test_matmul_fwd(shapes[s].N, shapes[s].C, shapes[s].OC, 1, ti ? "W transposed, small tiles" : "W transposed, big tiles");
            if (s < 2) test_matmul_fwd(shapes[s].N, shapes[s].C, shapes[s].OC, 0, "W transposed, no bias");
        }
    }
    S->mm_tile = WG_MM_TILE_AUTO;
    S->binding_limit = 3000;
    CHECK(strstr(wg_mm_describe(P.gpu, 0, 100, 10, 60, desc, sizeof desc), " W transposed") != NULL,
          "W's copy of 600 elements fits a 3000-element binding: %s", desc);
    test_matmul_fwd(100, 10, 60, 1, "W transposed, output in windows");
    CHECK(strstr(wg_mm_describe(P.gpu, 0, 67, 45, 130, desc, sizeof desc), "transposed") == NULL,
          "W's copy of 5850 elements does not fit a 3000-element binding: %s", desc);
    test_matmul_fwd(67, 45, 130, 1, "W's copy too large: direct");
    S->mm_tcopy = 1;
    CHECK(strstr(wg_mm_describe(P.gpu, 0, 100, 10, 60, desc, sizeof desc), "transposed") != NULL,
          "copies of 1600 elements fit a 3000-element binding: %s", desc);
    test_matmul_fwd(100, 10, 60, 1, "transposed, output in windows");
    test_matmul_t(100, 60, 10, "transposed, output in windows");
    CHECK(strstr(wg_mm_describe(P.gpu, 0, 67, 45, 130, desc, sizeof desc), "transposed") == NULL,
          "copies of 9000 elements do not fit a 3000-element binding: %s", desc);
    test_matmul_fwd(67, 45, 130, 1, "transposed copies too large: direct");
    CHECK(strstr(wg_mm_describe(P.gpu, 1, 67, 45, 130, desc, sizeof desc), "transposed") == NULL,
          "a copy of 8840 elements does not fit a 3000-element binding: %s", desc);
    test_matmul_t(67, 45, 130, "transposed copy too large: direct");
    S->binding_limit = 0;
    // auto: the device's row of the tile table, then the cost model (GPT-2 124M's shapes at
    // B·T = 8192: the qkv, attproj, fc and fcproj forwards copy W alone, the lm_head's and
    // 4096³'s both operands, 4096³'s matmul_t its dout; GPT-2's matmul_t and small GEMMs nothing)
    S->mm_tcopy = WG_AUTO;
    const int row = wg_mm_table_tcopy(wg_of(P.gpu));
    enum { NONE, BOTH, W };  // what the plan text says: nothing, " transposed", " W transposed"
    static const struct { int op; uint32_t N, C, OC; int takes; } rule[] = {
        {0, 8192, 768, 2304, W},  {0, 8192, 768, 3072, W},     {0, 8192, 768, 50257, BOTH}, {0, 4096, 4096, 4096, BOTH},
        {1, 4096, 4096, 4096, BOTH}, {0, 8192, 768, 768, W}, {0, 8192, 3072, 768, W},     {1, 8192, 3072, 768, NONE},
        {1, 8192, 768, 3072, NONE}, {0, 67, 45, 130, NONE},  {0, 4096, 768, 16384, BOTH}, {0, 4096, 768, 3072, W}};
    for (size_t i = 0; i < sizeof rule / sizeof rule[0]; i++) {
        const int want = row ? rule[i].takes : NONE;
        wg_mm_describe(P.gpu, rule[i].op, rule[i].N, rule[i].C, rule[i].OC, desc, sizeof desc);
        const int got = strstr(desc, " W transposed") ? W : strstr(desc, " transposed") ? BOTH : NONE;
        CHECK(got == want, "auto on a %s row: %s N=%u C=%u OC=%u: layout %d, expected %d: %s", row ? "tcopy" : "direct",
              wg_mm_op_name(rule[i].op), rule[i].N, rule[i].C, rule[i].OC, got, want, desc);
    }
}

// Tile shapes other than the generic defaults (WGTRAIN_MM_TILE specs): the tile table's row for
// NVIDIA GPUs, which the software GPU never picks itself: 128x64 tiles of 256 threads, 8x4 outputs
// a thread, with 8-deep k-slices (matmul, matmul_t; once without the register prefetch) and 128x128
// ones of 8x8 outputs a thread with 8-deep slices (matmul; matmul_at split-K and unsplit, both with
// dbias). Edges in every dimension. Each pipeline costs
// seconds of shader compilation on the software GPU: six of them here.
static void test_matmul_tile_specs(void) {
    char what[96];
    S->mm_vec4 = 0;
    CHECK(wg_settings_set(S, "WGTRAIN_MM_TILE", "128x64x8/8x4") == WGT_OK, "tile spec parses");
    snprintf(what, sizeof what, "tile 128x64x8/8x4");
    S->mm_splitk = 0;
    test_matmul_fwd(67, 45, 130, 1, what);
    test_matmul_t(130, 67, 45, what);
    S->mm_prefetch = 0;
    snprintf(what, sizeof what, "tile 128x64x8/8x4 no prefetch");
    test_matmul_t(67, 45, 130, what);
    S->mm_prefetch = WG_AUTO;
    CHECK(wg_settings_set(S, "WGTRAIN_MM_TILE", "128x128x8/8x8") == WGT_OK, "tile spec parses");
    snprintf(what, sizeof what, "tile 128x128x8/8x8");
    test_matmul_fwd(131, 67, 200, 1, what);
    test_matmul_at(200, 129, 300, 1, what);
    S->mm_splitk = 2;
    test_matmul_at(211, 209, 213, 1, what);
    // the production loads of that tile (vec4 auto: B stored along n as vec4, A scalar) on
    // aligned shapes with edges in every dimension, unsplit and split
    S->mm_vec4 = WG_AUTO;
    snprintf(what, sizeof what, "tile 128x128x8/8x8 vec4 auto");
    test_matmul_t(132, 68, 204, what);
    test_matmul_at(212, 132, 300, 1, what);
    S->mm_splitk = 0;
    test_matmul_at(200, 132, 300, 1, what);
    S->mm_vec4 = 0;
    // the warp layouts (WGTRAIN_MM_WARP): 8 and 16 threads of a 32-lane group along n on the
    // 128x64/8x4 tile (a 16 x 16 thread grid), 4 on the 128x128 one (16 x 16), and 16 on an 8-wide
    // grid, which does not divide it and falls back to row-major
    S->mm_splitk = 0;
    static const char *const warps[][2] = {{"8", "128x64x8/8x4"}, {"16", "128x64x8/8x4"}, {"4", "128x128x4/8x8"},
                                           {"16", "128x64x8/8x8"}};
    for (size_t i = 0; i < sizeof warps / sizeof warps[0]; i++) {
        CHECK(wg_settings_set(S, "WGTRAIN_MM_WARP", warps[i][0]) == WGT_OK, "warp layout parses");
        CHECK(wg_settings_set(S, "WGTRAIN_MM_TILE", warps[i][1]) == WGT_OK, "tile spec parses");
        snprintf(what, sizeof what, "tile %s warp %s", warps[i][1], warps[i][0]);
        if (i == 2) test_matmul_at(200, 129, 300, 1, what);
        else {
            test_matmul_fwd(67, 45, 130, 1, what);
            test_matmul_t(130, 67, 45, what);
        }
    }
    // paired lanes (WGTRAIN_MM_PAIR, the lane index rotated by one bit): matmul_t on the row-major
    // 128x64/8x4 tile, matmul_at on 128x128/8x8, and the forward on 128x64/8x4 with warp 8
    static const char *const pairs[][2] = {{"0", "128x64x8/8x4"}, {"0", "128x128x8/8x8"}, {"8", "128x64x8/8x4"}};
    CHECK(wg_settings_set(S, "WGTRAIN_MM_PAIR", "1") == WGT_OK, "lane pairing parses");
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        CHECK(wg_settings_set(S, "WGTRAIN_MM_WARP", pairs[i][0]) == WGT_OK, "warp layout parses");
        CHECK(wg_settings_set(S, "WGTRAIN_MM_TILE", pairs[i][1]) == WGT_OK, "tile spec parses");
        snprintf(what, sizeof what, "tile %s warp %s paired", pairs[i][1], pairs[i][0]);
        if (i == 0) test_matmul_t(130, 67, 45, what);
        else if (i == 1) test_matmul_at(200, 129, 300, 1, what);
        else test_matmul_fwd(67, 45, 130, 1, what);
    }
    CHECK(wg_settings_set(S, "WGTRAIN_MM_PAIR", "2") != WGT_OK, "a lane pairing of 2 is refused");
    wg_settings_set(S, "WGTRAIN_MM_PAIR", NULL);
    CHECK(wg_settings_set(S, "WGTRAIN_MM_WARP", "2") != WGT_OK, "a 2-wide warp layout is refused");
    CHECK(wg_settings_set(S, "WGTRAIN_MM_WARP", "32") != WGT_OK, "a 32-wide warp layout is refused");
    wg_settings_set(S, "WGTRAIN_MM_WARP", NULL);
    CHECK(wg_settings_set(S, "WGTRAIN_MM_TILE", "64x64x32/8x8") != WGT_OK, "a tile of 8 load passes is refused");
    CHECK(wg_settings_set(S, "WGTRAIN_MM_TILE", "128x128x8/8x8 ") != WGT_OK, "a tile spec with a blank is refused");
    CHECK(wg_settings_set(S, "WGTRAIN_MM_TILE", "128x128x2/8x8") != WGT_OK, "a 2-deep k-slice is refused");
    CHECK(wg_settings_set(S, "WGTRAIN_MM_TILE", "16x256x4/4x4") == WGT_OK, "a 16-row tile of 256 threads parses");
    wg_settings_set(S, "WGTRAIN_MM_TILE", NULL);
    S->mm_prefetch = S->mm_splitk = S->mm_vec4 = WG_AUTO;
}

static void test_matmul_splitk(void) {
    S->mm_streamk = 0;  // split-K's own path (stream-K takes its GEMMs by default)
    S->mm_vec4 = 0;
    test_matmul_splitk_pass("big tiles", 0);  // forced split-K takes the big tile
    S->mm_vec4 = 1;
    S->mm_tile = WG_MM_TILE_SMALL;
    test_matmul_splitk_pass("small tiles", 1);
    // raster groups: 1 (row-major), 3 (a short last group over the 4 row blocks of 64), the
    // default; with and without split-K
    char what[96];
    S->mm_vec4 = 0;
    S->mm_splitk = 3;
    static const int groups[] = {1, 3, WG_AUTO};
    for (int gi = 0; gi < 3; gi++) {
        S->mm_group = groups[gi];
        snprintf(what, sizeof what, "small tiles split-K 3 group %d", groups[gi]);
        test_matmul_fwd(211, 209, 213, 1, what);
        test_matmul_t(212, 216, 220, what);
        test_matmul_at(212, 216, 220, 0, what);
    }
    S->mm_splitk = 0;
    S->mm_group = 3;
    test_matmul_fwd(211, 209, 213, 1, "small tiles no split group 3");
    test_matmul_at(212, 216, 220, 1, "small tiles no split group 3");
    S->mm_tile = WG_MM_TILE_AUTO;
    S->mm_group = WG_AUTO;
    // the automatic choice: one tile, K = 600 -> 2 slices; K = 300 -> none
    S->mm_splitk = WG_AUTO;
    test_matmul_at(600, 71, 53, 1, "auto split-K");
    test_matmul_fwd(50, 601, 70, 1, "auto split-K");
    test_matmul_t(50, 70, 601, "auto split-K");
    test_matmul_at(300, 71, 53, 1, "auto, no split");
    // the plan of an output whose small tiles alone fill the GPU (256 of them; fewer big ones):
    // at a K too short for the partial-wave split (< 2048) the small tile unsplit, at a long K the
    // big tile's split (read from the plan, for this device's tiles; nothing runs)
    {
        wg_mm_tile_spec big, small;
        wg_mm_tiles(wg_of(P.gpu), 1, &big, &small);
        const uint32_t N = 16 * (uint32_t)small.bm, C = 16 * (uint32_t)small.bn;
        const int fewer_big = (N / big.bm) * (C / big.bn) < 256;
        char d[160], want[48];
        snprintf(want, sizeof want, "%dx%dx%d/%dx%d ", small.bm, small.bn, small.bk, small.tm, small.tn);
        wg_mm_describe(P.gpu, 1, N, C, 1000, d, sizeof d);
        CHECK(strstr(d, " split 0 ") && (!fewer_big || !strncmp(d, want, strlen(want))),
              "matmul_t %ux%u at K = 1000 takes the small tile (%s) unsplit: %s", N, C, want, d);
        wg_mm_describe(P.gpu, 1, N, C, 4096, d, sizeof d);
        CHECK(!fewer_big || !strstr(d, " split 0 "), "matmul_t %ux%u at K = 4096 is split: %s", N, C, d);
    }
    // the partial-wave rule counts each tile's waves on its own slots: 8192 x 768 at K = 768 is
    // 384 big tiles of 128² (1.45 waves of 264); 128x64 tiles of 256 threads fill 2.9 waves and
    // are taken, those of 128 threads (528 slots) fill the same 1.45 and are not (tuned tiles,
    // so that any device plans the same; nothing runs)
    {
        static const struct { wg_mm_tile_spec small; const char *want; } rule[] = {
            {{128, 64, 8, 8, 4}, "128x64x8/8x4 "}, {{128, 64, 8, 8, 8}, "128x128x8/8x8 "}};
        for (size_t i = 0; i < sizeof rule / sizeof rule[0]; i++) {
            S->mm_tuned = 1;
            S->mm_tuned_tile[1][0] = (wg_mm_tile_spec){128, 128, 8, 8, 8};
            S->mm_tuned_tile[1][1] = rule[i].small;
            char d[160];
            wg_mm_describe(P.gpu, 1, 8192, 768, 768, d, sizeof d);
            CHECK(!strncmp(d, rule[i].want, strlen(rule[i].want)) && strstr(d, " split 0 "),
                  "matmul_t 8192 x 768 at K = 768 with the small tile %dx%dx%d/%dx%d plans %s: %s", rule[i].small.bm,
                  rule[i].small.bn, rule[i].small.bk, rule[i].small.tm, rule[i].small.tn, rule[i].want, d);
            S->mm_tuned = 0;
        }
    }
    // split-K under the binding-split paths: a 3000-element limit also caps the scratch, so the
    // slices shrink to what fits (down to 1); multiples of 4 so that the vec4 loads see k-chunks
    // that start or end inside a vec4 (scalar fallback of that operand, masked edges)
    S->binding_limit = 3000;
    S->mm_tile = WG_MM_TILE_SMALL;
    S->mm_vec4 = 1;
    S->mm_splitk = 7;
    test_matmul_fwd(68, 44, 132, 1, "split binding + split-K 7");
    test_matmul_t(152, 300, 72, "split binding + split-K 7");
    test_matmul_at(300, 72, 152, 1, "split binding + split-K 7");
    S->mm_splitk = 0;
    test_matmul_t(152, 300, 72, "split binding, vec4");
    test_matmul_at(300, 72, 152, 1, "split binding, vec4");
    S->binding_limit = 0;
    S->mm_tile = WG_MM_TILE_AUTO;
    S->mm_splitk = WG_AUTO;
    S->mm_vec4 = WG_AUTO;
    S->mm_streamk = WG_AUTO;
}

// dW and dbias as views into one gradient buffer (as the model lays parameters out): the split
// path's reduce binds both read-write in one dispatch. Also checks that split-K is deterministic:
// the same call on the same input gives the same bits.
static void test_matmul_at_shared_grads(void) {
    const uint32_t N = 300, C = 68, OC = 52;
    const size_t odb = (size_t)OC * C + 64 - ((size_t)OC * C) % 64;  // dbias at the next aligned offset
    btensor dout = bt_rand((size_t)N * OC, 1), inp = bt_rand((size_t)N * C, 1);
    btensor grads = bt_rand(odb + OC, 1);
    wgt_view cw = wgt_view_of(grads.c, 0, (size_t)OC * C), gw = wgt_view_of(grads.g, 0, (size_t)OC * C);
    wgt_view cb = wgt_view_of(grads.c, odb, OC), gb = wgt_view_of(grads.g, odb, OC);
    S->mm_splitk = 7;
    S->mm_vec4 = 0;  // the big-tile pipelines of the split-K section
    for (int rep = 0; rep < 2; rep++) {
        P.cpu->matmul_at(P.cpu, cw, cb, bt_c(dout), bt_c(inp), N, C, OC);
        P.gpu->matmul_at(P.gpu, gw, gb, bt_g(dout), bt_g(inp), N, C, OC);
    }
    bt_check(&P, "matmul_at split-K 7: dW and dbias in one buffer, x2", grads, 2 * mm_atol(N), 1e-5);
    // determinism: zero, run, read; zero, run, read; bitwise equal
    float *r[2];
    for (int k = 0; k < 2; k++) {
        P.gpu->fill_zero(P.gpu, bt_g(grads), grads.n);
        P.gpu->matmul_at(P.gpu, gw, gb, bt_g(dout), bt_g(inp), N, C, OC);
        r[k] = malloc(grads.n * 4);
        P.gpu->download(P.gpu, r[k], bt_g(grads), grads.n);
    }
    CHECK(!memcmp(r[0], r[1], grads.n * 4), "matmul_at split-K 7 gives the same bits twice");
    free(r[0]);
    free(r[1]);
    S->mm_splitk = WG_AUTO;
    S->mm_vec4 = WG_AUTO;
    bt_free(&P, &dout); bt_free(&P, &inp); bt_free(&P, &grads);
}

// The split-K scratch belongs to its backend (like the gradient-norm scratch below): free a
// backend, open another (malloc may hand it the same address) and split-K must still work.
static void test_matmul_scratch_lifetime(void) {
    enum { N = 5, C = 40, OC = 6 };
    float x[N * C], w[OC * C], out[N * OC];
    for (int i = 0; i < N * C; i++) x[i] = (float)(i % 7) - 3.0f;
    for (int i = 0; i < OC * C; i++) w[i] = (float)(i % 5) - 2.0f;
    for (int round = 0; round < 2; round++) {
        wgt_backend *be;
        if (backend_webgpu_init(&be, getenv("WGTRAIN_TEST_ADAPTER") ? getenv("WGTRAIN_TEST_ADAPTER") : "auto") != WGT_OK) {
            CHECK(0, "another webgpu backend: %s", wgt_last_error());
            break;
        }
        wg_settings *s = wg_ctx_settings(wg_of(be));  // each context has its own settings
        s->mm_splitk = 2;
        s->mm_tile = WG_MM_TILE_SMALL;
        s->mm_vec4 = 0;
        wgt_buf *xb, *wb, *ob;
        be->buf_alloc(be, &xb, N * C, "x");
        be->buf_alloc(be, &wb, OC * C, "w");
        be->buf_alloc(be, &ob, N * OC, "out");
        wgt_view xv = wgt_view_of(xb, 0, N * C), wv = wgt_view_of(wb, 0, OC * C), ov = wgt_view_of(ob, 0, N * OC);
        be->upload(be, xv, x, N * C);
        be->upload(be, wv, w, OC * C);
        be->matmul(be, ov, xv, wv, nov(), N, C, OC);
        wgt_status st = be->download(be, out, ov, N * OC);
        double worst = 0;
        for (int r = 0; r < N; r++)
            for (int c = 0; c < OC; c++) {
                double ref = 0;  // small integers: exact in f32 whatever the order
                for (int k = 0; k < C; k++) ref += (double)x[r * C + k] * w[c * C + k];
                worst = fmax(worst, fabs(out[r * OC + c] - ref));
            }
        CHECK(st == WGT_OK && worst == 0, "split-K matmul on backend #%d: worst error %g (%s)", round + 2, worst,
              wgt_last_error());
        be->buf_free(be, xb);
        be->buf_free(be, wb);
        be->buf_free(be, ob);
        be->free(be);
    }
}

// matmul on views at nonzero, 256-byte-aligned offsets inside larger buffers (as the model
// binds parameters and activations)
static void test_matmul_offsets_at(uint32_t N, uint32_t C, uint32_t OC, size_t ow, const char *what) {
    const size_t oi = 128, ob = 64, oo = 192;
    btensor inp = bt_rand(oi + (size_t)N * C, 1), w = bt_rand(ow + (size_t)OC * C + 5, 1), b = bt_rand(ob + OC, 1);
    btensor out = bt_rand(oo + (size_t)N * OC + 9, 1);
    wgt_view ci = wgt_view_at(bt_c(inp), oi), gi = wgt_view_at(bt_g(inp), oi), cw = wgt_view_at(bt_c(w), ow);
    wgt_view gw = wgt_view_at(bt_g(w), ow), cb = wgt_view_at(bt_c(b), ob), gb = wgt_view_at(bt_g(b), ob);
    wgt_view co = wgt_view_at(bt_c(out), oo), go = wgt_view_at(bt_g(out), oo);
    P.cpu->matmul(P.cpu, co, ci, cw, cb, N, C, OC);
    P.gpu->matmul(P.gpu, go, gi, gw, gb, N, C, OC);
    char name[160];
    snprintf(name, sizeof name, "matmul on offset views (and untouched neighbours) %s", what);
    bt_check(&P, name, out, mm_atol(C), 1e-5);
    bt_free(&P, &inp); bt_free(&P, &w); bt_free(&P, &b); bt_free(&P, &out);
}

static void test_matmul_offsets(void) {
    test_matmul_offsets_at(33, 70, 90, 64 * 7, "odd sizes");
    S->mm_tile = WG_MM_TILE_SMALL;  // the vec4 pipelines of the split-K section
    test_matmul_offsets_at(36, 72, 92, 64 * 7, "multiples of 4 (vec4)");
    // (an offset that is not a multiple of 4 makes that operand scalar: the binding-split
    // section above covers that fallback through k-chunks that start inside a vec4)
    S->mm_tile = WG_MM_TILE_AUTO;
}

// ------------------------------------------------------------------ layernorm
// f32 sums of C terms against double: a few 1e-7 relative on O(1) outputs.
static void test_layernorm(uint32_t N, uint32_t C, float offset, float spread, const char *what) {
    float *x = trand_normal((size_t)N * C, spread);
    for (size_t i = 0; i < (size_t)N * C; i++) x[i] += offset;
    btensor inp = bt_new(&P, (size_t)N * C, x);
    free(x);
    btensor w = bt_rand(C, 1), b = bt_rand(C, 1);
    btensor out = bt_zero((size_t)N * C), mean = bt_zero(N), rstd = bt_zero(N);
    P.cpu->layernorm_forward(P.cpu, bt_c(out), bt_c(mean), bt_c(rstd), bt_c(inp), bt_c(w), bt_c(b), N, C);
    P.gpu->layernorm_forward(P.gpu, bt_g(out), bt_g(mean), bt_g(rstd), bt_g(inp), bt_g(w), bt_g(b), N, C);
    char name[160];
    // outputs are O(|w|·3): 2e-5 absolute is ~100 ulps, a wrong variance is off by O(1)
    snprintf(name, sizeof name, "layernorm_forward out %s N=%u C=%u", what, N, C);
    bt_check(&P, name, out, 2e-5, 2e-5);
    snprintf(name, sizeof name, "layernorm_forward mean %s", what);
    bt_check(&P, name, mean, 1e-5, 1e-6);
    snprintf(name, sizeof name, "layernorm_forward rstd %s", what);
    bt_check(&P, name, rstd, 1e-6, 1e-5);

    // backward from the same saved statistics (the CPU's, uploaded to both: the backward is
    // tested on its own), twice: everything accumulates
    float *m = malloc(N * 4), *r = malloc(N * 4);
    P.cpu->download(P.cpu, m, bt_c(mean), N);
    P.cpu->download(P.cpu, r, bt_c(rstd), N);
    P.gpu->upload(P.gpu, bt_g(mean), m, N);
    P.gpu->upload(P.gpu, bt_g(rstd), r, N);
    free(m); free(r);
    btensor dout = bt_rand((size_t)N * C, 1), dinp = bt_rand((size_t)N * C, 1), dw = bt_rand(C, 1), db = bt_rand(C, 1);
    for (int rep = 0; rep < 2; rep++) {
        P.cpu->layernorm_backward(P.cpu, bt_c(dinp), bt_c(dw), bt_c(db), bt_c(dout), bt_c(inp), bt_c(w), bt_c(mean),
                                  bt_c(rstd), N, C);
        P.gpu->layernorm_backward(P.gpu, bt_g(dinp), bt_g(dw), bt_g(db), bt_g(dout), bt_g(inp), bt_g(w), bt_g(mean),
                                  bt_g(rstd), N, C);
    }
    // dinp ~ rstd·O(1): relative 1e-5 plus an absolute floor scaled by rstd (a wide row has a
    // large rstd when spread is small)
    float rs = 1.0f / spread;
    snprintf(name, sizeof name, "layernorm_backward dinp x2 %s", what);
    bt_check(&P, name, dinp, 4e-5 * rs, 1e-5);
    // dweight, dbias: sums over N rows of O(1) terms
    snprintf(name, sizeof name, "layernorm_backward dweight x2 %s", what);
    bt_check(&P, name, dw, 4e-6 * (N + 8), 1e-5);
    snprintf(name, sizeof name, "layernorm_backward dbias x2 %s", what);
    bt_check(&P, name, db, 4e-6 * (N + 8), 1e-5);
    bt_free(&P, &inp); bt_free(&P, &w); bt_free(&P, &b); bt_free(&P, &out); bt_free(&P, &mean); bt_free(&P, &rstd);
    bt_free(&P, &dout); bt_free(&P, &dinp); bt_free(&P, &dw); bt_free(&P, &db);
}

// ------------------------------------------------------------------ embedding
static void test_embedding(uint32_t B, uint32_t T, uint32_t C, uint32_t V, const char *what) {
    size_t BT = (size_t)B * T;
    btensor tok = bt_tokens(BT, V), wte = bt_rand((size_t)V * C, 1), wpe = bt_rand((size_t)T * C, 1);
    btensor out = bt_rand(BT * C, 1);
    P.cpu->embedding_forward(P.cpu, bt_c(out), bt_c(tok), bt_c(wte), bt_c(wpe), B, T, C, V);
    P.gpu->embedding_forward(P.gpu, bt_g(out), bt_g(tok), bt_g(wte), bt_g(wpe), B, T, C, V);
    char name[160];
    snprintf(name, sizeof name, "embedding_forward %s B=%u T=%u C=%u V=%u", what, B, T, C, V);
    bt_check(&P, name, out, 0, 0);  // one addition each: bitwise equal
    btensor dout = bt_rand(BT * C, 1), dwte = bt_rand((size_t)V * C, 1), dwpe = bt_rand((size_t)T * C, 1);
    for (int rep = 0; rep < 2; rep++) {
        P.cpu->embedding_backward(P.cpu, bt_c(dwte), bt_c(dwpe), bt_c(dout), bt_c(tok), B, T, C, V);
        P.gpu->embedding_backward(P.gpu, bt_g(dwte), bt_g(dwpe), bt_g(dout), bt_g(tok), B, T, C, V);
    }
    // sums of up to B*T unit-normal rows in another order
    snprintf(name, sizeof name, "embedding_backward dwte x2 %s", what);
    bt_check(&P, name, dwte, 2e-6 * (BT / (V < BT ? V : BT) + 8), 1e-5);
    snprintf(name, sizeof name, "embedding_backward dwpe x2 %s", what);
    bt_check(&P, name, dwpe, 2e-6 * (B + 8), 1e-5);
    bt_free(&P, &tok); bt_free(&P, &wte); bt_free(&P, &wpe); bt_free(&P, &out);
    bt_free(&P, &dout); bt_free(&P, &dwte); bt_free(&P, &dwpe);
}

// A token list with heavy repetition (one token at half the positions) and the first occurrence
// late: exercises the chunked first-occurrence scan across several 256-position chunks.
static void test_embedding_repeats(void) {
    const uint32_t B = 3, T = 300, C = 20, V = 7;
    size_t BT = (size_t)B * T;
    int32_t *t = malloc(BT * 4);
    for (size_t i = 0; i < BT; i++) t[i] = (i % 2) ? 3 : (int32_t)(trng_u32() % V);
    t[0] = 5; t[700] = 6;  // 6 may appear only late
    btensor tok = bt_new(&P, BT, t);
    free(t);
    btensor dout = bt_rand(BT * C, 1), dwte = bt_zero((size_t)V * C), dwpe = bt_zero((size_t)T * C);
    P.cpu->embedding_backward(P.cpu, bt_c(dwte), bt_c(dwpe), bt_c(dout), bt_c(tok), B, T, C, V);
    P.gpu->embedding_backward(P.gpu, bt_g(dwte), bt_g(dwpe), bt_g(dout), bt_g(tok), B, T, C, V);
    bt_check(&P, "embedding_backward dwte, 450 repeats of one token", dwte, 2e-6 * 460, 1e-5);
    bt_free(&P, &tok); bt_free(&P, &dout); bt_free(&P, &dwte); bt_free(&P, &dwpe);
}

// ------------------------------------------------------------------ residual
// The views start o, 2·o and 3·o elements into their buffers (o a multiple of 4 but not of 64: the
// vec4 path's windows then start inside a 256-byte unit; o odd: the scalar path); the neighbours
// must come back unchanged.
static void test_residual(size_t n, size_t o, const char *what) {
    btensor a = bt_rand(o + n, 1), b = bt_rand(2 * o + n, 1), out = bt_rand(3 * o + n, 1);
    const wgt_view ca = wgt_view_at(bt_c(a), o), ga = wgt_view_at(bt_g(a), o), cb = wgt_view_at(bt_c(b), 2 * o),
                   gb = wgt_view_at(bt_g(b), 2 * o), co = wgt_view_at(bt_c(out), 3 * o),
                   go = wgt_view_at(bt_g(out), 3 * o);
    char name[160];
    P.cpu->residual_forward(P.cpu, co, ca, cb, n);
    P.gpu->residual_forward(P.gpu, go, ga, gb, n);
    snprintf(name, sizeof name, "residual_forward %s n=%zu offset %zu", what, n, o);
    bt_check(&P, name, out, 0, 0);  // one IEEE addition: bitwise equal
    P.cpu->residual_forward(P.cpu, ca, ca, cb, n);  // out aliases a
    P.gpu->residual_forward(P.gpu, ga, ga, gb, n);
    snprintf(name, sizeof name, "residual_forward in place %s n=%zu offset %zu", what, n, o);
    bt_check(&P, name, a, 0, 0);
    P.cpu->add_inplace(P.cpu, co, cb, n);
    P.gpu->add_inplace(P.gpu, go, gb, n);
    snprintf(name, sizeof name, "add_inplace %s n=%zu offset %zu", what, n, o);
    bt_check(&P, name, out, 0, 0);
    P.cpu->scale_inplace(P.cpu, cb, n, -1.75f);
    P.gpu->scale_inplace(P.gpu, gb, n, -1.75f);
    snprintf(name, sizeof name, "scale_inplace %s n=%zu offset %zu", what, n, o);
    bt_check(&P, name, b, 0, 0);  // one product
    bt_free(&P, &a); bt_free(&P, &b); bt_free(&P, &out);
}

// ------------------------------------------------------------------ optimizer
static void test_grad_norm(size_t n, const char *what) {
    btensor g = bt_rand(n, 1), ns = bt_rand(1, 1);
    char name[160];
    P.cpu->grad_norm_sq(P.cpu, bt_c(ns), bt_c(g), n, 0);
    P.gpu->grad_norm_sq(P.gpu, bt_g(ns), bt_g(g), n, 0);
    // a sum of n squares in f32 (tree) against double: relative 1e-5 is generous
    snprintf(name, sizeof name, "grad_norm_sq %s n=%zu", what, n);
    bt_check(&P, name, ns, 1e-6, 1e-5);
    P.cpu->grad_norm_sq(P.cpu, bt_c(ns), bt_c(g), n / 3, 1);
    P.gpu->grad_norm_sq(P.gpu, bt_g(ns), bt_g(g), n / 3, 1);
    snprintf(name, sizeof name, "grad_norm_sq accumulate %s n=%zu", what, n);
    bt_check(&P, name, ns, 1e-6, 1e-5);
    bt_free(&P, &g); bt_free(&P, &ns);
}

// grad_clip_scale on both backends: a status at an unaligned offset inside a larger buffer
// (as a view of a word range would be), the float words within 1 ulp, the counters exact.
static void clip_case(const char *name, float norm_sq, float loss_sum, float S, uint32_t t, uint32_t clean,
                      float max_norm, uint32_t dynamic, uint32_t window) {
    const size_t off = 5;
    float st[WGT_ST_WORDS + off];
    memset(st, 0, sizeof st);
    float *w = st + off;
    w[WGT_ST_NORM_SQ] = norm_sq;
    w[WGT_ST_LOSS_SUM] = loss_sum;
    w[WGT_ST_LOSS_SCALE] = S;
    wgt_st_set_u32(w, WGT_ST_T, t);
    wgt_st_set_u32(w, WGT_ST_CLEAN, clean);
    btensor b = bt_new(&P, WGT_ST_WORDS + off, st);
    P.cpu->grad_clip_scale(P.cpu, wgt_view_sub(bt_c(b), off, WGT_ST_WORDS), max_norm, 0.9f, 0.95f, dynamic, window);
    P.gpu->grad_clip_scale(P.gpu, wgt_view_sub(bt_g(b), off, WGT_ST_WORDS), max_norm, 0.9f, 0.95f, dynamic, window);
    float *c, *g;
    bt_get(&P, b, &c, &g);
    char what[160];
    snprintf(what, sizeof what, "grad_clip_scale %s: float words", name);
    const int fw[] = {WGT_ST_NORM_SQ, WGT_ST_LOSS_SUM, WGT_ST_LOSS_SCALE, WGT_ST_CLIP, WGT_ST_NORM, WGT_ST_STEP_SCALE,
                      WGT_ST_BC1, WGT_ST_BC2};
    int ok = 1;
    for (size_t k = 0; k < sizeof fw / sizeof fw[0]; k++) {
        float x = g[off + fw[k]], y = c[off + fw[k]];
        // one sqrt and one division: correctly rounded or 1 ulp; non-finite words must match; a
        // subnormal may be flushed to zero on a GPU (docs/numerics.md)
        int same = (isnan(x) && isnan(y)) || x == y || fabsf(x - y) <= 2.4e-7f * fabsf(y) ||
                   (fabsf(y) < 1.17549435e-38f && fabsf(x) < 1.17549435e-38f);
        if (!same) fprintf(stderr, "  word %d: gpu %.9g cpu %.9g\n", fw[k], x, y);
        ok &= same;
    }
    CHECK(ok, "%s", what);
    // the bias corrections are integer arithmetic on both sides: bit for bit
    CHECK(g[off + WGT_ST_BC1] == c[off + WGT_ST_BC1] && g[off + WGT_ST_BC2] == c[off + WGT_ST_BC2],
          "grad_clip_scale %s: bias corrections gpu %.9g %.9g cpu %.9g %.9g", name, g[off + WGT_ST_BC1],
          g[off + WGT_ST_BC2], c[off + WGT_ST_BC1], c[off + WGT_ST_BC2]);
    const int uw[] = {WGT_ST_T, WGT_ST_SKIPS, WGT_ST_SKIPPED, WGT_ST_CLEAN};
    for (size_t k = 0; k < sizeof uw / sizeof uw[0]; k++)
        CHECK(wgt_st_u32(g + off, uw[k]) == wgt_st_u32(c + off, uw[k]), "grad_clip_scale %s: counter word %d: gpu %u cpu %u",
              name, uw[k], wgt_st_u32(g + off, uw[k]), wgt_st_u32(c + off, uw[k]));
    CHECK(!memcmp(g, c, off * 4), "grad_clip_scale %s: words before the view changed", name);
    free(c);
    free(g);
    bt_free(&P, &b);
}

static void test_clip(void) {
    const float norms_sq[] = {0.0f, 0.25f, 4.0f, 1e6f, 1.0f};
    const float max_norms[] = {1.0f, 0.0f, -1.0f, 1.0f, 1.0f};
    for (int i = 0; i < 5; i++) {
        char name[96];
        snprintf(name, sizeof name, "norm_sq=%g max_norm=%g", norms_sq[i], max_norms[i]);
        clip_case(name, norms_sq[i], 2.0f, 1.0f, (uint32_t)i, 0, max_norms[i], 0, 2000);
    }
    clip_case("scale 2^20", 3.0f * 1099511627776.0f, 1.0f, 1048576.0f, 41, 3, 1.0f, 1, 2000);
    clip_case("t = 1000 (bias corrections)", 2.0f, 1.0f, 1.0f, 999, 0, 1.0f, 0, 2000);
    clip_case("t = 123456", 2.0f, 1.0f, 1.0f, 123455, 0, 1.0f, 0, 2000);
    clip_case("overflow, dynamic", INFINITY, 1.0f, 65536.0f, 7, 11, 1.0f, 1, 2000);
    clip_case("NaN norm, static", NAN, 1.0f, 8.0f, 7, 11, 1.0f, 0, 2000);
    clip_case("NaN loss", 1.0f, NAN, 1.0f, 7, 11, 1.0f, 1, 2000);
    clip_case("growth", 1.0f, 1.0f, 128.0f, 7, 4, 1.0f, 1, 5);
    clip_case("multiplier below 2^-126 skips", 1.0f, 1.0f, 3e38f, 7, 4, 1.0f, 1, 5);
    clip_case("no growth past 2^64", 1.0f, 1.0f, 18446744073709551616.0f, 7, 4, 1.0f, 1, 5);
    clip_case("backoff floor", INFINITY, 1.0f, 1.17549435e-38f, 7, 4, 1.0f, 1, 5);
}

static void test_adamw(size_t n) {
    btensor p = bt_rand(n, 1), m = bt_zero(n), v = bt_zero(n), g = bt_rand(n, 0.1f);
    for (int t = 1; t <= 3; t++) {
        // the status grad_clip_scale would leave for update t, multiplier 0.7
        float s[WGT_ST_WORDS] = {0};
        s[WGT_ST_CLIP] = 0.7f;
        s[WGT_ST_LOSS_SCALE] = 1.0f;
        s[WGT_ST_BC1] = cpu_bias_correction(0.9f, (uint32_t)t);
        s[WGT_ST_BC2] = cpu_bias_correction(0.95f, (uint32_t)t);
        wgt_st_set_u32(s, WGT_ST_T, (uint32_t)t);
        btensor sc = bt_new(&P, WGT_ST_WORDS, s);
        float wd = t == 2 ? 0.0f : 0.1f;
        P.cpu->adamw(P.cpu, bt_c(p), bt_c(m), bt_c(v), bt_c(g), bt_c(sc), n, 1e-2f, 0.9f, 0.95f, 1e-8f, wd);
        P.gpu->adamw(P.gpu, bt_g(p), bt_g(m), bt_g(v), bt_g(g), bt_g(sc), n, 1e-2f, 0.9f, 0.95f, 1e-8f, wd);
        bt_free(&P, &sc);
    }
    // element-wise f32 with sqrt and divisions (a few ulps each); m/sqrt(v) amplifies nothing
    bt_check(&P, "adamw params after 3 steps", p, 1e-6, 1e-5);
    bt_check(&P, "adamw m", m, 1e-9, 1e-5);
    bt_check(&P, "adamw v", v, 1e-12, 1e-5);
    bt_free(&P, &p); bt_free(&P, &m); bt_free(&P, &v); bt_free(&P, &g);
}

// The gradient-norm scratch buffer belongs to its backend: free a backend, open another (malloc
// may hand it the same address) and the norm must still work, on a fresh buffer.
static void test_norm_scratch_lifetime(void) {
    const float g[3] = {1.0f, 2.0f, 2.0f};
    for (int round = 0; round < 3; round++) {
        wgt_backend *be;
        if (backend_webgpu_init(&be, getenv("WGTRAIN_TEST_ADAPTER") ? getenv("WGTRAIN_TEST_ADAPTER") : "auto") != WGT_OK) {
            CHECK(0, "second webgpu backend: %s", wgt_last_error());
            return;
        }
        wgt_buf *gb, *nb;
        be->buf_alloc(be, &gb, 3, "g");
        be->buf_alloc(be, &nb, 1, "norm_sq");
        wgt_view gv = wgt_view_of(gb, 0, 3), nv = wgt_view_of(nb, 0, 1);
        be->upload(be, gv, g, 3);
        be->grad_norm_sq(be, nv, gv, 3, 0);
        float r = -1;
        wgt_status st = be->download(be, &r, nv, 1);
        CHECK(st == WGT_OK && r == 9.0f, "grad_norm_sq on backend #%d: %g (%s)", round + 2, r, wgt_last_error());
        be->buf_free(be, gb);
        be->buf_free(be, nb);
        be->free(be);
    }
}

// ------------------------------------------------------------------ matmul with f16 operands
// The f16 GEMMs (mixed precision) through the paths that cut operands: binding windows that
// start in the middle of a word (odd leading dimensions, a 3000-element binding limit), split-K,
// vec4 loads of the f32 operand beside the f16 one; in each f16 storage path the device has.
// Both sides widen the same halves exactly, so the f32 tolerances hold.
static btensor bt_rand_h(size_t n) {
    uint16_t *h = calloc(n + 2, 2);
    for (size_t i = 0; i < n; i++) h[i] = wgt_f32_to_f16(trng_normal());
    btensor t = bt_new(&P, wgt_f16_words(n), h);
    free(h);
    return t;
}

static void test_matmul_h(uint32_t N, uint32_t C, uint32_t OC, const char *what) {
    char name[200];
    btensor inp = bt_rand_h((size_t)N * C), w = bt_rand_h((size_t)OC * C), b = bt_rand(OC, 1);
    btensor out = bt_rand((size_t)N * OC, 1), dout = bt_rand((size_t)N * OC, 1), dinp = bt_rand((size_t)N * C, 1);
    btensor dw = bt_rand((size_t)OC * C, 1), db = bt_rand(OC, 1);
    P.cpu->matmul_f16(P.cpu, bt_c(out), bt_c(inp), bt_c(w), bt_c(b), N, C, OC);
    P.gpu->matmul_f16(P.gpu, bt_g(out), bt_g(inp), bt_g(w), bt_g(b), N, C, OC);
    snprintf(name, sizeof name, "matmul_f16 %s N=%u C=%u OC=%u", what, N, C, OC);
    bt_check(&P, name, out, mm_atol(C), 1e-5);
    P.cpu->matmul_t_f16(P.cpu, bt_c(dinp), bt_c(dout), bt_c(w), N, C, OC);
    P.gpu->matmul_t_f16(P.gpu, bt_g(dinp), bt_g(dout), bt_g(w), N, C, OC);
    snprintf(name, sizeof name, "matmul_t_f16 %s N=%u C=%u OC=%u", what, N, C, OC);
    bt_check(&P, name, dinp, mm_atol(OC), 1e-5);
    for (int rep = 0; rep < 2; rep++) {
        P.cpu->matmul_at_f16(P.cpu, bt_c(dw), bt_c(db), bt_c(dout), bt_c(inp), N, C, OC);
        P.gpu->matmul_at_f16(P.gpu, bt_g(dw), bt_g(db), bt_g(dout), bt_g(inp), N, C, OC);
    }
    snprintf(name, sizeof name, "matmul_at_f16 x2 %s N=%u C=%u OC=%u", what, N, C, OC);
    bt_check(&P, name, dw, 2 * mm_atol(N), 1e-5);
    bt_check(&P, name, db, 2 * mm_atol(N), 1e-5);
    bt_free(&P, &inp); bt_free(&P, &w); bt_free(&P, &b); bt_free(&P, &out); bt_free(&P, &dout);
    bt_free(&P, &dinp); bt_free(&P, &dw); bt_free(&P, &db);
}

static void test_matmul_f16(void) {
    const int native = wg_f16_native(wg_of(P.gpu));
    for (int pass = 0; pass < (native ? 2 : 1); pass++) {
        S->f16 = pass ? WG_F16_PACKED : WG_F16_AUTO;
        const char *path = wg_f16_native(wg_of(P.gpu)) ? "native" : "packed";
        char what[96];
        S->mm_tile = WG_MM_TILE_SMALL;
        snprintf(what, sizeof what, "%s", path);
        test_matmul_h(67, 45, 131, what);
        S->binding_limit = 3000;
        snprintf(what, sizeof what, "%s, split bindings", path);
        test_matmul_h(67, 45, 131, what);
        S->binding_limit = 0;
        S->mm_tile = WG_MM_TILE_BIG;
        S->mm_splitk = 3;
        S->mm_vec4 = 1;
        snprintf(what, sizeof what, "%s, split-K 3, vec4 f32 operand", path);
        test_matmul_h(100, 216, 90, what);
        S->mm_splitk = WG_AUTO;
        S->mm_vec4 = WG_AUTO;
        S->mm_tile = WG_MM_TILE_AUTO;
    }
    S->f16 = WG_F16_AUTO;
}

// ------------------------------------------------------------------ main
#define TIMED(what, call)                                                \
    do {                                                                 \
        double t0_ = wgt_now_s();                                            \
        call;                                                            \
        printf("  %-40s %6.2f s\n", what, wgt_now_s() - t0_);                \
        fflush(stdout);                                                  \
    } while (0)

int main(void) {
    P = bpair_open();
    S = wg_ctx_settings(wg_of(P.gpu));
    TIMED("matmul family", test_matmuls());
    TIMED("matmul split-K, vec4 loads, raster groups", test_matmul_splitk());
    TIMED("matmul stream-K", test_matmul_streamk());
    TIMED("matmul edge tiles first", test_matmul_edge_first());
    TIMED("matmul tile shapes of the tile table", test_matmul_tile_specs());
    TIMED("matmul, matmul_t through transposed operands", test_matmul_fwd_transposed());
    TIMED("matmul_at shared gradient buffer", test_matmul_at_shared_grads());
    TIMED("matmul offsets", test_matmul_offsets());
    TIMED("matmul split-K scratch lifetime", test_matmul_scratch_lifetime());
    TIMED("matmul with f16 operands", test_matmul_f16());
    TIMED("layernorm", {
        test_layernorm(67, 45, 0.0f, 1.0f, "random");
        test_layernorm(9, 700, 0.0f, 1.0f, "wide rows");
        test_layernorm(33, 257, 1000.0f, 1.0f, "mean 1000");
        test_layernorm(17, 768, 3e4f, 0.01f, "mean 3e4 spread 0.01");
        // the row kernels: C = 68 has its row in registers at every subgroup size, C = 2100 (525
        // vec4: more than 16 a lane at 32 lanes or fewer) reads it again in each pass
        test_layernorm(37, 68, 5.0f, 1.0f, "row in registers");
        test_layernorm(5, 2100, 5.0f, 1.0f, "row read again");
    });
    TIMED("layernorm 66000 rows (2-D grid)", test_layernorm(66000, 3, 1.0f, 2.0f, "66000 rows"));
    // the two-stage column sums (widths multiples of 4) over 20 chunks of 256 rows: the finish's
    // 16 chunk slices, 4 of them with two chunks
    TIMED("column sums over 20 chunks", (test_layernorm(5000, 68, 0.0f, 1.0f, "20 chunks"),
                                         test_matmul_at(5000, 8, 68, 1, "dbias over 20 chunks")));
    TIMED("embedding", {
        test_embedding(3, 37, 45, 50, "random");
        test_embedding(2, 300, 70, 1000, "several chunks");
        test_embedding(1, 5, 1100, 3, "C > 1024");
        test_embedding_repeats();
        S->binding_limit = 2000;  // vocabulary and position windows (wpe still fits)
        test_embedding(3, 37, 45, 50, "split");
        S->binding_limit = 2048;  // the tokens (B*T) and wpe (T*C) of exactly one binding, as the model allows
        test_embedding(64, 32, 64, 50, "tokens and wpe at the binding limit");
        S->binding_limit = 0;
    });
    TIMED("embedding 66000 positions (2-D grid)", test_embedding(2, 33000, 4, 50, "66000 positions"));
    TIMED("residual", {
        test_residual(1000, 0, "small, vec4");
        test_residual(1000, 12, "small, vec4");
        test_residual(1002, 0, "small, scalar");
        test_residual(1000, 3, "small, scalar");
        test_residual(70000 * 256 + 13, 0, "2-D grid");
        S->binding_limit = 1000;
        test_residual(5000, 0, "split, vec4");
        test_residual(5000, 20, "split, vec4");
        test_residual(5001, 1, "split, scalar");
        S->binding_limit = 0;
    });
    TIMED("optimizer", {
        test_grad_norm(1, "one");
        test_grad_norm(1000003, "1M");
        S->binding_limit = 1000;
        test_grad_norm(5003, "split");
        test_adamw(5003);
        S->binding_limit = 0;
        test_clip();
        test_adamw(300001);
        test_norm_scratch_lifetime();
    });
    bpair_close(&P);
    return test_finish();
}
