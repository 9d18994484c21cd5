// train_dist.c — the trainer's data-parallel parts (train_dist.h): agreement before step 1,
// the bucketed gradient sum through host memory, the weight check at checkpoints, the batch
// rule of a resume with another rank count, and a GPU per rank. MPI itself is behind dist.h.
#include "train/train_dist.h"
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cjson/cJSON.h>
#include "core/clock.h"
#include "core/fileutil.h"
#include "core/json_strict.h"

// ------------------------------------------------------------------ --resume and the batch

wgt_status train_dist_resume_batch(checkpoint *ck, const train_config *flags, const train_flags *given) {
    const long long N = dist_size();
    const ckpt_progress *pr = &ck->pr;
    unsigned long long per_step = (unsigned long long)ck->cfg.seq * (unsigned long long)ck->cfg.grad_accum;
    // the global batch the run was trained with, from its tokens (every update counts all ranks')
    if (!pr->step || !per_step || pr->tokens % (pr->step * per_step)) return WGT_OK;  // nothing to go by
    unsigned long long global = pr->tokens / (pr->step * per_step);
    int batch = train_config_flag_given(given, "--batch") ? flags->batch : ck->cfg.batch;
    if ((unsigned long long)batch * (unsigned long long)N == global) {
        ck->cfg.batch = batch;  // the per-rank share of the same global batch
        return WGT_OK;
    }
    if (global % (unsigned long long)N)
        return wgt_fail(WGT_ERR_CONFIG, "the checkpoint was trained with a global batch of %llu sequences, which %lld "
                        "ranks cannot share equally; resume with a rank count that divides %llu", global, N, global);
    return wgt_fail(WGT_ERR_CONFIG, "the checkpoint was trained with a global batch of %llu sequences per micro-batch, "
                    "and --batch is per rank: with %lld rank%s resume with --batch %llu (--batch %d would make it %llu)",
                    global, N, N > 1 ? "s" : "", global / (unsigned long long)N, batch,
                    (unsigned long long)batch * (unsigned long long)N);
}

// ------------------------------------------------------------------ a GPU per rank

static char g_pick[160];

