// op_desc.h — the ops of op_list.h as run-time data: for each op its bindings (name, role,
// element type, shape in scalar names) and scalars (type, default, range), a generic call
// that takes the views and scalars as arrays, and the shape arithmetic shared by the view
// checks of both backends, `wgtrain op` and the table-driven test.
#ifndef WGT_OP_DESC_H
#define WGT_OP_DESC_H
#include <stdint.h>
#include "backend/backend.h"

typedef enum { WGT_ROLE_OUT, WGT_ROLE_INOUT, WGT_ROLE_IN, WGT_ROLE_IN_OPT, WGT_ROLE_INOUT_OPT } wgt_role;
// F16: halves stored in pairs, so a binding of `count` halves needs ceil(count/2) elements
typedef enum { WGT_TYPE_F32, WGT_TYPE_I32, WGT_TYPE_U32, WGT_TYPE_SIZE, WGT_TYPE_F16 } wgt_type;

typedef struct {
    const char *name;
    wgt_role role;
    wgt_type type;
    const char *shape;  // e.g. "B,T,3*C"
} wgt_op_bind;

typedef struct {
    const char *name;
    wgt_type type;
    double def;  // NAN: none
    double lo, hi;
} wgt_op_scalar;

#define WGT_OP_MAX_BINDS 10
#define WGT_OP_MAX_SCALARS 12
#define WGT_OP_MAX_DIMS 4

typedef struct {
    const char *name, *summary;
    int nb, ns;
    const wgt_op_bind *b;
    const wgt_op_scalar *s;
    // be->NAME(be, v[0], ..., v[nb-1], s[0], ..., s[ns-1]); scalars converted to their C type
    void (*call)(wgt_backend *be, const wgt_view *v, const double *s);
} wgt_op_desc;

extern const wgt_op_desc wgt_op_descs[WGT_OP_COUNT];
const wgt_op_desc *wgt_op_find(const char *name);  // NULL if unknown

static inline int wgt_role_reads(wgt_role r) { return r != WGT_ROLE_OUT; }
static inline int wgt_role_writes(wgt_role r) { return r == WGT_ROLE_OUT || r == WGT_ROLE_INOUT || r == WGT_ROLE_INOUT_OPT; }
static inline int wgt_role_optional(wgt_role r) { return r == WGT_ROLE_IN_OPT || r == WGT_ROLE_INOUT_OPT; }
const char *wgt_role_name(wgt_role r);  // "out", "in+out", "in", ...
const char *wgt_type_name(wgt_type t);  // "float32", "int32", "uint32", "size", "float16"

// One dimension of a shape: a sum of terms, each the product of `factor` and named scalars
// ("NH*HS+2*NKV*HS"); `atleast` for ">=".
typedef struct {
    uint64_t factor;
    int nsym;
    int sym[3];  // scalar indexes
} wgt_op_term;
typedef struct {
    int nterm;
    wgt_op_term term[3];
    int atleast;
} wgt_op_dim;
// The scalar a dimension is when it is one plain name ("N"), else -1.
static inline int wgt_op_dim_symbol(const wgt_op_dim *d) {
    return d->nterm == 1 && d->term[0].nsym == 1 && d->term[0].factor == 1 && !d->atleast ? d->term[0].sym[0] : -1;
}

// Parses binding b's shape into dims; returns the number of dimensions. A malformed shape in
// op_list.h is a bug and aborts.
int wgt_op_dims(const wgt_op_desc *d, int b, wgt_op_dim *dims);
// The value of a dimension given the scalars; UINT64_MAX on overflow.
uint64_t wgt_op_dim_value(const wgt_op_dim *dim, const double *s);
// Elements binding b needs (the product of its shape; half of it rounded up for F16); UINT64_MAX
// on overflow.
uint64_t wgt_op_need(const wgt_op_desc *d, int b, const double *s);
// Aborts, naming the op and binding, when a present view holds fewer elements than its shape
// needs or a required one is absent: a layout bug in the caller.
void wgt_op_check_views(const wgt_op_desc *d, const wgt_view *v, const double *s);


// Inside a generated forwarder whose parameters are op's fields: checks every view against
// its shape (wgt_op_check_views). Both backends' forwarders start with it.
#define WGT_OP_VIEW_(name, role, type, shape) name,
#define WGT_OP_VALUE_(name, type, def, lo, hi) (double)name,
#define WGT_OP_CHECK_VIEWS(op)                                                   \
    do {                                                                         \
        const wgt_view views_[] = {WGT_OP_##op(WGT_OP_VIEW_, WGT_NO_S)};         \
        const double scalars_[] = {WGT_OP_##op(WGT_NO_B, WGT_OP_VALUE_)};        \
        wgt_op_check_views(&wgt_op_descs[WGT_OP_ID_##op], views_, scalars_);     \
    } while (0)
#endif
