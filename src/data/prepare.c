// prepare.c — corpus preparation (`wgtrain prepare`): gather input files, turn each into
// documents of plain text (converting the tagged Brown corpus), train the BPE tokenizer,
// tokenize, split train/val by document, write shards, tokenizer and meta.json.
// Everything is deterministic: the same inputs give byte-identical outputs.
#include "data/prepare.h"
#include "core/fileutil.h"
#include "core/runlock.h"
#include "data/shard.h"
#include "data/gpt2_bpe.h"
#include "data/text_tokenizer.h"
#include "data/tokenizer.h"
#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <stdlib.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "core/clock.h"

// Tokens per shard file, as llm.c's scripts use: big enough that a corpus has few files.
#define TOKENS_PER_SHARD 100000000u
// Bytes read from each file to decide whether it is Brown-tagged.
#define SNIFF_BYTES 65536

typedef struct {
    uint8_t *p;
    size_t n, cap;
} bytebuf;

static void bb_put(bytebuf *b, const void *data, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 256;
        b->p = realloc(b->p, b->cap);
        WGT_ASSERT(b->p, "out of host memory growing a buffer");
    }
    memcpy(b->p + b->n, data, n);
    b->n += n;
}
static void bb_puts(bytebuf *b, const char *s) { bb_put(b, s, strlen(s)); }
static void bb_printf(bytebuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bb_printf(bytebuf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    WGT_ASSERT(k >= 0 && (size_t)k < sizeof tmp, "bb_printf output too long");
    bb_put(b, tmp, (size_t)k);
}

typedef struct {
    char **v;
    size_t n, cap;
} strlist;

static void sl_add(strlist *l, const char *s) {
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 64;
        l->v = realloc(l->v, l->cap * sizeof *l->v);
        WGT_ASSERT(l->v, "out of host memory");
    }
    l->v[l->n++] = wgt_strdup(s);
}
static void sl_free(strlist *l) {
    for (size_t i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}
static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }


// ------------------------------------------------------------------ finding input files

// Adds the regular files under `dir`, depth first with names in byte order. Hidden entries
// (".git", ".cache", ...) are skipped, and so are symlinks to directories (they can loop).
static wgt_status walk_dir(const char *dir, strlist *out) {
    DIR *d = opendir(dir);
    if (!d) return wgt_fail(WGT_ERR_IO, "cannot read directory %s: %s", dir, strerror(errno));
    strlist names = {0};
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') sl_add(&names, e->d_name);
    closedir(d);
    if (names.n) qsort(names.v, names.n, sizeof *names.v, cmp_str);
    wgt_status st = WGT_OK;
    size_t dl = strlen(dir);
    for (size_t i = 0; i < names.n && st == WGT_OK; i++) {
        size_t len = dl + strlen(names.v[i]) + 2;
        char *full = wgt_malloc(len);
        snprintf(full, len, "%s%s%s", dir, (dl && dir[dl - 1] == '/') ? "" : "/", names.v[i]);
        struct stat sb;
        if (lstat(full, &sb) == 0) {
            if (S_ISDIR(sb.st_mode)) st = walk_dir(full, out);
            else if (S_ISREG(sb.st_mode) || (S_ISLNK(sb.st_mode) && stat(full, &sb) == 0 && S_ISREG(sb.st_mode)))
                sl_add(out, full);
        }
        free(full);
    }
    sl_free(&names);
    return st;
}

static wgt_status expand_path(const char *path, strlist *out) {
    struct stat sb;
    if (stat(path, &sb) != 0)
        return wgt_fail(WGT_ERR_IO, "cannot read input %s: %s", path, strerror(errno));
    if (S_ISDIR(sb.st_mode)) return walk_dir(path, out);
    if (!S_ISREG(sb.st_mode))
        return wgt_fail(WGT_ERR_ARG, "input %s is neither a regular file nor a directory; pass text files, "
                        "directories or glob patterns", path);
    sl_add(out, path);
    return WGT_OK;
}

// One --input: an existing path is taken literally; otherwise a pattern with * ? [ is globbed.
static wgt_status expand_input(const char *in, strlist *out) {
    struct stat sb;
    if (stat(in, &sb) == 0) return expand_path(in, out);
    if (!strpbrk(in, "*?[")) {
        return wgt_fail(WGT_ERR_IO, "input %s not found (%s); pass existing text files, directories or glob "
                        "patterns such as 'texts/*.txt'", in, strerror(errno));
    }
    glob_t g;
    int r = glob(in, 0, NULL, &g);
    if (r == GLOB_NOMATCH)
        return wgt_fail(WGT_ERR_IO, "the pattern %s matches no file; check the path (patterns are expanded by "
                        "wgtrain, so quote them in the shell)", in);
    if (r != 0) return wgt_fail(WGT_ERR_IO, "cannot expand the pattern %s (glob error %d)", in, r);
    wgt_status st = WGT_OK;
    for (size_t i = 0; i < g.gl_pathc && st == WGT_OK; i++) st = expand_path(g.gl_pathv[i], out);
    globfree(&g);
    return st;
}

