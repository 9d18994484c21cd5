// cli.h — the subcommands of the `wgtrain` command and the few helpers they share.
#ifndef WGT_CLI_H
#define WGT_CLI_H
#include <stdio.h>
#include "backend/backend.h"

// `wgtrain --version`: this release, and the Dawn package (scripts/setup.sh) it is built for.
#define WGTRAIN_VERSION "0.3.0"
#define WGTRAIN_DAWN_PACKAGE "bun-webgpu-linux-x64 0.1.7"

int cmd_info(int argc, char **argv);
int cmd_op(int argc, char **argv);
int cmd_grad(int argc, char **argv);
int cmd_prepare(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_sample(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_presets(int argc, char **argv);
int cmd_tune(int argc, char **argv);

// The presets of `wgtrain train` as a table (`wgtrain presets`, `wgtrain train --help`).
void cli_print_presets(FILE *f);

// ---- the shared argument conventions (cli_args.c)
// A subcommand lists the flags it knows, NULL-terminated; one that takes a value ends in '='
// ("--out="), a switch does not ("--resume").
// Rewrites argv so that every "--flag=value" becomes "--flag" "value" (the value of a flag
// that takes one is left as it is, even when it looks like --x=y); fails when a switch is
// given a value. argv[0] stays; the new vector lives as long as the process.
wgt_status cli_args_split(int *argc, char ***argv, const char *const *known);
extern char **cli_args_held;  // the last vector cli_args_split made
// 1 when a is one of the known flags.
int cli_flag_known(const char *a, const char *const *known);
// The error for an argument the subcommand does not know: "unknown option '--step'; did you
// mean --steps? (see wgtrain CMD --help)", the closest known flag by edit distance (or the
// flags it abbreviates) when there is one near enough.
wgt_status cli_unknown_flag(const char *cmd, const char *flag, const char *const *known);
// The suggestion alone ("--steps", "--val-every or --val-batches", or "").
void cli_suggest(const char *word, const char *const *known, char *buf, size_t cap);

// Reports a failed status as "wgtrain <cmd>: <message>" on stderr and returns exit code 1.
int cli_fail(const char *cmd, wgt_status st);
// "cpu", "webgpu" or "auto" (a real GPU through WebGPU if present, else the CPU backend).
wgt_status cli_backend_open(wgt_backend **out, const char *which, const char *adapter, int profile);
// Parses a strictly numeric, finite value; fails naming the flag otherwise.
wgt_status cli_parse_double(const char *flag, const char *s, double *out);
// cli_parse_double, then lo <= value <= hi (value < hi when hi_open); fails naming the flag
// and the range otherwise.
wgt_status cli_parse_double_range(const char *flag, const char *s, double lo, double hi, int hi_open, double *out);
wgt_status cli_parse_long(const char *flag, const char *s, long lo, long hi, long *out);
#endif
