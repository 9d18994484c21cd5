// text_tokenizer.h — one interface over every tokenizer kind wgtrain reads: its own byte-level
// BPE trained by `wgtrain prepare` (tokenizer.h, the file tokenizer.bin), GPT-2's (gpt2_bpe.h,
// encoder.json + vocab.bpe), and any kind added to the registry (tokenizer_kinds.c; how to add
// one: docs/tokenizer-format.md). A kind is a table of functions (text_tok_kind) over its own
// state; this interface finds the kind of a directory, a file or a name, and does what every
// kind shares: the end-of-text marker in text, directory files, meta.json's members and the
// fingerprint. Ids are uint32 throughout.
#ifndef WGT_TEXT_TOKENIZER_H
#define WGT_TEXT_TOKENIZER_H
#include <stddef.h>
#include <stdint.h>
#include "core/error.h"
#include "data/tokenizer.h"

#define TEXT_TOK_MAX_FILES 4  // the most files one kind keeps in a directory

// A tokenizer kind: a name, the files it keeps in a data or run directory, and its functions.
// `impl` is the kind's own state (what open returns). Functions marked optional may be NULL.
typedef struct text_tok_kind {
    const char *name;                            // as meta.json's "tokenizer_kind" names it
    const char *files[TEXT_TOK_MAX_FILES + 1];   // its files' standard names, NULL-terminated
    // Opens from paths[i], the file of files[i] (paths may be any names).
    wgt_status (*open)(void **impl, const char *const *paths);
    // Writes the files to paths[i] (atomically), so that open(paths) gives the same tokenizer.
    wgt_status (*save)(const void *impl, const char *const *paths);
    // optional: opens the installed copy when the name of the kind is given as a tokenizer
    // (`--tokenizer gpt2`); *source gets a malloc'd description of where it was found
    wgt_status (*open_installed)(void **impl, char **source);
    // optional: whether a file of another name, starting with these n bytes, is this kind's
    int (*sniff)(const uint8_t *head, size_t n);
    void (*free)(void *impl);
    int (*vocab_size)(const void *impl);  // includes the end-of-text token
    int (*eot)(const void *impl);         // the end-of-text id
    // Encodes any bytes into a malloc'd id array. wgtrain's and GPT-2's never emit special ids
    // for text; a Hugging Face tokenizer ("hf") matches its added tokens in the text, as
    // `tokenizers` does.
    wgt_status (*encode)(const void *impl, const uint8_t *bytes, size_t n, uint32_t **ids, size_t *n_ids);
    // Decodes into a malloc'd byte array; an id out of range is an error naming it and its position.
    wgt_status (*decode)(const void *impl, const uint32_t *ids, size_t n, uint8_t **bytes, size_t *n_bytes);
    // The bytes of one token (not NUL-terminated), or NULL for an id out of range.
    const uint8_t *(*token_bytes)(const void *impl, int id, size_t *len);
    // optional: 64-bit FNV-1a fingerprint; NULL hashes the kind's name and every id's bytes
    // (text_tokenizer_fingerprint)
    uint64_t (*fingerprint)(const void *impl);
} text_tok_kind;

// The registry (tokenizer_kinds.c): every kind, NULL-terminated; the first is the one
// `wgtrain prepare` trains.
extern const text_tok_kind *const text_tok_kinds[];
const text_tok_kind *text_tok_kind_find(const char *name);  // NULL if unknown
// "a", "b" and "c": the registered names, for messages, in buf (returned).
const char *text_tok_kind_names(char *buf, size_t n);

#define TEXT_TOK_BPE_NAME "wgtrain-bpe"
#define TEXT_TOK_GPT2_NAME "gpt2"
#define GPT2_DIR_ENV "WGTRAIN_GPT2_DIR"  // a directory with GPT-2's encoder.json and vocab.bpe

typedef struct text_tokenizer text_tokenizer;

// spec: a kind's name with an installed copy ("gpt2"), a data or run directory (its own
// tokenizer), or a tokenizer file (a kind's file by its standard name, with the kind's other
// files beside it, or a file a kind recognizes by its first bytes, e.g. a renamed tokenizer.bin).
wgt_status text_tokenizer_open(text_tokenizer **out, const char *spec);
wgt_status text_tokenizer_open_gpt2(text_tokenizer **out);
// A data or run directory's own tokenizer: what its meta.json names (data/data_meta.h), or
// else the files it holds. No tokenizer there: WGT_OK with *out = NULL.
wgt_status text_tokenizer_open_dir(text_tokenizer **out, const char *dir);
// The tokenizer a data directory's meta.json (already read: data/data_meta.h) describes.
struct data_meta;
wgt_status text_tokenizer_open_meta(text_tokenizer **out, const char *dir, const struct data_meta *m,
                                    const char *meta_path);
// Opens a kind from its files; `source` words messages (NULL: the first path).
wgt_status text_tokenizer_open_kind(text_tokenizer **out, const text_tok_kind *kind, const char *const *paths,
                                    const char *source);
// Wraps a kind's state (a tokenizer just trained); takes ownership of impl.
text_tokenizer *text_tokenizer_wrap(const text_tok_kind *kind, void *impl, const char *source);
// Takes ownership of wgtrain's BPE just trained.
text_tokenizer *text_tokenizer_from_bpe(tokenizer *tok);
void text_tokenizer_free(text_tokenizer *t);

const text_tok_kind *text_tokenizer_kind(const text_tokenizer *t);
const char *text_tokenizer_kind_name(const text_tokenizer *t);
const char *text_tokenizer_source(const text_tokenizer *t);
// The kind's own state (what its open returned), for code that knows the kind.
const void *text_tokenizer_impl(const text_tokenizer *t);  // where it was read from, for messages
int text_tokenizer_vocab_size(const text_tokenizer *t);     // includes end-of-text
int text_tokenizer_eot(const text_tokenizer *t);

// Encodes bytes into a malloc'd id array. The text "<|endoftext|>" is plain text unless
// allow_special, when each occurrence becomes the end-of-text id.
wgt_status text_tokenizer_encode(const text_tokenizer *t, const uint8_t *bytes, size_t n, int allow_special,
                                 uint32_t **ids, size_t *n_ids);
// Decodes into a malloc'd byte array; end-of-text decodes to "<|endoftext|>"; an id out of
// range is an error naming it and its position.
wgt_status text_tokenizer_decode(const text_tokenizer *t, const uint32_t *ids, size_t n, uint8_t **bytes,
                                 size_t *n_bytes);
const uint8_t *text_tokenizer_token_bytes(const text_tokenizer *t, int id, size_t *len);
// 64-bit FNV-1a fingerprint: equal fingerprints, the same tokenizer. The kind's own when it has
// one (wgtrain's BPE: of its file image); else of the kind's name (with its NUL) and, for every
// id, its byte length (uint32) and bytes — what decides an encoding whose merges go by id rank.
uint64_t text_tokenizer_fingerprint(const text_tokenizer *t);

// Writes the tokenizer's file(s) into dir under the kind's standard names and removes every
// other kind's, so dir holds one.
wgt_status text_tokenizer_save_dir(const text_tokenizer *t, const char *dir);
// Whether dir holds a file of any kind.
int text_tokenizer_dir_has(const char *dir);
// meta.json's members describing the tokenizer saved by text_tokenizer_save_dir, without
// braces or a trailing comma, for a line indented by two spaces (malloc'd; free() it):
// "tokenizer_kind", then "tokenizer" (one file) or "tokenizer_files" (several).
char *text_tokenizer_meta_json(const text_tokenizer *t);
#endif