static wgt_status read_file(const char *path, size_t max, uint8_t **data, size_t *n) {
    *data = NULL;
    *n = 0;
    FILE *f;
    WGT_TRY(file_fopen_read(path, "input", NULL, &f, NULL));
    bytebuf b = {0};
    uint8_t chunk[1 << 16];
    size_t k;
    while (b.n < max && (k = fread(chunk, 1, sizeof chunk < max - b.n ? sizeof chunk : max - b.n, f)) > 0)
        bb_put(&b, chunk, k);
    int err = ferror(f);
    fclose(f);
    if (err) {
        free(b.p);
        return wgt_fail(WGT_ERR_IO, "error reading input %s; check the file and its permissions", path);
    }
    *data = b.p;
    *n = b.n;
    return WGT_OK;
}

// ------------------------------------------------------------------ binary files

// Bytes of a file's start examined for a NUL byte.
#define BINARY_NUL_BYTES 8192

// A file that is not text: a NUL byte in its first 8 KiB, or (a head of at least 64 bytes)
// more than a third of its bytes outside valid UTF-8 sequences. Latin-1 text, a few
// accented letters in a line, stays text; images, archives and compiled files do not.
static int looks_binary(const uint8_t *p, size_t n) {
    if (n == 0) return 0;  // an empty file (p may be NULL) is empty text
    if (memchr(p, 0, n < BINARY_NUL_BYTES ? n : BINARY_NUL_BYTES)) return 1;
    size_t bad = 0;
    for (size_t i = 0; i < n;) {
        uint8_t c = p[i];
        size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        if (len == 0 || (len == 2 && c < 0xC2) || (len == 4 && c > 0xF4)) {
            bad++, i++;
            continue;
        }
        if (i + len > n) break;  // a sequence cut by the end of the head
        size_t k = 1;
        while (k < len && (p[i + k] & 0xC0) == 0x80) k++;
        if (k < len) bad++, i++;
        else i += len;
    }
    return n >= 64 && bad * 3 > n;
}

// ------------------------------------------------------------------ the Brown corpus

// A Brown tag: lowercase letters and the punctuation its tag set uses (np$, nn-tl, ppss+bem,
// `` '' -- *).
static int brown_tag_char(uint8_t c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || (c && strchr("$*+-.,:;'`()", c));
}

// Brown (form C) text is whitespace-separated word/TAG tokens. A file is taken as Brown when
// at least 90% of its (first SNIFF_BYTES of) tokens look like that.
static int looks_brown(const uint8_t *p, size_t n) {
    size_t tokens = 0, tagged = 0;
    for (size_t i = 0; i < n;) {
        while (i < n && (p[i] == ' ' || (p[i] >= 9 && p[i] <= 13))) i++;
        size_t s = i, slash = (size_t)-1;
        while (i < n && !(p[i] == ' ' || (p[i] >= 9 && p[i] <= 13))) {
            if (p[i] == '/') slash = i;
            i++;
        }
        if (i == s) break;
        tokens++;
        if (slash == (size_t)-1 || slash == s || slash + 1 == i || i - slash > 25) continue;
        size_t k = slash + 1;
        while (k < i && brown_tag_char(p[k])) k++;
        if (k == i) tagged++;
    }
    return tokens >= 8 && tagged * 10 >= tokens * 9;
}

