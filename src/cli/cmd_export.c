// cmd_export.c — `wgtrain export`: a run's model as a Hugging Face model directory that
// transformers' from_pretrained loads (config.json, model.safetensors in the family's Hugging
// Face names and layout) and, for runs on GPT-2's tokenizer, the tokenizer files AutoTokenizer
// reads (vocab.json, merges.txt, tokenizer_config.json, special_tokens_map.json). The files are
// written into a stage directory beside HF_DIR and switched in together (core/dir_switch.h), so
// HF_DIR always holds one export whole; files there that an export does not write are kept, and
// those of an export's names that an earlier export did not write are refused unless --force.
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cli/cli.h"
#include "core/dir_switch.h"
#include "cli/cmd_export_lora.h"
#include "core/fileutil.h"
#include "core/json_strict.h"
#include "data/gpt2_bpe.h"
#include "data/text_tokenizer.h"
#include "data/hf_tokenizer.h"
#include "data/hf_tokenizer_kind.h"
#include "model/lora.h"
#include "train/trainer.h"

#define MARKER "wgtrain-export.json"  // says that the directory's files are an export's
static const char *const OUR_FILES[] = {MARKER, "config.json", "model.safetensors", "model.safetensors.index.json",
                                        "vocab.json", "merges.txt", "tokenizer.json", "tokenizer_config.json",
                                        "special_tokens_map.json", NULL};

static void usage(void) {
    printf("usage: wgtrain export --run RUN_DIR --out HF_DIR [--force] [--max-shard-size SIZE]\n"
           "Writes the run's model (its last checkpoint) as a Hugging Face model directory: config.json and\n"
           "model.safetensors (float32, the names and layout of the family's transformers class), and for a run\n"
           "on GPT-2's tokenizer vocab.json, merges.txt, tokenizer_config.json and special_tokens_map.json (for one on\n"
           "a Hugging Face tokenizer.json: tokenizer.json and tokenizer_config.json as the data had them, and\n"
           "special_tokens_map.json), so that\n"
           "transformers' from_pretrained(HF_DIR) and AutoTokenizer.from_pretrained(HF_DIR) load it. HF_DIR is\n"
           "created if needed; files there that an earlier export did not write are refused unless --force.\n"
           "`wgtrain train --init HF_DIR` starts a run from it again.\n"
           "--max-shard-size SIZE: weights above SIZE bytes (a number, or with KB, MB, GB = 10^3.., KiB, MiB, GiB =\n"
           "2^10..; default 5GB, as save_pretrained) are written as shards model-00001-of-0000N.safetensors ... with\n"
           "model.safetensors.index.json.\n"
           "A LoRA run (train --lora) exports its adapters as a PEFT adapter directory (adapter_config.json,\n"
           "adapter_model.safetensors) that PeftModel.from_pretrained(base, HF_DIR) loads on the run's --init model;\n"
           "--merge writes the merged model (base + scale B A) as above instead.\n");
}

static int exists(const char *p) {
    struct stat sb;
    return lstat(p, &sb) == 0;
}

static wgt_status join(char *dst, size_t n, const char *dir, const char *name) {
    if ((size_t)snprintf(dst, n, "%s/%s", dir, name) >= n) return wgt_fail(WGT_ERR_ARG, "path too long: %s/%s", dir, name);
    return WGT_OK;
}

static wgt_status write_text(const char *dir, const char *name, const char *text) {
    char p[TRAIN_PATH_MAX + 64];
    WGT_TRY(join(p, sizeof p, dir, name));
    return atomic_write_file(p, text, strlen(text));
}

// Copies file src to dir/name (atomically).
static wgt_status copy_file(const char *src, const char *dir, const char *name) {
    char *data;
    size_t n;
    WGT_TRY(file_read_all(src, "tokenizer file", NULL, (size_t)64 << 20, &data, &n));
    char p[TRAIN_PATH_MAX + 64];
    wgt_status st = join(p, sizeof p, dir, name);
    if (st == WGT_OK) st = atomic_write_file(p, data, n);
    free(data);
    return st;
}

// The run's tokenizer: the one in the run directory, else the data's, whose fingerprint is the
// checkpoint's (any, for a run that recorded none); *tok = NULL when there is none. *dir gets the
// directory it was found in.
static void run_tokenizer_find(const checkpoint *ck, const char *run, text_tokenizer **tok, char *dir, size_t n) {
    *tok = NULL;
    dir[0] = 0;
    const char *cands[2] = {run, ck->cfg.data_dir};
    for (int i = 0; i < 2; i++) {
        if (!cands[i][0]) continue;
        text_tokenizer *t = NULL;
        if (text_tokenizer_open_dir(&t, cands[i]) != WGT_OK || !t) continue;
        char h[17];
        snprintf(h, sizeof h, "%016" PRIx64, text_tokenizer_fingerprint(t));
        if (ck->cfg.tokenizer_hash[0] && strcmp(h, ck->cfg.tokenizer_hash)) {
            text_tokenizer_free(t);
            continue;
        }
        *tok = t;
        snprintf(dir, n, "%s", cands[i]);
        return;
    }
}

