// dir_switch.h — replacing the files of a directory all at once: the new files are written into
// a sibling stage directory and then swapped with the directory in one rename, so that a failure
// (a full disk, a kill) at any moment leaves it showing either its old contents or the new ones,
// whole, never a mix. Used by `wgtrain export` (docs/files-and-safety.md#export).
//
// For DIR = PARENT/NAME the siblings are PARENT/.NAME.wgtrain-stage (being written),
// PARENT/.NAME.wgtrain-new (complete, not yet switched) and PARENT/.NAME.wgtrain-old (the old
// contents after a switch where the kernel cannot exchange two directories in one step). The
// switch is renameat2(RENAME_EXCHANGE) of the new directory and DIR where the file system has it
// (then DIR is never missing), else two renames (DIR is then absent for an instant). Entries of
// the old DIR that `owned` does not claim (files the caller does not write, say a README) are
// moved into the new DIR afterwards; owned ones of the old contents are deleted.
//
// The next dir_switch_begin finishes what a killed one left: a stage is deleted, a complete new
// directory is switched in if DIR is missing (the kill fell between the two renames) and
// otherwise dropped, and the entries of old contents are handed back (unowned) or deleted.
#ifndef WGT_DIR_SWITCH_H
#define WGT_DIR_SWITCH_H
#include <stddef.h>
#include "core/error.h"

// Whether a directory entry's name is one the caller writes (the new contents replace it).
typedef int (*dir_switch_owned_fn)(const char *name);

typedef struct {
    char dir[4096];    // DIR, resolved (a symlink to a directory is followed)
    char stage[4200], fresh[4200], old[4200];
    dir_switch_owned_fn owned;
} dir_switch;

// Finishes a stale switch of dir, then makes an empty stage directory (parents of dir made as
// needed); write the new files into s->stage.
wgt_status dir_switch_begin(dir_switch *s, const char *dir, dir_switch_owned_fn owned);
// Switches the stage in for dir's contents (see above).
wgt_status dir_switch_commit(dir_switch *s);
// Deletes the stage (after a failure while writing it).
void dir_switch_abort(dir_switch *s);

// Test hook: WGTRAIN_TEST_KILL_AT=NAME makes the process SIGKILL itself at the point NAME
// ("export-staged": the new files complete, before the switch; "export-switched": after the
// switch, before the old contents are handed back). Any other value is an error (exit 2).
void dir_switch_test_kill(const char *point);
#endif
