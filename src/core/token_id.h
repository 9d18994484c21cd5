// token_id.h — the one bound on vocabularies. Token ids are uint32 from the tokenizer to the
// kernels (shards store them in 16 bits only while the vocabulary fits: data/shard.h); every
// vocabulary size read from a file or flag is checked against TOKEN_MAX_VOCAB, which is far
// above any tokenizer in use (Gemma 3's 262,144) and keeps vocab * width products of int-sized
// dimensions checkable.
#ifndef WGT_TOKEN_ID_H
#define WGT_TOKEN_ID_H
#define TOKEN_MAX_VOCAB (1 << 24)
#endif
