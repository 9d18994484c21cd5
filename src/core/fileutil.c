// fileutil.c — atomic writes, safe opening of regular files, directory creation (see fileutil.h).
#include "core/fileutil.h"
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *type_name(mode_t m) {
    if (S_ISDIR(m)) return "a directory";
    if (S_ISLNK(m)) return "a symbolic link";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISSOCK(m)) return "a socket";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    return "not a regular file";
}

wgt_status file_check_replaceable(const char *path) {
    struct stat sb;
    if (lstat(path, &sb) != 0) {
        if (errno == ENOENT) return WGT_OK;
        return wgt_fail(WGT_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    }
    if (!S_ISREG(sb.st_mode))
        return wgt_fail(WGT_ERR_IO, "refusing to write '%s': it is %s, and wgtrain only replaces regular files; remove "
                        "it or choose another path", path, type_name(sb.st_mode));
    return WGT_OK;
}

// 12 random characters from [0-9a-z] (getrandom; a clock/pid mix if that is unavailable).
static void random_suffix(char out[13]) {
    static const char alphabet[] = "0123456789abcdefghijklmnopqrstuvwxyz";
    unsigned char r[12];
#ifdef GRND_NONBLOCK
    if (getrandom(r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
#else  // wasi-libc (the browser build): getentropy, the WASI random source
    if (getentropy(r, sizeof r) != 0) {
#endif
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ ((uint64_t)getpid() << 40) ^ (uint64_t)(uintptr_t)r;
        for (int i = 0; i < 12; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            r[i] = (unsigned char)(x >> 56);
        }
    }
    for (int i = 0; i < 12; i++) out[i] = alphabet[r[i] % 36];
    out[12] = 0;
}

wgt_status atomic_file_open(atomic_file *af, const char *path) {
    memset(af, 0, sizeof af[0]);
    size_t len = strlen(path);
    if (len == 0) return wgt_fail(WGT_ERR_ARG, "empty output path");
    if (len + 32 >= sizeof af->tmp) return wgt_fail(WGT_ERR_ARG, "path too long: %s", path);
    if (path[len - 1] == '/') return wgt_fail(WGT_ERR_ARG, "'%s' names a directory, not a file", path);
    WGT_TRY(file_check_replaceable(path));
    memcpy(af->path, path, len + 1);
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t dirlen = (size_t)(base - path);
    int fd = -1;
    for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
        char sfx[13];
        random_suffix(sfx);
        // NAME.tmp.XXXXXXXXXXXX; a name too long for that gets a short hidden name instead
        if (strlen(base) + sizeof ATOMIC_TMP_INFIX + 12 <= 255)
            snprintf(af->tmp, sizeof af->tmp, "%s" ATOMIC_TMP_INFIX "%s", path, sfx);
        else
            snprintf(af->tmp, sizeof af->tmp, "%.*s.wgtrain" ATOMIC_TMP_INFIX "%s", (int)dirlen, path, sfx);
        fd = open(af->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        int err = errno;
        return wgt_fail(WGT_ERR_IO, "cannot create a temporary file beside '%s' (%s): %s", path, af->tmp, strerror(err));
    }
    af->f = fdopen(fd, "wb");
    if (!af->f) {
        int err = errno;
        close(fd);
        unlink(af->tmp);
        return wgt_fail(WGT_ERR_IO, "cannot write '%s': %s", af->tmp, strerror(err));
    }
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
    // checked again: something may have been put at the path while we wrote
    wgt_status st = file_check_replaceable(af->path);
    if (st != WGT_OK) {
        unlink(af->tmp);
        return st;
    }
    if (rename(af->tmp, af->path) != 0) {
        err = errno;
        unlink(af->tmp);
        return wgt_fail(WGT_ERR_IO, "cannot replace '%s': %s", af->path, strerror(err));
    }
    // makes the rename itself durable; file systems that cannot sync a directory say EINVAL
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", af->path);
    int dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        int r = fsync(dfd);
        err = errno;
        close(dfd);
        if (r != 0 && err != EINVAL && err != ENOTSUP)
            return wgt_fail(WGT_ERR_IO, "'%s' was written but its directory could not be synced: %s", af->path, strerror(err));
    }
    return WGT_OK;
}

wgt_status atomic_write_file(const char *path, const void *data, size_t n) {
    atomic_file af;
    WGT_TRY(atomic_file_open(&af, path));
    atomic_file_write(&af, data, n);
    return atomic_file_commit(&af);
}

static wgt_status open_fail(const char *path, const char *what, const char *hint, int err) {
    return wgt_fail(WGT_ERR_IO, "cannot open %s%s%s: %s%s%s", what ? what : "", what ? " " : "", path, strerror(err),
                    hint ? "; " : "", hint ? hint : "");
}

static wgt_status not_regular(const char *path, const char *what, mode_t m) {
    return wgt_fail(WGT_ERR_IO, "%s%s%s is %s, not a regular file; pass a regular file", what ? what : "", what ? " " : "",
                    path, type_name(m));
}

wgt_status file_open_read(const char *path, const char *what, const char *hint, int *fd_out, uint64_t *size) {
    *fd_out = -1;
    struct stat sb;
    // the type first: opening a FIFO blocks until a writer appears, a device may do anything
    if (stat(path, &sb) != 0) return open_fail(path, what, hint, errno);
    if (!S_ISREG(sb.st_mode)) return not_regular(path, what, sb.st_mode);
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) return open_fail(path, what, hint, errno);
    // and again on what was opened (the path may have been replaced in between)
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return not_regular(path, what, sb.st_mode);
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        int err = errno;
        close(fd);
        return open_fail(path, what, hint, err);
    }
    *fd_out = fd;
    if (size) *size = (uint64_t)sb.st_size;
    return WGT_OK;
}