// A Hugging Face tokenizer as the data had it: tokenizer.json and tokenizer_config.json byte for
// byte (a minimal config naming the end-of-text token when the data had none), and
// special_tokens_map.json with the config's special tokens.
static wgt_status export_hf_tokenizer(const text_tokenizer *t, const char *out, int max_seq) {
    char p[TRAIN_PATH_MAX + 64];
    WGT_TRY(join(p, sizeof p, out, HF_TOKENIZER_FILE));
    const char *paths[1] = {p};
    WGT_TRY(text_tokenizer_kind(t)->save(text_tokenizer_impl(t), paths));
    size_t cn = 0;
    const char *config = hf_kind_config(text_tokenizer_impl(t), &cn);
    cJSON *map = cJSON_CreateObject();
    wgt_status st = WGT_OK;
    if (config) {
        cJSON *c = NULL;
        st = json_parse_strict(&c, config, cn, 0, "the tokenizer's tokenizer_config.json");
        static const char *const keys[] = {"bos_token", "eos_token", "unk_token", "pad_token"};
        for (size_t i = 0; c && i < sizeof keys / sizeof keys[0]; i++) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(c, keys[i]);
            if (v && (cJSON_IsString(v) || cJSON_IsObject(v))) cJSON_AddItemToObject(map, keys[i], cJSON_Duplicate(v, 1));
        }
        cJSON_Delete(c);
    } else {
        // no tokenizer_config.json: name the end-of-text token, the one thing training relied on
        int eot = text_tokenizer_eot(t);
        size_t len = 0;
        const uint8_t *b = eot >= 0 ? text_tokenizer_token_bytes(t, eot, &len) : NULL;
        char *eos = b ? wgt_malloc(len + 1) : NULL;
        if (eos) {
            memcpy(eos, b, len);
            eos[len] = 0;
            cJSON_AddStringToObject(map, "eos_token", eos);
        }
        cJSON *c = cJSON_CreateObject();
        cJSON_AddStringToObject(c, "tokenizer_class", "PreTrainedTokenizerFast");
        cJSON_AddNumberToObject(c, "model_max_length", max_seq);
        if (eos) cJSON_AddStringToObject(c, "eos_token", eos);
        char *text = cJSON_Print(c);
        cJSON_Delete(c);
        free(eos);
        st = write_text(out, "tokenizer_config.json", text);
        free(text);
    }
    char *text = cJSON_Print(map);
    cJSON_Delete(map);
    if (st == WGT_OK) st = write_text(out, "special_tokens_map.json", text);
    free(text);
    return st;
}

static int is_shard_name(const char *name, int *of);

// The names an export writes (the new export replaces them; any other entry of HF_DIR is kept).
static int export_owns(const char *name) {
    int of;
    for (int i = 0; OUR_FILES[i]; i++)
        if (!strcmp(name, OUR_FILES[i])) return 1;
    return is_shard_name(name, &of) || strstr(name, ".tmp.") != NULL;
}

static const char *const export_flags[] = {"--run=", "--out=", "--max-shard-size=", "--force", "--merge", "--help", "-h",
                                           NULL};

// save_pretrained's max_shard_size: an integer with an optional unit (KB, MB, GB decimal; KiB,
// MiB, GiB binary; B), 1 byte to 1 PB.
static wgt_status parse_shard_size(const char *v, uint64_t *out) {
    static const struct { const char *unit; uint64_t mul; } units[] = {
        {"", 1}, {"B", 1}, {"KB", 1000}, {"MB", 1000000}, {"GB", 1000000000}, {"KiB", 1024}, {"MiB", 1 << 20},
        {"GiB", 1 << 30}};
    char *end;
    errno = 0;
    unsigned long long n = (v[0] >= '0' && v[0] <= '9') ? strtoull(v, &end, 10) : 0;
    if (v[0] >= '0' && v[0] <= '9' && !errno && n >= 1 && n <= 1000000000000000ull)
        for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
            if (!strcmp(end, units[i].unit) && n <= 1000000000000000ull / units[i].mul) {
                *out = n * units[i].mul;
                return WGT_OK;
            }
    return wgt_fail(WGT_ERR_ARG, "--max-shard-size '%s' is not a size between 1 byte and 1 PB (e.g. 5GB, 500MB, "
                    "2GiB, 100000)", v);
}

