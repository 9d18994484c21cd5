// web_stubs.c — the browser build's stand-ins (web/web.mk, docs/web.md). The parts of wgtrain
// that need libedit (chat), setjmp (the chat-template interpreter) or PCRE2 and utf8proc (GPT-2's
// and Hugging Face tokenizers) are not compiled for wasm32; their entry points here refuse with
// a message that names the native build. Also the two POSIX calls wasi-libc lacks.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "cli/cli.h"
#include "data/chat_template.h"
#include "data/hf_tokenizer.h"
#include "data/hf_tokenizer_kind.h"

#define WEB_ONLY_NATIVE(what) \
    wgt_fail(WGT_ERR_CONFIG, "%s is not in the browser build of wgtrain; use the native build for it", what)

int cmd_chat(int argc, char **argv) {
    (void)argc, (void)argv;
    fprintf(stderr, "wgtrain chat: not in the browser build (it needs a terminal's line editing); use the native build\n");
    return 2;
}

wgt_status hf_tokenizer_load(hf_tokenizer **out, const char *path) {
    (void)path;
    *out = NULL;
    return WEB_ONLY_NATIVE("a Hugging Face tokenizer");
}
void hf_tokenizer_free(hf_tokenizer *t) { (void)t; }
// no hf_tokenizer can exist in this build (hf_tokenizer_load refuses), so these are never reached
wgt_status hf_tokenizer_encode(const hf_tokenizer *t, const uint8_t *bytes, size_t n, int add_special, uint32_t **ids,
                               size_t *n_ids) {
    (void)t, (void)bytes, (void)n, (void)add_special, (void)ids, (void)n_ids;
    WGT_ASSERT(0, "hf_tokenizer_encode without a Hugging Face tokenizer (browser build)");
    return WGT_ERR_CONFIG;
}
int64_t hf_tokenizer_token_id(const hf_tokenizer *t, const char *token) {
    (void)t, (void)token;
    return -1;
}
int hf_tokenizer_is_special(const hf_tokenizer *t, uint32_t id) {
    (void)t, (void)id;
    return 0;
}
// the "hf" tokenizer kind is not registered in this build (tokenizer_kinds.c), so no impl exists
const hf_tokenizer *hf_kind_tokenizer(const void *impl) {
    (void)impl;
    return NULL;
}
const char *hf_kind_config(const void *impl, size_t *n) {
    (void)impl;
    *n = 0;
    return NULL;
}

wgt_status chat_template_from_config(const cJSON *config, const char *name, const char **text) {
    (void)config, (void)name;
    *text = NULL;
    return WEB_ONLY_NATIVE("a chat template");
}
wgt_status chat_template_add_special_tokens(const cJSON *config, cJSON *context) {
    (void)config, (void)context;
    return WEB_ONLY_NATIVE("a chat template");
}
wgt_status chat_template_parse(const char *src, size_t n, chat_template **out) {
    (void)src, (void)n;
    *out = NULL;
    return WEB_ONLY_NATIVE("a chat template");
}
void chat_template_free(chat_template *t) { (void)t; }
wgt_status chat_template_render(const chat_template *t, const cJSON *context, const chat_template_opts *opts,
                                chat_template_output *out) {
    (void)t, (void)context, (void)opts;
    memset(out, 0, sizeof *out);
    return WEB_ONLY_NATIVE("a chat template");
}
void chat_template_output_free(chat_template_output *out) { (void)out; }

// realpath(3) for WASI, whose file system here has no links: the path made absolute (against
// the working directory, which is "/" in the browser build) with "." and ".." resolved, if it
// exists. Written here because wasi-libc has none.
char *realpath(const char *path, char *resolved) {
    struct stat sb;
    if (!path || stat(path, &sb) != 0) return NULL;
    char buf[4096] = "";
    size_t n = 0;
    const char *p = path;
    while (*p) {
        while (*p == '/') p++;
        const char *e = p;
        while (*e && *e != '/') e++;
        size_t len = (size_t)(e - p);
        if (len == 0 || (len == 1 && p[0] == '.')) {
        } else if (len == 2 && p[0] == '.' && p[1] == '.') {
            while (n > 0 && buf[n - 1] != '/') n--;
            if (n > 0) n--;
        } else {
            if (n + 1 + len + 1 > sizeof buf) { errno = ENAMETOOLONG; return NULL; }
            buf[n++] = '/';
            memcpy(buf + n, p, len);
            n += len;
        }
        p = e;
    }
    if (n == 0) buf[n++] = '/';
    buf[n] = 0;
    char *out = resolved ? resolved : malloc(n + 1);
    if (!out) return NULL;
    memcpy(out, buf, n + 1);
    return out;
}

// wasi has no permission bits: a directory's mode cannot be kept, and needs not be
int chmod(const char *path, mode_t mode) {
    (void)mode;
    struct stat sb;
    return stat(path, &sb);
}

// The browser build is a WASI reactor (web/web.mk: -mexec-model=reactor): JavaScript calls
// _initialize once, then this, and may call the other exports (malloc for mapped GPU memory,
// trainer_request_stop) while it runs; a command module would rerun its constructors on every
// such call. main's arguments come from WASI's args_get, as in a command.
int __main_void(void);  // wasi-libc
__attribute__((export_name("wgt_web_main"))) void wgt_web_main(void) { exit(__main_void()); }
