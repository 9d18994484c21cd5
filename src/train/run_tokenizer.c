// run_tokenizer.c — the run's own tokenizer, checked against its recorded fingerprint (see
// run_tokenizer.h).
#include "train/run_tokenizer.h"
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

wgt_status run_tokenizer_open(text_tokenizer **tok, const checkpoint *ck, const char *run_dir) {
    *tok = NULL;
    const char *want = ck->cfg.tokenizer_hash;
    const char *cands[2] = {run_dir, ck->cfg.data_dir};
    char bad_src[600] = "", bad_hash[17] = "";
    for (int i = 0; i < 2; i++) {
        if (!cands[i][0]) continue;
        text_tokenizer *t = NULL;
        WGT_TRY(text_tokenizer_open_dir(&t, cands[i]));
        if (!t) continue;
        char h[17];
        snprintf(h, sizeof h, "%016" PRIx64, text_tokenizer_fingerprint(t));
        if (!want[0] || !strcmp(h, want)) {
            if (bad_src[0])
                fprintf(stderr, "note: %s is not this run's tokenizer (fingerprint %s, the run's is %s); using %s, which "
                        "is\n", bad_src, bad_hash, want, text_tokenizer_source(t));
            *tok = t;
            return WGT_OK;
        }
        if (!bad_src[0]) {
            snprintf(bad_src, sizeof bad_src, "%s", text_tokenizer_source(t));
            snprintf(bad_hash, sizeof bad_hash, "%s", h);
        }
        text_tokenizer_free(t);
    }
    if (bad_src[0])
        return wgt_fail(WGT_ERR_FORMAT, "the tokenizer %s is not this run's: its fingerprint is %s but the run was trained "
                        "with %s (recorded when it started); put the run's own tokenizer back (the one of the data "
                        "directory it was trained on, %s), or pass --ids to give and get token ids", bad_src, bad_hash,
                        want, ck->cfg.data_dir);
    return WGT_OK;
}
