// dir_switch.c — a directory's contents replaced all at once through a sibling stage directory
// (see dir_switch.h).
#include "core/dir_switch.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "core/fileutil.h"

void dir_switch_test_kill(const char *point) {
    const char *e = getenv("WGTRAIN_TEST_KILL_AT");
    if (!e) return;
    if (strcmp(e, "export-staged") && strcmp(e, "export-switched")) {
        fprintf(stderr, "wgtrain: WGTRAIN_TEST_KILL_AT must be export-staged or export-switched, got '%s'\n", e);
        exit(2);
    }
    if (!strcmp(e, point)) raise(SIGKILL);
}

static int exists(const char *p) {
    struct stat sb;
    return lstat(p, &sb) == 0;
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)ftw;
    return flag == FTW_DP ? rmdir(path) : unlink(path);
}

// Deletes a tree (symlinks inside are removed, never followed).
static wgt_status rm_tree(const char *path) {
    if (!exists(path)) return WGT_OK;
    if (nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS) != 0)
        return wgt_fail(WGT_ERR_IO, "cannot remove %s: %s; remove it by hand", path, strerror(errno));
    return WGT_OK;
}

// The old contents in `from` go back: unowned entries are moved into s->dir (unless it has one
// of that name), owned ones deleted, and `from` with them.
static wgt_status hand_back(dir_switch *s, const char *from) {
    DIR *d = opendir(from);
    if (!d) return wgt_fail(WGT_ERR_IO, "cannot read %s: %s", from, strerror(errno));
    wgt_status st = WGT_OK;
    for (struct dirent *e; (e = readdir(d)) && st == WGT_OK;) {
        const char *n = e->d_name;
        if (!strcmp(n, ".") || !strcmp(n, "..") || s->owned(n)) continue;
        char a[PATH_MAX + 300], b[PATH_MAX + 300];
        snprintf(a, sizeof a, "%s/%s", from, n);
        snprintf(b, sizeof b, "%s/%s", s->dir, n);
        if (exists(b)) continue;  // (cannot happen: the new contents hold owned names only)
        if (rename(a, b) != 0)
            st = wgt_fail(WGT_ERR_IO, "cannot move %s back into %s: %s; it is still in %s", n, s->dir, strerror(errno),
                          from);
    }
    closedir(d);
    return st == WGT_OK ? rm_tree(from) : st;
}

static wgt_status recover(dir_switch *s) {
    WGT_TRY(rm_tree(s->stage));  // a stage never completed
    if (exists(s->fresh)) {
        if (!exists(s->dir)) {  // killed between the two renames of a switch: finish it
            if (rename(s->fresh, s->dir) != 0)
                return wgt_fail(WGT_ERR_IO, "cannot rename %s to %s: %s", s->fresh, s->dir, strerror(errno));
        } else {
            // a complete new directory not switched in, or (after an exchange) the old contents
            WGT_TRY(hand_back(s, s->fresh));
        }
    }
    if (exists(s->old)) {
        if (!exists(s->dir)) {
            if (rename(s->old, s->dir) != 0)
                return wgt_fail(WGT_ERR_IO, "cannot rename %s to %s: %s", s->old, s->dir, strerror(errno));
        } else {
            WGT_TRY(hand_back(s, s->old));
        }
    }
    return WGT_OK;
}

