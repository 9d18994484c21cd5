// trainer.c — `wgtrain train`'s loop: data windows -> forward/backward over K micro-batches
// -> AdamW with clipping -> metrics, validation, plot, checkpoints. Every random choice
// depends only on state stored in the checkpoint (the data RNG; the initialisation only at
// step 0), which is what makes a resumed run repeat the uninterrupted one bit for bit on the
// deterministic CPU backend.
#include "train/trainer.h"
#include <errno.h>
#include <glob.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "core/fileutil.h"
#include "backend/dropout.h"
#include "core/runlock.h"
#include "data/text_tokenizer.h"
#include "train/hf_init.h"
#include "train/lora_run.h"
#include "train/mem_plan.h"
#include "train/metrics.h"
#include "train/plot.h"
#include "train/rng.h"
#include "train/train_dist.h"
#include "core/clock.h"

// Updates skipped one after the other (non-finite loss) before training gives up.
#define MAX_SKIPS_IN_A_ROW 20

// Independent random streams drawn from the one --seed.
enum { STREAM_INIT = 1, STREAM_DATA = 2 };  // (lora_run.c repeats STREAM_INIT)

struct trainer {
    train_config cfg;
    trainer_opts o;
    dataset *ds;
    checkpoint ck;       // the resumed checkpoint (state freed once uploaded)
    int resumed;
    ckpt_progress pr;
    metrics_history hist;
    double entropy;
    long last_ckpt_step;
    int scale_changed;   // --resume with another loss scale setting: it starts afresh
    char resume_changes[1024];  // --resume: the settings changed, as a JSON object ("" when none)
    run_lock lock;       // RUN_DIR is ours from trainer_init to trainer_free
    char init_weights[TRAIN_PATH_MAX];  // --init: the safetensors file the new run starts from
    char init_adapter[TRAIN_PATH_MAX];  // --init naming a PEFT adapter: its directory ("" otherwise)
};


wgt_status run_path(char *dst, size_t n, const char *run_dir, const char *name) {
    if ((size_t)snprintf(dst, n, "%s/%s", run_dir, name) >= n)
        return wgt_fail(WGT_ERR_ARG, "path too long: %s/%s", run_dir, name);
    return WGT_OK;
}

static int path_exists(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0;
}

wgt_status run_checkpoint_read(checkpoint *ck, const char *run_dir) {
    char p[TRAIN_PATH_MAX];
    WGT_TRY(run_path(p, sizeof p, run_dir, RUN_CKPT_FILE));
    if (!path_exists(p)) {
        if (!path_exists(run_dir))
            return wgt_fail(WGT_ERR_IO, "run directory %s not found; train one with `wgtrain train --data DATA_DIR --out %s`",
                            run_dir, run_dir);
        return wgt_fail(WGT_ERR_IO, "%s has no checkpoint (%s): the run has not reached its first checkpoint yet, or this "
                        "is not a run directory", run_dir, RUN_CKPT_FILE);
    }
    return checkpoint_read(ck, p);
}

static wgt_status run_model_open_as(wgt_model **out, wgt_backend *be, const checkpoint *ck, int B, int T,
                                    const char *run_dir, model_precision prec, int inference) {
    *out = NULL;
    wgt_model *m;
    model_lora_opts lora;
    lora_run_opts(&ck->cfg, &lora);
    model_opts mo = {prec, &lora, train_config_recompute(&ck->cfg), inference};
    WGT_TRY(model_init_opts(&m, be, &ck->cfg.model, B, T, &mo));
    char p[TRAIN_PATH_MAX];
    wgt_status st = run_path(p, sizeof p, run_dir, RUN_CKPT_FILE);
    if (st == WGT_OK && model_lora_on(m)) st = lora_run_base(m, &ck->cfg);  // the frozen base, checked
    if (st == WGT_OK) st = checkpoint_check_model(ck, &ck->cfg, model_state_elems(m), p);
    if (st == WGT_OK) st = model_state_upload(m, ck->params, ck->m, ck->v);
    if (st != WGT_OK) {
        model_free(m);
        return st;
    }
    // a run started from broken weights (--init from a NaN- or Inf-filled file) computes NaN:
    // sample and eval would print nothing useful with no other sign of why
    size_t bad = 0, n = model_state_elems(m);
    for (size_t i = 0; i < n; i++) bad += !isfinite(ck->params[i]);
    if (bad)
        fprintf(stderr, "warning: %s: %zu of the model's %zu weights are not finite (NaN or infinity); its outputs mean "
                "nothing (was the run started with --init from broken weights?)\n", p, bad, n);
    *out = m;
    return WGT_OK;
}

wgt_status run_model_open(wgt_model **out, wgt_backend *be, const checkpoint *ck, int B, int T, const char *run_dir,
                          model_precision prec) {
    return run_model_open_as(out, be, ck, B, T, run_dir, prec, 0);
}
wgt_status run_model_open_inference(wgt_model **out, wgt_backend *be, const checkpoint *ck, int B, int T,
                                    const char *run_dir, model_precision prec) {
    return run_model_open_as(out, be, ck, B, T, run_dir, prec, 1);
}

wgt_status train_evaluate(wgt_model *m, const dataset *ds, int B, int T, long max_batches, double *loss, size_t *targets) {
    return train_evaluate_progress(m, ds, B, T, max_batches, loss, targets, NULL, NULL);
}

size_t train_eval_batches(const dataset *ds, int B, int T, long max_batches) {
    size_t windows = dataset_val_windows(ds, T), all = (windows + (size_t)B - 1) / (size_t)B;
    return max_batches > 0 && (size_t)max_batches < all ? (size_t)max_batches : all;
}

wgt_status train_evaluate_progress(wgt_model *m, const dataset *ds, int B, int T, long max_batches, double *loss,
                                   size_t *targets, train_eval_progress_fn progress, void *ctx) {
    size_t windows = dataset_val_windows(ds, T), all = (windows + (size_t)B - 1) / (size_t)B, batches = all;
    if (max_batches > 0 && (size_t)max_batches < batches) batches = (size_t)max_batches;
    int32_t *inp = wgt_malloc((size_t)B * T * 4), *tgt = wgt_malloc((size_t)B * T * 4);
    uint32_t *doc = wgt_malloc((size_t)B * T * 4);
    const int packed = dataset_packed(ds);
    double sum = 0;
    size_t count = 0;
    wgt_status st = WGT_OK;
    model_loss_opts plain = {0.0f, 0.0f, 0.0f, 0, 0};
    for (size_t b = 0; b < batches && st == WGT_OK; b++) {
        // a subset is spread evenly over the validation set: the first batches alone would all
        // come from its first documents
        size_t valid;
        st = dataset_val_batch(ds, b * all / batches, B, T, inp, tgt, doc, &valid);
        if (st != WGT_OK) break;
        if (!valid) continue;
        st = model_set_doc_start(m, packed ? doc : NULL);  // packed examples: isolated, positions restart
        if (st == WGT_OK) st = model_forward(m, inp, tgt, plain, 1.0f);
        double s = 0;
        if (st == WGT_OK) st = model_loss_sum(m, &s);
        sum += s;
        count += valid;
        if (progress && st == WGT_OK) progress(ctx, b + 1, batches, count);
    }
    free(inp);
    free(tgt);
    free(doc);
    WGT_TRY(st);
    if (!count) return wgt_fail(WGT_ERR_CONFIG, "the validation data has no target to score; prepare more text");
    *loss = sum / (double)count;
    if (targets) *targets = count;
    return WGT_OK;
}

