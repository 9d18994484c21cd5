// test_hf_tokenizer.c — src/data/hf_tokenizer.c against Hugging Face `tokenizers` itself: the
// ids of encode(text, add_special_tokens=False/True) and the text of decode(ids) for every text
// of tests/fixtures/hf_tokenizer_ids.json (made by gen_hf_tokenizer_ids.js with the Rust library)
// on the real tokenizer.json files of Llama-3.1, Qwen3, Mistral-7B-v0.1/Llama-2 and Gemma-3,
// each loaded once. Then refusals: unsupported components, malformed and inconsistent files.
#include <cjson/cJSON.h>
#include "testlib.h"
#include "data/hf_tokenizer.h"

#define HF_DIR "third_party/hf-tokenizers"
// FIXTURE: another file of the generator's format may be given at compile time (-DFIXTURE=...)
#ifndef FIXTURE
#define FIXTURE "tests/fixtures/hf_tokenizer_ids.json"
#endif

static int ids_equal(const uint32_t *ids, size_t n, const cJSON *want) {
    if (!cJSON_IsArray(want) || (size_t)cJSON_GetArraySize(want) != n) return 0;
    size_t i = 0;
    for (const cJSON *c = want->child; c; c = c->next, i++)
        if (!cJSON_IsNumber(c) || (double)ids[i] != c->valuedouble) return 0;
    return 1;
}

static void print_ids(const char *label, const uint32_t *ids, size_t n) {
    fprintf(stderr, "  %s:", label);
    for (size_t i = 0; i < n && i < 64; i++) fprintf(stderr, " %u", ids[i]);
    fprintf(stderr, "\n");
}

// Compares t against the rows of the fixture for the first n_texts texts (all when 0).
static void check_rows(const char *name, hf_tokenizer *t, const cJSON *texts, const cJSON *rows, int n_texts) {
    wgt_status st;
    size_t k = 0, bad = 0;
    const cJSON *tx = texts->child, *row = rows->child;
    for (; tx && row && (!n_texts || (int)k < n_texts); tx = tx->next, row = row->next, k++) {
        const char *s = tx->valuestring;
        size_t n = strlen(s);
        for (int special = 0; special < 2; special++) {
            uint32_t *ids = NULL;
            size_t ni = 0;
            const cJSON *want = cJSON_GetObjectItemCaseSensitive(row, special ? "ids_special" : "ids");
            st = hf_tokenizer_encode(t, (const uint8_t *)s, n, special, &ids, &ni);
            int ok = st == WGT_OK && ids_equal(ids, ni, want);
            if (!ok && bad++ < 8) {
                char *w = cJSON_PrintUnformatted(want);
                fprintf(stderr, "%s text #%zu (special %d) %s\n  want: %.400s\n", name, k, special, st ? wgt_last_error() : "", w);
                print_ids("got", ids, ni);
                free(w);
            }
            CHECK(ok, "%s: encode of text #%zu (add_special %d) differs from Hugging Face tokenizers", name, k, special);
            if (st != WGT_OK) continue;
            uint8_t *out = NULL;
            size_t no = 0;
            const cJSON *dec = cJSON_GetObjectItemCaseSensitive(row, special ? "decoded_special" : "decoded");
            st = hf_tokenizer_decode(t, ids, ni, &out, &no);
            ok = st == WGT_OK && cJSON_IsString(dec) && strlen(dec->valuestring) == no && !memcmp(out, dec->valuestring, no);
            if (!ok && bad++ < 8)
                fprintf(stderr, "%s text #%zu decode%s: want \"%s\" got \"%.*s\"\n", name, k, special ? " (special)" : "",
                        cJSON_IsString(dec) ? dec->valuestring : "?", (int)no, out ? (const char *)out : "");
            CHECK(ok, "%s: decode of text #%zu (add_special %d) differs from Hugging Face tokenizers", name, k, special);
            free(out);
            free(ids);
        }
    }
    CHECK(n_texts ? !row && (int)k == n_texts : !tx && !row, "%s: the fixture has %d texts but %d rows", name,
          cJSON_GetArraySize(texts), cJSON_GetArraySize(rows));
}

