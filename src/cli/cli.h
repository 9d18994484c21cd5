// cli.h — the subcommands of the `wgtrain` command and the few helpers they share.
#ifndef WGT_CLI_H
#define WGT_CLI_H
#include "backend/backend.h"

int cmd_info(int argc, char **argv);
int cmd_op(int argc, char **argv);
int cmd_grad(int argc, char **argv);
int cmd_prepare(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_sample(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_export(int argc, char **argv);

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