// ------------------------------------------------------------------ init

static wgt_status write_text(const char *path, const char *text) {
    atomic_file af;
    WGT_TRY(atomic_file_open(&af, path));
    atomic_file_write(&af, text, strlen(text));
    return atomic_file_commit(&af);
}

// Removes temporary files that a killed run left behind (atomic writes not yet renamed).
static void remove_stale_temps(const char *run_dir) {
    const char *names[] = {RUN_CKPT_FILE, RUN_CONFIG_FILE, RUN_METRICS_FILE, RUN_PLOT_FILE, RUN_MODEL_FILE, RUN_TOKENIZER_FILE};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char pat[TRAIN_PATH_MAX + 64];
        snprintf(pat, sizeof pat, "%s/%s.tmp.*", run_dir, names[i]);
        glob_t g;
        if (glob(pat, 0, NULL, &g) != 0) continue;
        for (size_t k = 0; k < g.gl_pathc; k++) unlink(g.gl_pathv[k]);
        globfree(&g);
    }
}

// --init from a directory that holds a tokenizer (a Hugging Face model's tokenizer.json): data
// prepared with another tokenizer is refused, naming both, since its ids would mean other text to
// the model. A model without tokenizer files, or data without a tokenizer, is left to the
// vocabulary check.
static wgt_status init_check_tokenizer(trainer *t, const char *init, const char *data_dir) {
    const text_tokenizer *dt = dataset_tokenizer(t->ds);
    if (!dt) return WGT_OK;
    char dir[TRAIN_PATH_MAX];
    struct stat sb;
    snprintf(dir, sizeof dir, "%s", init);
    if (stat(dir, &sb) == 0 && !S_ISDIR(sb.st_mode)) {
        char *slash = strrchr(dir, '/');
        if (slash) *slash = 0;
        else snprintf(dir, sizeof dir, ".");
    }
    if (!text_tokenizer_dir_has(dir)) return WGT_OK;
    text_tokenizer *mt;
    wgt_status st = text_tokenizer_open(&mt, dir);
    if (st != WGT_OK) {
        char *why = wgt_strdup(wgt_last_error());
        st = wgt_fail(st, "the tokenizer beside the model of --init %s cannot be read (%s), so the data in %s cannot be "
                      "checked against it", init, why, data_dir);
        free(why);
        return st;
    }
    uint64_t fm = text_tokenizer_fingerprint(mt), fd = text_tokenizer_fingerprint(dt);
    int vm = text_tokenizer_vocab_size(mt), vd = text_tokenizer_vocab_size(dt);
    if (fm != fd)
        st = wgt_fail(WGT_ERR_CONFIG, "the data in %s was prepared with the %s tokenizer %s (%d tokens, fingerprint %016"
                      PRIx64 ") but the model of --init %s comes with the %s tokenizer %s (%d tokens, fingerprint %016" PRIx64
                      "): its ids would mean other text to the model; prepare the data with `wgtrain prepare --tokenizer "
                      "%s`", data_dir, text_tokenizer_kind_name(dt), text_tokenizer_source(dt), vd, fd, init,
                      text_tokenizer_kind_name(mt), text_tokenizer_source(mt), vm, fm, dir);
    text_tokenizer_free(mt);
    return st;
}

// --init: the model config of the Hugging Face model (flags that contradict it refused), its
// weights file, and a --seq within its positions.
static wgt_status init_from_hf(trainer *t, const train_config *flags, const train_flags *given) {
    train_config *c = &t->cfg;
    model_config mc;
    WGT_TRY(lora_run_init_adapter(c, t->init_adapter, sizeof t->init_adapter));  // (c->init: its base)
    WGT_TRY(hf_init_resolve(c->init, train_config_flag_given(given, "--arch") ? flags->model.arch : NULL,
                            train_config_flag_given(given, "--heads") ? flags->model.n_head : 0, &mc, t->init_weights,
                            sizeof t->init_weights));
    WGT_TRY(train_config_check_init(flags, given, &mc, c->init));
    // the tensors against the config from the file's header, before the model's buffers exist
    WGT_TRY(model_check_safetensors(&mc, t->init_weights));
    c->model = mc;
    if (t->init_adapter[0]) WGT_TRY(lora_run_adapter_settings(c, given, t->init_adapter));
    if (c->seq > mc.max_seq) {
        if (train_config_flag_given(given, "--seq"))
            return wgt_fail(WGT_ERR_CONFIG, "--seq %d is above the %d positions of the model of --init %s; use --seq %d "
                            "or less", c->seq, mc.max_seq, c->init, mc.max_seq);
        printf("train: --seq %d (the preset's) is above the model's %d positions: using --seq %d\n", c->seq, mc.max_seq,
               mc.max_seq);
        c->seq = mc.max_seq;
    }
    char real[TRAIN_PATH_MAX];
    if (realpath(c->init, real) && strlen(real) < sizeof c->init) snprintf(c->init, sizeof c->init, "%s", real);
    return WGT_OK;
}

