// test_checkpoint.c — the training run's persistent state and the pieces resume relies on:
// checkpoint round trip and every refusal (truncation, flipped bytes, magic, version, another
// model), the run configuration's JSON round trip and resume-flag checks, the model config's
// JSON (family, old files, refusals), the learning-rate schedule, the data loader's windows
// (deterministic, targets = inputs shifted, validation covering every token once) and the
// sampler's filters.
#include <cjson/cJSON.h>
#include <ftw.h>
#include <math.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include "data/shard.h"
#include "testlib.h"
#include "train/checkpoint.h"
#include "train/dataset.h"
#include "train/rng.h"
#include "train/sampler.h"
#include "train/train_config.h"

static char tmpdir[256];

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) { return remove(p); }

static void tpath(char *dst, const char *name) { snprintf(dst, 512, "%s/%s", tmpdir, name); }
static void tpath2(char *dst, const char *dir, const char *name) {
    if ((size_t)snprintf(dst, 1024, "%s/%s", dir, name) >= 1024) abort();
}

// Reads path as a checkpoint and expects a refusal whose message contains `want`.
static void expect_refused(const char *path, const char *want, const char *what) {
    checkpoint ck;
    wgt_status st = checkpoint_read(&ck, path);
    CHECK(st != WGT_OK, "%s: a damaged checkpoint was accepted", what);
    CHECK(st != WGT_OK && strstr(wgt_last_error(), want), "%s: message lacks '%s': %s", what, want, wgt_last_error());
    CHECK(ck.params == NULL && ck.m == NULL && ck.v == NULL, "%s: a refused read left memory allocated", what);
}

static train_config test_config(void) {
    train_config c;
    train_config_preset(&c, "tiny");
    c.model.vocab = 300;
    snprintf(c.data_dir, sizeof c.data_dir, "/data/\"quoted\" dir");
    c.lr = 3e-3;
    c.seed = 9007199254740991L;  // the largest seed JSON holds exactly
    WGT_ASSERT(train_config_finish(&c) == WGT_OK, "test config must be valid");
    return c;
}

