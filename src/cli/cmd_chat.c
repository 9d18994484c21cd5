// cmd_chat.c — `wgtrain chat`: a conversation with a chat model, from a run directory (one
// fine-tuned on chat data) or a Hugging Face model directory. Each turn renders the whole
// conversation with the tokenizer's chat template and add_generation_prompt (as transformers'
// apply_chat_template), keeps the key/value cache of the longest prefix it shares with what is
// cached, prefills the rest and streams the reply (cli_generate.h). On a terminal it reads lines
// with libedit (line editing and history; BSD-licensed, readline's API): Ctrl-C stops the reply
// being written, Ctrl-D (or an empty stdin) ends. Otherwise (a pipe, or --json) it reads a JSON
// array of messages on stdin and writes the reply to stdout.
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <editline/readline.h>
#include "cli/cli.h"
#include "cli/cli_generate.h"
#include "core/fileutil.h"
#include "core/json_strict.h"
#include "data/chat_template.h"
#include "data/hf_tokenizer_kind.h"

#define CHAT_MAX_STDIN (64u << 20)
#define CHAT_MAX_TEMPLATE_BYTES (16u << 20)

static void usage(void) {
    printf("usage: wgtrain chat --run RUN_DIR | --model HF_DIR [--system TEXT] [options]\n"
           "  --run RUN_DIR       a run (trained or fine-tuned on chat data) whose tokenizer has a chat template\n"
           "  --model HF_DIR      a Hugging Face model directory (config.json, model.safetensors, tokenizer.json,\n"
           "                      tokenizer_config.json with its chat_template)\n"
           "  --system TEXT       a system message first (unless the messages on stdin start with one)\n"
           "  --chat-template FILE  a Jinja2 chat template instead of tokenizer_config.json's\n"
           "  --max-context N     the tokens a conversation may hold (default: the model's maximum, at most 4096)\n"
           "  --json              read a JSON array of messages ([{\"role\": \"user\", \"content\": \"Hi\"}]) on stdin and\n"
           "                      write the reply to stdout (what happens anyway when stdin is not a terminal)\n"
           "  --device D          auto, cpu or webgpu (default auto); --adapter A picks a WebGPU adapter\n");
    printf(gen_usage_text, 1024L, 0.7, 0.9);
    printf("On a terminal: type a message and Enter; Ctrl-C stops the reply, Ctrl-D ends the conversation.\n");
}

static const char *const chat_flags[] = {"--run=", "--model=", "--system=", "--chat-template=", "--max-context=",
                                         "--device=", "--adapter=", GEN_FLAG_LIST, "--json", "--help", "-h", NULL};

static volatile sig_atomic_t interrupted;
static void on_sigint(int sig) {
    (void)sig;
    interrupted = 1;
}

typedef struct {
    gen_model g;
    const hf_tokenizer *hf;
    cJSON *cfg;           // tokenizer_config.json
    chat_template *tmpl;
    model_decoder *d;
    sampler sp;
    gen_opts o;
    int32_t stop_ids[2 * GEN_MAX_STOPS];
    int n_stop;
    gen_seq seq;          // the ids the decoder holds (a prefix), then what the last reply added
    float *logits;
} chat;

// The conversation's ids with the generation prompt.
static wgt_status chat_render(chat *c, const cJSON *messages, uint32_t **ids, size_t *n) {
    cJSON *ctx = cJSON_CreateObject();
    cJSON_AddItemReferenceToObject(ctx, "messages", (cJSON *)messages);
    cJSON_AddBoolToObject(ctx, "add_generation_prompt", 1);
    wgt_status st = c->cfg ? chat_template_add_special_tokens(c->cfg, ctx) : WGT_OK;
    chat_template_output r = {0};
    chat_template_opts opts = {.now = -1, .limits = NULL};
    if (st == WGT_OK) st = chat_template_render(c->tmpl, ctx, &opts, &r);
    if (st == WGT_OK) st = hf_tokenizer_encode(c->hf, (const uint8_t *)r.text, r.n, 0, ids, n);
    chat_template_output_free(&r);
    cJSON_Delete(ctx);
    return st;
}

