// fuzz_safetensors.c — mutation fuzzer for the safetensors reader (st_open, st_open_header): seeds from
// st_writer, a hand-made header with __metadata__ and an odd-length header, and one mixing F16,
// F32 and BF16 tensors (the F32 one at an offset that is not a multiple of 4); an accepted
// file's tensors must be consistent (element counts, unique names, readable aligned data
// tiling the data section) and survive a write / read round trip.
#include <math.h>
#include "fuzzlib.h"
#include "core/safetensors.h"

static void add_raw_seed(fz_buf *b, const char *json, const float *d, size_t nf) {
    size_t jl = strlen(json);
    uint8_t len[8];
    for (int i = 0; i < 8; i++) len[i] = (uint8_t)((uint64_t)jl >> (8 * i));
    fz_set(b, len, 8);
    fz_insert(b, 8, json, jl);
    fz_insert(b, 8 + jl, d, nf * 4);
}

int main(int argc, char **argv) {
    long iters, accepted = 0;
    fz_setup(argc, argv, &iters);
    float d[16];
    for (int i = 0; i < 16; i++) d[i] = (float)i - 3.25f;
    enum { NS = 4 };
    fz_buf seeds[NS] = {{0}}, b = {0};
    st_writer *w = st_writer_new();
    size_t s1[2] = {2, 3}, s2[1] = {4}, s3[2] = {0, 5}, s4[1] = {6};
    st_writer_add(w, "wte.weight", 2, s1, d);
    st_writer_add(w, "h.0.ln_1.bias", 1, s2, d + 6);
    st_writer_add(w, "empty", 2, s3, d);
    if (st_writer_finish(w, fz_path("seed.st")) != WGT_OK || !fz_read(fz_path("seed.st"), &seeds[0])) return 2;
    w = st_writer_new();
    st_writer_add(w, "x", 1, s4, d);
    if (st_writer_finish(w, fz_path("seed.st")) != WGT_OK || !fz_read(fz_path("seed.st"), &seeds[1])) return 2;
    add_raw_seed(&seeds[2], "{\"__metadata__\":{\"format\":\"pt\"},\"b\":{\"dtype\":\"F32\",\"shape\":[3],"
                            "\"data_offsets\":[0,12]},\"a\":{\"dtype\":\"F32\",\"shape\":[1,1],\"data_offsets\":[12,16]}} ",
                 d, 4);
    {
        uint8_t mixed[6 + 8 + 4];
        const uint16_t h3[3] = {0x3c00, 0x8001, 0x7e01}, b2[2] = {0x4049, 0xff80};  // 1, -subnormal, NaN; 3.14, -inf
        memcpy(mixed, h3, 6);
        memcpy(mixed + 6, d, 8);
        memcpy(mixed + 14, b2, 4);
        const char *js = "{\"h\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[0,6]},\"f\":{\"dtype\":\"F32\","
                         "\"shape\":[2],\"data_offsets\":[6,14]},\"b\":{\"dtype\":\"BF16\",\"shape\":[2,1],"
                         "\"data_offsets\":[14,18]}}";
        add_raw_seed(&seeds[3], js, d, 0);
        fz_insert(&seeds[3], 8 + strlen(js), mixed, sizeof mixed);
    }
    const char *p = fz_path("in.st"), *q = fz_path("back.st");
    for (long it = 0; it < iters; it++) {
        if (it % 4 != 3 || !b.n) {
            size_t s = fz_below(NS);
            fz_set(&b, seeds[s].p, seeds[s].n);
        }
        fz_mutate(&b, fz_next() % 4 != 0);
        fz_write(p, &b);
        st_file *f = NULL, *h = NULL;
        wgt_status fs = st_open(&f, p), hs = st_open_header(&h, p);
        // the header alone is refused or accepted as the whole file is, with the same tensors and no data
        FZ_CHECK((fs == WGT_OK) == (hs == WGT_OK), "st_open %d but st_open_header %d", (int)fs, (int)hs);
        if (fs == WGT_OK && hs == WGT_OK) {
            FZ_CHECK(st_count(h) == st_count(f), "st_open_header: %d tensors, st_open %d", st_count(h), st_count(f));
            for (int i = 0; i < st_count(f) && i < st_count(h); i++)
                FZ_CHECK(!strcmp(st_at(h, i)->name, st_at(f, i)->name) && st_at(h, i)->n == st_at(f, i)->n &&
                             st_at(h, i)->data == NULL, "st_open_header: tensor %d differs", i);
        }
        st_close(h);
        if (fs != WGT_OK) {
            FZ_CHECK(f == NULL, "refused open returned a file");
            continue;
        }
        accepted++;
        size_t total = 0;
        double sum = 0;
        st_writer *bw = st_writer_new();
        for (int i = 0; i < st_count(f); i++) {
            const st_tensor *t = st_at(f, i);
            size_t n = 1;
            for (int k = 0; k < t->ndim; k++) n *= t->shape[k];
            FZ_CHECK(t->ndim >= 0 && t->ndim <= ST_MAX_DIMS && n == t->n, "tensor %s: n %zu vs %zu", t->name, t->n, n);
            FZ_CHECK(st_find(f, t->name) == t, "name '%s' not unique", t->name);
            FZ_CHECK(t->n == 0 || (uintptr_t)t->data % 4 == 0, "tensor %s misaligned", t->name);
            for (size_t k = 0; k < t->n; k++) sum += t->data[k];  // every element must be readable
            total += t->n * (strcmp(t->dtype, "F32") ? 2 : 4);  // bytes in the file
            st_writer_add(bw, t->name, t->ndim, t->shape, t->data);
        }
        FZ_CHECK(total + 8 <= b.n, "tensors hold %zu bytes in a file of %zu", total, b.n);
        (void)sum;
        st_file *g = NULL;
        if (st_writer_finish(bw, q) == WGT_OK && st_open(&g, q) == WGT_OK) {
            FZ_CHECK(st_count(g) == st_count(f), "round trip: %d tensors vs %d", st_count(g), st_count(f));
            for (int i = 0; i < st_count(f); i++) {
                const st_tensor *t = st_at(f, i), *u = st_find(g, t->name);
                FZ_CHECK(u && u->n == t->n && u->ndim == t->ndim && (t->n == 0 || !memcmp(u->data, t->data, t->n * 4)),
                         "round trip of '%s' differs", t->name);
            }
            st_close(g);
        } else {
            FZ_CHECK(0, "round trip failed: %s", wgt_last_error());
        }
        st_close(f);
    }
    for (int i = 0; i < NS; i++) free(seeds[i].p);
    free(b.p);
    return fz_finish("fuzz_safetensors", iters, accepted);
}
