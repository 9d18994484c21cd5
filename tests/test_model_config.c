// test_model_config.c — the parts of the model layer that the whole-model tests do not look at
// one by one: the configs of both families (wgtrain's JSON and Hugging Face config.json, read
// and written, with the refusals), family-specific fields in the wrong family, and the LLaMA
// parameter table (HF names and shapes, the tied lm_head left out, q | k | v packed into one
// matrix at unaligned offsets, decayed tensors first) with exact host and safetensors round trips
// of those unaligned tensors on both backends.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "testlib.h"
#include "model/model.h"

// q_proj has 20 x 20 = 400 elements, so k_proj starts 16 elements past an aligned offset
static const model_config LLAMA = {.arch = "llama", .n_layer = 2, .n_head = 2, .d_model = 20, .d_ff = 40,
                                   .vocab = 29, .max_seq = 16, .n_kv_heads = 1, .rope_theta = 500000.0,
                                   .rms_eps = 1e-6, .tie_embeddings = 0};
static const model_config GPT2 = {.arch = "gpt2", .n_layer = 3, .n_head = 2, .d_model = 8, .d_ff = 20, .vocab = 11,
                                  .max_seq = 7};

// Llama 3.1's RoPE scaling, and linear scaling: both round trips keep every factor
static const model_config LLAMA3 = {.arch = "llama", .n_layer = 2, .n_head = 4, .d_model = 32, .d_ff = 40, .vocab = 13,
                                    .max_seq = 64, .n_kv_heads = 2, .rope_theta = 500000, .rms_eps = 1e-5,
                                    .rope_scaling = 2, .rope_factor = 8, .rope_low_freq = 1, .rope_high_freq = 4,
                                    .rope_orig_max_pos = 8192};
static const model_config LLAMA_LIN = {.arch = "llama", .n_layer = 1, .n_head = 2, .d_model = 8, .d_ff = 8, .vocab = 5,
                                       .max_seq = 4, .n_kv_heads = 1, .rope_theta = 10000, .rms_eps = 1e-6,
                                       .tie_embeddings = 1, .rope_scaling = 1, .rope_factor = 2.5};

