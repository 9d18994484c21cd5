// fuzz_chat_template.c — mutation fuzzer for the chat-template interpreter
// (src/data/chat_template.c): the real Llama-3.1, Qwen3 and Gemma-3 templates, a ChatML one and a
// template using the rest of the supported Jinja2, mutated as text (byte edits plus splices of
// Jinja2 delimiters, keywords, filters and operators), parsed and rendered on a conversation with
// tool calls under small limits. A refusal must carry a message; an accepted render must give
// NUL-terminated valid UTF-8, spans that agree with the per-byte sources, and the same
// result a second time.
#include <cjson/cJSON.h>
#include "fuzzlib.h"
#include "data/chat_template.h"

static const char *const jinja_tokens[] = {
    "{{", "}}", "{%", "%}", "{#", "#}", "{%-", "-%}", "{{-", "-}}", "{%+", "+%}", "{% endif %}", "{% endfor %}",
    "{% else %}", "{% if x %}", "{% for m in messages %}", "{% set ns.a = 1 %}", "{% macro f(a) %}", "{% endmacro %}",
    "{% raw %}", "{% endraw %}", "{% generation %}", "{% endgeneration %}", "{% break %}", "{% continue %}",
    "loop.index0", "loop.last", "messages", "message", "namespace(", "range(", "range(99999)", "[::-1]", "[1:]",
    "[-1]", "|trim", "|tojson", "|tojson(indent=2)", "|length", "|join(', ')", "|map(attribute='role')",
    "|selectattr('role', 'equalto', 'user')", "|default('x')", "|first", "|reverse", "|items", "|string", "|int",
    " is defined", " is not none", " is string", " in ", " not in ", " and ", " or ", " not ", " ~ ", " + ", " * ",
    " // ", " % ", " ** ", "==", "!=", "<=", "(", ")", "[", "]", "'", "\"", "\\", ".split('x')", ".strip()",
    ".startswith('<')", ".get('a')", ".items()", "raise_exception('e')", "strftime_now('%Y')", "f(f(1))", "\n",
    "  ", "'\\u00e9'", "'\\x00'", "9223372036854775807", "-9223372036854775808", "1e308", "0.1", "true", "none"};
#define N_JT (sizeof jinja_tokens / sizeof jinja_tokens[0])

static const char *const chatml =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
static const char *const features =
    "{%- macro r(x, up=false) -%}{{ x|upper if up else x }}{%- endmacro -%}\n"
    "{% set ns = namespace(n=0) %}{% for m in messages if m.role != 'tool' %}{% set ns.n = ns.n + loop.index %}\n"
    "  [{{ r(m.role, loop.first) }} {{ m.content[:5] if m.content is string }}{{ loop.previtem.role if not loop.first }}]\n"
    "{% else %}none{% endfor %}{{ ns.n }} {{ messages|map(attribute='role')|join(',') }} {{ tools|tojson(indent=1) }}\n"
    "{{ {'a': [1, 2.5, none]}|tojson }} {{ 'a,b'.split(',')[::-1] }} {{ 7 // 2 }}{{ 'x' ~ 1.5 }}{% raw %}{{ r }}{% endraw %}";

static char *config_template(const char *model) {
    char path[256];
    snprintf(path, sizeof path, "third_party/hf-tokenizers/%s/tokenizer_config.json", model);
    fz_buf b = {0};
    if (!fz_read(path, &b)) return NULL;
    fz_reserve(&b, b.n + 1);
    b.p[b.n] = 0;
    cJSON *j = cJSON_Parse((const char *)b.p);
    free(b.p);
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(j, "chat_template");
    char *s = cJSON_IsString(ct) ? strdup(ct->valuestring) : NULL;
    cJSON_Delete(j);
    return s;
}

static int utf8_ok(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t k = u[i] < 0x80 ? 1 : (u[i] >= 0xc2 && u[i] < 0xe0) ? 2 : (u[i] >= 0xe0 && u[i] < 0xf0) ? 3 : (u[i] >= 0xf0 && u[i] < 0xf5) ? 4 : 0;
        if (!k || i + k > n) return 0;
        for (size_t j = 1; j < k; j++)
            if ((u[i + j] & 0xc0) != 0x80) return 0;
        i += k;
    }
    return 1;
}

