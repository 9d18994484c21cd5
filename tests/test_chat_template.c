// test_chat_template.c — the chat-template interpreter (src/data/chat_template.c): rendering
// against outputs of Debian's python3-jinja2 (configured as transformers configures it),
// refusals of unsupported or malformed templates with the construct and line named, the
// render limits, and the per-message spans on the real Llama-3.1, Qwen3 and Gemma-3 templates
// and a ChatML one. With `--batch FILE` it is instead the renderer that
// tests/test_chat_template_ref.py compares with jinja2 on many templates and conversations: each
// line of FILE is {"template", "context", "now"}, each output line {"ok", "text", "spans",
// "generation"} or {"ok": false, "error"}.
#include <cjson/cJSON.h>
#include "data/chat_template.h"
#include "testlib.h"

static char *render(const char *tpl, const char *ctx_json, wgt_status *st_out, chat_template_output *keep) {
    chat_template *t;
    wgt_status st = chat_template_parse(tpl, strlen(tpl), &t);
    if (st != WGT_OK) {
        if (st_out) *st_out = st;
        return NULL;
    }
    cJSON *ctx = cJSON_Parse(ctx_json ? ctx_json : "{}");
    if (!ctx) { fprintf(stderr, "bad test JSON: %s\n", ctx_json); exit(2); }
    chat_template_output o;
    chat_template_limits lim = {.max_steps = 200000, .max_memory = 32u << 20, .max_output = 1u << 20, .max_call_depth = 20};
    chat_template_opts opts = {.now = 1721952000 /* 2024-07-26 00:00 UTC */, .limits = &lim};
    st = chat_template_render(t, ctx, &opts, &o);
    cJSON_Delete(ctx);
    chat_template_free(t);
    if (st_out) *st_out = st;
    if (st != WGT_OK) return NULL;
    char *s = strdup(o.text);
    if (keep) *keep = o;
    else chat_template_output_free(&o);
    return s;
}

// The expected texts are what jinja2 3.1 renders for the same template and variables in
// ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) (recorded once from it).
static void check_render(const char *tpl, const char *ctx, const char *want) {
    wgt_status st;
    char *got = render(tpl, ctx, &st, NULL);
    CHECK(got && !strcmp(got, want), "template %s\n  want [%s]\n  got  [%s] %s", tpl, want, got ? got : "(error)",
          got ? "" : wgt_last_error());
    free(got);
}

// The template must be refused (at parse or render) with a message containing `part`.
static void check_refused(const char *tpl, const char *ctx, const char *part) {
    wgt_status st = WGT_OK;
    char *got = render(tpl, ctx, &st, NULL);
    CHECK(!got && st == WGT_ERR_FORMAT && strstr(wgt_last_error(), part), "template %s: want an error with [%s], got %s [%s]",
          tpl, part, got ? "a render" : "error", got ? got : wgt_last_error());
    free(got);
}