wgt_status dir_switch_begin(dir_switch *s, const char *dir, dir_switch_owned_fn owned) {
    memset(s, 0, sizeof *s);
    s->owned = owned;
    char real[PATH_MAX];
    if (realpath(dir, real)) snprintf(s->dir, sizeof s->dir, "%s", real);
    else if (strlen(dir) < sizeof s->dir) snprintf(s->dir, sizeof s->dir, "%s", dir);
    else return wgt_fail(WGT_ERR_ARG, "path too long: %s", dir);
    size_t n = strlen(s->dir);
    while (n > 1 && s->dir[n - 1] == '/') s->dir[--n] = 0;
    const char *slash = strrchr(s->dir, '/');
    const char *base = slash ? slash + 1 : s->dir;
    if (!*base || !strcmp(base, ".") || !strcmp(base, ".."))
        return wgt_fail(WGT_ERR_ARG, "%s: name the directory itself (its parent holds the files being written)", dir);
    char parent[4096];
    if (!slash) snprintf(parent, sizeof parent, ".");
    else if (slash == s->dir) snprintf(parent, sizeof parent, "/");
    else snprintf(parent, sizeof parent, "%.*s", (int)(slash - s->dir), s->dir);
    if ((size_t)snprintf(s->stage, sizeof s->stage, "%s/.%s.wgtrain-stage", parent, base) >= sizeof s->stage ||
        (size_t)snprintf(s->fresh, sizeof s->fresh, "%s/.%s.wgtrain-new", parent, base) >= sizeof s->fresh ||
        (size_t)snprintf(s->old, sizeof s->old, "%s/.%s.wgtrain-old", parent, base) >= sizeof s->old)
        return wgt_fail(WGT_ERR_ARG, "path too long: %s", dir);
    WGT_TRY(dir_make(parent));
    WGT_TRY(recover(s));
    if (mkdir(s->stage, 0777) != 0)
        return wgt_fail(WGT_ERR_IO, "cannot make the directory %s: %s", s->stage, strerror(errno));
    return WGT_OK;
}

void dir_switch_abort(dir_switch *s) {
    if (s->stage[0]) rm_tree(s->stage);
}

wgt_status dir_switch_commit(dir_switch *s) {
    struct stat sb;
    int had = stat(s->dir, &sb) == 0;
    if (had) chmod(s->stage, sb.st_mode & 07777);  // the directory keeps its permissions
    // durable before the switch: the files are (atomic writes sync them); their names too
    int fd = open(s->stage, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    if (rename(s->stage, s->fresh) != 0) {  // complete: from here on a new directory exists
        wgt_status st = wgt_fail(WGT_ERR_IO, "cannot rename %s to %s: %s", s->stage, s->fresh, strerror(errno));
        dir_switch_abort(s);
        return st;
    }
    dir_switch_test_kill("export-staged");
    if (!had) {
        if (rename(s->fresh, s->dir) != 0) {
            wgt_status st = wgt_fail(WGT_ERR_IO, "cannot rename %s to %s: %s", s->fresh, s->dir, strerror(errno));
            rm_tree(s->fresh);
            return st;
        }
        return WGT_OK;
    }
    const char *olddir = s->fresh;  // after an exchange the old contents are at the new one's name
#ifdef RENAME_EXCHANGE
    int exchanged = renameat2(AT_FDCWD, s->fresh, AT_FDCWD, s->dir, RENAME_EXCHANGE);
#else  // a C library without renameat2 (wasi-libc): the two renames below
    int exchanged = (errno = ENOSYS, -1);
#endif
    if (exchanged != 0) {
        if (errno != EINVAL && errno != ENOSYS) {
            wgt_status st = wgt_fail(WGT_ERR_IO, "cannot switch %s in for %s: %s", s->fresh, s->dir, strerror(errno));
            rm_tree(s->fresh);
            return st;
        }
        // no exchange on this file system: two renames
        if (rename(s->dir, s->old) != 0) {
            wgt_status st = wgt_fail(WGT_ERR_IO, "cannot rename %s to %s: %s", s->dir, s->old, strerror(errno));
            rm_tree(s->fresh);
            return st;
        }
        if (rename(s->fresh, s->dir) != 0) {
            wgt_status st = wgt_fail(WGT_ERR_IO, "cannot rename %s to %s: %s", s->fresh, s->dir, strerror(errno));
            if (rename(s->old, s->dir) == 0) rm_tree(s->fresh);
            return st;
        }
        olddir = s->old;
    }
    dir_switch_test_kill("export-switched");
    return hand_back(s, olddir);
}
