// safetensors.h — reading and writing .safetensors files (8-byte header length, JSON header
// of name -> {dtype, shape, data_offsets}, raw little-endian data). Reads F32, F16 and BF16
// tensors, converting the 16-bit ones exactly to float32 (wgtrain's master weights; subnormals,
// infinities and NaN included); other dtypes are refused with a clear message. Writes F32.
#ifndef WGT_SAFETENSORS_H
#define WGT_SAFETENSORS_H
#include <stddef.h>
#include <stdint.h>
#include "core/error.h"

#define ST_MAX_DIMS 4
typedef struct {
    char name[128];
    int ndim;
    size_t shape[ST_MAX_DIMS];
    size_t n;          // elements
    const float *data; // float32 values: into the st_file's own (aligned) copy of the data, or
                       // its conversion of an F16 / BF16 tensor; valid until st_close (NULL
                       // from st_open_header)
    char dtype[8];     // as stored: "F32", "F16" or "BF16"
    int shard;         // the file holding it (st_shard_path): 0 but in a sharded checkpoint
    uint64_t file_off; // where its bytes start in that file (st_tensor_read)
} st_tensor;

typedef struct st_file st_file;
wgt_status st_open(st_file **out, const char *path);
// The header alone, checked as st_open checks it (names, dtypes, shapes, the data offsets against
// the file's size); no data is read, and every tensor's data is NULL.
wgt_status st_open_header(st_file **out, const char *path);
// A Hugging Face checkpoint's headers: `path` is one .safetensors file (as st_open_header) or a
// model.safetensors.index.json, whose "weight_map" names each tensor's shard (a plain file name
// in the index's directory). Every shard's header is read and checked as st_open_header does;
// a shard listed but missing, a path that leaves the directory, a tensor the index puts in one
// shard but found in another (or in none, or in two shards), and a shard tensor the index does
// not list are refused, naming the tensor and the files. The tensors of every shard are one
// table (data NULL); st_tensor_read reads their values, one tensor at a time.
wgt_status st_open_checkpoint(st_file **out, const char *path);
// Tensor t of f (a table from st_open_header or st_open_checkpoint) as float32 into dst[t->n],
// read from its file (F16 / BF16 converted exactly). f keeps the last file it read open.
wgt_status st_tensor_read(st_file *f, const st_tensor *t, float *dst);
// The file tensor t was found in (the checkpoint path itself for one file).
const char *st_shard_path(const st_file *f, int shard);
int st_shard_count(const st_file *f);
// 1 when the name ends in ".index.json" (a sharded checkpoint's index).
int st_is_index_path(const char *path);
void st_close(st_file *f);
int st_count(const st_file *f);
const st_tensor *st_at(const st_file *f, int i);
const st_tensor *st_find(const st_file *f, const char *name);

// Writer: add tensors (data copied by reference until st_writer_finish), then finish writes the
// file atomically (temporary file, fsync, rename).
typedef struct st_writer st_writer;
st_writer *st_writer_new(void);
void st_writer_add(st_writer *w, const char *name, int ndim, const size_t *shape, const float *data);
// A string entry of the header's "__metadata__" (e.g. "format": "pt", which transformers reads);
// both strings are copied.
void st_writer_set_metadata(st_writer *w, const char *key, const char *value);
wgt_status st_writer_finish(st_writer *w, const char *path);  // frees w
void st_writer_discard(st_writer *w);  // frees w, writing nothing
#endif