static void test_basics(void) {
    check_render("Hello {{ name }}!", "{\"name\": \"World\"}", "Hello World!");
    check_render("{{ x }}|{{ x is defined }}|{{ x|default('d') }}", "{}", "|False|d");
    check_render("  {% if 1 %}\n  x\n  {% endif %}\n", NULL, "  x\n");
    check_render("a  {# c #}\nb", NULL, "a  b");
    check_render("{{ \"a\" }}  {% if 1 %}x{% endif %}", NULL, "a  x");
    check_render("{% set x = 1 %}{% for i in [1,2] %}{{ x }}{% set x = 2 %}{{x}}{% endfor %}{{x}}", NULL, "12121");
    check_render("{{ [1,\"a\",{\"b\":None}] }} {{ 1.0 }} {{ 1e16 }} {{ 1e-5 }} {{ 0.1+0.2 }} {{ true }}", NULL,
                 "[1, 'a', {'b': None}] 1.0 1e+16 1e-05 0.30000000000000004 True");
    check_render("{{ \"ab\" * 2 }}{{ 7 // 2 }}{{ -7 // 2 }}{{ 7 / 2 }}{{ -7 % 3 }}{{ 2 ** 3 }}", NULL, "abab3-43.528");
    check_render("{{ \"abc\"|title }}", NULL, "Abc");
    check_render("{% macro f(a, b=2) %}[{{a}}{{b}}]{% endmacro %}{{ f(1) }}{{ f(1, b=3) }}", NULL, "[12][13]");
    check_render("{% for m in xs %}{{ loop.index0 }}{{ loop.index }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}",
                 "{\"xs\": [5, 6]}", "01TrueFalse2;12FalseTrue2;");
    check_render("{%- set ns = namespace(a=1) -%}\n{%- for i in range(3) %}{% set ns.a = ns.a + i %}{% endfor -%}\n  {{ ns.a }}", NULL, "4");
    check_render("{{ 'a<b>c'.split('<') }}{{ ' x '.strip() }}{{ 'xyx'.lstrip('x') }}{{ 'abc'[::-1] }}{{ [1,2,3][1:] }}", NULL,
                 "['a', 'b>c']xyxcba[2, 3]");
    check_render("{{ {'a': 'é\"', 'b': [1, 2.5, none, true]}|tojson }}", NULL, "{\"a\": \"é\\\"\", \"b\": [1, 2.5, null, true]}");
    check_render("{{ {'a': 1, 'b': [1]}|tojson(indent=2) }}", NULL, "{\n  \"a\": 1,\n  \"b\": [\n    1\n  ]\n}");
    check_render("{% for k, v in d.items() %}{{ k }}={{ v }},{% endfor %}{{ d|length }}", "{\"d\": {\"x\": 1, \"y\": \"z\"}}", "x=1,y=z,2");
    check_render("{{ xs|selectattr('r', 'equalto', 'u')|map(attribute='c')|join('+') }}",
                 "{\"xs\": [{\"r\": \"u\", \"c\": \"1\"}, {\"r\": \"a\", \"c\": \"2\"}, {\"r\": \"u\", \"c\": \"3\"}]}", "1+3");
    check_render("{% for i in range(5) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 3 %}{% break %}{% endif %}{{ i }}{% endfor %}", NULL, "02");
    check_render("{{ 'a' if false }}|{{ ('a' if false) is defined }}|{{ none.foo is defined }}|{{ [1,2][5] is defined }}", NULL, "|False|False|False");
    check_render("{% set x %}a{{ 1 }}b{% endset %}[{{ x }}]", NULL, "[a1b]");
    check_render("{{- '  x  ' -}}   \n  {{ 'y' }}\n{%- if true %}\n  z\n{%+ endif %}", NULL, "  x  y  z\n");
    check_render("{{ strftime_now('%d %b %Y') }}", NULL, "26 Jul 2024");
    check_render("{{ 1 < 2 < 3 }}{{ 1 < 3 < 2 }}{{ 0x1F }}{{ 0b101 }}{{ 0o17 }}{{ 1_000 }}", NULL, "TrueFalse315151000");
    check_render("{% if false %}{{ x|nosuchfilter }}{% endif %}{{ 'y' if true else z|nosuch }}", NULL, "y");
}

static void test_refusals(void) {
    check_refused("{{ x|nosuchfilter }}", NULL, "line 1: unknown or unsupported filter 'nosuchfilter'");
    check_refused("{% if x %}{% for a in b %}{{ a|nosuch }}{% endfor %}{% endif %}", NULL, "unknown or unsupported filter 'nosuch'");
    check_refused("{% if true %}{{ x|nosuchfilter }}{% endif %}", NULL, "unknown filter 'nosuchfilter'");
    check_refused("{{ 01 }}", NULL, "expected the end of the print tag");
    check_refused("\n\n{% frobnicate %}", NULL, "line 3: unknown tag 'frobnicate'");
    check_refused("{% include 'x.j2' %}", NULL, "{% include %} tag is not supported");
    check_refused("{{ x is nosuchtest }}", NULL, "unknown or unsupported test 'nosuchtest'");
    check_refused("{% if x %}abc", NULL, "line 1: unexpected end of template");
    check_refused("{% for x in y %}{% endif %}", NULL, "unexpected {% endif %}");
    check_refused("{{ 1 + }}", NULL, "expected an expression");
    check_refused("{{ 'abc }}", NULL, "string is not closed");
    check_refused("{# open comment", NULL, "comment {# is not closed");
    check_refused("{{ x", NULL, "not closed");
    check_refused("{% break %}", NULL, "outside a for loop");
    check_refused("{{ raise_exception('roles must alternate') }}", NULL, "the template raised an error: roles must alternate");
    check_refused("{{ x.y }}", NULL, "'x' is undefined");
    check_refused("{{ 'a' + 1 }}", NULL, "unsupported operand type(s) for +: 'str' and 'int'");
    check_refused("{{ 'a' < 1 }}", NULL, "'<' not supported between instances of 'str' and 'int'");
    check_refused("{% set l = [1] %}{{ l.append(2) }}", NULL, "'list object' has no attribute 'append'");
    // limits: steps, call depth, memory, output, nesting
    check_refused("{% for i in range(100000) %}{% if i %}{% endif %}{% endfor %}", NULL, "steps (the limit");
    check_refused("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", NULL, "nested more than 20 deep");
    check_refused("{{ range(1000000) }}", NULL, "at most 100000");
    check_refused("{{ 'x' * 100000000 }}", NULL, "past the output limit");
    check_refused("{% for i in range(2000) %}{{ 'abcdefghij' * 100 }}{% endfor %}", NULL, "output is larger");
    check_refused("{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}", NULL, "MiB of memory");
    check_refused("{% set ns = namespace(a=1) %}{% set ns.a = [ns] %}{{ ns }}", NULL, "nested more than 200 deep");
    check_refused("{% set ns = namespace(x=1) %}{% for i in range(300) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x == ns.x }}",
                  NULL, "comparing values nested more than 200 deep");
    char deep[1200];
    size_t k = 0;
    k += (size_t)snprintf(deep + k, sizeof deep - k, "{{ ");
    for (int i = 0; i < 300; i++) deep[k++] = '(';
    deep[k++] = '1';
    for (int i = 0; i < 300; i++) deep[k++] = ')';
    snprintf(deep + k, sizeof deep - k, " }}");
    check_refused(deep, NULL, "nested more than");
}

