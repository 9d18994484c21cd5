#!/usr/bin/env python3
"""test_chat_template_ref.py — compares wgtrain's chat-template interpreter (src/data/chat_template.c,
driven through `build/tests/test_chat_template --batch`) byte for byte with Debian's python3-jinja2,
configured exactly as transformers' apply_chat_template configures it (ImmutableSandboxedEnvironment
with trim_blocks, lstrip_blocks and the loop controls; its own tojson, raise_exception and
strftime_now). Templates: the real Llama-3.1, Qwen3 and Gemma-3 ones from
third_party/hf-tokenizers, and templates written here in the style of ChatML (SmolLM2), Llama-2,
Mistral, Zephyr (TinyLlama), Meta's full Llama-3.1 tool template and one that exercises the rest of
the supported Jinja2. Conversations: with and without a system turn, multi-turn, empty contents,
Jinja-like braces, Unicode, tool calls and reasoning for Qwen3, content lists for Gemma-3, broken
role order, each with add_generation_prompt false and true. A template that jinja2 refuses must be
refused by wgtrain too. The spans wgtrain reports are checked independently: every span's bytes
must come from its message, and each message's (stripped) content found in the output must lie
inside a span of that message. Then a differential fuzz pass: CHAT_TEMPLATE_FUZZ (default 400)
templates mutated from these (seed CHAT_TEMPLATE_FUZZ_SEED), each rendered by both or refused by
both. Prints "N passed, N failed".
"""
import json
import os
import subprocess
import sys
import tempfile
from datetime import datetime, timezone

try:
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError:
    print("python3-jinja2 is missing: apt-get install python3-jinja2 (scripts/setup.sh)")
    print("0 passed, 1 failed")
    sys.exit(1)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HELPER = os.path.join(ROOT, os.environ.get("BUILD", "build"), "tests", "test_chat_template")
NOW = 1721952000  # 2024-07-26 00:00 UTC: the date strftime_now() sees on both sides