// Converts Brown text to plain text: drops the tags, turns `` and '' into ", joins words with
// spaces except before closing punctuation and after opening quotes/brackets. A line starting
// with a tab starts a paragraph; a headline (every tag ends in -hl) is a paragraph of its own.
// Paragraphs are separated by a blank line.
static void brown_to_text(const uint8_t *p, size_t n, bytebuf *out) {
    size_t start = out->n;
    int para_open = 0, prev_heading = 0, glue = 1;
    for (size_t i = 0; i < n;) {
        size_t e = i;
        while (e < n && p[e] != '\n') e++;
        int new_para = p[i] == '\t';
        size_t words = 0, heads = 0;
        for (size_t q = i; q < e;) {  // pass 1: is the line a headline?
            while (q < e && (p[q] == ' ' || p[q] == '\t' || p[q] == '\r')) q++;
            size_t s = q;
            while (q < e && !(p[q] == ' ' || p[q] == '\t' || p[q] == '\r')) q++;
            if (q == s) break;
            words++;
            if (q - s > 3 && !memcmp(p + q - 3, "-hl", 3)) heads++;
        }
        if (words) {
            int heading = heads == words;
            if (para_open && (new_para || heading || prev_heading)) {
                bb_puts(out, "\n\n");
                glue = 1;
            }
            for (size_t q = i; q < e;) {  // pass 2: the words
                while (q < e && (p[q] == ' ' || p[q] == '\t' || p[q] == '\r')) q++;
                size_t s = q, slash = (size_t)-1;
                while (q < e && !(p[q] == ' ' || p[q] == '\t' || p[q] == '\r')) {
                    if (p[q] == '/') slash = q;
                    q++;
                }
                if (q == s) break;
                size_t wl = (slash != (size_t)-1 && slash > s) ? slash - s : q - s;
                const char *w = (const char *)p + s;
                int open = 0, close = 0;
                if (wl == 2 && !memcmp(w, "``", 2)) {
                    w = "\"";
                    wl = 1;
                    open = 1;
                } else if (wl == 2 && !memcmp(w, "''", 2)) {
                    w = "\"";
                    wl = 1;
                    close = 1;
                } else if (wl == 1 && strchr("([{", w[0])) {
                    open = 1;
                } else if (wl >= 1 && strchr(".,;:?!)]}'", w[0])) {
                    // closing punctuation: a run of it (".", "?!", "...") or a lone quote
                    close = 1;
                    for (size_t k = 0; k < wl; k++)
                        if (!strchr(".,;:?!)]}'", w[k])) close = 0;
                }
                // "Jr./np ./." ends a sentence on an abbreviation: keep one period.
                if (wl == 1 && w[0] == '.' && out->n > start && out->p[out->n - 1] == '.') continue;
                if (!glue && !close) bb_puts(out, " ");
                bb_put(out, w, wl);
                glue = open;
            }
            para_open = 1;
            prev_heading = heading;
        }
        i = e + 1;
    }
    if (out->n > start) bb_puts(out, "\n");
}

// ------------------------------------------------------------------ the corpus

typedef struct {
    size_t off, len;
} doc_span;

typedef struct {
    bytebuf text;    // documents, each followed by one '\n' (not part of the document)
    doc_span *docs;
    size_t n_docs, cap_docs;
} corpus;

static void corpus_add_doc(corpus *c, const uint8_t *p, size_t n) {
    if (n == 0) return;
    if (c->n_docs == c->cap_docs) {
        c->cap_docs = c->cap_docs ? c->cap_docs * 2 : 256;
        c->docs = realloc(c->docs, c->cap_docs * sizeof *c->docs);
        WGT_ASSERT(c->docs, "out of host memory");
    }
    c->docs[c->n_docs++] = (doc_span){c->text.n, n};
    bb_put(&c->text, p, n);
    // The separator keeps the tokenizer's training from joining the end of one document to
    // the start of the next into a chunk that never occurs.
    bb_puts(&c->text, "\n");
}

static int is_ws(uint8_t c) { return c == ' ' || (c >= 9 && c <= 13); }

// A plain-text file is one document, or several when it separates them with <|endoftext|>;
// then each piece is trimmed of surrounding whitespace and empty pieces are dropped.
static size_t add_text_docs(corpus *c, const uint8_t *p, size_t n) {
    const char *mark = TOKENIZER_EOT_TEXT;
    size_t ml = strlen(mark), before = c->n_docs;
    if (n == 0) return 0;
    const uint8_t *hit = memmem(p, n, mark, ml);
    if (!hit) {
        corpus_add_doc(c, p, n);
        return c->n_docs - before;
    }
    size_t s = 0;
    for (;;) {
        size_t e = hit ? (size_t)(hit - p) : n;
        size_t a = s, b = e;
        while (a < b && is_ws(p[a])) a++;
        while (b > a && is_ws(p[b - 1])) b--;
        corpus_add_doc(c, p + a, b - a);
        if (!hit) break;
        s = e + ml;
        hit = memmem(p + s, n - s, mark, ml);
    }
    return c->n_docs - before;
}

typedef struct {
    char *path;
    int brown;
    size_t bytes;  // bytes read from the file
    size_t docs;
} source;

// ------------------------------------------------------------------ output helpers

static char *join_path(const char *dir, const char *name) {
    size_t len = strlen(dir) + strlen(name) + 2;
    char *s = wgt_malloc(len);
    snprintf(s, len, "%s/%s", dir, name);
    return s;
}

static void json_str(bytebuf *b, const char *s) {
    bb_puts(b, "\"");
    for (; *s; s++) {
        uint8_t c = (uint8_t)*s;
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            bb_put(b, e, 2);
        } else if (c < 0x20) {
            bb_printf(b, "\\u%04x", c);
        } else {
            bb_put(b, &c, 1);
        }
    }
    bb_puts(b, "\"");
}

