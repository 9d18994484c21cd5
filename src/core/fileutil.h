// fileutil.h — the one place wgtrain opens files, so that every reader and writer follows the
// same rules (docs/files-and-safety.md). Every open(2)/fopen(3) of the program is in
// fileutil.c; the other modules call these helpers (the run lock, safetensors, shards, the
// tokenizers, configs, checkpoints, metrics, the PCI attributes of a GPU per rank). The only
// exception is the standard output of a non-zero MPI rank, which dist.c points at /dev/null.
//  - writing is atomic: data goes to a fresh temporary file beside the target (a random name,
//    created with O_CREAT|O_EXCL|O_NOFOLLOW, so a planted file or symlink is never written
//    through), is fsynced, then renamed over the target and the directory fsynced. A crash at
//    any moment leaves either the old file or the complete new one, never a torn one.
//  - only a regular file (or nothing) is replaced: a directory, device, FIFO, socket or
//    symbolic link at the target path is refused with a message naming the path.
//  - reading opens only regular files: the type is checked before a (non-blocking) open and
//    again on the descriptor, so a FIFO or device given as input fails at once instead of
//    blocking or reading forever. Files are read, never memory-mapped: a file truncated by
//    someone else while we use it gives a read error, not SIGBUS.
#ifndef WGT_FILEUTIL_H
#define WGT_FILEUTIL_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "core/error.h"

typedef struct {
    FILE *f;
    char tmp[4096], path[4096];
    int failed;
} atomic_file;

// Suffix of temporary files: NAME.tmp.XXXXXXXXXXXX (random). Stale ones are matched by this.
#define ATOMIC_TMP_INFIX ".tmp."

wgt_status atomic_file_open(atomic_file *af, const char *path);
void atomic_file_write(atomic_file *af, const void *data, size_t n);  // errors reported at commit
wgt_status atomic_file_commit(atomic_file *af);
void atomic_file_abort(atomic_file *af);
// Writes a whole buffer atomically (open, write, commit).
wgt_status atomic_write_file(const char *path, const void *data, size_t n);

// Fails (naming the path) if something other than a regular file exists at path; nothing there
// is fine. Used before replacing or appending to a file.
wgt_status file_check_replaceable(const char *path);

// Opens an existing regular file for reading (read-only, close-on-exec, blocking I/O). `what`
// names the file in messages ("shard", "checkpoint"...; may be NULL) and `hint` is appended to
// the message when the file cannot be opened (may be NULL). *size receives the file's size.
wgt_status file_open_read(const char *path, const char *what, const char *hint, int *fd, uint64_t *size);
// The same, as a stdio stream.
wgt_status file_fopen_read(const char *path, const char *what, const char *hint, FILE **f, uint64_t *size);
// Reads up to cap bytes from the start of a regular file (what a kind's sniffer looks at); *n gets
// how many were read (fewer when the file is shorter).
wgt_status file_read_head(const char *path, const char *what, void *dst, size_t cap, size_t *n);
// Reads a whole regular file of at most max bytes into a malloc'd buffer with a NUL after the
// data (free() it). A larger file is refused with WGT_ERR_FORMAT.
wgt_status file_read_all(const char *path, const char *what, const char *hint, size_t max, char **data, size_t *n);
// pread of exactly n bytes at off; a short read (the file shrank) is an error naming path.
wgt_status file_pread_exact(int fd, void *dst, size_t n, uint64_t off, const char *path);

// Opens a regular file for appending, creating it if missing; a symlink or anything but a
// regular file at path is refused.
wgt_status file_open_append(const char *path, FILE **f);
// Opens a regular file for reading and writing in place (not atomically: for a lock file,
// whose descriptor is what matters), creating it if missing (mode 0644); a symlink or anything
// but a regular file at path is refused. `what` names the file in messages.
wgt_status file_open_rw(const char *path, const char *what, int *fd);

// mkdir -p
wgt_status dir_make(const char *path);

// 64-bit FNV-1a, for content fingerprints (h = FNV64_INIT to start, chainable).
#define FNV64_INIT 0xcbf29ce484222325ull
uint64_t fnv1a64(uint64_t h, const void *data, size_t n);
#endif