// save_pretrained's shard names, model-00001-of-00003.safetensors: whether `name` is one, and its N.
static int is_shard_name(const char *name, int *of) {
    int k, n, len = 0;
    return sscanf(name, "model-%5d-of-%5d.safetensors%n", &k, &n, &len) == 2 && len == (int)strlen(name) &&
           strlen(name) == strlen("model-00001-of-00001.safetensors") && (*of = n) > 0;
}

// Files of save_pretrained's shard pattern in dir: the first one (for a refusal) when `first`, and
// with remove, those of another shard count than keep_of are deleted (an earlier export's).
static wgt_status scan_shards(const char *dir, char *first, size_t n, int remove, int keep_of) {
    if (first) first[0] = 0;
    DIR *d = opendir(dir);
    if (!d) return WGT_OK;  // nothing there yet
    wgt_status st = WGT_OK;
    for (struct dirent *e; (e = readdir(d)) && st == WGT_OK;) {
        int of;
        if (!is_shard_name(e->d_name, &of)) continue;
        if (first && !first[0]) snprintf(first, n, "%s", e->d_name);
        if (remove && of != keep_of) {
            char p[TRAIN_PATH_MAX + 64];
            st = join(p, sizeof p, dir, e->d_name);
            if (st == WGT_OK && unlink(p) != 0 && errno != ENOENT)
                st = wgt_fail(WGT_ERR_IO, "cannot remove the old shard %s: %s", p, strerror(errno));
        }
    }
    closedir(d);
    return st;
}