static void test_json(void) {
    const model_config *cfgs[] = {&LLAMA, &GPT2, &LLAMA3, &LLAMA_LIN};
    for (int i = 0; i < 4; i++) {
        const model_config *c = cfgs[i];
        model_config r;
        model_config_delta d;
        char *js = model_config_to_json(c);
        CHECK(model_config_from_json(&r, js, "test") == WGT_OK, "%s: wgtrain JSON reads back: %s", c->arch, wgt_last_error());
        CHECK(!model_config_diff(c, &r, &d), "%s: wgtrain JSON round trip differs in %s (%s vs %s)", c->arch, d.key, d.a, d.b);
        free(js);
        char *hf = model_config_to_hf_json(c);
        CHECK(model_config_from_hf_json(&r, hf, "test") == WGT_OK, "%s: HF config.json reads back: %s", c->arch,
              wgt_last_error());
        CHECK(!model_config_diff(c, &r, &d), "%s: HF round trip differs in %s (%s vs %s)\n%s", c->arch, d.key, d.a, d.b, hf);
        free(hf);
    }
    // a LLaMA run config written before RoPE scaling, biases and windows existed reads them as 0;
    // a field that was always written is still required
    {
        model_config r;
        const char *old_cfg = "{\"arch\": \"llama\", \"n_layer\": 2, \"n_head\": 2, \"d_model\": 20, \"d_ff\": 40, "
                              "\"vocab\": 29, \"max_seq\": 16, \"n_kv_heads\": 1, \"rope_theta\": 500000, "
                              "\"rms_eps\": 1e-06, \"tie_embeddings\": 0}";
        model_config_delta dd;
        CHECK(model_config_from_json(&r, old_cfg, "old") == WGT_OK && !model_config_diff(&LLAMA, &r, &dd),
              "an older LLaMA run config reads as the same model: %s", wgt_last_error());
        CHECK(model_config_from_json(&r, "{\"arch\": \"llama\", \"n_layer\": 2, \"n_head\": 2, \"d_model\": 20, "
                                     "\"d_ff\": 40, \"vocab\": 29, \"max_seq\": 16, \"rope_theta\": 500000, "
                                     "\"rms_eps\": 1e-06, \"tie_embeddings\": 0}", "old") != WGT_OK &&
                  strstr(wgt_last_error(), "n_kv_heads"), "a config without n_kv_heads is refused: %s", wgt_last_error());
    }
    // the first differing field is named, family fields included
    model_config o = LLAMA;
    o.n_kv_heads = 2;
    model_config_delta d;
    CHECK(model_config_diff(&LLAMA, &o, &d) && !strcmp(d.key, "n_kv_heads") && !strcmp(d.a, "1") && !strcmp(d.b, "2"),
          "diff names n_kv_heads: %s %s %s", d.key, d.a, d.b);
    o = LLAMA;
    o.rms_eps = 1e-5;
    CHECK(model_config_diff(&LLAMA, &o, &d) && !strcmp(d.key, "rms_eps") && !strcmp(d.a, "1e-06"),
          "diff names rms_eps: %s %s %s", d.key, d.a, d.b);
    // a family's own setting in another family is refused by name
    o = GPT2;
    o.tie_embeddings = 1;
    CHECK(model_config_check(&o) != WGT_OK && strstr(wgt_last_error(), "tie_embeddings"), "gpt2 with tie_embeddings: %s",
          wgt_last_error());
    // switching family clears the other family's settings; defaults fill the new one's
    o = LLAMA;
    model_config_set_arch(&o, "gpt2");
    CHECK(o.n_kv_heads == 0 && o.rope_theta == 0 && o.rms_eps == 0 && o.n_layer == LLAMA.n_layer &&
              model_config_check(&o) == WGT_OK, "set_arch gpt2: %s", wgt_last_error());
    model_config_set_arch(&o, "llama");
    model_config_defaults(&o);
    CHECK(o.n_kv_heads == o.n_head && o.rope_theta == 10000.0 && o.rms_eps == 1e-5 && model_config_check(&o) == WGT_OK,
          "llama defaults: %d %g %g", o.n_kv_heads, o.rope_theta, o.rms_eps);
    // the checks of the family
    struct { const char *what; model_config c; const char *want; } bad[] = {
        {"kv heads not dividing heads", LLAMA, "n_kv_heads (3) must divide n_head (2)"},
        {"odd head size", LLAMA, "odd"},
        {"head size above 256", LLAMA, "above the supported 256"},
        {"no rope_theta", LLAMA, "rope_theta"},
    };
    bad[0].c.n_kv_heads = 3;
    bad[1].c.d_model = 18;
    bad[2].c.d_model = 2056, bad[2].c.n_head = 4;
    bad[3].c.rope_theta = 0;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(model_config_check(&bad[i].c) != WGT_OK && strstr(wgt_last_error(), bad[i].want), "%s: %s", bad[i].what,
              wgt_last_error());
    // Hugging Face defaults and alternatives
    model_config r;
    CHECK(model_config_from_hf_json(&r, "{\"model_type\": \"llama\", \"hidden_size\": 32, \"intermediate_size\": 64, "
                                        "\"num_attention_heads\": 4, \"num_hidden_layers\": 1, \"vocab_size\": 10}",
                                    "min") == WGT_OK &&
              r.n_kv_heads == 4 && r.rope_theta == 10000.0 && r.rms_eps == 1e-6 && r.max_seq == 2048 && !r.tie_embeddings,
          "HF LLaMA defaults: %s", wgt_last_error());
    CHECK(model_config_from_hf_json(&r, "{\"model_type\": \"llama\", \"hidden_size\": 32, \"intermediate_size\": 64, "
                                        "\"num_attention_heads\": 4, \"num_hidden_layers\": 1, \"vocab_size\": 10, "
                                        "\"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 1e6}}",
                                    "rope_parameters") == WGT_OK && r.rope_theta == 1e6,
          "rope_parameters: %s", wgt_last_error());
    CHECK(model_config_from_hf_json(&r, "{\"model_type\": \"llama\", \"hidden_size\": 32, \"intermediate_size\": 64, "
                                        "\"num_attention_heads\": 4, \"num_hidden_layers\": 1, \"vocab_size\": 10, "
                                        "\"rope_theta\": 1e4, \"rope_parameters\": {\"rope_theta\": 1e6}}",
                                    "two bases") != WGT_OK && strstr(wgt_last_error(), "rope_parameters.rope_theta is 1e+06"),
          "two RoPE bases that differ: %s", wgt_last_error());
    CHECK(model_config_from_hf_json(&r, "{\"model_type\": \"llama\", \"hidden_size\": 32, \"intermediate_size\": 64, "
                                        "\"num_attention_heads\": 4, \"num_hidden_layers\": 1, \"vocab_size\": 10, "
                                        "\"rope_theta\": 1e6, \"rope_parameters\": {\"rope_theta\": 1e6}}",
                                    "same bases") == WGT_OK && r.rope_theta == 1e6,
          "two RoPE bases that agree: %s", wgt_last_error());
    CHECK(model_config_from_hf_json(&r, "{\"model_type\": \"llama\", \"hidden_size\": 32, \"intermediate_size\": 64, "
                                        "\"num_attention_heads\": 4, \"num_hidden_layers\": 1, \"vocab_size\": 10, "
                                        "\"rope_parameters\": 5}", "rp number") != WGT_OK &&
              strstr(wgt_last_error(), "rope_parameters"), "rope_parameters not an object: %s", wgt_last_error());
    CHECK(model_config_from_hf_json(&r, "{\"model_type\": \"gpt2\", \"n_embd\": 16, \"n_head\": 2, \"n_layer\": 1, "
                                        "\"vocab_size\": 10, \"n_inner\": null}", "gpt2") == WGT_OK &&
              r.d_ff == 64 && r.max_seq == 1024 && !strcmp(r.arch, "gpt2"),
          "HF GPT-2 defaults: %s", wgt_last_error());
    CHECK(model_config_from_hf_json(&r, "[1]", "array") != WGT_OK && strstr(wgt_last_error(), "array"), "not an object: %s",
          wgt_last_error());
    CHECK(model_config_from_hf_json(&r, "{\"model_type\": \"llama\", \"hidden_size\": 32.5}", "frac") != WGT_OK &&
              strstr(wgt_last_error(), "hidden_size"), "a fractional size: %s", wgt_last_error());
    CHECK(model_config_from_hf_json(&r, "{\"model_type\": \"llama\", \"hidden_size\": 32, \"intermediate_size\": 64, "
                                        "\"num_attention_heads\": 4, \"num_hidden_layers\": 1, \"vocab_size\": 16777217}",
                                    "bigV") != WGT_OK && strstr(wgt_last_error(), "vocab_size"),
          "vocab above TOKEN_MAX_VOCAB (2^24): %s", wgt_last_error());
    // token ids are 32-bit: Gemma 3's 262,144 ids are a vocabulary like any other
    CHECK(model_config_from_hf_json(&r, "{\"model_type\": \"llama\", \"hidden_size\": 32, \"intermediate_size\": 64, "
                                        "\"num_attention_heads\": 4, \"num_hidden_layers\": 1, \"vocab_size\": 262144}",
                                    "gemmaV") == WGT_OK && r.vocab == 262144 && model_config_check(&r) == WGT_OK,
          "vocab 262144: %s", wgt_last_error());
    CHECK(model_config_from_hf_json(&r, "{\"model_type\": \"llama\", \"hidden_size\": 1e300}", "huge") != WGT_OK &&
              strstr(wgt_last_error(), "\"hidden_size\" is 1e+300; this build takes 1..65536"),
          "a huge size is named in a short form: %s", wgt_last_error());
}

