// tokenizer_kinds.c — the registry of tokenizer kinds (text_tokenizer.h). A kind is one row
// here plus its own file(s) defining its text_tok_kind; nothing else names kinds. How to add
// one: docs/tokenizer-format.md.
#include <stdio.h>
#include <string.h>
#include "data/text_tokenizer.h"

extern const text_tok_kind text_tok_kind_bpe;   // tokenizer.c
extern const text_tok_kind text_tok_kind_gpt2;  // gpt2_bpe.c
extern const text_tok_kind text_tok_kind_hf;    // hf_tokenizer_kind.c

const text_tok_kind *const text_tok_kinds[] = {
    &text_tok_kind_bpe,  // first: the kind `wgtrain prepare` trains
#ifndef WGT_NO_PCRE2     // the browser build has no PCRE2 or utf8proc (docs/web.md)
    &text_tok_kind_gpt2,
    &text_tok_kind_hf,
#endif
    NULL,
};

const text_tok_kind *text_tok_kind_find(const char *name) {
    for (int i = 0; text_tok_kinds[i]; i++)
        if (!strcmp(text_tok_kinds[i]->name, name)) return text_tok_kinds[i];
    return NULL;
}

const char *text_tok_kind_names(char *buf, size_t n) {
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; text_tok_kinds[i] && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s\"%s\"", i == 0 ? "" : text_tok_kinds[i + 1] ? ", " : " and ",
                              text_tok_kinds[i]->name);
    return buf;
}
