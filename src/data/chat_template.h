// chat_template.h — renders a Hugging Face chat template (the Jinja2 text in
// tokenizer_config.json's "chat_template") the way transformers does: an interpreter for the
// part of Jinja2 that chat templates use, with trim_blocks and lstrip_blocks on, the loop
// controls, transformers' tojson / raise_exception / strftime_now, and Jinja2's default
// Undefined. A template that uses anything else is refused at parse time, naming the construct
// and its line. Written by hand: no C library renders Jinja2 (docs/chat-templates.md).
//
// Besides the text, a render reports which output bytes were copied from which message's
// content, so that a trainer can mask the loss to assistant turns (docs/chat-templates.md
// defines the spans precisely).
#ifndef WGT_CHAT_TEMPLATE_H
#define WGT_CHAT_TEMPLATE_H
#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>
#include "core/error.h"

typedef struct chat_template chat_template;

// The template of a parsed tokenizer_config.json: "chat_template" as a string, or from a list of
// {"name", "template"} the one called `name` (NULL: "default"). *text points into config.
// WGT_ERR_CONFIG, naming the fix, when there is none (as with Llama-2's, whose field is null).
wgt_status chat_template_from_config(const cJSON *config, const char *name, const char **text);
// Adds to context the special tokens of config that transformers passes to the template
// (bos_token, eos_token, unk_token, sep_token, pad_token, cls_token, mask_token as strings,
// additional_special_tokens as a list), each a string or an {"content": ...} object; tokens that
// are null or absent are left out (the template sees them undefined), and keys already in
// context are kept.
wgt_status chat_template_add_special_tokens(const cJSON *config, cJSON *context);

// Parses src[0..n) (UTF-8). Unsupported syntax (an unknown tag, filter or test, {% include %},
// ...) and malformed templates fail with WGT_ERR_FORMAT and a message naming it and its line.
wgt_status chat_template_parse(const char *src, size_t n, chat_template **out);
void chat_template_free(chat_template *t);

// Limits of one render; a template that goes past one fails with WGT_ERR_FORMAT naming it.
typedef struct chat_template_limits {
    uint64_t max_steps;      // expression evaluations and loop iterations (default 20 million)
    size_t max_memory;       // bytes of values built while rendering (default 256 MiB)
    size_t max_output;       // bytes of output (default 64 MiB)
    int max_call_depth;      // nested macro calls (default 64)
} chat_template_limits;

// Options of one render. `now` is the time strftime_now() formats (seconds since 1970, UTC);
// with now < 0 a template that calls strftime_now() fails (a training set should not depend
// on the day it was rendered). limits: NULL for the defaults.
typedef struct chat_template_opts {
    int64_t now;
    const chat_template_limits *limits;
} chat_template_opts;

// [start, end): output bytes copied from messages[message]'s content (see below).
typedef struct chat_template_span {
    int32_t message;
    size_t start, end;
} chat_template_span;

typedef struct chat_template_output {
    char *text;                  // the rendered text, NUL-terminated (n bytes before the NUL)
    size_t n;
    // source[i] for each output byte: the index of the message whose content (the string
    // messages[k].content, the "text" strings of a content list, or messages[k].reasoning_content)
    // the byte was copied from, or -1 for bytes of the template's own text and of any other
    // value.
    int32_t *source;
    // The maximal runs of equal source >= 0, in output order.
    chat_template_span *spans;
    size_t n_spans;
    // The output ranges rendered inside {% generation %} ... {% endgeneration %} blocks (what
    // transformers' return_assistant_tokens_mask marks), in output order; message = -1.
    chat_template_span *generation;
    size_t n_generation;
} chat_template_output;

// Renders t with the variables of `context` (a JSON object: "messages", "add_generation_prompt",
// "bos_token", "eos_token", "tools", ... exactly the keyword arguments transformers passes to
// render()). raise_exception(msg) in the template fails with WGT_ERR_FORMAT and msg. On failure
// *out is zeroed.
wgt_status chat_template_render(const chat_template *t, const cJSON *context, const chat_template_opts *opts,
                                chat_template_output *out);
void chat_template_output_free(chat_template_output *out);
#endif