static void check_tokenizer(const char *name, const cJSON *texts, const cJSON *rows) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", HF_DIR, name);
    hf_tokenizer *t = NULL;
    wgt_status st = hf_tokenizer_load(&t, path);
    CHECK(st == WGT_OK, "%s: %s", name, wgt_last_error());
    if (st != WGT_OK) return;
    check_rows(name, t, texts, rows, 0);
    // invalid UTF-8 is refused, and so is an id that names no token
    uint32_t *ids = NULL;
    size_t ni = 0;
    CHECK(hf_tokenizer_encode(t, (const uint8_t *)"ab\xff", 3, 0, &ids, &ni) == WGT_ERR_ARG && ids == NULL &&
              strstr(wgt_last_error(), "byte offset 2"), "%s: invalid UTF-8 accepted (%s)", name, wgt_last_error());
    uint32_t big = hf_tokenizer_vocab_size(t);
    uint8_t *out = NULL;
    size_t no = 0;
    CHECK(hf_tokenizer_decode(t, &big, 1, &out, &no) == WGT_ERR_ARG && out == NULL, "%s: id %u decoded", name, big);
    hf_tokenizer_free(t);
}

// The text of the top-level "model" value of a tokenizer.json: [*start, *end).
static int find_model(const char *s, size_t n, size_t *start, size_t *end) {
    int depth = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '"') {
            size_t b = i++;
            while (i < n && s[i] != '"') i += s[i] == '\\' ? 2 : 1;
            if (depth == 1 && i - b == 6 && !memcmp(s + b, "\"model\"", 7)) {
                size_t j = i + 1;
                while (j < n && (s[j] == ' ' || s[j] == ':' || s[j] == '\n')) j++;
                *start = j;
                int d = 0;
                for (; j < n; j++) {
                    if (s[j] == '"') {
                        j++;
                        while (j < n && s[j] != '"') j += s[j] == '\\' ? 2 : 1;
                    } else if (s[j] == '{' || s[j] == '[') d++;
                    else if ((s[j] == '}' || s[j] == ']') && --d == 0) {
                        *end = j + 1;
                        return 1;
                    }
                }
                return 0;
            }
        } else if (c == '{' || c == '[') depth++;
        else if (c == '}' || c == ']') depth--;
    }
    return 0;
}

// Each variant of the fixture: its "config" (every key but the model) with the model of a real
// file, against the library's ids for the hand-written texts.
static void check_variants(const cJSON *fx) {
    const cJSON *texts = cJSON_GetObjectItemCaseSensitive(fx, "texts"), *vs = cJSON_GetObjectItemCaseSensitive(fx, "variants");
    const cJSON *nt = cJSON_GetObjectItemCaseSensitive(fx, "variant_texts");
    CHECK(cJSON_GetArraySize(vs) >= 8 && cJSON_IsNumber(nt), "the fixture lacks its variants");
    if (!cJSON_IsArray(vs) || !cJSON_IsNumber(nt)) return;
    static const char *bases[] = {"llama2", "qwen3"};
    char *base_text[2] = {0};
    size_t base_n[2] = {0}, ms[2] = {0}, me[2] = {0};
    for (int b = 0; b < 2; b++) {
        char path[256];
        snprintf(path, sizeof path, "%s/%s/tokenizer.json", HF_DIR, bases[b]);
        base_text[b] = (char *)test_slurp(path, &base_n[b]);
        CHECK(base_text[b] && find_model(base_text[b], base_n[b], &ms[b], &me[b]), "no model in %s", path);
    }
    for (const cJSON *v = vs->child; v; v = v->next) {
        const char *name = cJSON_GetObjectItemCaseSensitive(v, "name")->valuestring;
        const char *base = cJSON_GetObjectItemCaseSensitive(v, "base")->valuestring;
        int b = !strcmp(base, "qwen3");
        if (!base_text[b]) continue;
        char *cfg = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(v, "config"));
        size_t lc = strlen(cfg), lm = me[b] - ms[b];
        char *text = malloc(lc + lm + 16);
        memcpy(text, cfg, lc - 1);  // without the closing brace
        size_t k = lc - 1;
        memcpy(text + k, ",\"model\":", 9);
        k += 9;
        memcpy(text + k, base_text[b] + ms[b], lm);
        k += lm;
        text[k++] = '}';
        hf_tokenizer *t = NULL;
        wgt_status st = hf_tokenizer_load_text(&t, text, k, name);
        CHECK(st == WGT_OK, "variant %s: %s", name, wgt_last_error());
        if (t) check_rows(name, t, texts, cJSON_GetObjectItemCaseSensitive(v, "rows"), nt->valueint);
        hf_tokenizer_free(t);
        free(text);
        free(cfg);
    }
    free(base_text[0]);
    free(base_text[1]);
}