// The LLaMA parameter table, and exact round trips through the host and safetensors.
static void test_table(wgt_backend *be, int tie) {
    model_config c = LLAMA;
    c.tie_embeddings = tie;
    wgt_model *m, *m2;
    if (model_init(&m, be, &c, 2, 5) != WGT_OK) die("model_init");
    const int L = c.n_layer, np = model_param_count(m);
    CHECK(np == 1 + 9 * L + 1 + !tie, "%s tie=%d: %d tensors", be->name, tie, np);
    const size_t C = c.d_model, KV = (size_t)c.n_kv_heads * (C / c.n_head);
    char nm[96];
    int found_lm = 0;
    for (int i = 0; i < np; i++) {
        const model_param_info *p = model_param(m, i);
        found_lm |= !strcmp(p->name, "lm_head.weight");
        CHECK(!!(p->flags & MODEL_T_DECAY) == (p->ndim == 2), "%s: decay on matrices only", p->name);
        CHECK((p->flags & MODEL_T_PACKED) || p->off % 64 == 0, "%s: unpacked tensors are aligned (off %zu)", p->name, p->off);
        CHECK(p->ndim == 1 ? p->init == MODEL_INIT_ONES : p->init == MODEL_INIT_NORMAL, "%s: HF initialisation", p->name);
    }
    CHECK(found_lm == !tie, "lm_head.weight present: %d, tie %d", found_lm, tie);
    CHECK(!strcmp(model_param(m, 0)->name, "model.embed_tokens.weight"), "first tensor %s", model_param(m, 0)->name);
    // q | k | v of the last layer: HF names and shapes, packed one after the other
    int q = 1 + 9 * (L - 1);
    const model_param_info *pq = model_param(m, q), *pk = model_param(m, q + 1), *pv = model_param(m, q + 2);
    snprintf(nm, sizeof nm, "model.layers.%d.self_attn.k_proj.weight", L - 1);
    CHECK(!strcmp(pk->name, nm) && pk->shape[0] == KV && pk->shape[1] == C && pq->shape[0] == C,
          "%s [%zu, %zu]", pk->name, pk->shape[0], pk->shape[1]);
    CHECK(pk->off == pq->off + pq->n && pv->off == pk->off + pk->n && (pk->flags & MODEL_T_PACKED) &&
              (pv->flags & MODEL_T_PACKED) && pk->off % 64 != 0,
          "q | k | v packed: %zu %zu %zu (the test wants k at an unaligned offset)", pq->off, pk->off, pv->off);
    const model_param_info *pn = model_param(m, np - 1 - !tie);
    CHECK(!strcmp(pn->name, "model.norm.weight") && pn->ndim == 1 && pn->shape[0] == C, "%s", pn->name);
    // host round trip of every tensor (unaligned ones included), then safetensors into a second model
    uint64_t s = 99;
    float **vals = calloc((size_t)np, sizeof *vals);
    for (int i = 0; i < np; i++) {
        const model_param_info *p = model_param(m, i);
        vals[i] = malloc(p->n * 4);
        for (size_t k = 0; k < p->n; k++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            vals[i][k] = (float)((double)(s >> 11) / 9007199254740992.0 - 0.5);
        }
        if (model_param_set(m, i, vals[i]) != WGT_OK) die("param_set");
    }
    int same = 1;
    for (int i = 0; i < np; i++) {
        const model_param_info *p = model_param(m, i);
        float *g = malloc(p->n * 4);
        if (model_param_get(m, i, g, 0) != WGT_OK) die("param_get");
        same &= !memcmp(g, vals[i], p->n * 4);
        free(g);
    }
    CHECK(same, "%s tie=%d: parameters read back as set", be->name, tie);
    char path[512];
    snprintf(path, sizeof path, "%s/wgt_test_model_config_%d.safetensors", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (int)getpid());
    CHECK(model_save_safetensors(m, path, 0) == WGT_OK, "save: %s", wgt_last_error());
    if (model_init(&m2, be, &c, 1, 3) != WGT_OK) die("model_init 2");
    CHECK(model_load_safetensors(m2, path) == WGT_OK, "load: %s", wgt_last_error());
    same = 1;
    for (int i = 0; i < np; i++) {
        const model_param_info *p = model_param(m2, i);
        float *g = malloc(p->n * 4);
        if (model_param_get(m2, i, g, 0) != WGT_OK) die("param_get");
        same &= !memcmp(g, vals[i], p->n * 4);
        free(g);
    }
    CHECK(same, "%s tie=%d: parameters equal after a safetensors round trip", be->name, tie);
    model_free(m2);
    // the other tie setting refuses this file, naming lm_head.weight
    model_config o = c;
    o.tie_embeddings = !tie;
    if (model_init(&m2, be, &o, 1, 3) != WGT_OK) die("model_init 3");
    CHECK(model_load_safetensors(m2, path) != WGT_OK && strstr(wgt_last_error(), "lm_head.weight"),
          "tie %d file into a tie %d model: %s", tie, !tie, wgt_last_error());
    model_free(m2);
    unlink(path);
    for (int i = 0; i < np; i++) free(vals[i]);
    free(vals);
    model_free(m);
}

int main(void) {
    test_json();
    wgt_backend *cpu, *gpu;
    if (backend_cpu_init(&cpu) != WGT_OK) die("cpu backend");
    test_table(cpu, 0);
    test_table(cpu, 1);
    cpu->free(cpu);
    const char *ad = getenv("WGTRAIN_TEST_ADAPTER");
    if (backend_webgpu_init(&gpu, ad && *ad ? ad : "auto") != WGT_OK) die("webgpu backend");
    test_table(gpu, 0);
    test_table(gpu, 1);
    gpu->free(gpu);
    return test_finish();
}