class GenerationTracker(jinja2.ext.Extension):
    """{% generation %} ... {% endgeneration %}: renders its body (as transformers' AssistantTracker does)."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def make_env():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return datetime.fromtimestamp(NOW, timezone.utc).strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationTracker, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def real_template(model):
    with open(os.path.join(ROOT, "third_party", "hf-tokenizers", model, "tokenizer_config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    return cfg["chat_template"], cfg.get("bos_token"), cfg.get("eos_token")


CHATML = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
          "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}"
          "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
          "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")

LLAMA2 = ("{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}"
          "{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}"
          "{% set system_message = false %}{% endif %}{% for message in loop_messages %}"
          "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
          "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
          "{% if loop.index0 == 0 and system_message != false %}"
          "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
          "{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}"
          "{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
          "{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}")

MISTRAL = ("{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
           "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
           "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
           "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}"
           "{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}")

ZEPHYR = """{% for message in messages %}
{% if message['role'] == 'user' %}
{{ '<|user|>
' + message['content'] + eos_token }}
{% elif message['role'] == 'system' %}
{{ '<|system|>
' + message['content'] + eos_token }}
{% elif message['role'] == 'assistant' %}
{{ '<|assistant|>
'  + message['content'] + eos_token }}
{% endif %}
{% if loop.last and add_generation_prompt %}
{{ '<|assistant|>' }}
{% endif %}
{% endfor %}"""

# In the style of Meta's Llama-3.1 template with tools (system date, custom tools in the first user
# turn, ipython results), with the date from strftime_now as Llama-3.2's does.
LLAMA31_TOOLS = """{{- bos_token }}
{%- if custom_tools is defined %}
    {%- set tools = custom_tools %}
{%- endif %}
{%- if not tools_in_user_message is defined %}
    {%- set tools_in_user_message = true %}
{%- endif %}
{%- if not date_string is defined %}
    {%- set date_string = strftime_now("%d %b %Y") %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}

{#- This block extracts the system message, so we can slot it into the right place. #}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}

{#- System message + builtin tools #}
{{- "<|start_header_id|>system<|end_header_id|>\\n\\n" }}
{%- if builtin_tools is defined or tools is not none %}
    {{- "Environment: ipython\\n" }}
{%- endif %}
{%- if builtin_tools is defined %}
    {{- "Tools: " + builtin_tools | reject('equalto', 'code_interpreter') | join(", ") + "\\n\\n"}}
{%- endif %}
{{- "Cutting Knowledge Date: December 2023\\n" }}
{{- "Today Date: " + date_string + "\\n\\n" }}
{%- if tools is not none and not tools_in_user_message %}
    {{- "You have access to the following functions. To call a function, please respond with JSON for a function call." }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {{- "Do not use variables.\\n\\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\\n\\n" }}
    {%- endfor %}
{%- endif %}
{{- system_message }}
{{- "<|eot_id|>" }}

{#- Custom tools are passed in a user message with some extra guidance #}
{%- if tools_in_user_message and not tools is none %}
    {#- Extract the first user message so we can plug it in here #}
    {%- if messages | length != 0 %}
        {%- set first_user_message = messages[0]['content']|trim %}
        {%- set messages = messages[1:] %}
    {%- else %}
        {{- raise_exception("Cannot put tools in the first user message when there's no first user message!") }}
{%- endif %}
    {{- '<|start_header_id|>user<|end_header_id|>\\n\\n' -}}
    {{- "Given the following functions, please respond with a JSON for a function call " }}
    {{- "with its proper arguments that best answers the given prompt.\\n\\n" }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {{- "Do not use variables.\\n\\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\\n\\n" }}
    {%- endfor %}
    {{- first_user_message + "<|eot_id|>"}}
{%- endif %}

{%- for message in messages %}
    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}
        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' }}
    {%- elif 'tool_calls' in message %}
        {%- if not message.tool_calls|length == 1 %}
            {{- raise_exception("This model only supports single tool-calls at once!") }}
        {%- endif %}
        {%- set tool_call = message.tool_calls[0].function %}
        {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}
        {{- '{"name": "' + tool_call.name + '", ' }}
        {{- '"parameters": ' }}
        {{- tool_call.arguments | tojson }}
        {{- "}" }}
        {{- "<|eot_id|>" }}
    {%- elif message.role == "tool" or message.role == "ipython" %}
        {{- "<|start_header_id|>ipython<|end_header_id|>\\n\\n" }}
        {%- if message.content is mapping or message.content is iterable %}
            {{- message.content | tojson }}
        {%- else %}
            {{- message.content }}
        {%- endif %}
        {{- "<|eot_id|>" }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}
{%- endif %}
"""

# The rest of the supported language, on the same conversations.
FEATURES = """{%- macro render_role(role, upper=false) -%}
{{ role|upper if upper else role|capitalize }}{% endmacro -%}
{% set ns = namespace(n=0, users=[]) %}
{% for m in messages if m.role != 'tool' %}
  {% set ns.n = ns.n + 1 %}
  {% if m.role == 'user' %}{% set ns.users = ns.users + [loop.index0] %}{% endif %}
  [{{ loop.index }}/{{ loop.length }} {{ loop.revindex0 }} {{ render_role(m.role, upper=loop.first) }}{{ ' (after ' ~ loop.previtem.role ~ ')' if not loop.first }}]
  {%- if m.content is string %} {{ m.content|length }}:{{ m.content[:12] }}|{{ m.content[-5:]|replace('\\n', '\\\\n') }}|{{ m.content.split()|join(',') }}{% endif %}
  {% if m.content is string and m.content.startswith(('Hi', 'What')) %}!{% elif m.content is string and m.content.endswith('?') %}?{% else %}.{% endif %}

{% else %}
no messages
{% endfor %}
users at {{ ns.users }} of {{ ns.n }}; roles {{ messages|map(attribute='role')|list }}
{{ messages|selectattr('role', 'equalto', 'user')|list|length }} user, {{ messages|rejectattr('role', 'in', ['user', 'system'])|list|length }} other
{{ messages|first|tojson(sort_keys=true) if messages else 'none' }} {{ (messages|last).role if messages else '' }}
{{ {'b': [1, 2.5, none, true], 'a': 'x\\ty "q" é'}|tojson(separators=(',', ':')) }} {{ {'k': 1e300, 'j': -0.0, 'i': 123456789012}|tojson }}
{{ {'z': {'y': []}, 'w': {}}|tojson(indent=2) }}
{% for k, v in {'one': 1, 'two': 2}.items() %}{{ k }}={{ v }}{{ ',' if not loop.last }}{% endfor %} {{ {'a': 1}.get('b', 'dflt') }} {{ {'a': 1}.get('a') }}
{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % -3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 1.5 * 2 }} {{ -7.5 // 2 }} {{ 10 - 3 - 2 }} {{ 'ab' ~ 1 ~ none }}
{{ 'Hello World'.lower() }} {{ 'hello world'.upper() }} {{ 'hello world'.title() }} {{ 'x-y z'|title }} {{ '  pad  '|trim }}|{{ 'xxhixx'.strip('x') }}
{{ 'a,b,,c'.split(',') }} {{ 'a,b,,c'.split(',', 1) }} {{ 'a,b,,c'.rsplit(',', 1) }} {{ '  a  b  '.split() }} {{ 'abc'.replace('', '-') }} {{ 'aaa'.replace('a', 'b', 2) }}
{{ [3, 1, 2][::-1] }} {{ [3, 1, 2][-1] }} {{ 'héllo'[1:3] }} {{ 'héllo'|reverse }} {{ [1, 2] + [3] }} {{ (1,) }} {{ (1, 'a') }} {{ [] }} {{ {} }}
{{ 5 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ none is none }} {{ 1 is number }} {{ 1.0 is float }} {{ 'x' is lower }} {{ 'X' is upper }} {{ [] is sequence }} {{ {} is mapping }} {{ true is boolean }} {{ undefined_thing is undefined }}
{{ 'x' in 'xyz' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'q' not in 'xyz' }} {{ not none }} {{ 0 or 'zero' }} {{ 1 and 'one' }} {{ '1'|int + 1 }} {{ ' 2.5 '|float }} {{ 'x'|int(7) }} {{ -3|abs }}
{{ [1, 2, 3]|join('-') }} {{ [1, 2, 3]|first }} {{ [1, 2, 3]|last }} {{ 'abc'|list }} {{ none|default('d') }} {{ ''|default('e', true) }} {{ [0, 1, 2]|select|list }} {{ [0, 1, 2]|reject('odd')|list }} {{ ['a', 'b']|map('upper')|join }}
{{ 'a\\'b' }} {{ ["it's", 'say "hi"', 'both \\' "', 'tab\\t', 'é🙂\\x01'] }} {{ 12345678901234567 * 1.0 }} {{ 0.1 }} {{ 1/3 }} {{ 2.0 ** 70 }} {{ 1e-7 }}
{%- set block %}
 captured {{ messages|length }} {% endset %}
[{{ block }}]
{% for i in range(10) %}{% if i is odd %}{% continue %}{% endif %}{% if i > 6 %}{% break %}{% endif %}{{ i }}{% endfor %} {{ range(2, 9, 3)|list }} {{ range(5, 0, -2)|list }}
{% for a, b in [[1, 2], (3, 4)] %}{{ a + b }}{% endfor %} {{ dict(x=1, y='z')|tojson }} {{ strftime_now('%Y-%m-%d %A') }}
{{ '%s-%d %r %%' % ('a', 2.7, 'q') }} {{ 'plain' % no_such_var }} {{ 1 < 2 < 3 }} {{ 3 > 2 == 2 }} {{ 0x1f + 0o7 + 0b1 + 1_0 }} {{ [1][] is defined }}
{% raw %}{{ not rendered }}{% endraw %}
  {#- a comment -#}
   end {{ 'with' -}}   
   trailing
"""


def conversations():
    sys_msg = {"role": "system", "content": "You are a careful assistant. Answer briefly."}
    u1 = {"role": "user", "content": "Hi! What is 2+2?"}
    a1 = {"role": "assistant", "content": "It is 4."}
    u2 = {"role": "user", "content": "And 3+3?"}
    a2 = {"role": "assistant", "content": "That makes 6, of course."}
    weird = {"role": "user", "content": "  Braces {{ messages }} and {% if x %} and {# c #} in text\n\nnew lines\t"}
    uni = {"role": "assistant", "content": "Ünïcödé — 日本語テキスト 🙂👍🏽 e\u0301 \u00a0nbsp\u3000"}
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city",
              "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"},
                                                              "unit": {"type": "string", "enum": ["c", "f"]}},
                             "required": ["city"]}}}]
    call_a = {"role": "assistant", "content": "",
              "tool_calls": [{"type": "function", "function": {"name": "get_weather",
                                                               "arguments": {"city": "Paris", "unit": "c", "days": 2, "ratio": 0.5}}}]}
    call_s = {"role": "assistant", "content": "Let me check both.",
              "tool_calls": [{"function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}},
                             {"name": "get_weather", "arguments": {"city": "Lima"}}]}
    tool1 = {"role": "tool", "content": "{\"temp\": 21, \"sky\": \"clear\"}"}
    tool2 = {"role": "tool", "content": "Lima: 18 C"}
    think = {"role": "assistant", "content": "<think>\nThe user wants a sum.\n</think>\n\nThe answer is 6."}
    reason = {"role": "assistant", "content": "Seven.", "reasoning_content": "\n3 + 4 = 7\n"}
    return [
        ("single user", {"messages": [u1]}),
        ("system + 4 turns", {"messages": [sys_msg, u1, a1, u2, a2]}),
        ("no system, 3 turns", {"messages": [u1, a1, u2]}),
        ("empty contents", {"messages": [{"role": "user", "content": ""}, {"role": "assistant", "content": ""}]}),
        ("braces and unicode", {"messages": [sys_msg, weird, uni, {"role": "user", "content": "ok"}]}),
        ("tool calls", {"messages": [u1, call_a, tool1, call_s, tool1, tool2, a1], "tools": tools}),
        ("tools, no calls", {"messages": [sys_msg, u2], "tools": tools}),
        ("reasoning", {"messages": [u1, reason, u2, think]}),
        ("reasoning, earlier turn", {"messages": [u1, think, u2, a2]}),
        ("thinking off", {"messages": [u2], "enable_thinking": False}),
        ("content list", {"messages": [{"role": "system", "content": [{"type": "text", "text": "Be kind."}]},
                                       {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": " Describe this. "}]},
                                       {"role": "assistant", "content": [{"type": "text", "text": "A cat."}]}]}),
        ("roles out of order", {"messages": [u1, u2]}),
        ("starts with assistant", {"messages": [a1, u1]}),
        ("no messages", {"messages": []}),
    ]


# Jinja2 fragments spliced into the templates by the differential fuzz pass
FUZZ_TOKENS = ["{{", "}}", "{%", "%}", "{%-", "-%}", "{{-", "-}}", "\n", "  ", " ", "'", "x", "loop.index", "|trim",
               "|length", "[::-1]", "[1:]", " ~ ", " + ", " and ", " or ", " not ", "(", ")", "[", "]", "|tojson",
               "|string", " is defined", "0", "1", "-", ".strip()", "\t", "{#", "#}", "|upper", "|first", "|last",
               "|join", " in ", "none", "true", "1.5", "'a'", "\"b\"", " % ", " if ", " else ", "{% endif %}"]


def fuzz_cases(env, templates, n, seed):
    """n templates mutated from `templates` (a deterministic pseudo-random stream), each with a
    conversation: wgtrain must render what jinja2 renders and refuse what it refuses."""
    import random
    rnd = random.Random(seed)
    convs = conversations()
    out = []
    for i in range(n):
        s = rnd.choice(templates)[1]
        for _ in range(rnd.choice([1, 1, 2, 3])):
            at = rnd.randrange(len(s) + 1)
            r = rnd.random()
            if r < 0.4:
                s = s[:at] + rnd.choice(FUZZ_TOKENS) + s[at:]
            elif r < 0.7:
                s = s[:at] + s[at + rnd.randrange(1, 5):]
            else:
                j = rnd.randrange(len(s) + 1)
                s = s[:at] + s[j:j + rnd.randrange(1, 20)] + s[at:]
        cname, conv = rnd.choice(convs)
        ctx = {"tools": None, "documents": None}
        ctx.update(json.loads(json.dumps(conv)))
        ctx["add_generation_prompt"] = rnd.random() < 0.5
        ctx["bos_token"], ctx["eos_token"] = "<s>", "</s>"
        try:
            want, err = env.from_string(s).render(**ctx), None
        except Exception as e:
            want, err = None, f"{type(e).__name__}: {e}"
        # a printed function object shows its address in Python: nothing to compare
        if want is not None and ("<built-in method" in want or " at 0x" in want):
            continue
        out.append({"name": f"fuzz {i} / {cname}", "template": s, "context": ctx, "want": want, "err": err, "fuzz": True})
    return out


def main():
    env = make_env()
    templates = []
    for model in ("llama3_1", "qwen3", "gemma3"):
        src, bos, eos = real_template(model)
        templates.append((model, src, bos, eos))
    templates += [("chatml-smollm2", CHATML, None, "<|im_end|>"), ("llama2", LLAMA2, "<s>", "</s>"),
                  ("mistral", MISTRAL, "<s>", "</s>"), ("zephyr", ZEPHYR, "<s>", "</s>"),
                  ("llama3.1-tools", LLAMA31_TOOLS, "<|begin_of_text|>", "<|eot_id|>"),
                  ("features", FEATURES, "<s>", "</s>")]
    cases = []
    for tname, src, bos, eos in templates:
        try:
            compiled = env.from_string(src)
            compile_error = None
        except jinja2.TemplateError as e:
            compiled, compile_error = None, e
        for cname, conv in conversations():
            for agp in (False, True):
                ctx = {"tools": None, "documents": None}
                ctx.update(json.loads(json.dumps(conv)))
                ctx["add_generation_prompt"] = agp
                # special tokens as transformers' special_tokens_map passes them: unset ones left out
                if bos is not None:
                    ctx["bos_token"] = bos
                if eos is not None:
                    ctx["eos_token"] = eos
                if compiled is None:
                    want, err = None, str(compile_error)
                else:
                    try:
                        want, err = compiled.render(**ctx), None
                    except Exception as e:  # jinja2's and Python's errors: the C side must refuse too
                        want, err = None, f"{type(e).__name__}: {e}"
                        if type(e) is jinja2.exceptions.TemplateError:  # raise_exception(): its message must come through
                            err = "raised: " + str(e)
                cases.append({"name": f"{tname} / {cname} / add_generation_prompt={agp}", "template": src,
                              "context": ctx, "want": want, "err": err})
    # a differential fuzz pass: CHAT_TEMPLATE_FUZZ=N cases (default 400), CHAT_TEMPLATE_FUZZ_SEED
    import warnings
    warnings.simplefilter("ignore", SyntaxWarning)  # jinja2 compiles mutated templates to odd Python
    n_fuzz = int(os.environ.get("CHAT_TEMPLATE_FUZZ", "400"))
    cases += fuzz_cases(env, templates, n_fuzz, int(os.environ.get("CHAT_TEMPLATE_FUZZ_SEED", "1")))
    with tempfile.TemporaryDirectory() as td:
        path = os.path.join(td, "cases.jsonl")
        with open(path, "w", encoding="utf-8") as f:
            for c in cases:
                f.write(json.dumps({"template": c["template"], "context": c["context"], "now": NOW}, ensure_ascii=False) + "\n")
        if not os.access(HELPER, os.X_OK):
            print(f"{HELPER} is missing: run make")
            print("0 passed, 1 failed")
            return 1
        r = subprocess.run([HELPER, "--batch", path], capture_output=True, timeout=300)
        if r.returncode != 0:
            print(r.stderr.decode(errors="replace")[-2000:])
            print("0 passed, 1 failed")
            return 1
        results = [json.loads(line) for line in r.stdout.decode("utf-8").splitlines()]
    passed = failed = 0
    rendered = refused = 0

    def fail(msg):
        nonlocal failed
        failed += 1
        if failed <= 15:
            print("FAIL", msg)

    if len(results) != len(cases):
        fail(f"{len(results)} results for {len(cases)} cases")
    for c, res in zip(cases, results):
        if c["err"] is not None:
            if res["ok"]:
                fail(f"{c['name']}: jinja2 refuses ({c['err']}) but wgtrain rendered {res['text'][:200]!r}"
                     + (f"\n  template: {c['template']!r}" if c.get("fuzz") else ""))
            elif c["err"].startswith("raised: ") and c["err"][8:] not in res["error"]:
                fail(f"{c['name']}: the template's own message {c['err'][8:]!r} is not in wgtrain's error {res['error']!r}")
            else:
                passed += 1
                refused += 1
                if os.environ.get("VERBOSE"):
                    print(f"refused: {c['name']}: jinja2: {c['err'][:100]} | wgtrain: {res['error'][:150]}")
            continue
        if not res["ok"]:
            fail(f"{c['name']}: wgtrain refused: {res['error']}" + (f"\n  template: {c['template']!r}" if c.get("fuzz") else ""))
            continue
        if res["text"] != c["want"]:
            if c.get("fuzz"):
                print(f"(the template of the failing fuzz case: {c['template']!r})")
            w, g = c["want"], res["text"]
            k = next((i for i in range(min(len(w), len(g))) if w[i] != g[i]), min(len(w), len(g)))
            fail(f"{c['name']}: differs at char {k}:\n  jinja2:  {w[max(0, k - 60):k + 60]!r}\n  wgtrain: {g[max(0, k - 60):k + 60]!r}")
            continue
        passed += 1
        rendered += 1
        # spans: each span's bytes come from its message; each message's content found in the
        # output lies inside a span of that message
        out = c["want"].encode("utf-8")
        msgs = c["context"]["messages"]
        covered = {}
        ok = True
        for m, s, e in res["spans"]:
            fields = []
            msg = msgs[m] if 0 <= m < len(msgs) else {}
            for key in ("content", "reasoning_content"):
                v = msg.get(key)
                if isinstance(v, str):
                    fields.append(v)
                elif isinstance(v, list):
                    fields += [it["text"] for it in v if isinstance(it, dict) and isinstance(it.get("text"), str)]
            piece = out[s:e]
            # tojson copies content with escapes: compare against the escaped forms too
            forms = [f.encode() for f in fields] + [json.dumps(f, ensure_ascii=False).encode() for f in fields]
            # (case changes and |reverse keep the sources: compare case-insensitively and reversed too)
            text = piece.decode("utf-8", errors="replace")
            if not (0 <= s < e <= len(out)) or not any(
                    piece in x or piece.lower() in x.lower() or text[::-1].encode() in x for x in forms):
                ok = False
                fail(f"{c['name']}: span {m} [{s}, {e}) = {piece[:80]!r} is not from message {m}")
            for k in range(s, e):
                covered[k] = m
        for i, msg in enumerate(msgs):
            v = msg.get("content")
            texts = [v] if isinstance(v, str) else [it.get("text") for it in (v or []) if isinstance(it, dict)]
            for t in texts:
                # (Qwen3 rebuilds a "<think>" content from its parts around template text)
                if not isinstance(t, str) or len(t.strip()) < 4 or "<think>" in t:
                    continue
                needle = t.strip().encode()
                at = out.find(needle)
                while at >= 0:
                    if any(covered.get(k) != i for k in range(at, at + len(needle))):
                        # another message with the same text may own this occurrence
                        if not any(isinstance(o.get("content"), str) and o["content"].strip().encode() == needle
                                   for j, o in enumerate(msgs) if j != i):
                            ok = False
                            fail(f"{c['name']}: message {i}'s content at byte {at} is not inside a span of message {i}")
                            break
                    at = out.find(needle, at + 1)
        if ok:
            passed += 1
    print(f"{len(cases)} cases ({n_fuzz} of them mutated templates) over {len(templates)} templates: {rendered} rendered identically, {refused} refused by both")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
