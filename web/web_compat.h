// web_compat.h — included first in every file of the browser build (web/web.mk): declarations
// of the POSIX functions that wasi-libc lacks and web/web_stubs.c supplies.
#ifndef WGT_WEB_COMPAT_H
#define WGT_WEB_COMPAT_H
#include <sys/types.h>
char *realpath(const char *path, char *resolved);
int chmod(const char *path, mode_t mode);
#endif
