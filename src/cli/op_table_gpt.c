// op_table_gpt.c — `wgtrain op` entries for the GPT-2 ops (embedding, layernorm, matmul family,
// attention, residual, optimizer).
#include "cli/op_table.h"

const op_desc op_table_gpt[] = {
    {NULL, NULL, 0, {{0}}, 0, {{0}}, NULL, NULL},
};