// Writes toks as shards prefix_000.bin, prefix_001.bin, ... and removes higher-numbered shards
// left by an earlier, larger run. Appends each shard's meta.json entry to `list` and counts
// them in *n_files.
static wgt_status write_shards(const char *dir, const char *prefix, const uint32_t *toks, size_t n, int vocab,
                               bytebuf *list, size_t *n_files_out) {
    size_t n_files = n == 0 ? 1 : (n + TOKENS_PER_SHARD - 1) / TOKENS_PER_SHARD;
    char name[64];
    for (size_t i = 0; i < n_files; i++) {
        snprintf(name, sizeof name, "%s_%03zu.bin", prefix, i);
        char *path = join_path(dir, name);
        size_t off = i * (size_t)TOKENS_PER_SHARD, k = n - off < TOKENS_PER_SHARD ? n - off : TOKENS_PER_SHARD;
        wgt_status st = shard_write(path, toks + off, k, vocab);
        free(path);
        WGT_TRY(st);
        bb_puts(list, i ? ",\n    {\"file\": " : "\n    {\"file\": ");
        json_str(list, name);
        bb_printf(list, ", \"tokens\": %zu, \"crc32\": \"%08x\"}", k, shard_file_crc(toks + off, k, vocab));
    }
    bb_puts(list, "\n  ]");
    for (size_t i = n_files; i < 1000; i++) {
        snprintf(name, sizeof name, "%s_%03zu.bin", prefix, i);
        char *path = join_path(dir, name);
        unlink(path);  // ENOENT is the usual case
        free(path);
    }
    *n_files_out = n_files;
    return WGT_OK;
}

// ------------------------------------------------------------------ prepare

// "prepare: skipped N WHAT: a, b, c and K more"
static void print_skipped(const char *what, const strlist *l) {
    if (!l->n) return;
    printf("prepare: skipped %zu %s:", l->n, what);
    for (size_t i = 0; i < l->n && i < 5; i++) printf("%s %s", i ? "," : "", l->v[i]);
    if (l->n > 5) printf(" and %zu more", l->n - 5);
    printf("\n");
}

// ------------------------------------------------------------------ the output directory

// Whether `name` is a file that prepare writes (or a temporary of one, or the lock).
static int prepare_owns(const char *name) {
    static const char *const mine[] = {PREPARE_META_FILE, PREPARE_TOKENIZER_FILE, GPT2_ENCODER_FILE, GPT2_MERGES_FILE,
                                       "tokenizer.json", "tokenizer_config.json", RUN_LOCK_FILE, NULL};
    for (int i = 0; mine[i]; i++)
        if (!strcmp(name, mine[i])) return 1;
    size_t n = strlen(name);
    int bin = n > 4 && !strcmp(name + n - 4, ".bin");
    if (bin && (!strncmp(name, "train_", 6) || !strncmp(name, "val_", 4))) return 1;  // shards
    return strstr(name, ".tmp.") != NULL;  // an atomic write a killed prepare left behind
}

// --out must be new, empty or an earlier prepare's directory: one that holds anything else (a
// training run's checkpoint, the texts themselves) is refused, so that prepare never replaces a
// run's tokenizer.bin or mixes its shards into somebody else's files.
static wgt_status check_out_dir(const char *out_dir) {
    DIR *d = opendir(out_dir);
    if (!d) return WGT_OK;  // missing (made later) or not a directory (dir_make says so)
    wgt_status st = WGT_OK;
    for (struct dirent *e; (e = readdir(d)) && st == WGT_OK;) {
        const char *n = e->d_name;
        if (!strcmp(n, ".") || !strcmp(n, "..") || prepare_owns(n)) continue;
        if (!strcmp(n, "ckpt.bin") || !strcmp(n, "metrics.jsonl"))
            st = wgt_fail(WGT_ERR_ARG, "--out %s holds a training run (%s): prepare would replace the run's tokenizer; "
                          "choose a new or empty --out directory for the data", out_dir, n);
        else
            st = wgt_fail(WGT_ERR_ARG, "--out %s holds %s, which `wgtrain prepare` did not make: prepare writes only into "
                          "a new or empty directory or one it prepared before; choose another --out", out_dir, n);
    }
    closedir(d);
    return st;
}

// An input file inside the output directory would be read back as text (or be overwritten).
static wgt_status check_input_outside(const char *file, const char *out_real) {
    char real[PATH_MAX];
    if (!out_real || !realpath(file, real)) return WGT_OK;
    size_t k = strlen(out_real);
    if (!strncmp(real, out_real, k) && (real[k] == '/' || (k == 1 && out_real[0] == '/')))
        return wgt_fail(WGT_ERR_ARG, "the input %s is inside --out %s, where prepare writes its files; put the data "
                        "directory elsewhere", file, out_real);
    return WGT_OK;
}

wgt_status prepare_corpus(const char **inputs, int n_inputs, const char *out_dir, int vocab_size,
                          double val_fraction, int verbose) {
    return prepare_corpus_with(inputs, n_inputs, out_dir, PREPARE_TOKENIZER_TRAIN, vocab_size, val_fraction, verbose);
}