// strftime_now without a date is refused.
static void test_no_date(void) {
    chat_template *t;
    const char *tpl = "{{ strftime_now('%Y') }}";
    CHECK(chat_template_parse(tpl, strlen(tpl), &t) == WGT_OK, "%s", wgt_last_error());
    cJSON *ctx = cJSON_Parse("{}");
    chat_template_output o;
    chat_template_opts opts = {.now = -1};
    CHECK(chat_template_render(t, ctx, &opts, &o) == WGT_ERR_FORMAT && strstr(wgt_last_error(), "no date was given"),
          "%s", wgt_last_error());
    CHECK(chat_template_render(t, ctx, NULL, &o) == WGT_ERR_FORMAT, "NULL options mean no date");
    cJSON_Delete(ctx);
    chat_template_free(t);
}

static char *read_template(const char *model) {
    char path[256];
    snprintf(path, sizeof path, "third_party/hf-tokenizers/%s/tokenizer_config.json", model);
    size_t n;
    uint8_t *b = test_slurp(path, &n);
    if (!b) return NULL;
    cJSON *j = cJSON_Parse((const char *)b);
    free(b);
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(j, "chat_template");
    char *s = cJSON_IsString(ct) ? strdup(ct->valuestring) : NULL;
    cJSON_Delete(j);
    return s;
}

static const char *const chatml_template =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