wgt_status file_read_head(const char *path, const char *what, void *dst, size_t cap, size_t *n) {
    *n = 0;
    int fd;
    WGT_TRY(file_open_read(path, what, NULL, &fd, NULL));
    while (*n < cap) {
        ssize_t k = read(fd, (char *)dst + *n, cap - *n);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) {
            int err = errno;
            close(fd);
            return wgt_fail(WGT_ERR_IO, "cannot read %s%s%s: %s", what ? what : "", what ? " " : "", path, strerror(err));
        }
        if (k == 0) break;
        *n += (size_t)k;
    }
    close(fd);
    return WGT_OK;
}

wgt_status file_fopen_read(const char *path, const char *what, const char *hint, FILE **f, uint64_t *size) {
    *f = NULL;
    int fd;
    WGT_TRY(file_open_read(path, what, hint, &fd, size));
    *f = fdopen(fd, "rb");
    if (!*f) {
        int err = errno;
        close(fd);
        return open_fail(path, what, hint, err);
    }
    return WGT_OK;
}

wgt_status file_read_all(const char *path, const char *what, const char *hint, size_t max, char **data, size_t *n) {
    *data = NULL;
    *n = 0;
    int fd;
    uint64_t size;
    WGT_ASSERT(max < SIZE_MAX / 4, "file_read_all needs a real limit");
    WGT_TRY(file_open_read(path, what, hint, &fd, &size));
    if (size > max) {
        close(fd);
        return wgt_fail(WGT_ERR_FORMAT, "%s%s%s is %llu bytes, more than the %zu such a file can have", what ? what : "",
                        what ? " " : "", path, (unsigned long long)size, max);
    }
    // read up to max + 1 bytes whatever the size said: the file may grow or shrink meanwhile
    size_t cap = (size_t)size + 1, len = 0;
    char *buf = wgt_malloc(cap + 1);
    for (;;) {
        if (len == cap) {
            if (cap > max) break;
            cap = cap * 2 > max + 1 ? max + 1 : cap * 2;
            char *nb = realloc(buf, cap + 1);
            WGT_ASSERT(nb, "out of host memory");
            buf = nb;
        }
        ssize_t k = read(fd, buf + len, cap - len);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) {
            int err = errno;
            close(fd);
            free(buf);
            return wgt_fail(WGT_ERR_IO, "error reading %s%s%s: %s", what ? what : "", what ? " " : "", path, strerror(err));
        }
        if (k == 0) break;
        len += (size_t)k;
    }
    close(fd);
    if (len > max) {
        free(buf);
        return wgt_fail(WGT_ERR_FORMAT, "%s%s%s is more than the %zu bytes such a file can have", what ? what : "",
                        what ? " " : "", path, max);
    }
    buf[len] = 0;
    *data = buf;
    *n = len;
    return WGT_OK;
}

wgt_status file_pread_exact(int fd, void *dst, size_t n, uint64_t off, const char *path) {
    size_t done = 0;
    while (done < n) {
        ssize_t k = pread(fd, (char *)dst + done, n - done, (off_t)(off + done));
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return wgt_fail(WGT_ERR_IO, "error reading %s: %s", path, strerror(errno));
        if (k == 0)
            return wgt_fail(WGT_ERR_IO, "%s ended at byte %llu while %zu more bytes were expected: the file was truncated "
                            "or replaced in place while in use", path, (unsigned long long)(off + done), n - done);
        done += (size_t)k;
    }
    return WGT_OK;
}

wgt_status file_open_append(const char *path, FILE **f) {
    *f = NULL;
    WGT_TRY(file_check_replaceable(path));
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY, 0666);
    if (fd < 0) return wgt_fail(WGT_ERR_IO, "cannot open %s for appending: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return wgt_fail(WGT_ERR_IO, "refusing to append to '%s': it is not a regular file", path);
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    *f = fdopen(fd, "ab");
    if (!*f) {
        int err = errno;
        close(fd);
        return wgt_fail(WGT_ERR_IO, "cannot open %s for appending: %s", path, strerror(err));
    }
    return WGT_OK;
}

wgt_status file_open_rw(const char *path, const char *what, int *fd_out) {
    *fd_out = -1;
    int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY, 0644);
    if (fd < 0) return wgt_fail(WGT_ERR_IO, "cannot create %s %s: %s", what, path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return wgt_fail(WGT_ERR_IO, "%s %s is not a regular file; remove it", what, path);
    }
    *fd_out = fd;
    return WGT_OK;
}

wgt_status dir_make(const char *path) {
    char buf[4096];
    if (strlen(path) >= sizeof buf) return wgt_fail(WGT_ERR_ARG, "path too long: %s", path);
    if (!path[0]) return wgt_fail(WGT_ERR_ARG, "empty directory path");
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

uint64_t fnv1a64(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}