static void test_roundtrip_and_damage(void) {
    train_config c = test_config();
    // tokens = step x batch x seq; 3 skipped, loss scale 2^15, 17 updates since it changed
    ckpt_progress pr = {123, 120, 0xfedcba9876543210ull, 123 * 8 * 64, 42.5, 3, 32768.0, 17};
    size_t n = 4099;
    float *p = malloc(n * 4), *m = malloc(n * 4), *v = malloc(n * 4);
    uint64_t s = 7;
    for (size_t i = 0; i < n; i++) {
        p[i] = (float)(rng_next_double(&s) - 0.5);
        m[i] = (float)(rng_next_double(&s) * 1e-3);
        v[i] = (float)(rng_next_double(&s) * 1e-6);
    }
    p[5] = -0.0f;
    m[7] = 1e-40f;  // subnormal: must come back bit for bit
    char path[512], bad[512];
    tpath(path, "ckpt.bin");
    tpath(bad, "bad.bin");
    CHECK(checkpoint_write(path, &c, &pr, p, m, v, n) == WGT_OK, "write: %s", wgt_last_error());
    checkpoint ck;
    wgt_status st = checkpoint_read(&ck, path);
    CHECK(st == WGT_OK, "read back: %s", wgt_last_error());
    if (st == WGT_OK) {
        CHECK(ck.n == n, "n %zu", ck.n);
        CHECK(!memcmp(ck.params, p, n * 4) && !memcmp(ck.m, m, n * 4) && !memcmp(ck.v, v, n * 4), "state differs");
        CHECK(!memcmp(&ck.pr, &pr, sizeof pr), "progress differs: step %llu rng %llx", (unsigned long long)ck.pr.step,
              (unsigned long long)ck.pr.data_rng);
        char *a = train_config_to_json(&c), *b = train_config_to_json(&ck.cfg);
        CHECK(!strcmp(a, b), "config differs:\n%s\n%s", a, b);
        CHECK(ck.cfg.seed == c.seed && ck.cfg.lr == c.lr, "seed/lr not exact");
        free(a);
        free(b);
        CHECK(checkpoint_check_model(&ck, &c, n, path) == WGT_OK, "same model refused: %s", wgt_last_error());
        // another model: a different shape is named in the message
        train_config other = c;
        other.model.n_layer = 6;
        CHECK(checkpoint_check_model(&ck, &other, n, path) != WGT_OK && strstr(wgt_last_error(), "n_layer"),
              "different n_layer not refused by name: %s", wgt_last_error());
        other = c;
        other.model.vocab = 512;
        CHECK(checkpoint_check_model(&ck, &other, n, path) != WGT_OK && strstr(wgt_last_error(), "vocab"),
              "different vocab not refused: %s", wgt_last_error());
        CHECK(checkpoint_check_model(&ck, &c, n + 64, path) != WGT_OK && strstr(wgt_last_error(), "state elements"),
              "different state size not refused: %s", wgt_last_error());
        checkpoint_free(&ck);
    }

    size_t len = 0;
    uint8_t *file = test_slurp(path, &len);
    char *cj = train_config_to_json(&c);
    CHECK(file && len == CKPT_HEADER_BYTES + 4 + strlen(cj) + 64 + 8 + 12 * n, "file size %zu", len);
    // the same checkpoint in format version 1 (no loss scale state: the progress block is 24
    // bytes shorter) still loads, reading skips = step - updates and no recorded scale
    if (file) {
        size_t pos = CKPT_HEADER_BYTES + 4 + strlen(cj) + 40;
        uint8_t *v1 = malloc(len - 24);
        memcpy(v1, file, pos);
        memcpy(v1 + pos, file + pos + 24, len - pos - 24);
        uint32_t one = 1;
        uint64_t payload = len - 24 - CKPT_HEADER_BYTES;
        memcpy(v1 + 8, &one, 4);
        memcpy(v1 + 16, &payload, 8);
        uint32_t pcrc = (uint32_t)crc32_z(crc32(0, NULL, 0), v1 + CKPT_HEADER_BYTES, payload);
        memcpy(v1 + 24, &pcrc, 4);
        uint32_t h1 = (uint32_t)crc32(crc32(0, NULL, 0), v1, 60);
        memcpy(v1 + 60, &h1, 4);
        test_spit(bad, v1, len - 24);
        checkpoint old;
        CHECK(checkpoint_read(&old, bad) == WGT_OK, "a version 1 checkpoint is refused: %s", wgt_last_error());
        CHECK(old.pr.step == 123 && old.pr.updates == 120 && old.pr.skips == 3 && old.pr.loss_scale == 0 &&
              old.pr.scale_clean == 0 && old.n == n && !memcmp(old.v, v, n * 4),
              "version 1 progress: skips %llu scale %g", (unsigned long long)old.pr.skips, old.pr.loss_scale);
        checkpoint_free(&old);
        free(v1);
    }
    free(cj);
    // truncations anywhere: empty, inside the header, inside the payload, one byte short
    size_t cuts[] = {0, 7, 63, 64, 100, len / 2, len - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        test_spit(bad, file, cuts[i]);
        char what[64];
        snprintf(what, sizeof what, "truncated to %zu bytes", cuts[i]);
        expect_refused(bad, "truncated", what);
    }
    // trailing garbage
    uint8_t *longer = malloc(len + 3);
    memcpy(longer, file, len);
    memset(longer + len, 0xab, 3);
    test_spit(bad, longer, len + 3);
    expect_refused(bad, "after the payload", "3 bytes appended");
    free(longer);
    // single flipped bits: in the config's length (caught as inconsistent before the checksum
    // can be computed), the config text, params, the last byte of v
    size_t flips[] = {CKPT_HEADER_BYTES + 2, CKPT_HEADER_BYTES + 40, CKPT_HEADER_BYTES + 200, len / 2, len - 1};
    for (size_t i = 0; i < sizeof flips / sizeof flips[0]; i++) {
        file[flips[i]] ^= 0x10;
        test_spit(bad, file, len);
        file[flips[i]] ^= 0x10;
        char what[64];
        snprintf(what, sizeof what, "bit flipped at byte %zu", flips[i]);
        expect_refused(bad, flips[i] == CKPT_HEADER_BYTES + 2 ? "corrupted" : "checksum", what);
    }
    // a flipped byte in the header is caught by the header checksum
    file[20] ^= 1;
    test_spit(bad, file, len);
    file[20] ^= 1;
    expect_refused(bad, "corrupted header", "header byte flipped");
    // wrong magic
    file[0] = 'X';
    test_spit(bad, file, len);
    file[0] = 'W';
    expect_refused(bad, "not a wgtrain checkpoint", "wrong magic");
    // another format version, with a consistent header checksum (as a future writer would make)
    uint32_t ver = 3, hcrc;
    memcpy(file + 8, &ver, 4);
    hcrc = (uint32_t)crc32(crc32(0, NULL, 0), file, 60);
    memcpy(file + 60, &hcrc, 4);
    test_spit(bad, file, len);
    expect_refused(bad, "version 3", "format version 3");
    free(file);
    // a text file and a missing file
    test_spit(bad, "hello, world\n", 13);
    expect_refused(bad, "truncated", "short text file");
    tpath(bad, "missing.bin");
    expect_refused(bad, "cannot open", "missing file");
    free(p);
    free(m);
    free(v);
}

