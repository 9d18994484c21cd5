// error.c — status messages (thread-local) and the invariant abort.
#include "error.h"
#include <stdarg.h>
#include <string.h>

static _Thread_local char g_msg[2048];

wgt_status wgt_fail(wgt_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_msg, sizeof g_msg, fmt, ap);
    va_end(ap);
    return st;
}

const char *wgt_last_error(void) { return g_msg; }

const char *wgt_status_name(wgt_status st) {
    switch (st) {
    case WGT_OK: return "ok";
    case WGT_ERR_ARG: return "invalid argument";
    case WGT_ERR_IO: return "I/O error";
    case WGT_ERR_FORMAT: return "malformed input";
    case WGT_ERR_CONFIG: return "invalid configuration";
    case WGT_ERR_DEVICE: return "device error";
    case WGT_ERR_MEMORY: return "out of memory";
    }
    return "unknown error";
}

void wgt_abort(const char *file, int line, const char *expr, const char *hint) {
    fprintf(stderr, "wgtrain: internal error at %s:%d: %s failed\n  hint: %s\n"
            "  this is a bug in wgtrain; please report it with the command you ran\n",
            file, line, expr, hint ? hint : "");
    abort();
}

void *wgt_malloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) { fprintf(stderr, "wgtrain: out of host memory allocating %zu bytes\n", n); exit(1); }
    return p;
}
void *wgt_calloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) { fprintf(stderr, "wgtrain: out of host memory allocating %zu x %zu bytes\n", n, size); exit(1); }
    return p;
}
char *wgt_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = wgt_malloc(n);
    memcpy(p, s, n);
    return p;
}
