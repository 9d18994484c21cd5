// fuzz_tuning.c — mutation fuzzer for the GEMM tuning cache (wg_tune_parse, src/backend/webgpu/
// wg_tune.h): a cache of two devices mutated as text. An entry the parser accepts must hold six
// valid tile specs; a refusal must say why.
#include "fuzzlib.h"
#include "backend/webgpu/wg_tune.h"

static const char SEED[] =
    "{\"format\": \"wgtrain-tuning\", \"version\": 1, \"devices\": [\n"
    " {\"key\": \"other|gpu\", \"matmul\": {\"big\": \"128x128x16/8x8\", \"small\": \"64x64x16/4x4\"}},\n"
    " {\"key\": \"vendor|arch|name|driver|vulkan|k=0123456789abcdef|v1\", \"adapter\": \"name\", \"driver\": \"driver\",\n"
    "  \"matmul\": {\"big\": \"64x128x8/8x8\", \"small\": \"64x64x16/4x4\", \"big_gflops\": 31.5, \"small_gflops\": 2.5},\n"
    "  \"matmul_t\": {\"big\": \"128x128x8/8x8\", \"small\": \"64x64x8/8x8\", \"big_gflops\": 30, \"small_gflops\": 2},\n"
    "  \"matmul_at\": {\"big\": \"128x128x4/8x8\", \"small\": \"32x64x8/4x4\", \"big_gflops\": 29, \"small_gflops\": 1}}]}\n";
static const char KEY[] = "vendor|arch|name|driver|vulkan|k=0123456789abcdef|v1";

int main(int argc, char **argv) {
    long iters, accepted = 0;
    fz_setup(argc, argv, &iters);
    fz_buf b = {0};
    wg_mm_tile_spec t[WG_TUNE_OPS][WG_TUNE_CLASSES];
    char why[512];
    why[0] = 0;
    FZ_CHECK(wg_tune_parse(SEED, sizeof SEED - 1, KEY, t, why, sizeof why) == 1, "the seed is refused: %s", why);
    for (long it = 0; it < iters; it++) {
        fz_set(&b, SEED, sizeof SEED - 1);
        int rounds = 1 + (int)fz_below(4);
        for (int r = 0; r < rounds; r++) fz_mutate(&b, 1);
        memset(t, 0, sizeof t);
        why[0] = 0;
        int r = wg_tune_parse((const char *)b.p, b.n, KEY, t, why, sizeof why);
        FZ_CHECK(r >= -2 && r <= 1, "result %d", r);
        if (r == 1) {
            accepted++;
            for (int op = 0; op < WG_TUNE_OPS; op++)
                for (int c = 0; c < WG_TUNE_CLASSES; c++)
                    FZ_CHECK(wg_mm_tile_spec_valid(&t[op][c]), "an accepted tile %dx%dx%d/%dx%d is invalid", t[op][c].bm,
                             t[op][c].bn, t[op][c].bk, t[op][c].tm, t[op][c].tn);
        } else if (r < 0) {
            FZ_CHECK(why[0] != 0, "a refusal without a reason (%d)", r);
        }
    }
    free(b.p);
    return fz_finish("fuzz_tuning", iters, accepted);
}
