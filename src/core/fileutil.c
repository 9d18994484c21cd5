// fileutil.c — atomic writes and directory creation.
#include "core/fileutil.h"
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

wgt_status atomic_file_open(atomic_file *af, const char *path) {
    memset(af, 0, sizeof af[0]);
    if (strlen(path) + 32 >= sizeof af->tmp) return wgt_fail(WGT_ERR_ARG, "path too long: %s", path);
    snprintf(af->path, sizeof af->path, "%s", path);
    snprintf(af->tmp, sizeof af->tmp, "%s.tmp.%ld", path, (long)getpid());
    af->f = fopen(af->tmp, "wb");
    if (!af->f) return wgt_fail(WGT_ERR_IO, "cannot create '%s': %s", af->tmp, strerror(errno));
    return WGT_OK;
}

void atomic_file_write(atomic_file *af, const void *data, size_t n) {
    if (af->failed || !n) return;
    if (fwrite(data, 1, n, af->f) != n) af->failed = errno ? errno : EIO;
}

void atomic_file_abort(atomic_file *af) {
    if (af->f) fclose(af->f);
    af->f = NULL;
    unlink(af->tmp);
}

wgt_status atomic_file_commit(atomic_file *af) {
    int err = af->failed;
    if (!err && fflush(af->f) != 0) err = errno;
    if (!err && fsync(fileno(af->f)) != 0) err = errno;
    if (fclose(af->f) != 0 && !err) err = errno;
    af->f = NULL;
    if (err) {
        unlink(af->tmp);
        return wgt_fail(WGT_ERR_IO, "writing '%s' failed: %s (the previous file, if any, is untouched)", af->path, strerror(err));
    }
    if (rename(af->tmp, af->path) != 0) {
        err = errno;
        unlink(af->tmp);
        return wgt_fail(WGT_ERR_IO, "cannot replace '%s': %s", af->path, strerror(err));
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", af->path);
    int dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) { fsync(dfd); close(dfd); }  // makes the rename itself durable
    return WGT_OK;
}

wgt_status dir_make(const char *path) {
    char buf[4096];
    if (strlen(path) >= sizeof buf) return wgt_fail(WGT_ERR_ARG, "path too long: %s", path);
    strcpy(buf, path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(buf, 0755) != 0 && errno != EEXIST) return wgt_fail(WGT_ERR_IO, "cannot create directory '%s': %s", buf, strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST) return wgt_fail(WGT_ERR_IO, "cannot create directory '%s': %s", buf, strerror(errno));
    struct stat sb;
    if (stat(buf, &sb) != 0 || !S_ISDIR(sb.st_mode)) return wgt_fail(WGT_ERR_IO, "'%s' exists and is not a directory", buf);
    return WGT_OK;
}