// One reply to the conversation: reuses the cached prefix, prefills the rest, streams to out.
static wgt_status chat_reply(chat *c, const cJSON *messages, FILE *out, char **reply, const char **why) {
    uint32_t *ids = NULL;
    size_t n = 0;
    WGT_TRY(chat_render(c, messages, &ids, &n));
    const int cap = model_decoder_max_len(c->d);
    if (n == 0 || n >= (size_t)cap) {
        free(ids);
        return wgt_fail(WGT_ERR_ARG, "the conversation is %zu tokens, and the context holds %d; start a new one or raise "
                        "--max-context (up to the model's %d)", n, cap, model_cfg(c->g.m)->max_seq);
    }
    // the longest prefix of what the cache holds, at least one token left to prefill (its logits)
    size_t keep = 0, held = (size_t)model_decoder_len(c->d, 0);
    while (keep < held && keep + 1 < n && (uint32_t)c->seq.ids[keep] == ids[keep]) keep++;
    model_decoder_truncate(c->d, 0, (int)keep);
    c->seq.n = 0;
    for (size_t i = 0; i < n; i++) gen_seq_push(&c->seq, (int32_t)ids[i]);
    free(ids);
    WGT_TRY(model_decoder_prefill(c->d, 0, c->seq.ids + keep, (int)(n - keep), c->logits));
    return gen_run(c->d, &c->sp, c->g.tok, &c->o, c->stop_ids, c->n_stop, c->logits, &c->seq, out, 0, &interrupted,
                   reply, NULL, why);
}

static void add_message(cJSON *messages, const char *role, const char *content) {
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", role);
    cJSON_AddStringToObject(m, "content", content);
    cJSON_AddItemToArray(messages, m);
}

// --system: a system message first, unless the conversation has one
static void add_system(cJSON *messages, const char *system) {
    const cJSON *first = cJSON_GetArrayItem(messages, 0);
    const cJSON *role = first ? cJSON_GetObjectItemCaseSensitive(first, "role") : NULL;
    if (!system || (cJSON_IsString(role) && !strcmp(role->valuestring, "system"))) return;
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", "system");
    cJSON_AddStringToObject(m, "content", system);
    cJSON_InsertItemInArray(messages, 0, m);
}

// All of stdin (a pipe has no size to ask for), at most CHAT_MAX_STDIN bytes.
static wgt_status read_stdin(char **data, size_t *n) {
    size_t cap = 1 << 16, len = 0, k;
    char *b = wgt_malloc(cap + 1);
    while ((k = fread(b + len, 1, cap - len, stdin)) > 0) {
        len += k;
        if (len == cap && cap >= CHAT_MAX_STDIN) {
            free(b);
            return wgt_fail(WGT_ERR_ARG, "the messages on stdin exceed %u MiB", CHAT_MAX_STDIN >> 20);
        }
        if (len == cap) {
            char *nb = wgt_malloc(2 * cap + 1);
            memcpy(nb, b, len);
            free(b);
            b = nb;
            cap *= 2;
        }
    }
    if (ferror(stdin)) {
        free(b);
        return wgt_fail(WGT_ERR_IO, "error reading stdin: %s", strerror(errno));
    }
    *data = b;
    *n = len;
    return WGT_OK;
}

