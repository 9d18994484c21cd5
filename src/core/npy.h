// npy.h — NumPy .npy files (format 1.0/2.0/3.0), little-endian float32, int32, uint32 and
// float16, C order. The `wgtrain op` command reads kernel inputs and writes outputs in this format.
#ifndef WGT_NPY_H
#define WGT_NPY_H
#include <stddef.h>
#include <stdint.h>
#include "core/error.h"

typedef enum { NPY_F32, NPY_I32, NPY_U32, NPY_F16 } npy_dtype;
#define NPY_MAX_DIMS 8

typedef struct {
    npy_dtype dtype;
    int ndim;
    size_t shape[NPY_MAX_DIMS];
    size_t n;    // product of shape
    void *data;  // n * 4 bytes; float16: n * 2 bytes in a buffer of npy_words(a) * 4 (the pad zero)
} npy_array;

const char *npy_dtype_name(npy_dtype t);
// 4-byte words the data occupies (n, or ceil(n/2) for float16): what a backend buffer holds.
size_t npy_words(const npy_array *a);
wgt_status npy_load(npy_array *out, const char *path);
wgt_status npy_save(const char *path, const npy_array *a);
void npy_free(npy_array *a);
#endif