static void test_config_json_and_resume(void) {
    train_config c = test_config();
    char *json = train_config_to_json(&c);
    train_config back;
    CHECK(train_config_from_json(&back, json, "test") == WGT_OK, "from_json: %s", wgt_last_error());
    char *again = train_config_to_json(&back);
    CHECK(!strcmp(json, again), "JSON round trip differs");
    free(again);
    // a missing field and a foreign format are refused
    char *cut = strdup(json), *k = strstr(cut, "\"z_loss\"");
    if (k) memcpy(k, "\"zz_oss\"", 8);
    CHECK(train_config_from_json(&back, cut, "test") != WGT_OK && strstr(wgt_last_error(), "z_loss"),
          "missing z_loss accepted: %s", wgt_last_error());
    free(cut);
    CHECK(train_config_from_json(&back, "{\"format\": \"other\"}", "test") != WGT_OK, "foreign format accepted");
    CHECK(train_config_from_json(&back, "not json", "test") != WGT_OK, "garbage accepted");
    free(json);

    // resume checks: a flag equal to the checkpoint's or a mutable one passes; others are refused
    const char *argv_ok[] = {"x", "--steps", "5000", "--layers", "4", "--val-every", "7", "--data", "/elsewhere"};
    const char *argv_bad[] = {"x", "--layers", "6"};
    // what recovering from a divergence needs may change: the learning rate and its schedule, weight
    // decay, clipping, the loss scale; AdamW's betas may not
    const char *argv_recover[] = {"x", "--lr", "0.1", "--min-lr", "0.01", "--warmup", "3", "--weight-decay", "0.2",
                                  "--clip", "0.5", "--loss-scale", "dynamic", "--loss-scale-init", "1024",
                                  "--loss-scale-window", "10"};
    const char *argv_beta[] = {"x", "--beta1", "0.5"};
    const char *argv_seq[] = {"x", "--seq", "4096"};
    struct { const char **argv; int argc; const char *want; } cases[] = {
        {argv_ok, 9, NULL}, {argv_bad, 3, "--layers 6 differs"}, {argv_recover, 17, NULL}, {argv_beta, 3, "--beta1"},
        {argv_seq, 3, "maximum sequence length"}};
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        train_config f;
        memset(&f, 0, sizeof f);
        train_flags given;
        memset(&given, 0, sizeof given);
        wgt_status st = WGT_OK;
        for (int i = 1; i < cases[t].argc; i++)
            CHECK(train_config_parse_flag(&f, &given, cases[t].argc, (char **)cases[t].argv, &i, &st) && st == WGT_OK,
                  "flag %s not parsed: %s", cases[t].argv[i], wgt_last_error());
        st = train_config_check_resume(&c, &f, &given);
        if (!cases[t].want) CHECK(st == WGT_OK, "case %zu refused: %s", t, wgt_last_error());
        else CHECK(st != WGT_OK && strstr(wgt_last_error(), cases[t].want), "case %zu: %s", t, wgt_last_error());
    }
    // bad flag values name the flag
    const char *argv_v[] = {"x", "--batch", "0"};
    train_config f;
    train_flags given = {{0}};
    wgt_status st = WGT_OK;
    int i = 1;
    CHECK(train_config_parse_flag(&f, &given, 3, (char **)argv_v, &i, &st) && st != WGT_OK && strstr(wgt_last_error(), "--batch"),
          "--batch 0 accepted: %s", wgt_last_error());
    c.seq = 256;
    CHECK(train_config_finish(&c) != WGT_OK && strstr(wgt_last_error(), "--seq 256 exceeds"), "seq > max_seq: %s",
          wgt_last_error());
    CHECK(train_config_preset(&f, "huge") != WGT_OK && strstr(wgt_last_error(), "tiny"), "unknown preset: %s", wgt_last_error());
}

