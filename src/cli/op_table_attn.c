// op_table_attn.c — `wgtrain op` entries for attention (placeholder until the kernels land).
#include "cli/op_table.h"
const op_desc op_table_attn[] = {
    {NULL, NULL, 0, {{0}}, 0, {{0}}, NULL, NULL},
};