static void check_accessors(void) {
    hf_tokenizer *t = NULL;
    if (hf_tokenizer_load(&t, HF_DIR "/llama2/tokenizer.json") != WGT_OK) {
        CHECK(0, "llama2: %s", wgt_last_error());
        return;
    }
    CHECK(hf_tokenizer_vocab_size(t) == 32000, "llama2 vocab %u", hf_tokenizer_vocab_size(t));
    CHECK(hf_tokenizer_bos_id(t) == 1 && hf_tokenizer_eos_id(t) == -1, "llama2 bos %lld eos %lld",
          (long long)hf_tokenizer_bos_id(t), (long long)hf_tokenizer_eos_id(t));
    CHECK(hf_tokenizer_token_id(t, "</s>") == 2 && hf_tokenizer_is_special(t, 2) && !hf_tokenizer_is_special(t, 100),
          "llama2 </s> id %lld", (long long)hf_tokenizer_token_id(t, "</s>"));
    CHECK(hf_tokenizer_token_id(t, "no such token") == -1, "unknown token has an id");
    hf_tokenizer_free(t);
}

// A small valid tokenizer.json with `extra` spliced into the top level and the model's fields
// replaced by `model` when given.
static wgt_status load_variant(const char *model, const char *extra) {
    char text[4096];
    snprintf(text, sizeof text,
             "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,\"added_tokens\":[{\"id\":5,\"content\":\"<s>\","
             "\"single_word\":false,\"lstrip\":false,\"rstrip\":false,\"normalized\":false,\"special\":true}],%s"
             "\"model\":{%s}}",
             extra ? extra : "",
             model ? model : "\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2,\"c\":3,\"abc\":4},\"merges\":[\"a b\",[\"ab\",\"c\"]]");
    hf_tokenizer *t = NULL;
    wgt_status st = hf_tokenizer_load_text(&t, text, strlen(text), "variant.json");
    CHECK((st == WGT_OK) == (t != NULL), "status and result disagree");
    if (t) {
        uint32_t *ids = NULL;
        size_t n = 0;
        if (hf_tokenizer_encode(t, (const uint8_t *)"abc<s>ab", 8, 1, &ids, &n) == WGT_OK) free(ids);
    }
    hf_tokenizer_free(t);
    return st;
}

