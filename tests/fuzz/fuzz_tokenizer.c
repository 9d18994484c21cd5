// fuzz_tokenizer.c — mutation fuzzer for tokenizer_load: a trained tokenizer's file, mutated;
// every 3rd input gets its CRC-32 recomputed so the merge checks behind it are reached. An
// accepted tokenizer must round-trip text through encode / decode and keep its fingerprint
// through save / load.
#include <zlib.h>
#include "fuzzlib.h"
#include "data/tokenizer.h"

int main(int argc, char **argv) {
    long iters, accepted = 0;
    fz_setup(argc, argv, &iters);
    const char *text = "the cat sat on the mat and the dog sat on the log; the cat and the dog ran far away. "
                       "1964 1964 42 42 hello hello world world, aaaa bbbb aaaa bbbb\n";
    tokenizer *tok;
    if (tokenizer_train(&tok, (const uint8_t *)text, strlen(text), 320) != WGT_OK) return 2;
    fz_buf seed = {0}, b = {0};
    if (tokenizer_save(tok, fz_path("seed.bin")) != WGT_OK || !fz_read(fz_path("seed.bin"), &seed)) return 2;
    tokenizer_free(tok);
    const char *p = fz_path("in.bin"), *q = fz_path("back.bin");
    static const char sample[] = "the cat ran; \xff\x00 hello 1964!";
    const size_t sample_n = sizeof sample - 1;  // NUL included in the middle
    for (long it = 0; it < iters; it++) {
        fz_set(&b, seed.p, seed.n);
        fz_mutate(&b, 0);
        if (it % 3 == 0 && b.n >= 4) {
            uint32_t crc = (uint32_t)crc32(0L, b.p, (uInt)(b.n - 4));
            memcpy(b.p + b.n - 4, &crc, 4);
        }
        fz_write(p, &b);
        tokenizer *t = NULL;
        if (tokenizer_load(&t, p) != WGT_OK) {
            FZ_CHECK(t == NULL, "refused load returned a tokenizer");
            continue;
        }
        accepted++;
        int v = tokenizer_vocab_size(t);
        FZ_CHECK(v >= TOKENIZER_MIN_VOCAB && v <= TOKENIZER_MAX_VOCAB && tokenizer_eot(t) == v - 1, "vocab %d", v);
        uint32_t *ids;
        size_t ni;
        uint8_t *out;
        size_t no;
        if (tokenizer_encode(t, (const uint8_t *)sample, sample_n, &ids, &ni) == WGT_OK) {
            FZ_CHECK(tokenizer_decode(t, ids, ni, &out, &no) == WGT_OK && no == sample_n && !memcmp(out, sample, no),
                     "round trip of the sample text fails");
            if (no == sample_n) free(out);
            free(ids);
        }
        tokenizer *t2 = NULL;
        FZ_CHECK(tokenizer_save(t, q) == WGT_OK && tokenizer_load(&t2, q) == WGT_OK &&
                 tokenizer_fingerprint(t2) == tokenizer_fingerprint(t), "save / load changes the fingerprint");
        tokenizer_free(t2);
        tokenizer_free(t);
    }
    free(seed.p);
    free(b.p);
    return fz_finish("fuzz_tokenizer", iters, accepted);
}