// On a fixed conversation, each message's content must appear in the output with every byte's
// source its index, and no byte of the template's own text may carry a source.
static void test_spans(void) {
    static const char *const contents[] = {"You are terse.", "Hi there, {{ not jinja }} 🙂", "Hello! How can I help?",
                                           "Tell me a joke."};
    static const char *const roles[] = {"system", "user", "assistant", "user"};
    const char *models[] = {"llama3_1", "qwen3", "gemma3", "chatml"};
    for (int m = 0; m < 4; m++) {
        char *tpl = m < 3 ? read_template(models[m]) : strdup(chatml_template);
        CHECK(tpl != NULL, "%s: tokenizer_config.json with a chat_template is missing (scripts/setup.sh installs it)", models[m]);
        if (!tpl) continue;
        cJSON *ctx = cJSON_CreateObject();
        cJSON *msgs = cJSON_AddArrayToObject(ctx, "messages");
        for (int i = 0; i < 4; i++) {
            cJSON *msg = cJSON_CreateObject();
            cJSON_AddStringToObject(msg, "role", roles[i]);
            cJSON_AddStringToObject(msg, "content", contents[i]);
            cJSON_AddItemToArray(msgs, msg);
        }
        cJSON_AddTrueToObject(ctx, "add_generation_prompt");
        cJSON_AddStringToObject(ctx, "bos_token", "<BOS>");
        cJSON_AddStringToObject(ctx, "eos_token", "<EOS>");
        char *js = cJSON_PrintUnformatted(ctx);
        cJSON_Delete(ctx);
        chat_template_output o = {0};
        wgt_status st;
        char *text = render(tpl, js, &st, &o);
        CHECK(text != NULL, "%s: %s", models[m], wgt_last_error());
        if (text) {
            size_t tagged = 0;
            for (int i = 0; i < 4; i++) {
                const char *at = strstr(o.text, contents[i]);
                CHECK(at != NULL, "%s: message %d's content is not in the output", models[m], i);
                if (!at) continue;
                size_t s = (size_t)(at - o.text), e = s + strlen(contents[i]);
                int ok = 1;
                for (size_t k = s; k < e; k++) ok &= o.source[k] == i;
                CHECK(ok, "%s: message %d's bytes [%zu, %zu) are not all marked as its", models[m], i, s, e);
                int span_ok = 0;
                for (size_t k = 0; k < o.n_spans; k++)
                    span_ok |= o.spans[k].message == i && o.spans[k].start == s && o.spans[k].end == e;
                CHECK(span_ok, "%s: no span [%zu, %zu) for message %d", models[m], s, e, i);
                tagged += e - s;
            }
            size_t total = 0;
            for (size_t k = 0; k < o.n; k++) total += o.source[k] >= 0;
            CHECK(total == tagged, "%s: %zu bytes are marked as message content, the contents have %zu", models[m], total, tagged);
            CHECK(o.n_generation == 0, "%s: no generation blocks", models[m]);
            chat_template_output_free(&o);
        }
        free(text);
        free(js);
        free(tpl);
    }
    // {% generation %} blocks are reported
    chat_template_output o = {0};
    char *text = render("{% for m in messages %}<{{ m.role }}>{% generation %}{{ m.content }}!{% endgeneration %}{% endfor %}",
                        "{\"messages\": [{\"role\": \"u\", \"content\": \"ab\"}, {\"role\": \"a\", \"content\": \"cd\"}]}", NULL, &o);
    CHECK(text && !strcmp(text, "<u>ab!<a>cd!"), "generation text %s", text ? text : wgt_last_error());
    CHECK(o.n_generation == 2 && o.generation[0].start == 3 && o.generation[0].end == 6 && o.generation[1].start == 9 &&
          o.generation[1].end == 12, "generation spans");
    CHECK(o.n_spans == 2 && o.spans[1].message == 1 && o.spans[1].start == 9 && o.spans[1].end == 11, "content spans");
    chat_template_output_free(&o);
    free(text);
    // provenance survives slicing, trimming, splitting and tojson escapes
    text = render("{{ (messages[0].content|trim)[1:3] }}|{{ messages[0].content.split('x')[-1] }}|{{ messages[0].content|tojson }}",
                  "{\"messages\": [{\"role\": \"u\", \"content\": \" a\\\"bxcd \"}]}", NULL, &o);
    const char *want = "\"b|cd |\" a\\\"bxcd \"";
    CHECK(text && !strcmp(text, want), "provenance text %s", text ? text : wgt_last_error());
    if (text && !strcmp(text, want)) {
        int32_t exp[64];
        size_t n = strlen(want);
        for (size_t k = 0; k < n; k++) exp[k] = 0;
        exp[2] = exp[6] = exp[7] = -1;  // the two '|' and the opening quote of the JSON string
        exp[n - 1] = -1;                // its closing quote
        int ok = 1;
        for (size_t k = 0; k < n; k++) ok &= o.source[k] == exp[k];
        CHECK(ok, "provenance of sliced / split / escaped content");
    }
    chat_template_output_free(&o);
    free(text);
}