static void check_refusals(void) {
    // the base variant loads and merges by rank
    CHECK(load_variant(NULL, NULL) == WGT_OK, "base variant: %s", wgt_last_error());
    {
        const char *text = "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2,\"c\":3,\"bc\":4,\"abc\":5},"
                           "\"merges\":[\"b c\",\"a b\",\"a bc\"]},\"added_tokens\":[{\"id\":6,\"content\":\"<s>\",\"special\":true}],"
                           "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<s>\",\"type_id\":0}},"
                           "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"pair\":[],\"special_tokens\":{\"<s>\":{\"id\":\"<s>\",\"ids\":[6],\"tokens\":[\"<s>\"]}}}}";
        hf_tokenizer *t = NULL;
        CHECK(hf_tokenizer_load_text(&t, text, strlen(text), "rank.json") == WGT_OK, "rank.json: %s", wgt_last_error());
        if (t) {
            uint32_t *ids = NULL;
            size_t n = 0;
            // "b c" (rank 0) before "a b" (rank 1): a + bc, then "a bc" gives abc; "<s>" in the text is id 6
            CHECK(hf_tokenizer_encode(t, (const uint8_t *)"abc<s>ab", 8, 1, &ids, &n) == WGT_OK && n == 4 && ids[0] == 6 &&
                      ids[1] == 5 && ids[2] == 6 && ids[3] == 2, "merge by rank: n %zu", n);
            free(ids);
            hf_tokenizer_free(t);
        }
    }
    struct { const char *model, *extra, *needle; wgt_status st; } cases[] = {
        {"\"type\":\"WordPiece\",\"vocab\":{}", NULL, "WordPiece", WGT_ERR_CONFIG},
        {"\"type\":\"Unigram\",\"vocab\":[]", NULL, "Unigram", WGT_ERR_CONFIG},
        {NULL, "\"normalizer\":{\"type\":\"BertNormalizer\"},", "BertNormalizer", WGT_ERR_CONFIG},
        {NULL, "\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFC\"},{\"type\":\"Lowercase\"}]},", "Lowercase",
         WGT_ERR_CONFIG},
        {NULL, "\"pre_tokenizer\":{\"type\":\"Whitespace\"},", "Whitespace", WGT_ERR_CONFIG},
        {NULL, "\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(\"},\"behavior\":\"Isolated\",\"invert\":false},",
         "does not compile", WGT_ERR_FORMAT},
        {NULL, "\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"String\":\" \"},\"behavior\":\"Sideways\",\"invert\":false},",
         "Sideways", WGT_ERR_CONFIG},
        {NULL, "\"decoder\":{\"type\":\"WordPiece\"},", "WordPiece", WGT_ERR_CONFIG},
        {NULL, "\"post_processor\":{\"type\":\"BertProcessing\",\"sep\":[\"x\",99],\"cls\":[\"y\",0]},", "99", WGT_ERR_FORMAT},
        {NULL, "\"truncation\":{\"max_length\":5},", "truncation", WGT_ERR_FORMAT},  // key twice: refused as malformed
        {"\"type\":\"BPE\",\"dropout\":0.1,\"vocab\":{},\"merges\":[]", NULL, "dropout", WGT_ERR_CONFIG},
        {"\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":0},\"merges\":[]", NULL, "two tokens", WGT_ERR_FORMAT},
        {"\"type\":\"BPE\",\"vocab\":{\"a\":99999999999},\"merges\":[]", NULL, "integer id", WGT_ERR_FORMAT},
        {"\"type\":\"BPE\",\"vocab\":{\"a\":-1},\"merges\":[]", NULL, "integer id", WGT_ERR_FORMAT},
        {"\"type\":\"BPE\",\"vocab\":{\"a\":\"0\"},\"merges\":[]", NULL, "integer id", WGT_ERR_FORMAT},
        {"\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1},\"merges\":[\"a b\"]", NULL, "\"ab\" is not in", WGT_ERR_FORMAT},
        {"\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1},\"merges\":[\"ab\"]", NULL, "separated by a space", WGT_ERR_FORMAT},
        {"\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1},\"merges\":[[\"a\"]]", NULL, "neither", WGT_ERR_FORMAT},
        {"\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[],\"mystery\":1", NULL, "mystery", WGT_ERR_CONFIG},
        {"\"type\":\"BPE\",\"vocab\":[],\"merges\":[]", NULL, "vocab", WGT_ERR_FORMAT},
        // the added token <s> (id 5 in the base) would get id 2 here: the file's id disagrees
        {"\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1},\"merges\":[]", NULL, "would give it 2", WGT_ERR_FORMAT},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        wgt_status st = load_variant(cases[i].model, cases[i].extra);
        CHECK(st == cases[i].st && strstr(wgt_last_error(), cases[i].needle), "case %zu: status %d, message \"%s\" lacks \"%s\"",
              i, st, wgt_last_error(), cases[i].needle);
    }
    // truncated and non-JSON texts
    static const char *broken[] = {"", "{", "{\"model\":", "[]", "null", "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}", "{\"model\":5}"};
    for (size_t i = 0; i < sizeof broken / sizeof *broken; i++) {
        hf_tokenizer *t = NULL;
        wgt_status st = hf_tokenizer_load_text(&t, broken[i], strlen(broken[i]), "broken.json");
        CHECK(st == WGT_ERR_FORMAT && t == NULL, "broken text %zu accepted (status %d)", i, st);
    }
    hf_tokenizer *t = NULL;
    CHECK(hf_tokenizer_load(&t, "no/such/dir") == WGT_ERR_IO && t == NULL, "a missing path loads");
}

int main(void) {
    size_t n = 0;
    uint8_t *text = test_slurp(FIXTURE, &n);
    CHECK(text != NULL, "cannot read %s", FIXTURE);
    cJSON *fx = text ? cJSON_ParseWithLength((const char *)text, n) : NULL;
    CHECK(fx != NULL, "%s is not JSON", FIXTURE);
    if (fx) {
        const cJSON *texts = cJSON_GetObjectItemCaseSensitive(fx, "texts");
        const cJSON *toks = cJSON_GetObjectItemCaseSensitive(fx, "tokenizers");
        CHECK(cJSON_GetArraySize(texts) >= 200, "the fixture has too few texts");
        static const char *names[] = {"llama3_1", "qwen3", "llama2", "gemma3"};
        for (int i = 0; i < 4; i++) {
            const cJSON *rows = cJSON_GetObjectItemCaseSensitive(toks, names[i]);
            CHECK(cJSON_IsArray(rows), "the fixture lacks %s", names[i]);
            if (cJSON_IsArray(rows)) check_tokenizer(names[i], texts, rows);
        }
        check_variants(fx);
        cJSON_Delete(fx);
    }
    free(text);
    check_accessors();
    check_refusals();
    return test_finish();
}