// The model's part of the configuration (model.h): its JSON round trip, configurations written
// before model families existed (no "arch") reading as GPT-2, an unknown family or a missing
// size refused by name, and the model comparison naming the family.
static char *edit_model_json(const train_config *c, const char *del, const char *arch) {
    char *js = train_config_to_json(c);
    cJSON *root = cJSON_Parse(js), *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    free(js);
    if (del) cJSON_DeleteItemFromObjectCaseSensitive(model, del);
    if (arch) cJSON_ReplaceItemInObjectCaseSensitive(model, "arch", cJSON_CreateString(arch));
    js = cJSON_Print(root);
    cJSON_Delete(root);
    return js;
}

static void test_model_config(void) {
    train_config c = test_config(), back;
    char *js = model_config_to_json(&c.model);
    model_config mc;
    model_config_delta d;
    CHECK(model_config_from_json(&mc, js, "test") == WGT_OK && !model_config_diff(&mc, &c.model, &d) &&
              !strcmp(mc.arch, "gpt2"), "model config round trip: %s", wgt_last_error());
    CHECK(strstr(js, "\"arch\"") != NULL, "the model JSON lacks its family: %s", js);
    free(js);
    js = edit_model_json(&c, "arch", NULL);
    CHECK(train_config_from_json(&back, js, "test") == WGT_OK && !strcmp(back.model.arch, MODEL_ARCH_DEFAULT) &&
              back.model.n_layer == c.model.n_layer, "a configuration without arch: %s", wgt_last_error());
    free(js);
    js = edit_model_json(&c, NULL, "nosuch");
    CHECK(train_config_from_json(&back, js, "test") != WGT_OK && strstr(wgt_last_error(), "unknown model family 'nosuch'") &&
              strstr(wgt_last_error(), "gpt2"), "unknown family: %s", wgt_last_error());
    free(js);
    js = edit_model_json(&c, "d_ff", NULL);
    CHECK(train_config_from_json(&back, js, "test") != WGT_OK && strstr(wgt_last_error(), "model.d_ff"),
          "missing d_ff: %s", wgt_last_error());
    free(js);
    train_config other = c;
    snprintf(other.model.arch, sizeof other.model.arch, "other");
    CHECK(model_config_diff(&other.model, &c.model, &d) && !strcmp(d.key, "arch"), "diff of families: %s", d.key);
    CHECK(train_config_check_model(&c, &other, "test") != WGT_OK && strstr(wgt_last_error(), "arch"),
          "another family not refused by name: %s", wgt_last_error());
    CHECK(model_config_check(&other.model) != WGT_OK && strstr(wgt_last_error(), "unknown model family"),
          "unknown family passes the check: %s", wgt_last_error());
    other = c;
    other.model.d_ff = 77;
    CHECK(model_config_diff(&c.model, &other.model, &d) && !strcmp(d.key, "d_ff") && !strcmp(d.b, "77"),
          "diff of d_ff: %s %s %s", d.key, d.a, d.b);
    // --arch on the command line: an unknown family is refused when the run is checked
    const char *argv_arch[] = {"x", "--arch", "nosuch"};
    train_flags given = {{0}};
    wgt_status st = WGT_OK;
    int i = 1;
    train_config f;
    memset(&f, 0, sizeof f);
    CHECK(train_config_parse_flag(&f, &given, 3, (char **)argv_arch, &i, &st) && st == WGT_OK, "--arch not parsed");
    other = c;
    train_config_apply_flags(&other, &f, &given);
    CHECK(train_config_finish(&other) != WGT_OK && strstr(wgt_last_error(), "nosuch"), "--arch nosuch: %s",
          wgt_last_error());
}