static wgt_status prepare_run(const char **inputs, int n_inputs, const char *out_dir, prepare_tokenizer kind,
                              const char *spec, int vocab_size, double val_fraction, int verbose);

wgt_status prepare_corpus_with(const char **inputs, int n_inputs, const char *out_dir, prepare_tokenizer kind,
                               int vocab_size, double val_fraction, int verbose) {
    return prepare_run(inputs, n_inputs, out_dir, kind, NULL, vocab_size, val_fraction, verbose);
}

wgt_status prepare_corpus_spec(const char **inputs, int n_inputs, const char *out_dir, const char *spec,
                               double val_fraction, int verbose) {
    if (!spec || !*spec) return wgt_fail(WGT_ERR_ARG, "no tokenizer given; pass --tokenizer with a tokenizer file or directory");
    return prepare_run(inputs, n_inputs, out_dir, PREPARE_TOKENIZER_TRAIN, spec, 0, val_fraction, verbose);
}

static wgt_status prepare_run(const char **inputs, int n_inputs, const char *out_dir, prepare_tokenizer kind,
                              const char *spec, int vocab_size, double val_fraction, int verbose) {
    if (spec) vocab_size = TOKENIZER_MIN_VOCAB;  // unused: the tokenizer's own
    if (kind == PREPARE_TOKENIZER_GPT2) vocab_size = TOKENIZER_MIN_VOCAB;  // unused: GPT-2's is fixed
    if (vocab_size < TOKENIZER_MIN_VOCAB || vocab_size > TOKENIZER_MAX_VOCAB)
        return wgt_fail(WGT_ERR_ARG, "--vocab %d is out of range: it must be at least %d (256 byte tokens + the "
                        "end-of-text token) and at most %d (the limit of its tokenizer file format); try 4096 or 16384",
                        vocab_size, TOKENIZER_MIN_VOCAB, TOKENIZER_MAX_VOCAB);
    if (!(val_fraction > 0.0 && val_fraction < 1.0))
        return wgt_fail(WGT_ERR_ARG, "validation fraction %g is out of range: it must be above 0 and below 1; "
                        "0.1 is usual", val_fraction);
    if (n_inputs <= 0 || !inputs) return wgt_fail(WGT_ERR_ARG, "no input given; pass --input with a file, "
                                                  "directory or glob pattern");
    if (!out_dir || !*out_dir) return wgt_fail(WGT_ERR_ARG, "no output directory given; pass --out DATA_DIR");

    wgt_status st = WGT_OK;
    corpus c = {0};
    source *srcs = NULL;
    size_t n_srcs = 0, cap_srcs = 0;
    text_tokenizer *tt = NULL;
    uint32_t **doc_ids = NULL;
    size_t *doc_n = NULL;
    uint32_t *train = NULL, *val = NULL;
    strlist seen = {0};
    // files already read, by device and inode: a symlink (or hard link) to one counts once
    struct file_id { dev_t dev; ino_t ino; } *ids = NULL;
    size_t n_ids = 0, cap_ids = 0;
    strlist skipped_binary = {0}, skipped_dup = {0};
    char *path = NULL;
    bytebuf meta = {0}, conv = {0}, train_list = {0}, val_list = {0};
    size_t n_train_files = 0, n_val_files = 0;
    run_lock lock = {0};
    double t0 = wgt_now_s();

    st = check_out_dir(out_dir);
    if (st != WGT_OK) goto done;
    char out_real_buf[PATH_MAX];
    const char *out_real = st == WGT_OK && realpath(out_dir, out_real_buf) ? out_real_buf : NULL;
    // 1. Gather documents, input by input.
    for (int ii = 0; ii < n_inputs && st == WGT_OK; ii++) {
        strlist files = {0};
        st = expand_input(inputs[ii], &files);
        for (size_t i = 0; i < files.n && st == WGT_OK; i++) st = check_input_outside(files.v[i], out_real);
        if (st == WGT_OK && files.n == 0)
            st = wgt_fail(WGT_ERR_IO, "input %s contains no files (hidden files are skipped)", inputs[ii]);
        // A directory or pattern with mostly Brown files is the Brown corpus: its other files
        // are the corpus' own documentation (README, CONTENTS, cats.txt...), not text to learn.
        int *brown = files.n ? wgt_calloc(files.n, sizeof *brown) : NULL;
        int *binary = files.n ? wgt_calloc(files.n, sizeof *binary) : NULL;
        size_t n_brown = 0, n_text = 0;
        for (size_t i = 0; i < files.n && st == WGT_OK; i++) {
            uint8_t *head;
            size_t hn;
            st = read_file(files.v[i], SNIFF_BYTES, &head, &hn);
            if (st != WGT_OK) break;
            binary[i] = looks_binary(head, hn);
            brown[i] = !binary[i] && looks_brown(head, hn);
            n_brown += (size_t)brown[i];
            n_text += (size_t)!binary[i];
            free(head);
        }
        int brown_set = n_text > 1 && n_brown * 2 >= n_text;
        size_t seen_before = seen.n;  // `seen` is sorted up to here
        for (size_t i = 0; i < files.n && st == WGT_OK; i++) {
            if (brown_set && !brown[i]) {
                if (verbose) printf("prepare: skipping %s (not Brown-tagged, beside Brown corpus files)\n", files.v[i]);
                continue;
            }
            // The same file named by two inputs (say, a directory and a pattern) counts once.
            // Within one input names are unique, so only earlier inputs' names need checking.
            if (seen_before && bsearch(&files.v[i], seen.v, seen_before, sizeof *seen.v, cmp_str)) continue;
            sl_add(&seen, files.v[i]);
            if (binary[i]) {
                sl_add(&skipped_binary, files.v[i]);
                continue;
            }
            // another name (a symlink, a hard link) of a file already read is a duplicate
            struct stat fsb;
            if (stat(files.v[i], &fsb) == 0) {
                int dup = 0;
                for (size_t k = 0; k < n_ids && !dup; k++) dup = ids[k].dev == fsb.st_dev && ids[k].ino == fsb.st_ino;
                if (dup) {
                    sl_add(&skipped_dup, files.v[i]);
                    continue;
                }
                if (n_ids == cap_ids) {
                    cap_ids = cap_ids ? cap_ids * 2 : 64;
                    ids = realloc(ids, cap_ids * sizeof *ids);
                    WGT_ASSERT(ids, "out of host memory");
                }
                ids[n_ids++] = (struct file_id){fsb.st_dev, fsb.st_ino};
            }
            uint8_t *data;
            size_t n;
            st = read_file(files.v[i], SIZE_MAX, &data, &n);
            if (st != WGT_OK) break;
            size_t nd;
            if (brown[i]) {
                conv.n = 0;
                brown_to_text(data, n, &conv);
                size_t before = c.n_docs;
                corpus_add_doc(&c, conv.p, conv.n);
                nd = c.n_docs - before;
            } else {
                nd = add_text_docs(&c, data, n);
            }
            free(data);
            if (n_srcs == cap_srcs) {
                cap_srcs = cap_srcs ? cap_srcs * 2 : 64;
                srcs = realloc(srcs, cap_srcs * sizeof *srcs);
                WGT_ASSERT(srcs, "out of host memory");
            }
            srcs[n_srcs++] = (source){wgt_strdup(files.v[i]), brown[i], n, nd};
        }
        free(brown);
        free(binary);
        sl_free(&files);
        if (st != WGT_OK) goto done;
        if (seen.n) qsort(seen.v, seen.n, sizeof *seen.v, cmp_str);
    }
    if (verbose) {
        print_skipped("binary file(s) (a NUL byte in the first 8 KiB, or mostly invalid UTF-8)", &skipped_binary);
        print_skipped("duplicate(s) (a symlink or hard link to a file already read)", &skipped_dup);
    }
    if (c.n_docs == 0) {
        st = wgt_fail(WGT_ERR_ARG, "the corpus is empty: the %zu input file(s) hold no text%s; pass files with text "
                      "in them", n_srcs, skipped_binary.n ? " (the binary ones were skipped)" : "");
        goto done;
    }
    size_t text_bytes = 0, n_brown_src = 0;
    for (size_t i = 0; i < c.n_docs; i++) text_bytes += c.docs[i].len;
    for (size_t i = 0; i < n_srcs; i++) n_brown_src += (size_t)srcs[i].brown;
    if (verbose)
        printf("prepare: %zu files (%zu Brown-tagged), %zu documents, %.2f MB of text (%.1f s)\n", n_srcs,
               n_brown_src, c.n_docs, text_bytes / 1e6, wgt_now_s() - t0);

    // 2. Tokenizer.
    st = dir_make(out_dir);
    if (st == WGT_OK) st = run_lock_acquire(&lock, out_dir, "prepare");
    if (st != WGT_OK) goto done;
    path = join_path(out_dir, PREPARE_META_FILE);
    // a stale meta.json must not describe the files we are about to replace; without it the
    // directory is refused until this prepare completes
    st = file_check_replaceable(path);
    if (st == WGT_OK && unlink(path) != 0 && errno != ENOENT)
        st = wgt_fail(WGT_ERR_IO, "cannot remove the old %s: %s", path, strerror(errno));
    free(path);
    path = NULL;
    if (st != WGT_OK) goto done;
    double t1 = wgt_now_s();
    if (spec) {
        st = text_tokenizer_open(&tt, spec);
    } else if (kind == PREPARE_TOKENIZER_GPT2) {
        st = text_tokenizer_open_gpt2(&tt);
    } else {
        tokenizer *tok = NULL;
        st = tokenizer_train(&tok, c.text.p, c.text.n, vocab_size);
        if (st == WGT_OK) tt = text_tokenizer_from_bpe(tok);
    }
    if (st != WGT_OK) goto done;
    int vocab = text_tokenizer_vocab_size(tt);
    if (text_tokenizer_eot(tt) < 0 || text_tokenizer_eot(tt) >= vocab) {
        st = wgt_fail(WGT_ERR_FORMAT, "the %s tokenizer %s names no end-of-text token to separate documents with; give it "
                      "a tokenizer_config.json with an eos_token", text_tokenizer_kind_name(tt), text_tokenizer_source(tt));
        goto done;
    }
    uint32_t eot = (uint32_t)text_tokenizer_eot(tt);
    if (spec) {
        vocab_size = vocab;  // for meta.json's requested_vocab_size
        if (verbose) printf("prepare: the %s tokenizer (%d tokens, end-of-text %u) from %s\n", text_tokenizer_kind_name(tt),
                            vocab, eot, text_tokenizer_source(tt));
    } else if (kind == PREPARE_TOKENIZER_GPT2) {
        vocab_size = vocab;  // for meta.json's requested_vocab_size
        if (verbose) printf("prepare: GPT-2's tokenizer (%d tokens) from %s\n", vocab, text_tokenizer_source(tt));
    } else if (verbose) {
        printf("prepare: tokenizer of %d tokens (%d merges) trained in %.2f s\n", vocab, vocab - TOKENIZER_MIN_VOCAB,
               wgt_now_s() - t1);
        if (vocab < vocab_size)
            printf("prepare: note: the corpus supports only %d of the %d tokens asked for (no pair left that occurs "
                   "twice)\n", vocab, vocab_size);
    }
    st = text_tokenizer_save_dir(tt, out_dir);  // tokenizer.bin, or GPT-2's encoder.json + vocab.bpe
    if (st != WGT_OK) goto done;

    // 3. Tokenize each document (in parallel: the encoder is read-only and keeps its own cache).
    double t2 = wgt_now_s();
    doc_ids = wgt_calloc(c.n_docs, sizeof *doc_ids);
    doc_n = wgt_calloc(c.n_docs, sizeof *doc_n);
    long nd_l = (long)c.n_docs, failed = nd_l;
#pragma omp parallel for schedule(dynamic, 4)
    for (long d = 0; d < nd_l; d++)
        if (text_tokenizer_encode(tt, c.text.p + c.docs[d].off, c.docs[d].len, 0, &doc_ids[d], &doc_n[d]) != WGT_OK) {
#pragma omp critical
            if (d < failed) failed = d;
        }
    if (failed < nd_l) {  // again on this thread, for the message (error messages are per thread)
        uint32_t *ids;
        size_t k;
        st = text_tokenizer_encode(tt, c.text.p + c.docs[failed].off, c.docs[failed].len, 0, &ids, &k);
        if (st == WGT_OK) free(ids), st = wgt_fail(WGT_ERR_ARG, "tokenizing document %ld failed", failed + 1);
        goto done;
    }

    // 4. Split. Every document is preceded by the end-of-text token (as in llm.c's shards), so
    //    each shard starts with one and a model learns where documents begin.
    size_t n_train = 0, n_val = 0, val_docs, train_docs;
    int by_tokens = c.n_docs == 1;
    if (by_tokens) {
        size_t n = doc_n[0];
        if (n < 2) {
            st = wgt_fail(WGT_ERR_ARG, "the corpus is too small: one document of %zu token(s) cannot be split into "
                          "train and validation data; pass more text", n);
            goto done;
        }
        size_t nv = (size_t)llround(val_fraction * (double)n);
        if (nv < 1) nv = 1;
        if (nv > n - 1) nv = n - 1;
        train = wgt_malloc((n - nv + 1) * sizeof *train);
        val = wgt_malloc((nv + 1) * sizeof *val);
        train[n_train++] = eot;
        memcpy(train + n_train, doc_ids[0], (n - nv) * sizeof *train);
        n_train += n - nv;
        val[n_val++] = eot;
        memcpy(val + n_val, doc_ids[0] + (n - nv), nv * sizeof *val);
        n_val += nv;
        train_docs = val_docs = 1;
    } else {
        val_docs = (size_t)llround(val_fraction * (double)c.n_docs);
        if (val_docs < 1) val_docs = 1;
        if (val_docs > c.n_docs - 1) val_docs = c.n_docs - 1;
        train_docs = c.n_docs - val_docs;
        size_t tt = 0, tv = 0;
        for (size_t d = 0; d < c.n_docs; d++) *(d < train_docs ? &tt : &tv) += doc_n[d] + 1;
        train = wgt_malloc(tt * sizeof *train);
        val = wgt_malloc(tv * sizeof *val);
        for (size_t d = 0; d < c.n_docs; d++) {
            uint32_t *dst = d < train_docs ? train : val;
            size_t *k = d < train_docs ? &n_train : &n_val;
            dst[(*k)++] = eot;
            memcpy(dst + *k, doc_ids[d], doc_n[d] * sizeof *dst);
            *k += doc_n[d];
        }
    }
    double entropy = shard_unigram_entropy(train, n_train, vocab);
    if (verbose)
        printf("prepare: tokenized in %.2f s: %zu train tokens (%zu documents), %zu val tokens (%zu %s), %.2f bytes "
               "per token\n", wgt_now_s() - t2, n_train, train_docs, n_val, by_tokens ? (size_t)1 : val_docs,
               by_tokens ? "document's tail" : "documents", (double)text_bytes / (double)(n_train + n_val));

    // 5. Files: shards and tokenizer first, meta.json last, so its presence marks a complete directory.
    st = write_shards(out_dir, "train", train, n_train, vocab, &train_list, &n_train_files);
    if (st == WGT_OK) st = write_shards(out_dir, "val", val, n_val, vocab, &val_list, &n_val_files);
    if (st != WGT_OK) goto done;

    bb_printf(&meta, "{\n  \"format\": \"wgtrain-data\",\n  \"version\": %d,\n  ", PREPARE_META_VERSION);
    char *tok_json = text_tokenizer_meta_json(tt);
    bb_puts(&meta, tok_json);
    free(tok_json);
    bb_printf(&meta, ",\n  \"tokenizer_fnv1a64\": \"%016" PRIx64 "\"", text_tokenizer_fingerprint(tt));
    bb_printf(&meta, ",\n  \"vocab_size\": %d,\n  \"requested_vocab_size\": %d,\n  \"eot_token\": %d,\n", vocab,
              vocab_size, (int)eot);
    bb_puts(&meta, "  \"train_shards\": [");
    bb_put(&meta, train_list.p, train_list.n);
    bb_puts(&meta, ",\n  \"val_shards\": [");
    bb_put(&meta, val_list.p, val_list.n);
    bb_printf(&meta, ",\n  \"train_tokens\": %zu,\n  \"val_tokens\": %zu,\n", n_train, n_val);
    bb_printf(&meta, "  \"documents\": %zu,\n  \"train_documents\": %zu,\n  \"val_documents\": %zu,\n", c.n_docs,
              train_docs, val_docs);
    bb_printf(&meta, "  \"split\": \"%s\",\n  \"val_fraction\": %.17g,\n", by_tokens ? "tokens" : "documents",
              val_fraction);
    bb_printf(&meta, "  \"text_bytes\": %zu,\n  \"unigram_entropy_nats\": %.6f,\n  \"sources\": [", text_bytes,
              entropy);
    for (size_t i = 0; i < n_srcs; i++) {
        bb_puts(&meta, i ? ",\n    {\"path\": " : "\n    {\"path\": ");
        json_str(&meta, srcs[i].path);
        bb_printf(&meta, ", \"format\": \"%s\", \"bytes\": %zu, \"documents\": %zu}", srcs[i].brown ? "brown" : "text",
                  srcs[i].bytes, srcs[i].docs);
    }
    bb_puts(&meta, n_srcs ? "\n  ]\n}\n" : "]\n}\n");
    path = join_path(out_dir, PREPARE_META_FILE);
    st = atomic_write_file(path, meta.p, meta.n);
    if (st != WGT_OK) goto done;
    char tok_files[256] = "";
    for (int i = 0; text_tokenizer_kind(tt)->files[i]; i++)
        snprintf(tok_files + strlen(tok_files), sizeof tok_files - strlen(tok_files), "%s%s", i ? " + " : "",
                 text_tokenizer_kind(tt)->files[i]);
    if (verbose)
        printf("prepare: wrote %s: %s, %zu train shard(s), %zu val shard(s), %s\n"
               "prepare: unigram entropy of the train tokens: %.4f nats/token (%.4f bits): a model that ignores "
               "context reaches this loss\nprepare: done in %.1f s\n",
               out_dir, tok_files,
               n_train_files, n_val_files, PREPARE_META_FILE, entropy,
               entropy / log(2.0), wgt_now_s() - t0);

done:
    free(ids);
    sl_free(&skipped_binary);
    sl_free(&skipped_dup);
    free(path);
    free(meta.p);
    free(conv.p);
    free(train);
    free(val);
    if (doc_ids)
        for (size_t d = 0; d < c.n_docs; d++) free(doc_ids[d]);
    free(doc_ids);
    free(doc_n);
    text_tokenizer_free(tt);
    for (size_t i = 0; i < n_srcs; i++) free(srcs[i].path);
    free(srcs);
    free(c.text.p);
    free(c.docs);
    free(train_list.p);
    free(val_list.p);
    sl_free(&seen);
    run_lock_release(&lock);
    return st;
}
