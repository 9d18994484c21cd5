// cli_args.c — the command-line conventions every subcommand shares: `--flag=value` as well
// as `--flag value`, and "did you mean --steps?" for a flag that does not exist.
#include <stdlib.h>
#include <string.h>
#include "cli/cli.h"

// The name of a known-list entry without its '=' (a flag that takes a value).
static size_t name_len(const char *k) {
    size_t n = strlen(k);
    return n && k[n - 1] == '=' ? n - 1 : n;
}

// known entry k, compared with the n characters of s
static int entry_is(const char *k, const char *s, size_t n) { return name_len(k) == n && !strncmp(k, s, n); }

// external, so that the store is kept: the vector stays reachable until exit
char **cli_args_held;

wgt_status cli_args_split(int *argc, char ***argv, const char *const *known) {
    int n = *argc;
    char **in = *argv;
    // at most one more element per argument; the new vector lives as long as the process (held
    // by cli_args_held, so leak checkers see it reachable)
    char **out = wgt_calloc((size_t)n * 2 + 1, sizeof *out);
    int k = 0;
    if (n > 0) out[k++] = in[0];
    for (int i = 1; i < n; i++) {
        char *a = in[i];
        char *eq = !strncmp(a, "--", 2) ? strchr(a, '=') : NULL;
        if (eq && eq > a + 2) {
            size_t len = (size_t)(eq - a);
            for (const char *const *p = known; *p; p++) {
                if (!entry_is(*p, a, len)) continue;
                if ((*p)[strlen(*p) - 1] != '=') {
                    free(out);
                    return wgt_fail(WGT_ERR_ARG, "%.*s takes no value (got '%s')", (int)len, a, a);
                }
            }
            *eq = 0;  // argv's strings are the program's to modify: "--flag=value" -> "--flag", "value"
            out[k++] = a;
            out[k++] = eq + 1;
            continue;
        }
        out[k++] = a;
        // the value of a flag that takes one is copied as it is, even if it looks like a --flag=value
        for (const char *const *p = known; *p; p++)
            if ((*p)[strlen(*p) - 1] == '=' && entry_is(*p, a, strlen(a)) && i + 1 < n) {
                out[k++] = in[++i];
                break;
            }
    }
    out[k] = NULL;
    cli_args_held = out;
    *argc = k;
    *argv = out;
    return WGT_OK;
}

static size_t edit_distance(const char *a, size_t na, const char *b, size_t nb) {
    size_t *row = wgt_malloc((nb + 1) * sizeof *row);
    for (size_t j = 0; j <= nb; j++) row[j] = j;
    for (size_t i = 1; i <= na; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= nb; j++) {
            size_t up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            diag = up;
            row[j] = best;
        }
    }
    size_t d = row[nb];
    free(row);
    return d;
}

void cli_suggest(const char *word, const char *const *known, char *buf, size_t cap) {
    buf[0] = 0;
    size_t nw = strlen(word), best = (size_t)-1;
    const char *pick = NULL;
    for (const char *const *p = known; *p; p++) {
        size_t nk = name_len(*p);
        if ((*p)[0] == '-' && (*p)[1] != '-') continue;  // -h
        size_t d = edit_distance(word, nw, *p, nk);
        if (d < best) best = d, pick = *p;
    }
    // close enough to be a typo: two edits, or a third of a long name
    size_t limit = nw / 3 > 2 ? nw / 3 : 2;
    if (pick && best <= limit) {
        snprintf(buf, cap, "%.*s", (int)name_len(pick), pick);
        return;
    }
    // else the flags it abbreviates (--val: --val-every, --val-batches)
    size_t k = 0;
    int hits = 0;
    for (const char *const *p = known; *p && nw >= 4; p++) {
        size_t nk = name_len(*p);
        if (nk <= nw || strncmp(*p, word, nw) || hits == 3) continue;
        int w = snprintf(buf + k, cap - k, "%s%.*s", hits ? " or " : "", (int)nk, *p);
        if (w < 0 || (size_t)w >= cap - k) break;
        k += (size_t)w, hits++;
    }
}

wgt_status cli_unknown_flag(const char *cmd, const char *flag, const char *const *known) {
    if (flag[0] != '-')
        return wgt_fail(WGT_ERR_ARG, "unexpected argument '%s': options start with -- (see wgtrain %s --help)", flag, cmd);
    char hint[256];
    // the name of a --flag=value whose flag is unknown: cli_args_split left the value as the next argument
    cli_suggest(flag, known, hint, sizeof hint);
    if (hint[0])
        return wgt_fail(WGT_ERR_ARG, "unknown option '%s'; did you mean %s? (see wgtrain %s --help)", flag, hint, cmd);
    return wgt_fail(WGT_ERR_ARG, "unknown option '%s' (see wgtrain %s --help)", flag, cmd);
}

int cli_flag_known(const char *a, const char *const *known) {
    for (const char *const *p = known; *p; p++)
        if (entry_is(*p, a, strlen(a))) return 1;
    return 0;
}
