// op_table.h — the kernels reachable by `wgtrain op`: for each, its bindings (names as in
// SPEC §2-3), its scalar parameters, a plan function that checks the input shapes and sets the
// output shapes, and a run function that calls the backend op.
#ifndef WGT_OP_TABLE_H
#define WGT_OP_TABLE_H
#include <math.h>
#include "backend/backend.h"
#include "core/npy.h"

#define OP_MAX_BINDS 10
#define OP_MAX_PARAMS 12

typedef enum { OP_IN, OP_OUT, OP_INOUT } op_role;
typedef enum { OP_F32, OP_INT } op_kind;  // OP_INT accepts int32 or uint32 arrays

typedef struct { const char *name; op_kind kind; op_role role; int optional; } op_bind_desc;
typedef struct { const char *name; double def; int is_int; } op_param_desc;  // def NAN: derived / required

typedef struct op_call op_call;
typedef struct op_desc {
    const char *name;
    const char *summary;
    int nb;
    op_bind_desc b[OP_MAX_BINDS];
    int np;
    op_param_desc p[OP_MAX_PARAMS];
    wgt_status (*plan)(op_call *c);
    void (*run)(wgt_backend *be, op_call *c);
} op_desc;

struct op_call {
    const op_desc *d;
    npy_array a[OP_MAX_BINDS];  // inputs as loaded; outputs get ndim/shape from plan
    int have[OP_MAX_BINDS];     // input given (or output produced)
    double p[OP_MAX_PARAMS];
    int p_set[OP_MAX_PARAMS];   // given with --set
    wgt_view v[OP_MAX_BINDS];
};

const op_desc *op_find(const char *name);
void op_list(FILE *f);
// tables of the kernel families, each terminated by an entry with name == NULL
extern const op_desc op_table_seed[];
extern const op_desc op_table_gpt[];
extern const op_desc op_table_attn[];

// helpers for plan functions
void op_out_like(op_call *c, int out, int like);
void op_out_shape(op_call *c, int out, int ndim, const size_t *shape);
#endif
