// fuzz_meta.c — mutation fuzzer for a data directory's meta.json (dataset_open): a directory
// written by prepare_corpus, its meta.json mutated as text (and now and then a shard or the
// tokenizer as bytes, restored afterwards). An accepted directory must give batches of valid
// token ids and agree with itself on counts.
#include "fuzzlib.h"
#include "data/prepare.h"
#include "train/dataset.h"

int main(int argc, char **argv) {
    long iters, accepted = 0;
    fz_setup(argc, argv, &iters);
    FILE *f = fopen(fz_path("corpus.txt"), "wb");
    for (int d = 0; d < 12; d++)
        fprintf(f, "the cat %d sat on the mat and the dog ran far away from home.\n<|endoftext|>\n", d);
    fclose(f);
    char dir[512], meta[600], shard[600], tokp[600];
    snprintf(dir, sizeof dir, "%s", fz_path("data"));
    snprintf(meta, sizeof meta, "%s/meta.json", dir);
    snprintf(shard, sizeof shard, "%s/train_000.bin", dir);
    snprintf(tokp, sizeof tokp, "%s/tokenizer.bin", dir);
    const char *in[] = {fz_path("corpus.txt")};
    if (prepare_corpus(in, 1, dir, 280, 0.25, 0) != WGT_OK) {
        fprintf(stderr, "prepare: %s\n", wgt_last_error());
        return 2;
    }
    fz_buf seed = {0}, b = {0}, shard_orig = {0}, tok_orig = {0}, m = {0};
    if (!fz_read(meta, &seed) || !fz_read(shard, &shard_orig) || !fz_read(tokp, &tok_orig)) return 2;
    int32_t inp[2 * 8], tgt[2 * 8];
    for (long it = 0; it < iters; it++) {
        fz_set(&b, seed.p, seed.n);
        int which = (int)fz_below(10);  // 0: a shard, 1: the tokenizer, else meta.json
        if (which == 0) {
            fz_set(&m, shard_orig.p, shard_orig.n);
            fz_mutate(&m, 0);
            fz_write(shard, &m);
        } else if (which == 1) {
            fz_set(&m, tok_orig.p, tok_orig.n);
            fz_mutate(&m, 0);
            fz_write(tokp, &m);
        } else {
            fz_mutate(&b, 1);
        }
        fz_write(meta, &b);
        dataset *ds = NULL;
        wgt_status st = dataset_open(&ds, dir);
        if (st == WGT_OK) {
            accepted++;
            int v = dataset_vocab(ds);
            FZ_CHECK(v >= 257 && v <= 65535, "vocab %d", v);
            FZ_CHECK(dataset_check_vocab(ds, v) == WGT_OK, "tokens beyond the vocabulary: %s", wgt_last_error());
            if (dataset_check_seq(ds, 8) == WGT_OK) {
                uint64_t rng = (uint64_t)it;
                FZ_CHECK(dataset_train_batch(ds, &rng, 2, 8, inp, tgt) == WGT_OK, "batch: %s", wgt_last_error());
                for (int i = 0; i < 16; i++) FZ_CHECK(inp[i] >= 0 && inp[i] < v && tgt[i] >= 0 && tgt[i] < v, "id %d", inp[i]);
                size_t valid;
                FZ_CHECK(dataset_val_batch(ds, 0, 2, 8, inp, tgt, NULL, &valid) == WGT_OK, "val batch: %s", wgt_last_error());
            }
            dataset_free(ds);
        } else {
            FZ_CHECK(ds == NULL, "refused open returned a dataset");
        }
        if (which == 0) fz_write(shard, &shard_orig);
        if (which == 1) fz_write(tokp, &tok_orig);
    }
    free(seed.p);
    free(b.p);
    free(m.p);
    free(shard_orig.p);
    free(tok_orig.p);
    return fz_finish("fuzz_meta", iters, accepted);
}
