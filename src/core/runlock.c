// runlock.c — directory locks with flock(2) (see runlock.h).
#include "core/runlock.h"
#include "core/fileutil.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#ifdef WGT_NO_FLOCK
// a build of one process at a time (the browser's, docs/web.md): no other process can hold the
// directory, so taking the lock always succeeds and the holder's record is still written
#define LOCK_EX 2
#define LOCK_NB 4
static int flock(int fd, int op) { (void)fd, (void)op; return 0; }
#else
#include <sys/file.h>
#endif
#include <sys/stat.h>
#include <unistd.h>

wgt_status run_lock_acquire(run_lock *l, const char *dir, const char *who) {
    l->held = 0;
    l->fd = -1;
    char path[4200];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, RUN_LOCK_FILE) >= sizeof path)
        return wgt_fail(WGT_ERR_ARG, "path too long: %s/%s", dir, RUN_LOCK_FILE);
    int fd;
    WGT_TRY(file_open_rw(path, "the lock file", &fd));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int err = errno;
        if (err != EWOULDBLOCK) {
            close(fd);
            return wgt_fail(WGT_ERR_IO, "cannot lock %s: %s", path, strerror(err));
        }
        // the holder writes "pid command" right after locking; an empty file means it is just starting
        char info[128] = {0};
        ssize_t k = pread(fd, info, sizeof info - 1, 0);
        close(fd);
        long pid = 0;
        char cmd[32] = "";
        if (k > 0) sscanf(info, "%ld %31s", &pid, cmd);
        if (pid > 0)
            return wgt_fail(WGT_ERR_IO, "%s is in use by another wgtrain process (pid %ld, `wgtrain %s`); wait for it to "
                            "finish or stop it, or use another directory", dir, pid, cmd[0] ? cmd : "?");
        return wgt_fail(WGT_ERR_IO, "%s is in use by another wgtrain process (just starting; its pid is not recorded yet); "
                        "wait for it to finish or stop it, or use another directory", dir);
    }
    char info[128];
    int len = snprintf(info, sizeof info, "%ld %s\n", (long)getpid(), who ? who : "?");
    if (ftruncate(fd, 0) != 0 || pwrite(fd, info, (size_t)len, 0) != len) {
        int err = errno;
        close(fd);
        return wgt_fail(WGT_ERR_IO, "cannot write the lock file %s: %s", path, strerror(err));
    }
    l->fd = fd;
    l->held = 1;
    return WGT_OK;
}

wgt_status run_lock_dir(run_lock *l, const char *dir, int create, const char *who) {
    l->held = 0;
    l->fd = -1;
    if (create) WGT_TRY(dir_make(dir));
    struct stat sb;
    if (!create && (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))) return WGT_OK;
    return run_lock_acquire(l, dir, who);
}

void run_lock_release(run_lock *l) {
    if (!l->held) return;
    if (ftruncate(l->fd, 0) != 0) { /* only cosmetic: the lock itself goes with the descriptor */ }
    close(l->fd);  // drops the flock
    l->fd = -1;
    l->held = 0;
}
