// fuzz_hf_config.c — mutation fuzzer for a Hugging Face config.json (model_config_from_hf_file,
// what `train --init` and `grad --config` read): the config.json that `export` writes for a
// llama and a gpt2 model, mutated as text (NUL bytes, a byte order mark and duplicated keys
// among the mutations). An accepted file must be strict JSON (one object, no key twice, nothing
// after it) and describe a valid model whose config.json reads back as the same model.
#include "fuzzlib.h"
#include "core/json_strict.h"
#include "model/model.h"

int main(int argc, char **argv) {
    long iters, accepted = 0;
    fz_setup(argc, argv, &iters);
    model_config cfgs[2] = {
        {.arch = "llama", .n_layer = 2, .n_head = 4, .d_model = 32, .d_ff = 64, .vocab = 96, .max_seq = 16,
         .n_kv_heads = 2, .rope_theta = 10000, .rms_eps = 1e-5, .tie_embeddings = 1},
        {.arch = "gpt2", .n_layer = 1, .n_head = 2, .d_model = 16, .d_ff = 64, .vocab = 50, .max_seq = 8},
    };
    fz_buf seeds[2] = {{0}, {0}}, b = {0};
    for (int i = 0; i < 2; i++) {
        model_config_defaults(&cfgs[i]);
        char *js = model_config_to_hf_json(&cfgs[i]);
        fz_set(&seeds[i], js, strlen(js));
        free(js);
    }
    const char *p = fz_path("config.json");
    for (long it = 0; it < iters; it++) {
        const fz_buf *s = &seeds[fz_below(2)];
        fz_set(&b, s->p, s->n);
        int rounds = 1 + (int)fz_below(3);
        for (int r = 0; r < rounds; r++) fz_mutate(&b, 1);
        if (!fz_below(8)) {  // a key of the seed given again before the closing brace
            static const char *const dups[] = {", \"num_attention_heads\": 2", ", \"n_head\": 1", ", \"model_type\": \"gpt2\""};
            const char *d = dups[fz_below(3)];
            size_t at = b.n;
            while (at > 0 && b.p[at - 1] != '}') at--;
            if (at > 0) fz_insert(&b, at - 1, d, strlen(d));
        }
        if (!fz_below(16)) fz_insert(&b, 0, "\xEF\xBB\xBF", 3);
        fz_write(p, &b);
        model_config c;
        if (model_config_from_hf_file(&c, p) != WGT_OK) {
            FZ_CHECK(wgt_last_error()[0] != 0, "a refusal without a message");
            continue;
        }
        accepted++;
        cJSON *j = NULL;
        FZ_CHECK(json_parse_strict(&j, (const char *)b.p, b.n, 0, "accepted") == WGT_OK && cJSON_IsObject(j),
                 "accepted text that is not one strict JSON object: %s", wgt_last_error());
        cJSON_Delete(j);
        FZ_CHECK(model_config_check(&c) == WGT_OK, "accepted an invalid model: %s", wgt_last_error());
        char *again = model_config_to_hf_json(&c);
        model_config r;
        model_config_delta d;
        FZ_CHECK(model_config_from_hf_json(&r, again, "again") == WGT_OK && !model_config_diff(&c, &r, &d),
                 "the accepted model does not read back as itself");
        free(again);
    }
    for (int i = 0; i < 2; i++) free(seeds[i].p);
    free(b.p);
    return fz_finish("fuzz_hf_config", iters, accepted);
}