static wgt_status export_main(int argc, char **argv) {
    const char *run = NULL, *out = NULL;
    int force = 0, merge = 0, n_shards = 0;
    text_tokenizer *tok = NULL;
    uint64_t shard_bytes = MODEL_SHARD_BYTES_DEFAULT;
    WGT_TRY(cli_args_split(&argc, &argv, export_flags));
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage();
            exit(0);
        }
        if (!strcmp(a, "--force") || !strcmp(a, "--merge")) {
            *(a[2] == 'f' ? &force : &merge) = 1;
            continue;
        }
        if (!cli_flag_known(a, export_flags)) return cli_unknown_flag("export", a, export_flags);
        if (i + 1 >= argc) return wgt_fail(WGT_ERR_ARG, "option '%s' needs a value (see --help)", a);
        const char *v = argv[++i];
        if (!strcmp(a, "--run")) run = v;
        else if (!strcmp(a, "--max-shard-size")) WGT_TRY(parse_shard_size(v, &shard_bytes));
        else out = v;
    }
    if (!run || !out) return wgt_fail(WGT_ERR_ARG, "--run RUN_DIR and --out HF_DIR are required (see --help)");
    checkpoint ck;
    memset(&ck, 0, sizeof ck);
    WGT_TRY(run_checkpoint_read(&ck, run));
    wgt_status st = WGT_OK;
    if (merge && !ck.cfg.lora_r) st = wgt_fail(WGT_ERR_ARG, "--merge is for a LoRA run; %s trained every weight", run);
    if (st == WGT_OK && ck.cfg.lora_r && !merge) {  // a LoRA run without --merge: its adapters, as PEFT writes them
        st = export_lora_adapter(&ck, run, out, force);
        checkpoint_free(&ck);
        return st;
    }
    char p[TRAIN_PATH_MAX + 64], tokdir[TRAIN_PATH_MAX];
    // HF_DIR: a directory (made if missing) whose files we may replace
    struct stat sb;
    if (stat(out, &sb) == 0 && !S_ISDIR(sb.st_mode))
        st = wgt_fail(WGT_ERR_ARG, "--out %s exists and is not a directory", out);
    if (st == WGT_OK) st = join(p, sizeof p, out, MARKER);
    if (st == WGT_OK && !force && !exists(p)) {
        for (int i = 1; OUR_FILES[i] && st == WGT_OK; i++) {
            char q[TRAIN_PATH_MAX + 64];
            st = join(q, sizeof q, out, OUR_FILES[i]);
            if (st == WGT_OK && exists(q))
                st = wgt_fail(WGT_ERR_ARG, "%s already holds %s, which `wgtrain export` did not write; pass --force to "
                              "replace it, or choose another --out", out, OUR_FILES[i]);
        }
        char shard[256];
        if (st == WGT_OK) st = scan_shards(out, shard, sizeof shard, 0, 0);
        if (st == WGT_OK && shard[0])
            st = wgt_fail(WGT_ERR_ARG, "%s already holds %s, which `wgtrain export` did not write; pass --force to "
                          "replace it, or choose another --out", out, shard);
    }
    if (st == WGT_OK) run_tokenizer_find(&ck, run, &tok, tokdir, sizeof tokdir);
    const char *tok_kind = tok ? text_tokenizer_kind_name(tok) : "";
    int gpt2 = !strcmp(tok_kind, TEXT_TOK_GPT2_NAME), hf = !strcmp(tok_kind, HF_KIND_NAME);
    // every file goes into the stage; HF_DIR changes only when all of them are there
    dir_switch sw;
    memset(&sw, 0, sizeof sw);
    int staged = 0;
    if (st == WGT_OK) st = dir_switch_begin(&sw, out, export_owns);
    staged = st == WGT_OK;
    const char *final_out = out;
    out = sw.stage;
    if (st == WGT_OK) {
        char real[TRAIN_PATH_MAX];
        char *esc = NULL;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "format", "wgtrain-export");
        cJSON_AddStringToObject(o, "run", realpath(run, real) ? real : run);
        cJSON_AddNumberToObject(o, "step", (double)ck.pr.step);
        cJSON_AddStringToObject(o, "arch", ck.cfg.model.arch);
        if (ck.cfg.init[0]) cJSON_AddStringToObject(o, "init", ck.cfg.init);
        esc = cJSON_Print(o);
        cJSON_Delete(o);
        st = write_text(out, MARKER, esc);
        free(esc);
    }
    if (st == WGT_OK) {
        char *hf = model_config_to_hf_json(&ck.cfg.model);
        st = write_text(out, "config.json", hf);
        free(hf);
    }
    wgt_backend *be = NULL;
    wgt_model *m = NULL;
    if (st == WGT_OK) st = cli_backend_open(&be, "cpu", NULL, 0);
    if (st == WGT_OK) st = run_model_open(&m, be, &ck, 1, 1, run, MODEL_PREC_F32);
    if (st == WGT_OK && merge) st = model_lora_merge(m);  // base + s B A
    if (st == WGT_OK) st = model_export_safetensors(m, out, shard_bytes, &n_shards);
    model_free(m);
    if (be) be->free(be);
    // (the stage starts empty: nothing of an earlier export, whose weights or tokenizer files
    // would contradict these, reaches HF_DIR)
    if (st == WGT_OK && hf) st = export_hf_tokenizer(tok, out, ck.cfg.model.max_seq);
    if (st == WGT_OK && gpt2) {
        char src[TRAIN_PATH_MAX + 64];
        st = join(src, sizeof src, tokdir, GPT2_ENCODER_FILE);
        if (st == WGT_OK) st = copy_file(src, out, "vocab.json");
        if (st == WGT_OK) st = join(src, sizeof src, tokdir, GPT2_MERGES_FILE);
        if (st == WGT_OK) st = copy_file(src, out, "merges.txt");
        char tc[512];
        snprintf(tc, sizeof tc,
                 "{\n  \"tokenizer_class\": \"GPT2Tokenizer\",\n  \"model_max_length\": %d,\n"
                 "  \"bos_token\": \"<|endoftext|>\",\n  \"eos_token\": \"<|endoftext|>\",\n"
                 "  \"unk_token\": \"<|endoftext|>\",\n  \"add_prefix_space\": false,\n  \"add_bos_token\": false,\n"
                 "  \"errors\": \"replace\"\n}\n", ck.cfg.model.max_seq);
        if (st == WGT_OK) st = write_text(out, "tokenizer_config.json", tc);
        if (st == WGT_OK)
            st = write_text(out, "special_tokens_map.json", "{\n  \"bos_token\": \"<|endoftext|>\",\n  \"eos_token\": "
                            "\"<|endoftext|>\",\n  \"unk_token\": \"<|endoftext|>\"\n}\n");
    }
    if (st == WGT_OK) st = dir_switch_commit(&sw);
    else if (staged) dir_switch_abort(&sw);
    out = final_out;
    if (st == WGT_OK) {
        const model_config *c = &ck.cfg.model;
        char wfiles[96];
        if (n_shards > 1) snprintf(wfiles, sizeof wfiles, "%d shards and model.safetensors.index.json", n_shards);
        else snprintf(wfiles, sizeof wfiles, "model.safetensors");
        printf("export: %s (step %llu): %s, %d layers, d_model %d, vocabulary %d -> %s (config.json, %s%s)\n", run,
               (unsigned long long)ck.pr.step, c->arch, c->n_layer, c->d_model, c->vocab, out, wfiles,
               gpt2 ? ", GPT-2 tokenizer files" : hf ? ", tokenizer.json, tokenizer_config.json, special_tokens_map.json" : "");
        if (!gpt2 && !hf)
            printf("export: %s, so there are no tokenizer files\n",
                   tok ? "the run's tokenizer is wgtrain's own BPE, which transformers cannot read"
                       : "the run's data has no tokenizer (or it was not found)");
    }
    text_tokenizer_free(tok);
    checkpoint_free(&ck);
    return st;
}

int cmd_export(int argc, char **argv) {
    wgt_status st = export_main(argc, argv);
    return st == WGT_OK ? 0 : cli_fail("export", st);
}
