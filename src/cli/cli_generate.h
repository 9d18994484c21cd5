// cli_generate.h — what `wgtrain sample` and `wgtrain chat` share: the generation flags (sampling,
// stop strings and tokens, the token budget), the ids that end a reply, opening a model for
// decoding from a run or a Hugging Face directory, and the loop that picks, streams and stops.
#ifndef WGT_CLI_GENERATE_H
#define WGT_CLI_GENERATE_H
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include "data/text_tokenizer.h"
#include "model/decode.h"
#include "train/sampler.h"

#define GEN_MAX_STOPS 16

typedef struct {
    double temperature, top_p, min_p, rep_penalty;
    long top_k, seed, max_tokens;
    const char *stops[GEN_MAX_STOPS];  // stop strings: the reply ends before the first occurrence
    int n_stops;
    int32_t stop_ids[GEN_MAX_STOPS];   // --stop-token ids (the tokenizer's are added by gen_stop_ids)
    int n_stop_ids;
    int ignore_eos;                    // 1: the tokenizer's end ids do not stop (--ignore-eos)
    int ids_space;                     // as_ids: a space before the first id too (after a prompt)
    int slide;                         // 1: a full context keeps going on the last max_len tokens
                                       // (recomputed for every token, as a model without a cache)
} gen_opts;

// The flags (for cli_args_split / cli_flag_known), NULL-terminated lists to append to a command's.
#define GEN_FLAG_LIST                                                                                        \
    "--temperature=", "--top-k=", "--top-p=", "--min-p=", "--repetition-penalty=", "--seed=", "--max-tokens=", \
        "--stop=", "--stop-token=", "--ignore-eos"
// Their help lines.
extern const char gen_usage_text[];

void gen_opts_default(gen_opts *o, double temperature, double top_p, long max_tokens);
// Handles flag a (value v; v is NULL for --ignore-eos): 1 when a is a generation flag (*st is
// the parse's status), 0 when it is not.
int gen_opts_parse(gen_opts *o, const char *a, const char *v, wgt_status *st);
// The sampler the options describe (sampler_free it).
void gen_sampler_init(sampler *sp, const gen_opts *o, int vocab);

// The ids that end a reply: the tokenizer's end-of-text, and for a Hugging Face tokenizer its
// config's eos_token and the end-of-turn tokens of the common chat formats it has (<|eot_id|>,
// <|im_end|>, <end_of_turn>, <|end|>, <|eom_id|>), the ids of generation_config.json's
// eos_token_id in model_dir (may be NULL), and the --stop-token ids. Unless ignore_eos, only the
// last are used. ids[GEN_MAX_STOPS * 2]; *n receives the count.
wgt_status gen_stop_ids(const gen_opts *o, const text_tokenizer *tok, const char *model_dir, int32_t *ids, int *n);

// A model ready for decoding: from a run directory (its checkpoint) or a Hugging Face model
// directory (config.json + safetensors), with its tokenizer (the run's or its data directory's;
// the directory's tokenizer.json). *model_dir: the directory a generation_config.json may be in.
typedef struct {
    wgt_backend *be;
    wgt_model *m;
    text_tokenizer *tok;
    char model_dir[4096];
    char tok_error[1024];  // why tok is NULL when a tokenizer was found but refused ("" otherwise)
} gen_model;
wgt_status gen_model_open(gen_model *g, const char *run, const char *hf_dir, const char *device, const char *adapter,
                          int need_tokenizer);
void gen_model_close(gen_model *g);

// The ids of one sequence: everything fed or generated (the repetition penalty reads them).
typedef struct {
    int32_t *ids;
    size_t n, cap;
} gen_seq;
void gen_seq_push(gen_seq *s, int32_t id);
void gen_seq_free(gen_seq *s);

// Generates for sequence 0 of d, whose cache holds seq->ids and whose next-token logits are in
// logits[V] (overwritten): up to o->max_tokens tokens, each appended to seq, stopping at a stop
// id (not appended), a stop string (the text before it is the reply), a full context (unless
// o->slide), or when
// *interrupt becomes nonzero. The reply's text streams to out as it is decided (text that could
// still begin a stop string is held back; ids as decimal numbers with as_ids). *reply (may be
// NULL) receives the reply's bytes (malloc'd, NUL-terminated), *why one of "stop", "length",
// "context", "interrupt".
wgt_status gen_run(model_decoder *d, sampler *sp, const text_tokenizer *tok, const gen_opts *o, const int32_t *stop_ids,
                   int n_stop_ids, float *logits, gen_seq *seq, FILE *out, int as_ids,
                   volatile sig_atomic_t *interrupt, char **reply, size_t *n_reply, const char **why);
#endif