// A PCI attribute such as "0x030000\n" (sysfs files say 4096 bytes, their page, whatever they
// hold). 0 when it cannot be read or is not hexadecimal: that device is left out.
static int read_hex(const char *dir, const char *name, unsigned *out) {
    char p[512], *text;
    size_t n;
    if ((size_t)snprintf(p, sizeof p, "/sys/bus/pci/devices/%s/%s", dir, name) >= sizeof p) return 0;
    if (file_read_all(p, "PCI attribute", NULL, 4096, &text, &n) != WGT_OK) return 0;
    char *end;
    unsigned long v = strtoul(text, &end, 16);
    int ok = end != text && v <= 0xFFFFFFFFul;
    free(text);
    if (ok) *out = (unsigned)v;
    return ok;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int have_device_select_layer(void) {
    const char *dirs[] = {"/usr/share/vulkan/implicit_layer.d", "/etc/vulkan/implicit_layer.d"};
    for (size_t i = 0; i < 2; i++) {
        char p[256];
        snprintf(p, sizeof p, "%s/VkLayer_MESA_device_select.json", dirs[i]);
        if (access(p, R_OK) == 0) return 1;
    }
    return 0;
}

const char *train_dist_pick_gpu(const char *device, const char *adapter) {
    g_pick[0] = 0;
    if (dist_size() == 1 || dist_local_size() == 1 || (adapter && *adapter) || !strcmp(device, "cpu")) return g_pick;
    if (getenv("DRI_PRIME") || getenv("MESA_VK_DEVICE_SELECT")) {
        snprintf(g_pick, sizeof g_pick, "the GPU chosen by DRI_PRIME / MESA_VK_DEVICE_SELECT");
        return g_pick;
    }
    // the host's GPUs: PCI display controllers (class 0x03) of NVIDIA or AMD, in bus order
    // (a server's BMC VGA and an integrated GPU beside them are not training GPUs)
    char *names[64];
    int n = 0;
    DIR *d = opendir("/sys/bus/pci/devices");
    struct dirent *e;
    while (d && (e = readdir(d)) && n < 64) {
        unsigned cls, vendor;
        if (e->d_name[0] == '.' || !read_hex(e->d_name, "class", &cls) || !read_hex(e->d_name, "vendor", &vendor)) continue;
        if ((cls >> 16) == 0x03 && (vendor == 0x10de || vendor == 0x1002)) names[n++] = wgt_strdup(e->d_name);
    }
    if (d) closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    if (n > 1) {
        const char *pci = names[dist_local_rank() % n];
        unsigned dom, bus, dev, fn;
        if (!have_device_select_layer())
            snprintf(g_pick, sizeof g_pick, "%d GPUs here but no Vulkan device-select layer (Mesa's, from "
                     "mesa-vulkan-drivers): every rank of this host opens the same GPU", n);
        else if (sscanf(pci, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) == 4) {
            char tag[64];
            snprintf(tag, sizeof tag, "pci-%04x_%02x_%02x_%u", dom, bus, dev, fn);
            setenv("DRI_PRIME", tag, 1);
            setenv("MESA_VK_DEVICE_SELECT_FORCE_DEFAULT_DEVICE", "1", 1);
            snprintf(g_pick, sizeof g_pick, "GPU %d of %d (PCI %s)", dist_local_rank() % n, n, pci);
        }
    }
    for (int i = 0; i < n; i++) free(names[i]);
    return g_pick;
}

// ------------------------------------------------------------------ agreement before step 1

#define DIFF_MAX 320
typedef struct {
    uint64_t data, prog, weights;
    uint64_t step;
    int local_rank;
    char host[64], device[160], diff[DIFF_MAX];
} rank_record;

// The first leaf in which two JSON values differ, as "path: A vs B"; 0 if they are equal.
static int json_first_diff(const cJSON *a, const cJSON *b, const char *path, char *out, size_t cap) {
    if (cJSON_IsObject(a) && cJSON_IsObject(b)) {
        const cJSON *x;
        cJSON_ArrayForEach(x, a) {
            char p[160];
            snprintf(p, sizeof p, "%s%s%s", path, path[0] ? "." : "", x->string);
            const cJSON *y = cJSON_GetObjectItemCaseSensitive(b, x->string);
            if (!y) {
                snprintf(out, cap, "%s is set on rank %d and absent on rank 0", p, dist_rank());
                return 1;
            }
            if (json_first_diff(x, y, p, out, cap)) return 1;
        }
        cJSON_ArrayForEach(x, b) if (!cJSON_GetObjectItemCaseSensitive(a, x->string)) {
            snprintf(out, cap, "%s%s%s is absent on rank %d and set on rank 0", path, path[0] ? "." : "", x->string,
                     dist_rank());
            return 1;
        }
        return 0;
    }
    if (cJSON_Compare(a, b, 1)) return 0;
    char *sa = cJSON_PrintUnformatted(a), *sb = cJSON_PrintUnformatted(b);
    snprintf(out, cap, "%s is %.100s on rank %d and %.100s on rank 0", path, sa ? sa : "?", dist_rank(), sb ? sb : "?");
    free(sa);
    free(sb);
    return 1;
}

static uint64_t data_fingerprint(const train_config *c, const dataset *ds, const ckpt_progress *pr) {
    uint64_t h = DIST_HASH_SEED;
    const char *th = dataset_tokenizer_hash(ds);
    h = dist_hash(th, strlen(th), h);
    size_t counts[2] = {dataset_train_tokens(ds), dataset_val_tokens(ds)};
    h = dist_hash(counts, sizeof counts, h);
    // the first windows the next step draws: the same files give the same tokens
    uint64_t rng = pr->data_rng;
    int nb = c->batch < 4 ? c->batch : 4;
    int32_t *in = wgt_malloc((size_t)nb * c->seq * 4), *tg = wgt_malloc((size_t)nb * c->seq * 4);
    if (dataset_train_batch(ds, &rng, nb, c->seq, in, tg) == WGT_OK) {
        h = dist_hash(in, (size_t)nb * c->seq * 4, h);
        h = dist_hash(tg, (size_t)nb * c->seq * 4, h);
    }
    free(in);
    free(tg);
    return h;
}

wgt_status train_dist_agree(const train_config *c, const dataset *ds, const ckpt_progress *pr, wgt_model *m,
                            wgt_backend *be, float *host) {
    const int N = dist_size(), me = dist_rank();
    if (N == 1) return WGT_OK;
    rank_record mine;
    memset(&mine, 0, sizeof mine);
    // the configuration: rank 0's JSON to everyone, each rank names its first difference
    char *json = train_config_to_json(c);
    unsigned long long len = strlen(json) + 1;
    WGT_TRY(dist_bcast(&len, sizeof len));
    char *ref = wgt_malloc(len);
    if (me == 0) memcpy(ref, json, len);
    WGT_TRY(dist_bcast(ref, len));
    if (strcmp(ref, json)) {
        cJSON *a = NULL, *b = NULL;
        if (json_parse_strict(&a, json, strlen(json), 0, "this rank's configuration") != WGT_OK ||
            json_parse_strict(&b, ref, strnlen(ref, len), 0, "rank 0's configuration") != WGT_OK || !json_first_diff(a, b, "", mine.diff, sizeof mine.diff))
            snprintf(mine.diff, sizeof mine.diff, "the configuration JSON differs");
        cJSON_Delete(a);
        cJSON_Delete(b);
    }
    free(json);
    free(ref);
    mine.data = data_fingerprint(c, ds, pr);
    ckpt_progress p = *pr;
    p.elapsed_s = 0;  // wall time may differ; the position may not
    mine.prog = dist_hash(&p, sizeof p, DIST_HASH_SEED);
    mine.step = pr->step;
    size_t n = model_state_elems(m);
    WGT_TRY(model_params_download(m, host));
    mine.weights = dist_hash(host, n * 4, DIST_HASH_SEED);
    mine.local_rank = dist_local_rank();
#ifdef WGT_NO_MPI
    snprintf(mine.host, sizeof mine.host, "local");  // one process (no gethostname in wasi-libc)
#else
    if (gethostname(mine.host, sizeof mine.host - 1)) snprintf(mine.host, sizeof mine.host, "?");
#endif
    snprintf(mine.device, sizeof mine.device, "%s%s%s%s", be->name, be->device_name ? " (" : "",
             be->device_name ? be->device_name(be) : "", be->device_name ? ")" : "");
    const size_t used = strlen(mine.device), pick = strlen(g_pick);
    if (pick && used + pick + 4 < sizeof mine.device) {  // ", <pick>" when it fits whole
        memcpy(mine.device + used, ", ", 2);
        memcpy(mine.device + used + 2, g_pick, pick + 1);
    }

    rank_record *all = wgt_malloc((size_t)N * sizeof *all);
    WGT_TRY(dist_allgather(&mine, all, sizeof mine));
    printf("train: data parallel over %d ranks: %d x %d sequences x %d tokens x %d micro-batch%s = %lld tokens per "
           "update in all (--batch is per rank)\n", N, N, c->batch, c->seq, c->grad_accum, c->grad_accum > 1 ? "es" : "",
           (long long)N * c->batch * c->seq * c->grad_accum);
    for (int r = 0; r < N; r++)
        printf("train: rank %d on %s (local rank %d): %s\n", r, all[r].host, all[r].local_rank, all[r].device);
    // the same verdict on every rank, from the same records
    char msg[4096] = "";
    size_t k = 0;
    for (int r = 1; r < N && k < sizeof msg - 600; r++) {
        const rank_record *x = &all[r];
        if (x->diff[0])
            k += (size_t)snprintf(msg + k, sizeof msg - k, "%srank %d's configuration differs from rank 0's: %s",
                                  k ? "; " : "", r, x->diff);
        else if (x->data != all[0].data)
            k += (size_t)snprintf(msg + k, sizeof msg - k, "%srank %d reads other data than rank 0 (another tokenizer, "
                                  "other shards or other tokens under --data)", k ? "; " : "", r);
        else if (x->prog != all[0].prog)
            k += (size_t)snprintf(msg + k, sizeof msg - k, "%srank %d resumed from another checkpoint than rank 0 "
                                  "(step %llu there, %llu on rank 0)", k ? "; " : "", r,
                                  (unsigned long long)x->step, (unsigned long long)all[0].step);
        else if (x->weights != all[0].weights)
            k += (size_t)snprintf(msg + k, sizeof msg - k, "%srank %d starts from other weights than rank 0 (another "
                                  "checkpoint or --init file of the same step)", k ? "; " : "", r);
    }
    free(all);
    if (k)
        return dist_fail_all(WGT_ERR_CONFIG, "the ranks disagree before step 1: %s. Every rank must be started with the "
                             "same flags, the same data and the same run directory", msg);
    return WGT_OK;
}

// ------------------------------------------------------------------ each step

static double g_comm_s;
static long g_comm_steps;

static void test_kill(long step1) {
    const char *e = getenv("WGTRAIN_TEST_KILL");
    if (!e) return;
    int r;
    long s;
    char tail;
    if (sscanf(e, "%d:%ld%c", &r, &s, &tail) != 2 || r < 0 || s < 1) {
        fprintf(stderr, "wgtrain train: rank %d: WGTRAIN_TEST_KILL must be RANK:STEP (e.g. 1:3), got '%s'\n",
                dist_rank(), e);
        exit(2);
    }
    if (r == dist_rank() && s == step1) raise(SIGKILL);
}

wgt_status train_dist_step(wgt_model *m, float *host, long step, int local_stop, int *stop_all) {
    test_kill(step + 1);
    if (dist_size() == 1) {
        *stop_all = local_stop;
        return WGT_OK;
    }
    double t0 = wgt_now_s();
    const size_t n = model_state_elems(m), nb = (n + DIST_BUCKET_ELEMS - 1) / DIST_BUCKET_ELEMS;
    dist_reqs *rq = dist_reqs_new((int)nb);
    wgt_status st = WGT_OK;
    // the buckets of one downloaded slice are summed while the next slice comes down from the
    // device, in the state's order
    for (size_t d = 0; d < n && st == WGT_OK; d += DIST_DOWNLOAD_ELEMS) {
        size_t dk = n - d < DIST_DOWNLOAD_ELEMS ? n - d : DIST_DOWNLOAD_ELEMS;
        st = model_grads_download(m, host + d, d, dk);
        for (size_t o = d; o < d + dk && st == WGT_OK; o += DIST_BUCKET_ELEMS) {
            size_t k = d + dk - o < DIST_BUCKET_ELEMS ? d + dk - o : DIST_BUCKET_ELEMS;
            st = dist_isum_f32(rq, host + o, k);
        }
        dist_progress(rq);
    }
    if (st == WGT_OK) st = dist_wait_all(rq);
    dist_reqs_free(rq);
    for (size_t d = 0; d < n && st == WGT_OK; d += DIST_DOWNLOAD_ELEMS) {
        size_t dk = n - d < DIST_DOWNLOAD_ELEMS ? n - d : DIST_DOWNLOAD_ELEMS;
        st = model_grads_upload(m, host + d, d, dk);
    }
    WGT_TRY(st);
    double stop = local_stop ? 1.0 : 0.0;
    WGT_TRY(dist_sum_f64(&stop, 1));
    *stop_all = stop > 0;
    g_comm_s += wgt_now_s() - t0;
    g_comm_steps++;
    return WGT_OK;
}

wgt_status train_dist_check_weights(wgt_model *m, float *host) {
    const int N = dist_size();
    if (N == 1) return WGT_OK;
    size_t n = model_state_elems(m);
    WGT_TRY(model_params_download(m, host));
    uint64_t h = dist_hash(host, n * 4, DIST_HASH_SEED), *all = wgt_malloc((size_t)N * sizeof *all);
    WGT_TRY(dist_allgather(&h, all, sizeof h));
    int bad = -1;
    for (int r = 1; r < N && bad < 0; r++)
        if (all[r] != all[0]) bad = r;
    free(all);
    if (bad >= 0)
        return dist_fail_all(WGT_ERR_DEVICE, "rank %d's weights differ from rank 0's after identical updates: a device "
                             "computed the optimizer step differently; the last checkpoint is kept, resume from it", bad);
    return WGT_OK;
}

void train_dist_report(void) {
    if (dist_size() == 1 || !g_comm_steps) return;
    printf("train: gradient allreduce over %d ranks: %.1f ms per step on average (%ld steps, buckets of %zu MiB)\n",
           dist_size(), 1e3 * g_comm_s / (double)g_comm_steps, g_comm_steps, DIST_BUCKET_ELEMS * 4 >> 20);  // MiB
}