static wgt_status chat_json(chat *c, const char *system) {
    char *in = NULL;
    size_t n_in = 0;
    WGT_TRY(read_stdin(&in, &n_in));
    cJSON *messages = NULL;
    wgt_status st = json_parse_strict(&messages, in, n_in, 0, "the messages on stdin");
    free(in);
    WGT_TRY(st);
    if (!cJSON_IsArray(messages) || cJSON_GetArraySize(messages) == 0)
        st = wgt_fail(WGT_ERR_ARG, "chat reads a non-empty JSON array of messages on stdin, such as "
                      "[{\"role\": \"user\", \"content\": \"Hi\"}]");
    const cJSON *m;
    int k = 0;
    cJSON_ArrayForEach(m, messages) {
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(m, "role");
        if (st == WGT_OK && (!cJSON_IsObject(m) || !cJSON_IsString(r)))
            st = wgt_fail(WGT_ERR_ARG, "message #%d on stdin is not an object with a \"role\" string", k + 1);
        k++;
    }
    char *reply = NULL;
    const char *why = NULL;
    if (st == WGT_OK) {
        add_system(messages, system);
        st = chat_reply(c, messages, stdout, &reply, &why);
    }
    if (st == WGT_OK) putchar('\n');
    free(reply);
    cJSON_Delete(messages);
    return st;
}

static wgt_status chat_terminal(chat *c, const char *system) {
    cJSON *messages = cJSON_CreateArray();
    if (system) add_message(messages, "system", system);
    fprintf(stderr, "wgtrain chat: %s (%s). Ctrl-C stops a reply, Ctrl-D ends.\n", c->g.model_dir,
            model_cfg(c->g.m)->arch);
    wgt_status st = WGT_OK;
    for (;;) {
        interrupted = 0;
        char *line = readline("> ");
        if (!line && interrupted) {  // Ctrl-C at the prompt: a new prompt (libedit returns no line)
            fputc('\n', stdout);
            continue;
        }
        if (!line) break;  // Ctrl-D
        interrupted = 0;  // (a Ctrl-C before the line editor was reading: the line stands)
        if (!line[0]) {
            free(line);
            continue;
        }
        add_history(line);
        add_message(messages, "user", line);
        free(line);
        char *reply = NULL;
        const char *why = NULL;
        st = chat_reply(c, messages, stdout, &reply, &why);
        if (st != WGT_OK) {  // said, and the message dropped: the conversation goes on
            fprintf(stderr, "wgtrain chat: %s\n", wgt_last_error());
            cJSON_DeleteItemFromArray(messages, cJSON_GetArraySize(messages) - 1);
            st = WGT_OK;
            continue;
        }
        printf("%s\n", !strcmp(why, "interrupt") ? " [stopped]" : !strcmp(why, "length") ? " [max tokens]"
                                                        : !strcmp(why, "context") ? " [context full]" : "");
        fflush(stdout);
        add_message(messages, "assistant", reply);
        free(reply);
    }
    cJSON_Delete(messages);
    return st;
}