int main(int argc, char **argv) {
    long iters, accepted = 0;
    fz_setup(argc, argv, &iters);
    const char *seeds[5] = {NULL, NULL, NULL, chatml, features};
    char *owned[3] = {config_template("llama3_1"), config_template("qwen3"), config_template("gemma3")};
    int nseeds = 0;
    const char *use[5];
    for (int k = 0; k < 3; k++)
        if (owned[k]) use[nseeds++] = owned[k];
    use[nseeds++] = seeds[3];
    use[nseeds++] = seeds[4];
    const char *ctx_text =
        "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Hi {{ x }} é\"},"
        " {\"role\": \"assistant\", \"content\": \"<think>\\nr\\n</think>\\n\\nOK\", \"tool_calls\": [{\"function\": {\"name\": \"f\","
        " \"arguments\": {\"a\": 1}}}]}, {\"role\": \"tool\", \"content\": \"42\"}, {\"role\": \"user\", \"content\": \"Thanks\"}],"
        " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {}}}],"
        " \"add_generation_prompt\": true, \"bos_token\": \"<s>\", \"eos_token\": \"</s>\"}";
    cJSON *ctx = cJSON_Parse(ctx_text);
    if (!ctx) return 2;
    const int n_messages = 5;
    chat_template_limits lim = {.max_steps = 50000, .max_memory = 16u << 20, .max_output = 256u << 10, .max_call_depth = 16};
    chat_template_opts opts = {.now = 1721952000, .limits = &lim};
    fz_buf b = {0};
    for (long it = 0; it < iters; it++) {
        const char *seed = use[fz_below((size_t)nseeds)];
        fz_set(&b, seed, strlen(seed));
        int k = fz_below(4) ? 1 : 2 + (int)fz_below(3);
        for (int m = 0; m < k; m++) {
            if (fz_next() & 1) fz_mutate(&b, 1);
            else {  // splice a Jinja2 token, sometimes replacing a few bytes
                const char *t = jinja_tokens[fz_below(N_JT)];
                size_t at = fz_below(b.n + 1);
                if (fz_next() & 1) fz_erase(&b, at, fz_below(6));
                fz_insert(&b, at < b.n ? at : b.n, t, strlen(t));
            }
        }
        chat_template *t = NULL;
        wgt_status st = chat_template_parse((const char *)b.p, b.n, &t);
        if (st != WGT_OK) {
            FZ_CHECK(t == NULL && wgt_last_error()[0], "a refused parse must leave no template and a message");
            continue;
        }
        chat_template_output o, o2;
        st = chat_template_render(t, ctx, &opts, &o);
        if (st != WGT_OK) {
            FZ_CHECK(o.text == NULL && wgt_last_error()[0], "a refused render must leave no output and a message");
            chat_template_free(t);
            continue;
        }
        accepted++;
        FZ_CHECK(o.text[o.n] == 0, "the output is not NUL-terminated");  // ('\x00' in a template can put NULs inside)
        FZ_CHECK(utf8_ok(o.text, o.n), "the output is not valid UTF-8");
        size_t prev_end = 0, in_spans = 0, sourced = 0;
        for (size_t k2 = 0; k2 < o.n_spans; k2++) {
            const chat_template_span *s = &o.spans[k2];
            FZ_CHECK(s->start < s->end && s->end <= o.n && s->start >= prev_end, "span %zu [%zu, %zu) of %zu bytes", k2, s->start, s->end, o.n);
            FZ_CHECK(s->message >= 0 && s->message < n_messages, "span of message %d", s->message);
            if (s->start < s->end && s->end <= o.n)
                for (size_t i = s->start; i < s->end; i++) FZ_CHECK(o.source[i] == s->message, "source %d in a span of %d", o.source[i], s->message);
            prev_end = s->end;
            in_spans += s->end - s->start;
        }
        for (size_t i = 0; i < o.n; i++) sourced += o.source[i] >= 0;
        FZ_CHECK(sourced == in_spans, "%zu sourced bytes, %zu in spans", sourced, in_spans);
        for (size_t k2 = 0; k2 < o.n_generation; k2++)
            FZ_CHECK(o.generation[k2].start < o.generation[k2].end && o.generation[k2].end <= o.n, "generation span");
        FZ_CHECK(chat_template_render(t, ctx, &opts, &o2) == WGT_OK && o2.n == o.n && !memcmp(o2.text, o.text, o.n),
                 "a second render differs");
        chat_template_output_free(&o2);
        chat_template_output_free(&o);
        chat_template_free(t);
    }
    cJSON_Delete(ctx);
    for (int k2 = 0; k2 < 3; k2++) free(owned[k2]);
    free(b.p);
    return fz_finish("fuzz_chat_template", iters, accepted);
}
