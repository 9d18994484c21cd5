// runlock.h — an exclusive lock on a directory (a run directory for `train`, a data directory
// for `prepare`), so that two processes never write the same checkpoint, metrics or shards at
// once. The lock is flock(2) on a small file inside the directory that records the holder's
// pid; the kernel drops it when the process ends, however it ends, so a crash never leaves a
// stale lock behind (the file itself may stay: it is only a place to lock).
#ifndef WGT_RUNLOCK_H
#define WGT_RUNLOCK_H
#include "core/error.h"


#define RUN_LOCK_FILE ".wgtrain.lock"

typedef struct {
    int held;  // zero-initialised: not held
    int fd;
} run_lock;

// Takes the lock on dir (which must exist) without waiting. When another process holds it,
// fails with a message naming dir, the holder's pid and command. `who` ("train", "prepare")
// is recorded for the messages of later contenders.
wgt_status run_lock_acquire(run_lock *l, const char *dir, const char *who);
// For a run directory: with create, makes dir (mkdir -p) and takes the lock; without it, a
// missing dir is left alone (there is nothing in it to protect; the caller's own checks report
// it) and the lock is not taken.
wgt_status run_lock_dir(run_lock *l, const char *dir, int create, const char *who);
// Releases the lock (a no-op on a lock not held).
void run_lock_release(run_lock *l);
#endif
