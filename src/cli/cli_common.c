// cli_common.c — helpers shared by the subcommands: error reporting, number parsing, backends.
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend/backend.h"
#include "cli/cli.h"

int cli_fail(const char *cmd, wgt_status st) {
    fprintf(stderr, "wgtrain %s: %s: %s\n", cmd, wgt_status_name(st), wgt_last_error());
    return 1;
}

wgt_status cli_parse_double(const char *flag, const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end) return wgt_fail(WGT_ERR_ARG, "%s expects a number, got '%s'", flag, s);
    // a number, but beyond what a double holds: too large, or too close to 0 (below 2.2e-308,
    // where precision is lost, or rounding to 0)
    if (errno == ERANGE)
        return wgt_fail(WGT_ERR_ARG, "%s %s is out of range: its magnitude is %s for a double (use a value between "
                        "about 2.2e-308 and 1.8e308, or 0)", flag, s, fabs(v) > 1 ? "too large" : "too small");
    if (!isfinite(v)) return wgt_fail(WGT_ERR_ARG, "%s must be finite, got '%s'", flag, s);
    *out = v;
    return WGT_OK;
}

wgt_status cli_parse_double_range(const char *flag, const char *s, double lo, double hi, int hi_open, double *out) {
    double v;
    WGT_TRY(cli_parse_double(flag, s, &v));
    if (v < lo || (hi_open ? v >= hi : v > hi))
        return wgt_fail(WGT_ERR_ARG, "%s must be in [%g, %g%s, got %s", flag, lo, hi, hi_open ? ")" : "]", s);
    *out = v;
    return WGT_OK;
}

wgt_status cli_parse_long(const char *flag, const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno == ERANGE) return wgt_fail(WGT_ERR_ARG, "%s expects an integer, got '%s'", flag, s);
    if (v < lo || v > hi) return wgt_fail(WGT_ERR_ARG, "%s must be between %ld and %ld, got %ld", flag, lo, hi, v);
    *out = v;
    return WGT_OK;
}

wgt_status cli_backend_open(wgt_backend **out, const char *which, const char *adapter, int profile) {
    *out = NULL;
    if (!which || !strcmp(which, "cpu")) return backend_cpu_init(out);
    if (!strcmp(which, "webgpu")) return backend_webgpu_init_ex(out, adapter, profile);
    if (!strcmp(which, "auto")) {
        // a real GPU through WebGPU if there is one; the software GPU is for testing, not training.
        // A malformed WebGPU setting (WGT_ERR_ARG) is reported, not hidden by the fallback.
        wgt_status st = backend_webgpu_init_ex(out, adapter && *adapter ? adapter : "gpu", profile);
        if (st == WGT_OK || st == WGT_ERR_ARG) return st;
        return backend_cpu_init(out);
    }
    return wgt_fail(WGT_ERR_ARG, "unknown device '%s'; use cpu, webgpu or auto", which);
}