// chat_template_from_config and chat_template_add_special_tokens on the real configurations
static void test_config(void) {
    const char *models[] = {"llama3_1", "qwen3", "gemma3", "llama2"};
    for (int m = 0; m < 4; m++) {
        char path[256];
        snprintf(path, sizeof path, "third_party/hf-tokenizers/%s/tokenizer_config.json", models[m]);
        size_t n;
        uint8_t *b = test_slurp(path, &n);
        CHECK(b != NULL, "%s is missing", path);
        if (!b) continue;
        cJSON *cfg = cJSON_Parse((const char *)b);
        free(b);
        const char *text;
        wgt_status st = chat_template_from_config(cfg, NULL, &text);
        if (m == 3) CHECK(st == WGT_ERR_CONFIG && strstr(wgt_last_error(), "no chat_template"), "llama2 has none: %s", wgt_last_error());
        else CHECK(st == WGT_OK && strstr(text, "for message in"), "%s: %s", models[m], wgt_last_error());
        CHECK(chat_template_from_config(cfg, "tool_use", &text) == WGT_ERR_CONFIG, "%s: no template named tool_use", models[m]);
        cJSON *ctx = cJSON_Parse("{\"eos_token\": \"MINE\"}");
        CHECK(chat_template_add_special_tokens(cfg, ctx) == WGT_OK, "%s: %s", models[m], wgt_last_error());
        const cJSON *bos = cJSON_GetObjectItemCaseSensitive(ctx, "bos_token");
        const cJSON *eos = cJSON_GetObjectItemCaseSensitive(ctx, "eos_token");
        const cJSON *pad = cJSON_GetObjectItemCaseSensitive(ctx, "pad_token");
        CHECK(cJSON_IsString(eos) && !strcmp(eos->valuestring, "MINE"), "%s: the context's own eos_token is kept", models[m]);
        if (m == 1) {  // Qwen3: no bos_token (null), pad_token set, 13 additional tokens
            const cJSON *add = cJSON_GetObjectItemCaseSensitive(ctx, "additional_special_tokens");
            CHECK(!bos && cJSON_IsString(pad) && !strcmp(pad->valuestring, "<|endoftext|>") && cJSON_GetArraySize(add) == 13,
                  "qwen3 special tokens");
        }
        if (m == 2) CHECK(cJSON_IsString(bos) && !strcmp(bos->valuestring, "<bos>") && cJSON_IsString(pad), "gemma3 special tokens");
        if (m == 0) CHECK(cJSON_IsString(bos) && !strcmp(bos->valuestring, "<|begin_of_text|>") && !pad, "llama3_1 special tokens");
        cJSON_Delete(ctx);
        cJSON_Delete(cfg);
    }
    cJSON *cfg = cJSON_Parse("{\"chat_template\": [{\"name\": \"default\", \"template\": \"A\"}, {\"name\": \"tool_use\", \"template\": \"B\"}],"
                             " \"bos_token\": {\"content\": \"<s>\", \"lstrip\": false}}");
    const char *text = NULL;
    CHECK(chat_template_from_config(cfg, NULL, &text) == WGT_OK && !strcmp(text, "A"), "default of a list");
    CHECK(chat_template_from_config(cfg, "tool_use", &text) == WGT_OK && !strcmp(text, "B"), "named template");
    cJSON *ctx = cJSON_CreateObject();
    CHECK(chat_template_add_special_tokens(cfg, ctx) == WGT_OK &&
          !strcmp(cJSON_GetObjectItemCaseSensitive(ctx, "bos_token")->valuestring, "<s>"), "an AddedToken object's content");
    cJSON_Delete(ctx);
    cJSON_Delete(cfg);
}

// --batch FILE: the renderer of tests/test_chat_template_ref.py
static int run_batch(const char *path) {
    size_t n;
    uint8_t *b = test_slurp(path, &n);
    if (!b) { fprintf(stderr, "cannot read %s\n", path); return 2; }
    char *save = NULL;
    for (char *line = strtok_r((char *)b, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        cJSON *c = cJSON_Parse(line);
        const cJSON *tpl = cJSON_GetObjectItemCaseSensitive(c, "template");
        const cJSON *ctx = cJSON_GetObjectItemCaseSensitive(c, "context");
        const cJSON *now = cJSON_GetObjectItemCaseSensitive(c, "now");
        if (!cJSON_IsString(tpl) || !cJSON_IsObject(ctx)) { fprintf(stderr, "bad batch line\n"); return 2; }
        cJSON *res = cJSON_CreateObject();
        chat_template *t;
        wgt_status st = chat_template_parse(tpl->valuestring, strlen(tpl->valuestring), &t);
        chat_template_output o = {0};
        if (st == WGT_OK) {
            chat_template_opts opts = {.now = cJSON_IsNumber(now) ? (int64_t)now->valuedouble : -1};
            st = chat_template_render(t, ctx, &opts, &o);
            chat_template_free(t);
        }
        cJSON_AddBoolToObject(res, "ok", st == WGT_OK);
        if (st == WGT_OK) {
            cJSON_AddStringToObject(res, "text", o.text);
            cJSON *sp = cJSON_AddArrayToObject(res, "spans");
            for (size_t k = 0; k < o.n_spans; k++) {
                int v[3] = {o.spans[k].message, (int)o.spans[k].start, (int)o.spans[k].end};
                cJSON_AddItemToArray(sp, cJSON_CreateIntArray(v, 3));
            }
            cJSON *g = cJSON_AddArrayToObject(res, "generation");
            for (size_t k = 0; k < o.n_generation; k++) {
                int v[2] = {(int)o.generation[k].start, (int)o.generation[k].end};
                cJSON_AddItemToArray(g, cJSON_CreateIntArray(v, 2));
            }
        } else cJSON_AddStringToObject(res, "error", wgt_last_error());
        chat_template_output_free(&o);
        char *s = cJSON_PrintUnformatted(res);
        puts(s);
        free(s);
        cJSON_Delete(res);
        cJSON_Delete(c);
    }
    free(b);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--batch")) return run_batch(argv[2]);
    test_basics();
    test_refusals();
    test_no_date();
    test_spans();
    test_config();
    return test_finish();
}