static wgt_status init_new(trainer *t, const train_config *flags, const train_flags *given) {
    train_config *c = &t->cfg;
    // the preset first (flags->preset is empty unless --preset was given), then every flag on top
    WGT_TRY(train_config_start(c, flags, given));
    if (!c->model.max_seq) c->model.max_seq = c->seq;  // max_seq = --seq unless --max-seq
    if (!c->data_dir[0]) return wgt_fail(WGT_ERR_ARG, "no data directory; pass --data DATA_DIR (see `wgtrain prepare`)");
    char ckp[TRAIN_PATH_MAX];
    WGT_TRY(run_path(ckp, sizeof ckp, t->o.run_dir, RUN_CKPT_FILE));
    if (path_exists(ckp))
        return wgt_fail(WGT_ERR_ARG, "%s already holds a run (%s); pass --resume to continue it, or choose another --out",
                        t->o.run_dir, RUN_CKPT_FILE);
    if (c->init[0]) WGT_TRY(init_from_hf(t, flags, given));
    WGT_TRY(dataset_open(&t->ds, c->data_dir));
    if (c->init[0]) WGT_TRY(init_check_tokenizer(t, c->init, c->data_dir));
    snprintf(c->tokenizer_hash, sizeof c->tokenizer_hash, "%s", dataset_tokenizer_hash(t->ds));
    int dv = dataset_vocab(t->ds);
    if (c->init[0] && dv && dv != c->model.vocab)
        return wgt_fail(WGT_ERR_CONFIG, "the data in %s has a %d-token vocabulary but the model of --init has vocab_size "
                        "%d: the data must be tokenized with the model's tokenizer%s", c->data_dir, dv, c->model.vocab,
                        c->model.vocab == 50257 ? " (prepare it with `wgtrain prepare --tokenizer gpt2`)" : "");
    if (dv && c->model.vocab && c->model.vocab != dv)
        return wgt_fail(WGT_ERR_CONFIG, "--vocab %d differs from the data's tokenizer (%d tokens); drop --vocab, which is only "
                        "for data without a tokenizer", c->model.vocab, dv);
    if (dv) c->model.vocab = dv;
    if (dataset_packed(t->ds) && !strcmp(c->model.arch, "gpt2"))
        return wgt_fail(WGT_ERR_CONFIG, "%s holds instruction data, trained as packed examples whose positions restart at "
                        "each example; GPT-2's learned position embeddings do not restart in this build: train a "
                        "LLaMA-family model (--arch llama, or --init a LLaMA model) on it", c->data_dir);
    if (!c->model.vocab)
        return wgt_fail(WGT_ERR_CONFIG, "%s has no tokenizer, so the vocabulary size is unknown; pass --vocab N (50257 for "
                        "GPT-2 tokens)", c->data_dir);
    return train_config_finish(c);
}

static wgt_status init_resume(trainer *t, const train_config *flags, const train_flags *given) {
    if (train_config_flag_given(given, "--init"))
        return wgt_fail(WGT_ERR_ARG, "--init starts a new run from a model; --resume continues %s from its checkpoint: "
                        "drop one of them", t->o.run_dir);
    WGT_TRY(run_checkpoint_read(&t->ck, t->o.run_dir));
    t->resumed = 1;
    WGT_TRY(train_dist_resume_batch(&t->ck, flags, given));  // [dist] --batch is per rank
    WGT_TRY(train_config_check_resume(&t->ck.cfg, flags, given));
    t->cfg = t->ck.cfg;
    train_config_apply_flags(&t->cfg, flags, given);  // only fields a resumed run may change
    // a new --lr without --min-lr keeps the schedule's shape: the floor scales with the peak
    if (train_config_flag_given(given, "--lr") && !train_config_flag_given(given, "--min-lr") && t->ck.cfg.lr > 0)
        t->cfg.min_lr = t->ck.cfg.min_lr == t->ck.cfg.lr / 10 ? t->cfg.lr / 10  // the default, lr / 10
                                                                : t->ck.cfg.min_lr * (t->cfg.lr / t->ck.cfg.lr);
    WGT_TRY(train_config_finish(&t->cfg));
    // the optimizer settings that recovering from a divergence needs may change; say which did
    // (they go into config.json, the next checkpoint and the first metrics row of this session)
    char said[1024];
    if (train_config_resume_changes(&t->ck.cfg, &t->cfg, t->resume_changes, sizeof t->resume_changes, said,
                                    sizeof said))
        printf("train: resuming with changed settings: %s\n", said);
    t->scale_changed = strcmp(t->ck.cfg.loss_scale, t->cfg.loss_scale) || t->ck.cfg.loss_scale_init != t->cfg.loss_scale_init;
    WGT_TRY(dataset_open(&t->ds, t->cfg.data_dir));
    WGT_TRY(dataset_check_tokenizer(t->ds, t->cfg.tokenizer_hash, t->cfg.data_dir, "the run"));
    int dv = dataset_vocab(t->ds);
    if (dv && dv != t->cfg.model.vocab)
        return wgt_fail(WGT_ERR_CONFIG, "the data in %s has a %d-token vocabulary but the run's model has %d: it is not the "
                        "data this run was trained on; pass the right --data", t->cfg.data_dir, dv, t->cfg.model.vocab);
    t->pr = t->ck.pr;
    if ((long)t->pr.step >= t->cfg.steps)
        printf("train: the checkpoint is at step %llu and the run has %ld steps: nothing to do (raise --steps to train "
               "further)\n", (unsigned long long)t->pr.step, t->cfg.steps);
    return WGT_OK;
}

