// fileutil.h — atomic file writing: data goes to a temporary file beside the target, is
// fsynced, then renamed over the target (and the directory fsynced), so a crash at any moment
// leaves either the old file or the complete new one, never a torn one.
#ifndef WGT_FILEUTIL_H
#define WGT_FILEUTIL_H
#include <stddef.h>
#include <stdio.h>
#include "core/error.h"

typedef struct {
    FILE *f;
    char tmp[4096], path[4096];
    int failed;
} atomic_file;

wgt_status atomic_file_open(atomic_file *af, const char *path);
void atomic_file_write(atomic_file *af, const void *data, size_t n);  // errors reported at commit
wgt_status atomic_file_commit(atomic_file *af);
void atomic_file_abort(atomic_file *af);
// mkdir -p
wgt_status dir_make(const char *path);
#endif
