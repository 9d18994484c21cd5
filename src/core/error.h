// error.h — wgtrain's two tiers of errors.
// Tier 1: a status code plus a message, for anything a user can cause (bad file, bad flag,
// impossible config). Functions return wgt_status and fill a thread-local message.
// Tier 2: WGT_ASSERT aborts with file, line and a hint, for broken invariants (our bugs).
#ifndef WGT_ERROR_H
#define WGT_ERROR_H
#include <stdio.h>
#include <stdlib.h>

typedef enum wgt_status {
    WGT_OK = 0,
    WGT_ERR_ARG,       // bad command-line argument or parameter value
    WGT_ERR_IO,        // a file could not be opened, read or written
    WGT_ERR_FORMAT,    // a file's contents are malformed or do not match what was expected
    WGT_ERR_CONFIG,    // an impossible or unsupported configuration
    WGT_ERR_DEVICE,    // the GPU or its driver failed or lacks something we need
    WGT_ERR_MEMORY,    // out of host or device memory
} wgt_status;

// Records a message for the current thread and returns the status; use as
// `return wgt_fail(WGT_ERR_IO, "cannot open %s: %s", path, strerror(errno));`
wgt_status wgt_fail(wgt_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// The message of the last failure on this thread ("" if none).
const char *wgt_last_error(void);
const char *wgt_status_name(wgt_status st);

void wgt_abort(const char *file, int line, const char *expr, const char *hint) __attribute__((noreturn));
#define WGT_ASSERT(cond, hint) \
    do { if (!(cond)) wgt_abort(__FILE__, __LINE__, #cond, hint); } while (0)
// Propagates a failing status to the caller.
#define WGT_TRY(expr) \
    do { wgt_status st_ = (expr); if (st_ != WGT_OK) return st_; } while (0)

// Allocation that aborts on failure (host memory exhaustion is not recoverable here).
void *wgt_malloc(size_t n);
void *wgt_calloc(size_t n, size_t size);
char *wgt_strdup(const char *s);
#endif
