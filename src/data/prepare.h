// prepare.h — turns a text corpus into a data directory the trainer reads: a trained BPE
// tokenizer, train/val token shards and meta.json (layout in docs/tokenizer-format.md).
#ifndef WGT_PREPARE_H
#define WGT_PREPARE_H
#include "core/error.h"

#define PREPARE_TOKENIZER_FILE "tokenizer.bin"
#define PREPARE_META_FILE "meta.json"
// meta.json version 2 records the tokenizer's fingerprint and each shard's token count and
// CRC-32, checked when the directory is opened (docs/files-and-safety.md).
#define PREPARE_META_VERSION 2

// inputs: files, directories (walked recursively in sorted order; hidden entries skipped) or
// glob patterns. Each file is one document, except that a plain-text file is split into
// several at each "<|endoftext|>" it contains. Brown-corpus files (word/TAG tokens) are
// detected and converted to plain text. The last val_fraction of the documents (0 < f < 1; at
// least one) become the validation split; a corpus of one document gives val the last
// val_fraction of its tokens. Creates out_dir if needed and holds an exclusive lock on it
// while writing (a second prepare into the same directory is refused). meta.json is removed
// first and written last, so an interrupted prepare leaves a directory that is refused, never
// a new tokenizer beside old shards. verbose prints progress and a summary,
// including the unigram entropy of the train tokens (also stored in meta.json).
wgt_status prepare_corpus(const char **inputs, int n_inputs, const char *out_dir, int vocab_size,
                          double val_fraction, int verbose);

// Which tokenizer prepare uses: a new BPE trained on the corpus (vocab_size ids), or GPT-2's
// (text_tokenizer_open_gpt2; vocab_size is ignored: 50257). meta.json records the kind.
typedef enum { PREPARE_TOKENIZER_TRAIN = 0, PREPARE_TOKENIZER_GPT2 } prepare_tokenizer;
wgt_status prepare_corpus_with(const char **inputs, int n_inputs, const char *out_dir, prepare_tokenizer kind,
                               int vocab_size, double val_fraction, int verbose);
// The same with an existing tokenizer: spec as text_tokenizer_open takes it (a kind's file, a
// directory holding one, such as a Hugging Face model's tokenizer.json + tokenizer_config.json).
// Documents are separated by its end-of-text id (for a Hugging Face tokenizer: the config's
// eos_token); a tokenizer without one is refused.
wgt_status prepare_corpus_spec(const char **inputs, int n_inputs, const char *out_dir, const char *spec,
                               double val_fraction, int verbose);

// Instruction and chat data (prepare_jsonl.c, docs/instruction-data.md): JSONL files of
// {"text"}, {"prompt", "completion"} or {"messages"} records, tokenized with the Hugging Face
// tokenizer `spec` (its chat template renders messages) into flagged shards (shard.h: the loss
// mask and the example starts). The last val_fraction of the examples (at least one) are the
// validation split. A malformed or empty record fails naming its file and line; an example
// whose mask trains nothing is skipped; one longer than max_tokens (0: no limit) is truncated
// or (drop_long) dropped; all counted in the summary and meta.json.
typedef struct {
    const char *chat_template;  // a Jinja2 file instead of the tokenizer config's (NULL: the config's)
    int max_tokens;             // 0: no limit
    int drop_long;              // over-long examples: 1 drop, 0 truncate
} prepare_jsonl_opts;
wgt_status prepare_jsonl(const char **inputs, int n_inputs, const char *out_dir, const char *spec,
                         const prepare_jsonl_opts *o, double val_fraction, int verbose);
#endif