static void test_lr_schedule(void) {
    train_config c = test_config();
    c.lr = 1e-3, c.min_lr = 1e-4, c.warmup = 10, c.steps = 111;
    CHECK(fabs(train_lr_at(&c, 0) - 1e-4) < 1e-12, "first warmup lr %g", train_lr_at(&c, 0));
    CHECK(fabs(train_lr_at(&c, 9) - 1e-3) < 1e-12, "end of warmup %g", train_lr_at(&c, 9));
    CHECK(fabs(train_lr_at(&c, 10) - 1e-3) < 1e-12, "start of decay %g", train_lr_at(&c, 10));
    CHECK(fabs(train_lr_at(&c, 110) - 1e-4) < 1e-12, "last step at min_lr %g", train_lr_at(&c, 110));
    CHECK(fabs(train_lr_at(&c, 60) - 5.5e-4) < 1e-12, "cosine midpoint %g", train_lr_at(&c, 60));
    int mono = 1;
    for (long s = 10; s < 110; s++) mono &= train_lr_at(&c, s + 1) <= train_lr_at(&c, s);
    CHECK(mono, "decay not monotone");
    CHECK(train_lr_at(&c, 500) == c.min_lr, "past the end (steps raised on resume) stays at min_lr");
}

static void test_dataset(void) {
    // an llm.c-style directory (no meta.json, no tokenizer): NAME_train.bin / NAME_val.bin
    char dir[512], p[1024];
    tpath(dir, "data");
    mkdir(dir, 0755);
    uint32_t tr[1000], va[95];
    for (int i = 0; i < 1000; i++) tr[i] = (uint32_t)(i % 250);
    for (int i = 0; i < 95; i++) va[i] = (uint32_t)(1000 + i);
    tpath2(p, dir, "x_train.bin");
    CHECK(shard_write(p, tr, 1000, 1095) == WGT_OK, "shard_write");
    tpath2(p, dir, "x_val.bin");
    CHECK(shard_write(p, va, 95, 1095) == WGT_OK, "shard_write");
    dataset *ds;
    if (dataset_open(&ds, dir) != WGT_OK) {
        CHECK(0, "dataset_open: %s", wgt_last_error());
        return;
    }
    CHECK(dataset_vocab(ds) == 0 && dataset_tokenizer(ds) == NULL, "no tokenizer expected");
    CHECK(dataset_train_tokens(ds) == 1000 && dataset_val_tokens(ds) == 95, "token counts");
    CHECK(fabs(dataset_unigram_entropy(ds) - log(250.0)) < 1e-3, "entropy %g", dataset_unigram_entropy(ds));
    CHECK(dataset_check_vocab(ds, 1095) == WGT_OK, "vocab 1095 refused: %s", wgt_last_error());
    CHECK(dataset_check_vocab(ds, 1050) != WGT_OK && strstr(wgt_last_error(), "token id 1050") &&
          strstr(wgt_last_error(), "x_val.bin"), "bad token not named: %s", wgt_last_error());
    CHECK(dataset_check_seq(ds, 999) == WGT_OK, "seq 999 fits 1000 tokens");
    CHECK(dataset_check_seq(ds, 1000) != WGT_OK && strstr(wgt_last_error(), "too short"), "seq 1000: %s", wgt_last_error());
    // training windows: deterministic from the RNG state, targets are the next tokens
    enum { B = 3, T = 16 };
    int32_t in1[B * T], tg1[B * T], in2[B * T], tg2[B * T];
    uint64_t r1 = 99, r2 = 99;
    CHECK(dataset_train_batch(ds, &r1, B, T, in1, tg1) == WGT_OK, "train batch: %s", wgt_last_error());
    CHECK(dataset_train_batch(ds, &r2, B, T, in2, tg2) == WGT_OK, "train batch: %s", wgt_last_error());
    CHECK(r1 == r2 && !memcmp(in1, in2, sizeof in1) && !memcmp(tg1, tg2, sizeof tg1), "same RNG state, other batch");
    int shifted = 1;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            shifted &= tg1[b * T + t] == (in1[b * T + t] + 1) % 250;
            if (t + 1 < T) shifted &= in1[b * T + t + 1] == tg1[b * T + t];
        }
    CHECK(shifted, "targets are not the inputs shifted by one");
    // validation: windows of T+1 overlapping by one token; every target scored exactly once
    size_t windows = dataset_val_windows(ds, T), batches = (windows + B - 1) / B, total = 0;
    CHECK(windows == (95 - 1 + T - 1) / T, "windows %zu", windows);
    int seen[95] = {0}, ok = 1;
    for (size_t b = 0; b < batches; b++) {
        size_t valid = 0;
        CHECK(dataset_val_batch(ds, b, B, T, in1, tg1, NULL, &valid) == WGT_OK, "val batch: %s", wgt_last_error());
        total += valid;
        for (int k = 0; k < B * T; k++) {
            if (tg1[k] < 0) continue;
            ok &= tg1[k] >= 1001 && tg1[k] < 1095 && in1[k] == tg1[k] - 1;
            if (tg1[k] >= 1001 && tg1[k] < 1095) seen[tg1[k] - 1000]++;
        }
    }
    for (int i = 1; i < 95; i++) ok &= seen[i] == 1;
    CHECK(ok && total == 94, "validation windows: %zu targets", total);
    dataset_free(ds);
    CHECK(dataset_open(&ds, "/nonexistent/dir") != WGT_OK && strstr(wgt_last_error(), "wgtrain prepare"),
          "missing dir: %s", wgt_last_error());
}