wgt_status trainer_init(trainer **out, const train_config *flags, const train_flags *given, const trainer_opts *o) {
    *out = NULL;
    trainer *t = wgt_calloc(1, sizeof *t);
    t->o = *o;
    const int writer = dist_rank() == 0;  // [dist] rank 0 alone writes the run directory
    wgt_status st = writer ? run_lock_dir(&t->lock, o->run_dir, !o->resume, "train") : WGT_OK;
    if (st == WGT_OK) st = o->resume ? init_resume(t, flags, given) : init_new(t, flags, given);
    train_config *c = &t->cfg;
    // store the data directory absolute, so eval/sample/--resume work from any directory
    char real[TRAIN_PATH_MAX];
    if (st == WGT_OK && realpath(c->data_dir, real) && strlen(real) < sizeof c->data_dir)
        snprintf(c->data_dir, sizeof c->data_dir, "%s", real);
    if (st == WGT_OK) st = dataset_check_vocab(t->ds, c->model.vocab);
    if (st == WGT_OK) st = dataset_check_seq(t->ds, c->seq);
    if (st == WGT_OK && writer) st = dir_make(o->run_dir);
    char p[TRAIN_PATH_MAX];
    if (st == WGT_OK && writer) {
        remove_stale_temps(o->run_dir);
        char *json = train_config_to_json(c);
        st = run_path(p, sizeof p, o->run_dir, RUN_CONFIG_FILE);
        if (st == WGT_OK) st = write_text(p, json);
        free(json);
    }
    // the run keeps its own tokenizer, so sample works even if the data directory moves
    // (tokenizer.bin, or GPT-2's encoder.json + vocab.bpe)
    if (st == WGT_OK && writer && dataset_tokenizer(t->ds) && (!t->resumed || !text_tokenizer_dir_has(o->run_dir)))
        st = text_tokenizer_save_dir(dataset_tokenizer(t->ds), o->run_dir);
    if (st == WGT_OK) st = run_path(p, sizeof p, o->run_dir, RUN_METRICS_FILE);
    if (st == WGT_OK && writer) {
        if (t->resumed) st = metrics_log_rewind(p, (long)t->pr.step, &t->hist);
        else if (unlink(p) != 0 && errno != ENOENT)
            st = wgt_fail(WGT_ERR_IO, "cannot remove the old %s: %s", p, strerror(errno));
    }
    if (st != WGT_OK) {
        trainer_free(t);
        return st;
    }
    t->entropy = dataset_unigram_entropy(t->ds);
    t->last_ckpt_step = t->resumed ? (long)t->pr.step : -1;
    if (!t->resumed) t->pr.data_rng = rng_seed_stream((uint64_t)c->seed, STREAM_DATA);
    const model_config *mc = &c->model;
    printf("train: data %s: %zu train tokens, %zu val tokens, vocabulary %d\n", c->data_dir,
           dataset_train_tokens(t->ds), dataset_val_tokens(t->ds), mc->vocab);
    printf("train: unigram entropy of the train tokens: %.4f nats/token (a model that ignores context reaches this "
           "loss; learning shows as loss below it)\n", t->entropy);
    printf("train: model %s (preset %s): %d layers, %d heads, d_model %d, d_ff %d, vocabulary %d, max_seq %d\n", mc->arch, c->preset,
           mc->n_layer, mc->n_head, mc->d_model, mc->d_ff, mc->vocab, mc->max_seq);
    if (c->init[0] && !t->resumed) printf("train: model from --init %s\n", c->init);
    if (mc->n_kv_heads)
        printf("train: %d key/value heads, RoPE base %g, RMSNorm eps %g, lm_head %s\n", mc->n_kv_heads, mc->rope_theta,
               mc->rms_eps, mc->tie_embeddings ? "tied to the token embedding" : "of its own");
    printf("train: %d x %d tokens x %d micro-batch%s = %d tokens per update, %ld updates; lr %g (warmup %ld, cosine to "
           "%g), weight decay %g, clip %g, label smoothing %g, z-loss %g, seed %ld\n", c->batch, c->seq, c->grad_accum,
           c->grad_accum > 1 ? "es" : "", c->batch * c->seq * c->grad_accum, c->steps, c->lr, c->warmup, c->min_lr,
           c->weight_decay, c->clip, c->label_smoothing, c->z_loss, c->seed);
    if (dataset_packed(t->ds)) {
        size_t n_ex = 0, longer = dataset_examples_longer(t->ds, c->seq, &n_ex);
        printf("train: instruction data: rows of packed examples (each attends to itself, positions restart), loss on "
               "the trained tokens only, averaged over each update's; %zu training examples", n_ex);
        if (longer) printf(", %zu of them longer than --seq + 1 and cut to it", longer);
        printf("\n");
    }
    if (c->warmup > c->steps)
        printf("train: warning: --warmup %ld is longer than the run (--steps %ld): the learning rate rises for the whole "
               "run and reaches only %g of --lr %g; lower --warmup\n", c->warmup, c->steps,
               train_lr_at(c, c->steps - 1) / c->lr, c->lr);
    {
        // validation during training scores a fixed subset; `wgtrain eval` scores everything
        size_t vb = train_eval_batches(t->ds, c->batch, c->seq, c->val_batches),
               all = train_eval_batches(t->ds, c->batch, c->seq, 0), vt = dataset_val_tokens(t->ds);
        size_t used = vb * (size_t)c->batch * (size_t)c->seq;
        if (used > vt) used = vt;
        char when[64];
        if (c->val_every > 0) snprintf(when, sizeof when, "every %ld steps (--val-every)", c->val_every);
        else snprintf(when, sizeof when, "at the end (--val-every 0)");
        if (vb < all)
            printf("train: validation: %zu batch%s (--val-batches) of %d x %d, about %zu tokens, %s: a fixed subset spread "
                   "over the %zu val tokens, so its loss differs a little from `wgtrain eval`, which scores all of them\n",
                   vb, vb == 1 ? "" : "es", c->batch, c->seq, used, when, vt);
        else
            printf("train: validation: all %zu val tokens (%zu batches of %d x %d), %s, as `wgtrain eval` does\n", vt, vb,
                   c->batch, c->seq, when);
    }
    if (t->resumed) printf("train: resuming %s at step %llu\n", o->run_dir, (unsigned long long)t->pr.step);
    *out = t;
    return WGT_OK;
}

void trainer_free(trainer *t) {
    if (!t) return;
    dataset_free(t->ds);
    checkpoint_free(&t->ck);
    metrics_history_free(&t->hist);
    run_lock_release(&t->lock);
    free(t);
}

// ------------------------------------------------------------------ run

static volatile sig_atomic_t g_stop = 0;
// [dist] with several ranks a stop is decided by all of them at the same step (train_dist_step)
static int g_stop_all = 0;
static int stop_requested(void) { return dist_size() > 1 ? g_stop_all : g_stop; }

static void on_signal(int sig) {
    g_stop = sig;
    signal(sig, SIG_DFL);  // a second Ctrl-C ends the process at once
    // said at once, even in a long step (write(2) is async-signal-safe; stdio is not)
    static const char msg_int[] = "\nstopping after this step... (at its next micro-batch; a checkpoint of the last "
                                  "completed update follows; Ctrl-C again quits at once, keeping the last checkpoint)\n";
    static const char msg_term[] = "\nstopping after this step... (SIGTERM: at its next micro-batch; a checkpoint of "
                                   "the last completed update follows)\n";
    ssize_t r = sig == SIGINT ? write(STDERR_FILENO, msg_int, sizeof msg_int - 1)
                              : write(STDERR_FILENO, msg_term, sizeof msg_term - 1);
    (void)r;
}

void trainer_request_stop(void) { g_stop = SIGINT; }

