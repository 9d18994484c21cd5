// family_common.c — what the families' blocks do alike, written once: the --recompute plumbing
// (which activations a block shares with block 0, the backward's loop that recomputes them) and
// the view of a packed q | k | v. The families' view and activation structs are private to their
// files; these helpers see them only as runs of wgt_views.
#include <string.h>
#include "model/model_impl.h"

model_acts_own model_block_acts_share(const wgt_model *m, int l, void *h, const void *h0, size_t attn_end, size_t size) {
    const size_t first = sizeof(wgt_view);  // past the block's input
    WGT_ASSERT(attn_end % sizeof(wgt_view) == 0 && size % sizeof(wgt_view) == 0 && first <= attn_end && attn_end <= size,
               "a block's activation struct must hold only views, its input first");
    if (l > 0 && m->recompute == MODEL_RECOMPUTE_BLOCK) {  // one set for all blocks but the inputs
        memcpy((char *)h + first, (const char *)h0 + first, size - first);
        return MODEL_ACTS_INPUT;
    }
    if (l > 0 && m->recompute == MODEL_RECOMPUTE_ATTENTION) {  // the attention's: one set
        memcpy((char *)h + first, (const char *)h0 + first, attn_end - first);
        return MODEL_ACTS_NOT_ATTENTION;
    }
    return MODEL_ACTS_ALL;
}

void model_blocks_backward(wgt_model *m, model_block_fn block_forward, model_block_fn attn_forward,
                           model_block_fn block_backward) {
    for (int l = m->c.n_layer - 1; l >= 0; l--) {
        // --recompute: the shared activations hold the last block's; the others are recomputed
        if (l + 1 < m->c.n_layer && m->recompute == MODEL_RECOMPUTE_BLOCK) block_forward(m, l);
        if (l + 1 < m->c.n_layer && m->recompute == MODEL_RECOMPUTE_ATTENTION) attn_forward(m, l);
        block_backward(m, l);
    }
}

wgt_view model_packed_view(wgt_view a, wgt_view b, wgt_view c, const char *what) {
    WGT_ASSERT(b.buf == a.buf && c.buf == a.buf && b.off == a.off + a.n && c.off == b.off + b.n, what);
    return model_view(a.buf, a.off, a.n + b.n + c.n);
}