static void test_sampler(void) {
    enum { V = 50 };
    float lg[V];
    for (int i = 0; i < V; i++) lg[i] = (float)(i % 7) * 0.3f;
    lg[31] = 3.0f;
    sampler s;
    sampler_init(&s, V, 0.0, 0, 1.0, 1);
    CHECK(sampler_pick(&s, lg) == 31, "greedy");
    sampler_free(&s);
    sampler_init(&s, V, 1.0, 1, 1.0, 1);
    int all = 1;
    for (int k = 0; k < 50; k++) all &= sampler_pick(&s, lg) == 31;
    CHECK(all, "top-k 1 is greedy");
    sampler_free(&s);
    sampler_init(&s, V, 1.0, 0, 1e-6, 1);
    all = 1;
    for (int k = 0; k < 50; k++) all &= sampler_pick(&s, lg) == 31;
    CHECK(all, "tiny top-p is greedy");
    sampler_free(&s);
    // top-k 3 only ever returns the three likeliest; unfiltered sampling matches the softmax
    lg[5] = 2.9f, lg[12] = 2.8f;
    sampler_init(&s, V, 1.0, 3, 1.0, 2);
    all = 1;
    for (int k = 0; k < 300; k++) {
        int t = sampler_pick(&s, lg);
        all &= t == 31 || t == 5 || t == 12;
    }
    CHECK(all, "top-k 3 left the top 3");
    sampler_free(&s);
    sampler_init(&s, V, 1.0, 0, 1.0, 3);
    double z = 0;
    for (int i = 0; i < V; i++) z += exp(lg[i]);
    int hits = 0, N = 20000;
    for (int k = 0; k < N; k++) hits += sampler_pick(&s, lg) == 31;
    double want = exp(3.0) / z, sd = sqrt(want * (1 - want) / N);
    CHECK(fabs((double)hits / N - want) < 5 * sd, "frequency of the top token %g, softmax %g", (double)hits / N, want);
    sampler_free(&s);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/wgt_ckpt_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 2;
    }
    test_roundtrip_and_damage();
    test_config_json_and_resume();
    test_model_config();
    test_lr_schedule();
    test_dataset();
    test_sampler();
    nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return test_finish();
}