static void fmt_duration(char *buf, size_t n, double s) {
    if (!isfinite(s) || s < 0) snprintf(buf, n, "?");
    else if (s < 60) snprintf(buf, n, "%.0fs", s);
    else if (s < 3600) snprintf(buf, n, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
    else snprintf(buf, n, "%dh%02dm", (int)(s / 3600), (int)fmod(s / 60, 60));
}

typedef struct {
    float *params, *m, *v;  // host copies of the state, allocated once
} state_buf;

static wgt_status save_all(trainer *t, wgt_model *m, state_buf *sb, int tty) {
    double t0 = wgt_now_s();
    char p[TRAIN_PATH_MAX];
    // [dist] every rank's weights must still be rank 0's, which alone writes
    WGT_TRY(train_dist_check_weights(m, sb->params));
    if (dist_rank() != 0) {
        t->last_ckpt_step = (long)t->pr.step;
        return WGT_OK;
    }
    WGT_TRY(model_state_download(m, sb->params, sb->m, sb->v));
    WGT_TRY(run_path(p, sizeof p, t->o.run_dir, RUN_CKPT_FILE));
    WGT_TRY(checkpoint_write(p, &t->cfg, &t->pr, sb->params, sb->m, sb->v, model_state_elems(m)));
    // model.safetensors is a by-product for other tools; ckpt.bin (written first) is the truth
    if (model_lora_on(m)) {  // LoRA: the adapters in PEFT's format (the base is --init's)
        WGT_TRY(model_lora_save_peft(m, t->o.run_dir, t->cfg.init));
    } else {
        WGT_TRY(run_path(p, sizeof p, t->o.run_dir, RUN_MODEL_FILE));
        WGT_TRY(model_save_safetensors(m, p, 0));
    }
    t->last_ckpt_step = (long)t->pr.step;
    printf("%scheckpoint: step %llu written to %s/%s (%.1f s)\n", tty ? "\r\033[K" : "", (unsigned long long)t->pr.step,
           t->o.run_dir, RUN_CKPT_FILE, wgt_now_s() - t0);
    return WGT_OK;
}

// A checkpoint that is due, unless updates are being skipped: the weights then are those the
// divergence left (the last update that went through made the gradients overflow), and the
// checkpoint already written holds the last good state, which the advice at the stop names.
static wgt_status save_due(trainer *t, wgt_model *m, state_buf *sb, int skipped_in_a_row, int tty) {
    if (skipped_in_a_row > 0) {
        if (dist_rank() == 0) {
            char kept[64];
            if (t->last_ckpt_step >= 0) snprintf(kept, sizeof kept, "the one of step %ld is kept", t->last_ckpt_step);
            else snprintf(kept, sizeof kept, "there is none yet");
            printf("%scheckpoint: step %llu not written: the last %d update%s skipped (non-finite gradients), so the "
                   "weights may have diverged; %s\n", tty ? "\r\033[K" : "", (unsigned long long)t->pr.step,
                   skipped_in_a_row, skipped_in_a_row == 1 ? " was" : "s were", kept);
        }
        return WGT_OK;
    }
    return save_all(t, m, sb, tty);
}

static wgt_status write_plot(trainer *t) {
    char p[TRAIN_PATH_MAX], title[256];
    if (dist_rank() != 0) return WGT_OK;  // [dist] rank 0 writes
    WGT_TRY(run_path(p, sizeof p, t->o.run_dir, RUN_PLOT_FILE));
    const model_config *mc = &t->cfg.model;
    snprintf(title, sizeof title, "wgtrain %s: L=%d C=%d NH=%d V=%d, %d x %d tokens/update", mc->arch, mc->n_layer,
             mc->d_model, mc->n_head, mc->vocab, t->cfg.batch * t->cfg.grad_accum, t->cfg.seq);
    // the plot is for people: failing to write it must not stop the run before its checkpoint
    if (plot_loss_svg(p, &t->hist, t->entropy, title) != WGT_OK)
        fprintf(stderr, "\ntrain: warning: %s (training continues)\n", wgt_last_error());
    return WGT_OK;
}

// ------------------------------------------------------------------ asynchronous step results
// An update is recorded and submitted, and its results (loss, gradient norm, skip decision,
// loss scale) come back through a readback slot while the next update is recorded and runs.
// So the host reads step s's results one step late, except where it needs them at once: before
// a validation, a checkpoint, the last step or a stop, the pending results are drained first.

// An update whose results are on their way.
typedef struct {
    long step;       // 0-based index
    double lr;
    // when its recording began (the end of the previous update's recording when that came right
    // before) and ended; the step time itself is measured when its results come back
    double t_from, t_end;
    int slot;        // readback slot
    double trained;  // the targets its loss is the mean of (all ranks)
} pending_step;

typedef struct {
    pending_step q[2];  // oldest first: at most the update recorded last and the one before it
    int n;
} step_queue;

// What the loop keeps between steps for the progress line, metrics and the skip limit.
typedef struct {
    metrics_log ml;
    int tty, scaled, dynamic;
    int skipped_in_a_row;
    double t_session, elapsed0;
    double t_last_end;  // the end of the last recording; 0 after validation or a checkpoint
    double t_last_done; // when the last update's results came back; 0 likewise
    long step0;
    double win_t;       // train time and tokens since the tok/s shown last
    size_t win_tokens;
    size_t tokens_per_update;  // of all ranks
    float *host;        // [dist] model_state_elems floats of scratch for the gradient reduction
    wgt_backend *profiled;  // WGTRAIN_PROFILE: a backend timing its kernels, reset after the first update
} run_state;

// Records update `step`: K micro-batches of forward and backward, the update, the start of its
// readback. Returns with the update submitted; nothing here waits for the device. A stop
// requested between micro-batches abandons the update (*abandoned = 1): its data draws are
// undone, so the run stops at the last completed update and a resume repeats this one whole.
// [dist] with several ranks the stop is agreed once per update (train_dist_step), not here.
static wgt_status record_step(trainer *t, wgt_model *m, run_state *rs, long step, int32_t *inp, int32_t *tgt,
                              pending_step *p, int *abandoned) {
    *abandoned = 0;
    const train_config *c = &t->cfg;
    const int B = c->batch, T = c->seq, K = c->grad_accum;
    // [dist] N ranks of B sequences each: the gradient is normalised by the global token count
    const int NR = dist_size(), rank = dist_rank();
    const size_t BT = (size_t)B * T;
    // the loss is the mean over the update's trained targets, all micro-batches and ranks together
    // (not a mean of micro-batch means): every target of plain windows is trained; packed rows are
    // drawn for the whole update first and their trained targets counted (and summed over ranks)
    double trained = (double)BT * K * NR;
    const int packed = dataset_packed(t->ds);
    int32_t *all_in = NULL, *all_tg = NULL;
    uint32_t *all_doc = NULL;
    if (packed) {
        all_in = wgt_malloc(BT * (size_t)K * 4), all_tg = wgt_malloc(BT * (size_t)K * 4);
        all_doc = wgt_malloc(BT * (size_t)K * 4);
        wgt_status st = WGT_OK;
        double mine = 0;
        for (int k = 0; k < K && st == WGT_OK; k++)
            st = dataset_train_batch_part(t->ds, &t->pr.data_rng, NR * B, rank * B, B, T, all_in + k * BT, all_tg + k * BT,
                                          all_doc + k * BT);
        for (size_t i = 0; st == WGT_OK && i < BT * (size_t)K; i++) mine += all_tg[i] >= 0;
        if (st == WGT_OK && NR > 1) st = dist_sum_f64(&mine, 1);
        if (st != WGT_OK) {
            free(all_in), free(all_tg), free(all_doc);
            return st;
        }
        trained = mine;
    }
    // no trained target at all (rows of prompts cut before their answers): a zero gradient
    const float inv_norm = trained > 0 ? (float)(1.0 / trained) : 0.0f;
    p->trained = trained;
    model_loss_opts lo = {(float)c->label_smoothing, (float)c->z_loss, (float)c->dropout, 0, 0};
    p->step = step;
    p->lr = train_lr_at(c, step);
    p->t_from = rs->t_last_end > 0 ? rs->t_last_end : wgt_now_s();
    p->slot = (int)(step % WGT_READBACK_SLOTS);
    model_zero_grad(m);
    const uint64_t rng0 = t->pr.data_rng;
    model_lora_set_training(m, 1);  // (LoRA: its adapter dropout applies to these forwards alone)
    for (int k = 0; k < K; k++) {
        if (k > 0 && NR == 1 && g_stop) {
            model_lora_set_training(m, 0);
            t->pr.data_rng = rng0;
            *abandoned = 1;
            return WGT_OK;
        }
        // [dist] every rank draws the global batch of NR*B windows and keeps its part
        wgt_status st = WGT_OK;
        if (packed) {
            memcpy(inp, all_in + k * BT, BT * 4);
            memcpy(tgt, all_tg + k * BT, BT * 4);
            st = model_set_doc_start(m, all_doc + k * BT);
        } else {
            st = dataset_train_batch_part(t->ds, &t->pr.data_rng, NR * B, rank * B, B, T, inp, tgt, NULL);
        }
        if (st != WGT_OK) {
            free(all_in), free(all_tg), free(all_doc);
            return st;
        }
        // dropout masks from the seed, the update and the micro-batch: a resumed run draws the same
        lo.dropout_seed = wgt_dropout_key((uint32_t)c->seed ^ (uint32_t)((uint64_t)c->seed >> 32), (uint32_t)step,
                                          (uint32_t)k);
        lo.accumulate_loss = k > 0;  // the micro-batches' losses add up on the device
        st = model_forward(m, inp, tgt, lo, inv_norm);
        if (st != WGT_OK) {
            free(all_in), free(all_tg), free(all_doc);
            return st;
        }
        model_backward(m);
    }
    free(all_in), free(all_tg), free(all_doc);
    // [dist] gradients summed over the ranks (a blocking round trip through host memory), stop
    // requests agreed; the loss sums are added when the results are collected
    model_lora_set_training(m, 0);
    WGT_TRY(train_dist_step(m, rs->host, step, g_stop != 0, &g_stop_all));
    // the device decides: a non-finite norm or loss skips the update, and the loss scale adapts
    model_update(m, (float)p->lr, (float)c->beta1, (float)c->beta2, (float)c->eps, (float)c->weight_decay,
                 (float)c->clip);
    WGT_TRY(model_result_begin(m, p->slot));
    p->t_end = rs->t_last_end = wgt_now_s();
    return WGT_OK;
}

// Collects the results of pending update p (waiting for them), updates the counters, reports a
// skip and fills its metrics row (val_loss NAN: the caller measures it).
static wgt_status collect_step(trainer *t, wgt_model *m, run_state *rs, const pending_step *p, metrics_row *row) {
    int ready;
    model_step_result r;
    WGT_TRY(model_result_end(m, p->slot, 1, &ready, &r));
    WGT_ASSERT(ready, "a waiting readback came back without its data");
    const long s1 = p->step + 1;
    // the update's time: from when the previous one's results came back (or its own recording
    // began, if later) to when its own did. The host records ahead of the device, so the pace
    // at which results come back is the step time (recording alone would say a few ms), unless
    // the recording itself waited for the device (a data-parallel step brings its gradients
    // down to the host): then it is the recording's time
    double now = wgt_now_s(), dt = now - (rs->t_last_done > p->t_from ? rs->t_last_done : p->t_from);
    if (p->t_end - p->t_from > dt) dt = p->t_end - p->t_from;
    rs->t_last_done = now;
    if (!(dt > 1e-9)) dt = 1e-9;  // a clock too coarse for the step
    t->pr.updates = r.updates;
    t->pr.skips = r.skips;
    t->pr.loss_scale = r.next_scale;
    t->pr.scale_clean = r.clean;
    t->pr.elapsed_s = rs->elapsed0 + (now - rs->t_session);
    rs->win_t += dt, rs->win_tokens += rs->tokens_per_update;
    // [dist] the global loss: every rank collects the same updates in the same order
    if (dist_size() > 1) WGT_TRY(dist_sum_f64(&r.loss_sum, 1));
    double loss = p->trained > 0 ? r.loss_sum / p->trained : 0.0;
    *row = (metrics_row){s1, loss, NAN, p->lr, r.grad_norm, (double)rs->tokens_per_update / dt, t->pr.elapsed_s,
                         r.skipped, rs->scaled ? (double)r.loss_scale : NAN, (long)r.skips, NULL};
    const char *cr = rs->tty ? "\r\033[K" : "";
    if (!r.skipped) {
        rs->skipped_in_a_row = 0;
    } else if (rs->dynamic && r.loss_scale > 1.0f && isfinite(loss)) {
        // the scaler backing off: expected at the start and now and then; not a divergence
        printf("%sstep %ld: the gradients overflowed at loss scale %g; the update is skipped and the scale lowered to %g\n",
               cr, s1, r.loss_scale, r.next_scale);
    } else {
        int bad_loss = !isfinite(loss);
        // a fixed loss scale that overflows the gradients is the likelier cause than the weights
        const int scale_fix = rs->scaled && !rs->dynamic && !bad_loss;
        const char *fix = scale_fix ? "a lower --loss-scale (or dynamic)" : "a lower --lr or --clip";
        printf("%sstep %ld: the %s is %g, so the update is skipped (the gradients would poison the weights); if this "
               "repeats, use %s\n", cr, s1, bad_loss ? "loss" : "gradient norm", bad_loss ? loss : r.grad_norm, fix);
        // a few bad batches can be skipped; a long run of them means the weights are already broken
        if (++rs->skipped_in_a_row >= MAX_SKIPS_IN_A_ROW) {
            // advice that works: --resume takes these settings (train_config_check_resume)
            const train_config *c = &t->cfg;
            char flags[160];
            if (scale_fix) snprintf(flags, sizeof flags, "--loss-scale dynamic");
            else snprintf(flags, sizeof flags, "--lr %g%s", c->lr / 10, c->clip > 0 && c->clip <= 1 ? "" : " --clip 1");
            char where[TRAIN_PATH_MAX + 400];
            if (t->last_ckpt_step >= 0)
                snprintf(where, sizeof where, "resume from the last checkpoint (step %ld, kept from before the skipped "
                         "updates) with %s: wgtrain train --out %s --resume %s", t->last_ckpt_step, fix, t->o.run_dir,
                         flags);
            else
                snprintf(where, sizeof where, "there is no checkpoint yet: start again with %s (e.g. %s)", fix, flags);
            return wgt_fail(WGT_ERR_CONFIG, "the %s has not been finite for %d updates in a row (up to step %ld): the "
                            "weights are no longer usable; %s", bad_loss ? "loss" : "gradient norm",
                            rs->skipped_in_a_row, s1, where);
        }
    }
    return WGT_OK;
}

// Writes the metrics row of a collected update and, when due, the progress line: refreshed in
// place on a terminal, plain lines every --log-every otherwise, and always when forced (the
// last step, a validation).
static wgt_status report_step(trainer *t, run_state *rs, const metrics_row *row, int force) {
    const train_config *c = &t->cfg;
    if (dist_rank() != 0) return WGT_OK;  // [dist] rank 0 writes and prints
    metrics_row logged = *row;
    if (t->resume_changes[0]) logged.resumed_with = t->resume_changes;  // once, on this session's first row
    WGT_TRY(metrics_log_write(&rs->ml, &logged));
    t->resume_changes[0] = 0;
    metrics_history_add(&t->hist, row);
    const long s1 = row->step;
    if (!(rs->tty || s1 % c->log_every == 0 || force)) return WGT_OK;
    double sess_t = wgt_now_s() - rs->t_session, eta = (double)(c->steps - s1) * sess_t / (double)(s1 - rs->step0);
    char eta_s[32], scale_s[64] = "";
    fmt_duration(eta_s, sizeof eta_s, eta);
    if (rs->scaled) snprintf(scale_s, sizeof scale_s, " | scale %g | skips %ld", row->loss_scale, row->skips);
    else if (row->skips) snprintf(scale_s, sizeof scale_s, " | skips %ld", row->skips);
    printf("%sstep %*ld/%ld | loss %.4f | lr %.3e | grad norm %.3f%s | %.0f tok/s | ETA %s%s", rs->tty ? "\r\033[K" : "",
           (int)snprintf(NULL, 0, "%ld", c->steps), s1, c->steps, row->loss, row->lr, row->grad_norm, scale_s,
           (double)rs->win_tokens / rs->win_t, eta_s, rs->tty ? "" : "\n");
    if (!rs->tty || rs->win_t > 2.0) rs->win_t = 0, rs->win_tokens = 0;  // a terminal shows a ~2 s average
    fflush(stdout);
    return WGT_OK;
}

// Finishes the oldest pending update (the queue is full, or the loop ended).
static wgt_status finish_oldest(trainer *t, wgt_model *m, run_state *rs, step_queue *sq) {
    WGT_ASSERT(sq->n > 0, "no pending update to finish");
    pending_step p = sq->q[0];
    sq->q[0] = sq->q[1];
    sq->n--;
    metrics_row row;
    WGT_TRY(collect_step(t, m, rs, &p, &row));
    // the first update compiles pipelines and allocates: the profile times the ones after it
    if (rs->profiled && row.step == rs->step0 + 1) rs->profiled->profile_reset(rs->profiled);
    int last = row.step == t->cfg.steps || (t->o.stop_at > 0 && row.step >= t->o.stop_at);
    return report_step(t, rs, &row, last);
}

wgt_status trainer_run(trainer *t, wgt_backend *be, int *interrupted) {
    *interrupted = 0;
    const train_config *c = &t->cfg;
    const int B = c->batch, T = c->seq, K = c->grad_accum;
    const size_t BT = (size_t)B * T;
    wgt_model *m = NULL;
    wgt_status st;
    printf("train: device %s%s%s%s\n", be->name, be->device_name ? " (" : "", be->device_name ? be->device_name(be) : "",
           be->device_name ? ")" : "");
    if (be->device_is_software && be->device_is_software(be))
        printf("train: warning: this WebGPU adapter is a software GPU; it trains about 10x slower than --device cpu "
               "(it is there to check the WGSL kernels)\n");
    // the plan first: a run that cannot fit stops here, before anything is allocated
    model_opts mo;
    model_lora_opts lora;
    st = train_plan_check(c, be, &mo, &lora);
    if (st != WGT_OK) return st;
    if (t->resumed) {
        // (the recomputation may change on resume: the plan's choice)
        snprintf(t->ck.cfg.recompute, sizeof t->ck.cfg.recompute, "%s", model_recompute_name(mo.recompute));
        st = run_model_open(&m, be, &t->ck, B, T, t->o.run_dir, train_config_precision(c));
        checkpoint_free(&t->ck);  // uploaded: the host copy is no longer needed
    } else {
        st = model_init_opts(&m, be, &c->model, B, T, &mo);
        const uint64_t seed = rng_seed_stream((uint64_t)c->seed, STREAM_INIT);
        if (st == WGT_OK) st = c->init[0] ? model_init_for_load(m, seed) : model_init_random(m, seed);
        // --init: its weights replace the zeros; the gradients and AdamW moments stay zero
        if (st == WGT_OK && c->init[0]) {
            st = model_load_safetensors(m, t->init_weights);
            if (st == WGT_OK) printf("train: weights from %s (optimizer state fresh, step 0)\n", t->init_weights);
        }
        if (st == WGT_OK && t->init_adapter[0]) st = model_lora_load_peft(m, t->init_adapter);
        if (st == WGT_OK && model_lora_on(m)) st = lora_run_start(m, &t->cfg, t->o.run_dir);
    }
    // the loss scale and the optimizer's counters live on the device (the optimizer status)
    float scale0;
    int dynamic;
    train_loss_scale_resolve(c, &scale0, &dynamic);
    if (st == WGT_OK) st = model_set_loss_scale(m, scale0, dynamic, (uint32_t)c->loss_scale_window);
    if (st == WGT_OK && t->resumed) {
        // a changed loss scale setting starts from its own first scale
        model_opt_state os = {t->pr.updates, t->pr.skips, t->scale_changed ? 0u : (uint32_t)t->pr.scale_clean,
                              t->pr.loss_scale > 0 && !t->scale_changed ? (float)t->pr.loss_scale : scale0};
        st = model_opt_state_set(m, &os);
    }
    // every pipeline of the step compiled now, so that step 1's time is a step's and a kernel
    // that does not compile on this device stops the run before it starts
    int n_pipes = 0;
    double t_pipes = 0;
    if (st == WGT_OK) {
        model_loss_opts lo = {(float)c->label_smoothing, (float)c->z_loss, (float)c->dropout, 0, 0};
        st = model_prepare_step(m, lo, &n_pipes, &t_pipes);
    }
    if (st != WGT_OK) {
        model_free(m);
        return st;
    }
    if (n_pipes > 0) printf("train: %d pipelines compiled in %.2f s\n", n_pipes, t_pipes);
    printf("train: %.2f M parameters, precision %s\n", model_num_params(m) / 1e6, model_precision_name(model_prec(m)));
    if (train_loss_scale_on(c))
        printf("train: loss scale %s%g%s\n", dynamic ? "dynamic from " : "", t->resumed && t->pr.loss_scale > 0 && !t->scale_changed ?
               t->pr.loss_scale : (double)scale0, dynamic ? " (halved on an overflow, doubled after --loss-scale-window "
               "clean updates)" : " (fixed)");
    size_t n = model_state_elems(m);
    state_buf sb = {wgt_malloc(n * 4), wgt_malloc(n * 4), wgt_malloc(n * 4)};
    int32_t *inp = wgt_malloc(BT * 4), *tgt = wgt_malloc(BT * 4);
    run_state rs;
    memset(&rs, 0, sizeof rs);
    char p[TRAIN_PATH_MAX];
    // [dist] every rank holds the same config, data, position and weights before step 1
    st = train_dist_agree(c, t->ds, &t->pr, m, be, sb.params);
    if (st == WGT_OK) st = run_path(p, sizeof p, t->o.run_dir, RUN_METRICS_FILE);
    if (st == WGT_OK && dist_rank() == 0) st = metrics_log_open(&rs.ml, p);  // [dist] rank 0 writes

    rs.tty = isatty(STDOUT_FILENO) && dist_size() == 1;  // [dist] mpirun gives ranks a pty even when its output is a file
    rs.scaled = train_loss_scale_on(c);
    rs.dynamic = dynamic;
    if (be->profile_reset && be->profile_report) rs.profiled = be;  // opened so by WGTRAIN_PROFILE=1
    rs.tokens_per_update = BT * (size_t)K * (size_t)dist_size();  // [dist] every rank's tokens
    rs.host = sb.params;
    g_stop = 0;
    g_stop_all = 0;
    void (*old_int)(int) = signal(SIGINT, on_signal), (*old_term)(int) = signal(SIGTERM, on_signal);
    rs.t_session = wgt_now_s();
    rs.elapsed0 = t->pr.elapsed_s;
    rs.step0 = (long)t->pr.step;
    step_queue sq = {.n = 0};
    const int tty = rs.tty;

    while (st == WGT_OK && (long)t->pr.step < c->steps && !(t->o.stop_at > 0 && (long)t->pr.step >= t->o.stop_at)) {
        if (stop_requested()) break;
        long step = (long)t->pr.step;  // 0-based index of this update
        pending_step ps;
        int abandoned;
        st = record_step(t, m, &rs, step, inp, tgt, &ps, &abandoned);
        if (st != WGT_OK || abandoned) break;
        t->pr.step++;
        t->pr.tokens += rs.tokens_per_update;
        sq.q[sq.n++] = ps;
        // the previous update's results, read while this one runs
        if (sq.n == 2) st = finish_oldest(t, m, &rs, &sq);
        if (st != WGT_OK) break;

        long s1 = (long)t->pr.step;
        int last = s1 == c->steps || (t->o.stop_at > 0 && s1 >= t->o.stop_at);
        int do_val = (c->val_every > 0 && s1 % c->val_every == 0) || s1 == c->steps;
        int do_ckpt = (c->ckpt_every > 0 && s1 % c->ckpt_every == 0) || last;
        if (!(do_val || do_ckpt || stop_requested())) continue;
        // this update's results are needed now: validation, a checkpoint or a stop follows
        WGT_ASSERT(sq.n == 1, "a boundary step with more than its own update pending");
        sq.n = 0;
        metrics_row row;
        st = collect_step(t, m, &rs, &sq.q[0], &row);
        if (st != WGT_OK) break;
        if (do_val) {
            st = train_evaluate(m, t->ds, B, T, c->val_batches, &row.val_loss, NULL);
            if (st != WGT_OK) break;
        }
        st = report_step(t, &rs, &row, last || do_val);
        if (st != WGT_OK) break;
        if (do_val)
            printf("%sstep %ld: val loss %.4f (perplexity %.4g; unigram entropy %.4f)\n", tty ? "\r\033[K" : "", s1,
                   row.val_loss, exp(row.val_loss), t->entropy);
        // the checkpoint first: nothing about the plot may stand between a step and its checkpoint
        if (do_ckpt) st = save_due(t, m, &sb, rs.skipped_in_a_row, tty);
        if (st == WGT_OK) st = write_plot(t);
        rs.t_last_end = rs.t_last_done = 0;  // the next update's time starts when it does, not at this one's end
        if (t->o.stop_at > 0 && s1 >= t->o.stop_at) break;
    }
    // results still on their way (a stop between boundaries)
    while (st == WGT_OK && sq.n > 0) st = finish_oldest(t, m, &rs, &sq);
    // --steps 0 (with --init): the model becomes the run's step 0, untrained
    if (st == WGT_OK && c->steps == 0 && !t->resumed) {
        st = save_all(t, m, &sb, tty);
        if (st == WGT_OK) printf("train: --steps 0: the model of --init is the run's step 0 (no training)\n");
    }
    // a signal during the last step changes nothing: the run is complete
    if (st == WGT_OK && stop_requested() && (long)t->pr.step < c->steps && !(t->o.stop_at > 0 && (long)t->pr.step >= t->o.stop_at)) {
        *interrupted = 1;
        if (t->last_ckpt_step != (long)t->pr.step) st = save_due(t, m, &sb, rs.skipped_in_a_row, tty);
        if (st == WGT_OK && t->last_ckpt_step >= 0)
            printf("%sinterrupted at step %llu (checkpoint at step %ld); continue with: wgtrain train --out %s --resume\n",
                   tty ? "\r\033[K" : "", (unsigned long long)t->pr.step, t->last_ckpt_step, t->o.run_dir);
        else if (st == WGT_OK)
            printf("%sinterrupted at step %llu, with no checkpoint to continue from\n", tty ? "\r\033[K" : "",
                   (unsigned long long)t->pr.step);
    }
    if (st == WGT_OK) train_dist_report();
    if (st == WGT_OK && !*interrupted && (long)t->pr.step >= c->steps && rs.step0 < c->steps)
        printf("train: done: %ld steps, %.1f M tokens, %.1f s of training; run directory %s\n", c->steps,
               t->pr.tokens / 1e6, t->pr.elapsed_s, t->o.run_dir);
    if (st == WGT_OK && be->bytes_allocated) {  // what the plan predicted, as allocated (docs/memory.md)
        uint64_t live = 0, peak = 0;
        be->bytes_allocated(be, &live, &peak);
        printf("train: device buffers: peak %.2f MiB allocated\n", peak / 1048576.0);
    }
    if (st == WGT_OK && rs.profiled && dist_rank() == 0) {
        printf("train: per-kernel GPU time of the updates after the first (timestamp queries):\n");
        rs.profiled->profile_report(rs.profiled, stdout);
    }
    signal(SIGINT, old_int);
    signal(SIGTERM, old_term);
    metrics_log_close(&rs.ml);
    free(sb.params);
    free(sb.m);
    free(sb.v);
    free(inp);
    free(tgt);
    model_free(m);
    return st;
}