static wgt_status chat_main(int argc, char **argv) {
    WGT_TRY(cli_args_split(&argc, &argv, chat_flags));
    const char *run = NULL, *hf_dir = NULL, *system = NULL, *tfile = NULL, *device = "auto", *adapter = NULL;
    long max_context = 0;
    int json = 0;
    chat c;
    memset(&c, 0, sizeof c);
    gen_opts_default(&c.o, 0.7, 0.9, 1024);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        wgt_status st;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage();
            exit(0);
        }
        if (!strcmp(a, "--json")) {
            json = 1;
            continue;
        }
        if (!strcmp(a, "--ignore-eos") && gen_opts_parse(&c.o, a, NULL, &st)) continue;
        if (!cli_flag_known(a, chat_flags)) return cli_unknown_flag("chat", a, chat_flags);
        if (i + 1 >= argc) return wgt_fail(WGT_ERR_ARG, "option '%s' needs a value (see --help)", a);
        const char *v = argv[++i];
        if (gen_opts_parse(&c.o, a, v, &st)) {
            WGT_TRY(st);
            continue;
        }
        if (!strcmp(a, "--run")) run = v;
        else if (!strcmp(a, "--model")) hf_dir = v;
        else if (!strcmp(a, "--system")) system = v;
        else if (!strcmp(a, "--chat-template")) tfile = v;
        else if (!strcmp(a, "--max-context")) WGT_TRY(cli_parse_long(a, v, 2, 1 << 24, &max_context));
        else if (!strcmp(a, "--device")) device = v;
        else if (!strcmp(a, "--adapter")) adapter = v;
        else return cli_unknown_flag("chat", a, chat_flags);
    }
    if (strcmp(device, "auto") && strcmp(device, "cpu") && strcmp(device, "webgpu"))
        return wgt_fail(WGT_ERR_ARG, "unknown device '%s'; use --device auto, cpu or webgpu", device);
    if (!run && !hf_dir) return wgt_fail(WGT_ERR_ARG, "give the model: --run RUN_DIR or --model HF_DIR (see --help)");
    WGT_TRY(gen_model_open(&c.g, run, hf_dir, device, adapter, 1));
    wgt_status st = WGT_OK;
    const model_config *mc = model_cfg(c.g.m);
    if (strcmp(text_tokenizer_kind_name(c.g.tok), HF_KIND_NAME))
        st = wgt_fail(WGT_ERR_CONFIG, "%s: chat needs a Hugging Face tokenizer with a chat template (tokenizer.json and "
                      "tokenizer_config.json); this model's tokenizer is a %s one", c.g.model_dir,
                      text_tokenizer_kind_name(c.g.tok));
    char *ttext_file = NULL;
    size_t cn = 0, tn = 0;
    const char *ttext = NULL, *config = NULL;
    if (st == WGT_OK) {
        c.hf = hf_kind_tokenizer(text_tokenizer_impl(c.g.tok));
        config = hf_kind_config(text_tokenizer_impl(c.g.tok), &cn);
        if (config) st = json_parse_strict(&c.cfg, config, cn, 0, HF_CONFIG_FILE);
    }
    if (st == WGT_OK && tfile) {
        st = file_read_all(tfile, "chat template", "pass a Jinja2 template file", CHAT_MAX_TEMPLATE_BYTES, &ttext_file, &tn);
        ttext = ttext_file;
    } else if (st == WGT_OK && !c.cfg) {
        st = wgt_fail(WGT_ERR_CONFIG, "%s has no tokenizer_config.json, so no chat template; pass --chat-template FILE",
                      c.g.model_dir);
    } else if (st == WGT_OK) {
        st = chat_template_from_config(c.cfg, NULL, &ttext);
        if (st == WGT_OK) tn = strlen(ttext);
    }
    if (st == WGT_OK) st = chat_template_parse(ttext, tn, &c.tmpl);
    if (st == WGT_OK) st = gen_stop_ids(&c.o, c.g.tok, c.g.model_dir, c.stop_ids, &c.n_stop);
    const long ctx = max_context ? max_context : mc->max_seq < 4096 ? mc->max_seq : 4096;
    if (st == WGT_OK && ctx > mc->max_seq)
        st = wgt_fail(WGT_ERR_ARG, "--max-context %ld is above the model's maximum sequence length %d", ctx, mc->max_seq);
    if (st == WGT_OK) st = model_decoder_init(&c.d, c.g.m, 1, (int)ctx);
    if (st == WGT_OK) {
        c.logits = wgt_malloc((size_t)mc->vocab * sizeof *c.logits);
        gen_sampler_init(&c.sp, &c.o, mc->vocab);
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_sigint;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, NULL);  // no SA_RESTART: Ctrl-C at the prompt interrupts the read
        st = json || !isatty(STDIN_FILENO) ? chat_json(&c, system) : chat_terminal(&c, system);
        sampler_free(&c.sp);
    }
    free(c.logits);
    gen_seq_free(&c.seq);
    model_decoder_free(c.d);
    chat_template_free(c.tmpl);
    cJSON_Delete(c.cfg);
    free(ttext_file);
    gen_model_close(&c.g);
    return st;
}

int cmd_chat(int argc, char **argv) {
    wgt_status st = chat_main(argc, argv);
    return st == WGT_OK ? 0 : cli_fail("chat", st);
}
