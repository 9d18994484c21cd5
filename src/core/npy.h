// npy.h — NumPy .npy files (format 1.0/2.0/3.0), little-endian float32, int32 and uint32,
// C order. The `wgtrain op` command reads kernel inputs and writes outputs in this format.
#ifndef WGT_NPY_H
#define WGT_NPY_H
#include <stddef.h>
#include <stdint.h>
#include "core/error.h"

typedef enum { NPY_F32, NPY_I32, NPY_U32 } npy_dtype;
#define NPY_MAX_DIMS 8

typedef struct {
    npy_dtype dtype;
    int ndim;
    size_t shape[NPY_MAX_DIMS];
    size_t n;    // product of shape
    void *data;  // n * 4 bytes
} npy_array;

const char *npy_dtype_name(npy_dtype t);
wgt_status npy_load(npy_array *out, const char *path);
wgt_status npy_save(const char *path, const npy_array *a);
void npy_free(npy_array *a);
#endif
