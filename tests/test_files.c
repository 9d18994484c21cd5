// test_files.c — file-format and data-safety rules (docs/files-and-safety.md): atomic writes
// that refuse to replace anything but a regular file, readers that refuse FIFOs and devices
// instead of blocking, directory locks, the strict .npy / safetensors / JSON parsers, the
// checkpoint's content checks behind its CRC, the data directory's integrity scheme (shard
// CRCs, tokenizer fingerprint, interrupted prepare), shards truncated while in use, and the
// tokenizer's duplicate-merge refusal. Each case is one that an earlier version got wrong.
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>
#include "core/fileutil.h"
#include "core/json_strict.h"
#include "core/npy.h"
#include "core/runlock.h"
#include "core/safetensors.h"
#include "model/model.h"
#include "data/prepare.h"
#include "data/shard.h"
#include "data/tokenizer.h"
#include "testlib.h"
#include "train/checkpoint.h"
#include "train/dataset.h"
#include "train/metrics.h"
#include "train/plot.h"
#include "train/train_config.h"

static char tmpdir[256];

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) { return remove(p); }

static const char *tp(const char *name) {
    static char bufs[16][1024];
    static int k = 0;
    char *b = bufs[k++ % 16];
    snprintf(b, 1024, "%s/%s", tmpdir, name);
    return b;
}

static int has(const char *needle) { return strstr(wgt_last_error(), needle) != NULL; }

static int count_temps(const char *dir) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "ls -a '%s' | grep -c '\\.tmp\\.' >/dev/null 2>&1", dir);
    return system(cmd) == 0;
}

// ------------------------------------------------------------------ atomic writes

static void test_atomic_write(void) {
    const char *p = tp("a.txt");
    CHECK(atomic_write_file(p, "hello", 5) == WGT_OK, "new file: %s", wgt_last_error());
    CHECK(atomic_write_file(p, "bye", 3) == WGT_OK, "replace a regular file: %s", wgt_last_error());
    size_t n;
    uint8_t *b = test_slurp(p, &n);
    CHECK(b && n == 3 && !memcmp(b, "bye", 3), "content after replace");
    free(b);
    CHECK(!count_temps(tmpdir), "no temporary file left");

    // two writers of one path get different, unguessable temporary names, created exclusively
    atomic_file a1, a2;
    CHECK(atomic_file_open(&a1, p) == WGT_OK && atomic_file_open(&a2, p) == WGT_OK, "two opens");
    CHECK(strcmp(a1.tmp, a2.tmp) && !strncmp(a1.tmp, p, strlen(p)) && strstr(a1.tmp, ".tmp."), "temp names %s %s",
          a1.tmp, a2.tmp);
    char pidname[64];
    snprintf(pidname, sizeof pidname, ".tmp.%ld", (long)getpid());
    CHECK(!strstr(a1.tmp, pidname), "temporary name is not predictable from the pid: %s", a1.tmp);
    atomic_file_abort(&a1);
    atomic_file_abort(&a2);

    // what is not a regular file is never replaced
    const char *fifo = tp("fifo");
    mkfifo(fifo, 0600);
    CHECK(atomic_write_file(fifo, "x", 1) != WGT_OK && has("FIFO") && has(fifo), "FIFO target: %s", wgt_last_error());
    struct stat sb;
    CHECK(lstat(fifo, &sb) == 0 && S_ISFIFO(sb.st_mode), "the FIFO is still a FIFO");
    npy_array arr = {NPY_F32, 1, {2}, 2, (float[]){1, 2}};
    CHECK(npy_save(fifo, &arr) != WGT_OK && has("FIFO"), "npy_save onto a FIFO (a device as --out): %s", wgt_last_error());
    CHECK(lstat(fifo, &sb) == 0 && S_ISFIFO(sb.st_mode), "still a FIFO after npy_save");
    mkdir(tp("adir"), 0755);
    CHECK(atomic_write_file(tp("adir"), "x", 1) != WGT_OK && has("directory"), "directory target: %s", wgt_last_error());
    test_spit(tp("target"), "keep", 4);
    symlink(tp("target"), tp("link"));
    CHECK(atomic_write_file(tp("link"), "evil", 4) != WGT_OK && has("symbolic link"), "symlink target: %s",
          wgt_last_error());
    b = test_slurp(tp("target"), &n);
    CHECK(b && n == 4 && !memcmp(b, "keep", 4) && lstat(tp("link"), &sb) == 0 && S_ISLNK(sb.st_mode),
          "the link and its target are untouched");
    free(b);
    // replaced by a directory between open and commit: refused at commit, temp removed
    atomic_file af;
    CHECK(atomic_file_open(&af, tp("race")) == WGT_OK, "open");
    mkdir(tp("race"), 0755);
    atomic_file_write(&af, "x", 1);
    CHECK(atomic_file_commit(&af) != WGT_OK && has("directory"), "commit over a new directory: %s", wgt_last_error());
    CHECK(access(af.tmp, F_OK) != 0, "temporary file removed after a refused commit");
    // appending (metrics.jsonl) refuses a symlink too
    FILE *f = NULL;
    CHECK(file_open_append(tp("link"), &f) != WGT_OK && !f, "append through a symlink refused");
    CHECK(file_open_append(tp("log"), &f) == WGT_OK && f, "append to a new file: %s", wgt_last_error());
    if (f) fclose(f);
}

// ------------------------------------------------------------------ non-regular inputs

static void on_alarm(int sig) {
    static const char msg[] = "FAIL: a reader blocked on a FIFO\n0 passed, 1 failed\n";
    if (write(2, msg, sizeof msg - 1)) {}
    _exit(1);
}

static void test_nonregular_inputs(void) {
    signal(SIGALRM, on_alarm);
    alarm(20);  // before the fix, opening the FIFO blocked forever
    const char *fifo = tp("in.fifo");
    mkfifo(fifo, 0600);
    npy_array a;
    CHECK(npy_load(&a, fifo) != WGT_OK && has("FIFO"), "npy: %s", wgt_last_error());
    st_file *sf;
    CHECK(st_open(&sf, fifo) != WGT_OK && has("FIFO"), "safetensors: %s", wgt_last_error());
    checkpoint ck;
    CHECK(checkpoint_read(&ck, fifo) != WGT_OK && has("FIFO"), "checkpoint: %s", wgt_last_error());
    tokenizer *tok;
    CHECK(tokenizer_load(&tok, fifo) != WGT_OK && has("FIFO"), "tokenizer: %s", wgt_last_error());
    shard *s;
    CHECK(shard_open(&s, fifo) != WGT_OK && has("FIFO"), "shard: %s", wgt_last_error());
    // a FIFO in place of a shard of an llm.c-style directory
    mkdir(tp("fifodata"), 0755);
    mkfifo(tp("fifodata/x_train.bin"), 0600);
    dataset *ds;
    CHECK(dataset_open(&ds, tp("fifodata")) != WGT_OK && has("FIFO"), "dataset: %s", wgt_last_error());
    CHECK(npy_load(&a, "/dev/zero") != WGT_OK && has("character device"), "a device as input: %s", wgt_last_error());
    alarm(0);
}

// ------------------------------------------------------------------ locks

static void test_runlock(void) {
    mkdir(tp("run"), 0755);
    run_lock a = {0}, b = {0};
    CHECK(run_lock_acquire(&a, tp("run"), "train") == WGT_OK, "first lock: %s", wgt_last_error());
    char pid[32];
    snprintf(pid, sizeof pid, "pid %ld", (long)getpid());
    CHECK(run_lock_acquire(&b, tp("run"), "train") != WGT_OK && has(pid) && has("in use"), "second lock: %s",
          wgt_last_error());
    run_lock_release(&a);
    CHECK(run_lock_acquire(&b, tp("run"), "train") == WGT_OK, "lock after release: %s", wgt_last_error());
    run_lock_release(&b);
    run_lock_release(&b);  // twice is harmless
    // held by another process: its pid is named
    int up[2], down[2];
    if (pipe(up) || pipe(down)) { perror("pipe"); exit(2); }
    pid_t child = fork();
    if (child == 0) {
        close(down[1]);
        close(up[0]);
        run_lock l = {0};
        char c = run_lock_acquire(&l, tp("run"), "prepare") == WGT_OK ? 'y' : 'n';
        if (write(up[1], &c, 1) != 1) _exit(3);
        if (read(down[0], &c, 1) < 0) _exit(3);  // until the parent closes the pipe
        _exit(0);
    }
    char c = 0;
    if (read(up[0], &c, 1) != 1) c = 0;
    CHECK(c == 'y', "child took the lock");
    snprintf(pid, sizeof pid, "pid %ld", (long)child);
    CHECK(run_lock_acquire(&b, tp("run"), "train") != WGT_OK && has(pid) && has("wgtrain prepare"),
          "lock held by another process: %s", wgt_last_error());
    close(down[1]);
    waitpid(child, NULL, 0);
    CHECK(run_lock_acquire(&b, tp("run"), "train") == WGT_OK, "the lock is free when its holder exits: %s",
          wgt_last_error());
    run_lock_release(&b);
    close(up[0]);
    close(up[1]);
    close(down[0]);
    // a run directory that does not exist is not created by a resume's lock
    run_lock r = {0};
    CHECK(run_lock_dir(&r, tp("no-such-run"), 0, "train") == WGT_OK && !r.held && access(tp("no-such-run"), F_OK) != 0,
          "resume of a missing directory takes no lock and creates nothing");
    CHECK(run_lock_dir(&r, tp("new-run/sub"), 1, "train") == WGT_OK && r.held, "new run dir created and locked");
    run_lock_release(&r);
}

// ------------------------------------------------------------------ strict JSON

static void test_json_strict(void) {
    struct { const char *text; unsigned flags; int ok; } cases[] = {
        {"{\"a\": [1, 2.5, -3e2, true, null, \"x\\u00e9\\ud83d\\ude00\"]}", 0, 1},
        {"{\"a\": 1}   \n", 0, 1},
        {"{\"a\": 1} x", 0, 0},              // trailing garbage
        {"{\"a\": 1, \"a\": 2}", 0, 0},      // duplicate key
        {"{\"a\": {\"b\": 1, \"b\": 1}}", 0, 0},
        {"{\"a\": 01}", 0, 0},               // leading zero
        {"{\"a\": \"x\\u0000y\"}", 0, 0},    // NUL escape
        {"{\"a\": \"\x01\"}", 0, 0},         // raw control character
        {"{\"a\": \"\xc3\x28\"}", 0, 0},     // invalid UTF-8
        {"{\"a\": \"\xed\xa0\x80\"}", 0, 0}, // UTF-8 encoded surrogate
        {"{\"a\": \"\\ud800\"}", 0, 0},      // lone surrogate
        {"{\"a\": 1,}", 0, 0},               // trailing comma
        {"{\"a\": 12}", JSON_INTEGERS_ONLY, 1},
        {"{\"a\": 1.5}", JSON_INTEGERS_ONLY, 0},
        {"{\"a\": 1e3}", JSON_INTEGERS_ONLY, 0},
        {"{\"a\": -1}", JSON_INTEGERS_ONLY, 0},
        {"{\"a\": 9007199254740991}", JSON_INTEGERS_ONLY, 1},
        {"{\"a\": 9007199254740992}", JSON_INTEGERS_ONLY, 0},
        {"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]", 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cJSON *j = NULL;
        wgt_status st = json_parse_strict(&j, cases[i].text, strlen(cases[i].text), cases[i].flags, "case");
        CHECK((st == WGT_OK) == cases[i].ok, "case %zu (%s): %s", i, cases[i].text, st ? wgt_last_error() : "accepted");
        cJSON_Delete(j);
    }
    cJSON *j = NULL;
    CHECK(json_parse_strict(&j, "{\"a\": 1}\0 ", 10, 0, "nul") != WGT_OK, "a NUL byte after the value");
    CHECK(json_parse_strict(&j, "\xEF\xBB\xBF{\"a\": 1}", 11, 0, "bom") != WGT_OK && strstr(wgt_last_error(), "byte order mark"),
          "a byte order mark is refused by name: %s", wgt_last_error());
    {  // nesting beyond the limit is said to be too deep (not "not an object")
        char deep[5000 * 2 + 1];
        for (int i = 0; i < 5000; i++) deep[i] = '[', deep[5000 + i] = ']';
        CHECK(json_parse_strict(&j, deep, 10000, 0, "deep") != WGT_OK && strstr(wgt_last_error(), "too deep"),
              "5000 levels: %s", wgt_last_error());
    }
    cJSON *n = cJSON_CreateNumber(1e300);
    int64_t v = 0;
    CHECK(!json_int_in(n, 0, INT32_MAX, &v), "1e300 is not an int32");
    cJSON_SetNumberValue(n, 2.5);
    CHECK(!json_int_in(n, 0, 10, &v), "2.5 is not an integer");
    cJSON_SetNumberValue(n, 7);
    CHECK(json_int_in(n, 0, 10, &v) && v == 7, "7");
    cJSON_Delete(n);
}

// ------------------------------------------------------------------ .npy

// A .npy version 1.0 file with the given header text (padded as NumPy does) and data bytes.
static void write_npy(const char *path, const char *dict, int version, const void *data, size_t n) {
    char h[20000];
    size_t pre = version == 1 ? 10 : 12, len = strlen(dict);
    memcpy(h, dict, len);
    while ((pre + len + 1) % 64) h[len++] = ' ';
    h[len++] = '\n';
    uint8_t *buf = malloc(pre + len + n);
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (uint8_t)version;
    buf[7] = 0;
    buf[8] = (uint8_t)len;
    buf[9] = (uint8_t)(len >> 8);
    if (version != 1) buf[10] = (uint8_t)(len >> 16), buf[11] = (uint8_t)(len >> 24);
    memcpy(buf + pre, h, len);
    if (n) memcpy(buf + pre + len, data, n);
    test_spit(path, buf, pre + len + n);
    free(buf);
}

static void test_npy(void) {
    float d[6] = {1, 2, 3, 4, 5, 6};
    const char *p = tp("t.npy");
    struct { const char *dict; size_t bytes; int ok; size_t n; const char *msg; } cases[] = {
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 24, 1, 6, NULL},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (6,)}", 24, 1, 6, NULL},
        {"{\"shape\": (6,), \"fortran_order\": False, \"descr\": \"<i4\"}", 24, 1, 6, NULL},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': ()}", 4, 1, 1, NULL},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (0, 3)}", 0, 1, 0, NULL},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (6)}", 24, 0, 0, "not a tuple"},
        {"{'descr': '<f4', 'descr': '<i4', 'fortran_order': False, 'shape': (6,)}", 24, 0, 0, "twice"},
        {"{'descr': '<f4', 'fortran_order': False}", 24, 0, 0, "missing"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'extra': 1}", 24, 0, 0, "unexpected key"},
        // 'shape' inside a string: the old key search found it there
        {"{'descr': '<f4', 'fortran_order': False, 'x': \"'shape': (6,)\", 'shape': (6,)}", 24, 0, 0, "unexpected key"},
        {"{'descr': '<f4', 'fortran_order': 0, 'shape': (6,)}", 24, 0, 0, "True or False"},
        {"{'descr': 5, 'fortran_order': False, 'shape': (6,)}", 24, 0, 0, "quoted string"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (-6,)}", 24, 0, 0, "non-negative"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (6.0,)}", 24, 0, 0, "expected ','"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (06,)}", 24, 0, 0, "leading zero"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': [6]}", 24, 0, 0, "tuple"},
        {"{'descr': '<f8', 'fortran_order': False, 'shape': (3,)}", 24, 0, 0, "<f8"},
        {"{'descr': '<f4', 'fortran_order': True, 'shape': (6,)}", 24, 0, 0, "Fortran"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (6,)} x", 24, 0, 0, "after the header"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (7,)}", 24, 0, 0, "truncated"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (5,)}", 24, 0, 0, "after the 5 elements"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776, 1099511627776)}", 24, 0, 0, "too large"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_npy(p, cases[i].dict, 1, d, cases[i].bytes);
        npy_array a;
        wgt_status st = npy_load(&a, p);
        if (cases[i].ok) {
            CHECK(st == WGT_OK && a.n == cases[i].n && (a.n == 0 || !memcmp(a.data, d, a.n * 4)), "case %zu %s: %s", i,
                  cases[i].dict, wgt_last_error());
            if (st == WGT_OK) npy_free(&a);
        } else {
            CHECK(st != WGT_OK && has(cases[i].msg) && !a.data, "case %zu %s: want '%s', got %s", i, cases[i].dict,
                  cases[i].msg, st ? wgt_last_error() : "accepted");
        }
    }
    write_npy(p, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,)}", 2, d, 24);
    npy_array a;
    CHECK(npy_load(&a, p) == WGT_OK && a.n == 6, "version 2.0: %s", wgt_last_error());
    npy_free(&a);
    // version 1.1 does not exist
    write_npy(p, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,)}", 1, d, 24);
    size_t n;
    uint8_t *b = test_slurp(p, &n);
    b[7] = 1;
    test_spit(p, b, n);
    CHECK(npy_load(&a, p) != WGT_OK && has("1.1"), "version 1.1: %s", wgt_last_error());
    // a header without its final newline
    b[7] = 0;
    size_t hl = (size_t)b[8] | (size_t)b[9] << 8;
    b[10 + hl - 1] = ' ';
    test_spit(p, b, n);
    CHECK(npy_load(&a, p) != WGT_OK && has("newline"), "no newline: %s", wgt_last_error());
    free(b);
    // save / load round trip, 0-d and 3-d
    float v3[24];
    for (int i = 0; i < 24; i++) v3[i] = (float)i / 7.0f;
    npy_array s3 = {NPY_F32, 3, {2, 3, 4}, 24, v3};
    CHECK(npy_save(p, &s3) == WGT_OK && npy_load(&a, p) == WGT_OK && a.ndim == 3 && a.shape[2] == 4 &&
          !memcmp(a.data, v3, sizeof v3), "3-d round trip: %s", wgt_last_error());
    npy_free(&a);
}

// ------------------------------------------------------------------ safetensors

// A safetensors file: 8-byte length, the header text (padded with `pad` spaces), data bytes.
static void write_st(const char *path, const char *json, size_t pad, const void *data, size_t n) {
    size_t jl = strlen(json), hl = jl + pad;
    uint8_t *buf = malloc(8 + hl + n);
    for (int i = 0; i < 8; i++) buf[i] = (uint8_t)((uint64_t)hl >> (8 * i));
    memcpy(buf + 8, json, jl);
    memset(buf + 8 + jl, ' ', pad);
    if (n) memcpy(buf + 8 + hl, data, n);
    test_spit(path, buf, 8 + hl + n);
    free(buf);
}

// F16 and BF16 tensors read as exact float32: every one of the 65536 halves (normal, subnormal,
// zeros, infinities, NaN), every BF16 pattern, and a file mixing dtypes so that the F32 tensor
// after an odd-length F16 one is not 4-byte aligned in the file.
static double half_value(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
    return (h & 0x8000) ? -v : v;
}
static void test_safetensors_16bit(void) {
    const char *p = tp("h.safetensors");
    uint16_t *all = malloc(65536 * 2);
    for (uint32_t i = 0; i < 65536; i++) all[i] = (uint16_t)i;
    const char *dts[2] = {"F16", "BF16"};
    for (int k = 0; k < 2; k++) {
        char json[160];
        snprintf(json, sizeof json, "{\"h\":{\"dtype\":\"%s\",\"shape\":[256,256],\"data_offsets\":[0,131072]}}", dts[k]);
        write_st(p, json, 0, all, 131072);
        st_file *f = NULL;
        CHECK(st_open(&f, p) == WGT_OK, "%s: %s", dts[k], wgt_last_error());
        if (!f) continue;
        const st_tensor *t = st_find(f, "h");
        CHECK(t && t->n == 65536 && !strcmp(t->dtype, dts[k]), "%s: the tensor", dts[k]);
        int bad = 0;
        for (uint32_t i = 0; t && i < 65536; i++) {
            float v = t->data[i];
            uint32_t bits;
            memcpy(&bits, &v, 4);
            if (k == 1) {
                bad += bits != i << 16;
            } else if (((i >> 10) & 31) == 31) {
                // infinity or NaN, sign and payload kept
                bad += bits != ((i & 0x8000u) << 16 | 0x7f800000u | (i & 1023u) << 13);
            } else {
                bad += (double)v != half_value((uint16_t)i) || (signbit(v) != 0) != ((i & 0x8000) != 0);
            }
        }
        CHECK(!bad, "%s: %d of 65536 values converted inexactly", dts[k], bad);
        st_close(f);
    }
    free(all);
    // F16 [3] (6 bytes), then F32 [2] at byte 6, then BF16 [1]
    uint8_t data[6 + 8 + 2];
    uint16_t h3[3] = {0x3c00, 0xc000, 0x0001};  // 1, -2, 2^-24
    float f2[2] = {0.1f, -3.5f};
    uint16_t b1 = 0x4049;                       // bf16 3.140625
    memcpy(data, h3, 6);
    memcpy(data + 6, f2, 8);
    memcpy(data + 14, &b1, 2);
    write_st(p, "{\"a\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[0,6]},"
                "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[6,14]},"
                "\"c\":{\"dtype\":\"BF16\",\"shape\":[1],\"data_offsets\":[14,16]}}", 0, data, sizeof data);
    st_file *f = NULL;
    CHECK(st_open(&f, p) == WGT_OK, "mixed dtypes: %s", wgt_last_error());
    if (f) {
        const st_tensor *a = st_find(f, "a"), *b = st_find(f, "b"), *c = st_find(f, "c");
        CHECK(a && b && c && a->data[0] == 1.0f && a->data[1] == -2.0f && a->data[2] == ldexpf(1.0f, -24) &&
                  b->data[0] == 0.1f && b->data[1] == -3.5f && c->data[0] == 3.140625f &&
                  (uintptr_t)b->data % sizeof(float) == 0,
              "mixed dtypes: values");
        st_close(f);
    }
}

static void test_safetensors(void) {
    float d[10];
    for (int i = 0; i < 10; i++) d[i] = (float)i * 0.5f - 1.0f;
    const char *p = tp("t.safetensors");
    const char *good = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
                       "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[24,40]},"
                       "\"__metadata__\":{\"format\":\"pt\"}}";
    // every padding: a header length that is not a multiple of 4 must still give aligned floats
    for (size_t pad = 0; pad < 4; pad++) {
        write_st(p, good, pad, d, 40);
        st_file *f;
        wgt_status st = st_open(&f, p);
        CHECK(st == WGT_OK, "pad %zu: %s", pad, wgt_last_error());
        if (st != WGT_OK) continue;
        const st_tensor *a = st_find(f, "a"), *b = st_find(f, "b");
        CHECK(st_count(f) == 2 && a && b && a->n == 6 && b->n == 4 && b->ndim == 1, "pad %zu: tensors", pad);
        if (a && b) {
            CHECK((uintptr_t)a->data % sizeof(float) == 0 && (uintptr_t)b->data % sizeof(float) == 0,
                  "pad %zu: data is float-aligned", pad);
            float got[10];
            memcpy(got, a->data, 24);
            memcpy(got + 6, b->data, 16);
            CHECK(!memcmp(got, d, 40), "pad %zu: values", pad);
        }
        st_close(f);
    }
    struct { const char *json; size_t data; const char *msg; } bad[] = {
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[20,36]}}", 40, "overlapping"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[32,40]}}", 40, "gap"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}}", 40, "cover 24 data bytes"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[16,40]}}", 40, "starts at byte 16"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2.5,4],\"data_offsets\":[0,40]}}", 40, "non-negative integer"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-2,-5],\"data_offsets\":[0,40]}}", 40, "non-negative integer"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1e1],\"data_offsets\":[0,40]}}", 40, "non-negative integer"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1e300],\"data_offsets\":[0,40]}}", 40, "non-negative integer"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[10],\"data_offsets\":[0,40.0]}}", 40, "non-negative integer"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,0]}}", 0, "overflows"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[10],\"data_offsets\":[0,40]},"
         "\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[40,40]}}", 40, "twice"},
        {"{\"a\\u0000b\":{\"dtype\":\"F32\",\"shape\":[10],\"data_offsets\":[0,40]}}", 40, "NUL"},
        {"{\"a\":{\"dtype\":\"F33\",\"shape\":[10],\"data_offsets\":[0,40]}}", 40, "unknown dtype"},
        {"{\"a\":{\"dtype\":\"I32\",\"shape\":[10],\"data_offsets\":[0,40]}}", 40, "dtype I32"},
        {"{\"a\":{\"dtype\":\"F16\",\"shape\":[10],\"data_offsets\":[0,40]}}", 40, "do not match its shape"},
        {"{\"a\":{\"dtype\":\"BF16\",\"shape\":[30],\"data_offsets\":[0,60]}}", 40, "beyond"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[10],\"data_offsets\":[0,40],\"x\":1}}", 40, "unknown field"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[10],\"data_offsets\":[0,20,40]}}", 40, "lacks"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[10],\"data_offsets\":[0,40]}}xyz", 40, "after the JSON"},
        {" {\"a\":{\"dtype\":\"F32\",\"shape\":[10],\"data_offsets\":[0,40]}}", 40, "start with '{'"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[10],\"data_offsets\":[0,40]},\"__metadata__\":{\"k\":1}}", 40, "not a string"},
        {"{\"\xff\":{\"dtype\":\"F32\",\"shape\":[10],\"data_offsets\":[0,40]}}", 40, "UTF-8"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[20],\"data_offsets\":[0,80]}}", 40, "beyond"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_st(p, bad[i].json, 0, d, bad[i].data);
        st_file *f = NULL;
        wgt_status st = st_open(&f, p);
        CHECK(st != WGT_OK && has(bad[i].msg) && !f, "case %zu (%s): want '%s', got %s", i, bad[i].json, bad[i].msg,
              st ? wgt_last_error() : "accepted");
        if (st == WGT_OK) st_close(f);
    }
    // a header length beyond the file
    uint8_t hdr[12] = {0xff, 0xff, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' '};
    test_spit(p, hdr, sizeof hdr);
    st_file *f = NULL;
    CHECK(st_open(&f, p) != WGT_OK && has("beyond the end"), "huge header length: %s", wgt_last_error());
    // the writer's output reads back
    st_writer *w = st_writer_new();
    size_t s1[2] = {2, 3}, s2[1] = {4};
    st_writer_add(w, "x", 2, s1, d);
    st_writer_add(w, "y", 1, s2, d + 6);
    CHECK(st_writer_finish(w, p) == WGT_OK && st_open(&f, p) == WGT_OK && st_count(f) == 2 &&
          !memcmp(st_find(f, "y")->data, d + 6, 16), "writer round trip: %s", wgt_last_error());
    st_close(f);
    test_safetensors_16bit();
}

// A sharded checkpoint: two shards (an F32 one and a BF16 one, the BF16 tensor at an odd element
// offset) read through the index to the same values as one file; the index's own refusals
// (test_sharded.sh has the shard-level ones end to end).
static void test_safetensors_index(void) {
    float d[10];
    for (int i = 0; i < 10; i++) d[i] = (float)i * 0.5f - 1.0f;  // exact in BF16
    uint16_t bf[4];
    for (int i = 0; i < 4; i++) {
        uint32_t b;
        memcpy(&b, &d[6 + i], 4);
        bf[i] = (uint16_t)(b >> 16);
    }
    unsigned char two[2 + 8];  // one BF16 value before the tensor: it starts at byte 2
    memset(two, 0, 2);
    memcpy(two + 2, bf, 8);
    write_st(tp("s1.safetensors"), "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}}", 0, d, 24);
    write_st(tp("s2.safetensors"), "{\"pad\":{\"dtype\":\"BF16\",\"shape\":[1],\"data_offsets\":[0,2]},"
             "\"b\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[2,10]}}", 0, two, 10);
    const char *ip = tp("m.safetensors.index.json");
    const char *good = "{\"metadata\":{\"total_size\":34},\"weight_map\":{\"a\":\"s1.safetensors\","
                       "\"b\":\"s2.safetensors\",\"pad\":\"s2.safetensors\"}}";
    test_spit(ip, good, strlen(good));
    st_file *f = NULL;
    wgt_status st = st_open_checkpoint(&f, ip);
    CHECK(st == WGT_OK && st_count(f) == 3 && st_shard_count(f) == 2, "index: %s", st ? wgt_last_error() : "");
    if (st == WGT_OK) {
        const st_tensor *a = st_find(f, "a"), *b = st_find(f, "b");
        float got[10] = {0};
        CHECK(a && b && !a->data && st_tensor_read(f, b, got + 6) == WGT_OK && st_tensor_read(f, a, got) == WGT_OK &&
                  !memcmp(got, d, 40), "index: the values of both shards (BF16 converted)");
        CHECK(b && strstr(st_shard_path(f, b->shard), "s2.safetensors"), "index: b's shard");
        st_close(f);
    }
    struct { const char *json; const char *msg; } bad[] = {
        {"{\"weight_map\":{}}", "non-empty \"weight_map\""},
        {"[]", "weight_map"},
        {"{\"weight_map\":{\"a\":1}}", "must be a file name"},
        {"{\"weight_map\":{\"a\":\"../s1.safetensors\"}}", "must be a file name"},
        {"{\"weight_map\":{\"a\":\"/etc/passwd\"}}", "must be a file name"},
        {"{\"weight_map\":{\"a\":\"..\"}}", "must be a file name"},
        {"{\"weight_map\":{\"a\":\"\"}}", "must be a file name"},
        {"{\"weight_map\":{\"a\":\"s1.safetensors\",\"a\":\"s1.safetensors\"}}", "twice"},
        {"{\"weight_map\":{\"a\":\"s1.safetensors\"},\"extra\":1}", "unknown key"},
        {"{\"weight_map\":{\"a\":\"s1.safetensors\"},\"metadata\":3}", "\"metadata\" must be an object"},
        {"{\"weight_map\":{\"a\":\"nope.safetensors\"}}", "which is missing"},
        {"{\"weight_map\":{\"a\":\"s2.safetensors\",\"b\":\"s2.safetensors\",\"pad\":\"s2.safetensors\"}}",
         "tensor 'a' in shard"},
        {"{\"weight_map\":{\"a\":\"s1.safetensors\",\"b\":\"s2.safetensors\"}}", "does not list"},
        {"{\"weight_map\":{\"a\":\"s2.safetensors\",\"b\":\"s2.safetensors\",\"pad\":\"s1.safetensors\"}}",
         "is in shard"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        test_spit(ip, bad[i].json, strlen(bad[i].json));
        f = NULL;
        st = st_open_checkpoint(&f, ip);
        CHECK(st != WGT_OK && has(bad[i].msg) && !f, "index case %zu (%s): want '%s', got %s", i, bad[i].json,
              bad[i].msg, st ? wgt_last_error() : "accepted");
        if (st == WGT_OK) st_close(f);
    }
    // one file through st_open_checkpoint: its header, values by st_tensor_read
    CHECK(st_open_checkpoint(&f, tp("s1.safetensors")) == WGT_OK, "one file: %s", wgt_last_error());
    float got[6];
    CHECK(st_tensor_read(f, st_find(f, "a"), got) == WGT_OK && !memcmp(got, d, 24), "one file: values");
    st_close(f);
}

// ------------------------------------------------------------------ tokenizer

static void test_tokenizer_duplicate_merge(void) {
    // a well-formed file (valid CRC) whose merge 1 repeats merge 0: the message names merge 0
    // (it used to be read from the freed tokenizer)
    uint8_t buf[32 + 8 + 4] = {'W', 'G', 'T', '-', 'B', 'P', 'E', '\n'};
    uint32_t hdr[6] = {1, 259, 2, 258, 1, 0};
    memcpy(buf + 8, hdr, sizeof hdr);
    uint8_t merges[8] = {'a', 0, 'b', 0, 'a', 0, 'b', 0};
    memcpy(buf + 32, merges, 8);
    uint32_t crc = (uint32_t)crc32(0L, buf, 40);
    memcpy(buf + 40, &crc, 4);
    test_spit(tp("dup.bin"), buf, sizeof buf);
    tokenizer *tok = NULL;
    CHECK(tokenizer_load(&tok, tp("dup.bin")) == WGT_ERR_FORMAT && !tok &&
          has("merge 1 repeats the pair (97, 98) of merge 0"), "duplicate merge: %s", wgt_last_error());
}

// ------------------------------------------------------------------ checkpoint contents

// Rewrites checkpoint file bytes with the configuration text `json` and progress `pr` (and
// header reserved byte `rsv` set to rsv_val when rsv >= 0), with every checksum made valid.
static void rebuild_ckpt(const char *dst, const uint8_t *file, size_t len, const char *json, size_t jlen,
                         const ckpt_progress *pr, int rsv, uint8_t rsv_val) {
    uint32_t oj;
    memcpy(&oj, file + 64, 4);
    size_t rest_off = 64 + 4 + oj + 64, rest = len - rest_off;  // format version 2: 64 progress bytes
    size_t payload = 4 + jlen + 64 + rest;
    uint8_t *out = malloc(64 + payload);
    memcpy(out, file, 64);
    uint32_t jl = (uint32_t)jlen;
    memcpy(out + 64, &jl, 4);
    memcpy(out + 68, json, jlen);
    uint8_t *pb = out + 68 + jlen;
    memcpy(pb, &pr->step, 8);
    memcpy(pb + 8, &pr->updates, 8);
    memcpy(pb + 16, &pr->data_rng, 8);
    memcpy(pb + 24, &pr->tokens, 8);
    memcpy(pb + 32, &pr->elapsed_s, 8);
    memcpy(pb + 40, &pr->skips, 8);
    memcpy(pb + 48, &pr->loss_scale, 8);
    memcpy(pb + 56, &pr->scale_clean, 8);
    memcpy(pb + 64, file + rest_off, rest);
    uint64_t p64 = payload;
    memcpy(out + 16, &p64, 8);
    if (rsv >= 0) out[rsv] = rsv_val;
    uint32_t crc = (uint32_t)crc32_z(crc32(0, NULL, 0), out + 64, payload);
    memcpy(out + 24, &crc, 4);
    uint32_t hcrc = (uint32_t)crc32(crc32(0, NULL, 0), out, 60);
    memcpy(out + 60, &hcrc, 4);
    test_spit(dst, out, 64 + payload);
    free(out);
}

static void test_checkpoint_contents(void) {
    train_config c;
    train_config_preset(&c, "tiny");
    c.model.vocab = 300;
    snprintf(c.data_dir, sizeof c.data_dir, "/data");
    train_config_finish(&c);
    uint64_t per = (uint64_t)c.batch * c.seq * c.grad_accum;
    ckpt_progress pr = {10, 9, 77, 10 * per, 3.5, 1, 1024.0, 4};
    float st[64] = {0};
    const char *p = tp("ck.bin"), *q = tp("ck2.bin");
    CHECK(checkpoint_write(p, &c, &pr, st, st, st, 64) == WGT_OK, "write: %s", wgt_last_error());
    size_t len;
    uint8_t *file = test_slurp(p, &len);
    char *json = train_config_to_json(&c);
    size_t jl = strlen(json);
    checkpoint ck;
    rebuild_ckpt(q, file, len, json, jl, &pr, -1, 0);
    CHECK(checkpoint_read(&ck, q) == WGT_OK, "rebuilt unchanged: %s", wgt_last_error());
    checkpoint_free(&ck);
    struct { ckpt_progress pr; int rsv; const char *suffix; const char *msg; } cases[] = {
        {{2000000000000ull, 9, 77, 2000000000000ull * per, 3.5, 0, 0, 0}, -1, NULL, "beyond"},
        {{10, 11, 77, 10 * per, 3.5, 0, 0, 0}, -1, NULL, "11 updates applied in 10 steps"},
        {{10, 9, 77, 10 * per + 1, 3.5, 0, 0, 0}, -1, NULL, "tokens consumed"},
        {{10, 9, 77, 10 * per, -1.0, 0, 0, 0}, -1, NULL, "elapsed"},
        {{10, 9, 77, 10 * per, 3.5, 0, 0, 0}, 40, NULL, "reserved header byte 40"},
        {{10, 9, 77, 10 * per, 3.5, 0, 0, 0}, -1, " trailing", "after the JSON value"},
        {{10, 9, 77, 10 * per, 3.5, 0, 0, 0}, -1, "\0x", "NUL"},
        {{10, 9, 77, 10 * per, 3.5, 2, 0, 0}, -1, NULL, "2 skipped"},
        {{10, 9, 77, 10 * per, 3.5, 1, 0, 10}, -1, NULL, "since the loss scale"},
        {{10, 9, 77, 10 * per, 3.5, 1, -2.0, 0}, -1, NULL, "loss scale -2"},
        {{10, 9, 77, 10 * per, 3.5, 1, 1.5e-45, 0}, -1, NULL, "positive normal f32"},
        {{10, 9, 77, 10 * per, 3.5, 1, 0.1, 0}, -1, NULL, "positive normal f32"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *j2 = malloc(jl + 16);
        memcpy(j2, json, jl);
        size_t l2 = jl;
        if (cases[i].suffix) {
            size_t sl = cases[i].suffix[0] ? strlen(cases[i].suffix) : 2;
            memcpy(j2 + jl, cases[i].suffix, sl);
            l2 += sl;
        }
        rebuild_ckpt(q, file, len, j2, l2, &cases[i].pr, cases[i].rsv, 7);
        wgt_status s = checkpoint_read(&ck, q);
        CHECK(s != WGT_OK && has(cases[i].msg) && !ck.params, "case %zu: want '%s', got %s", i, cases[i].msg,
              s ? wgt_last_error() : "accepted");
        if (s == WGT_OK) checkpoint_free(&ck);
        free(j2);
    }
    // a duplicate key in the configuration: the second "lr" would have been ignored
    char *dup = malloc(jl + 32);
    char *brace = strchr(json, '{');
    size_t pre = (size_t)(brace - json) + 1;
    memcpy(dup, json, pre);
    size_t dl = pre + (size_t)sprintf(dup + pre, "\"format\": \"x\",");
    memcpy(dup + dl, json + pre, jl - pre);
    dl += jl - pre;
    rebuild_ckpt(q, file, len, dup, dl, &pr, -1, 0);
    CHECK(checkpoint_read(&ck, q) != WGT_OK && has("twice"), "duplicate key in the config: %s", wgt_last_error());
    free(dup);
    // the run configuration's tokenizer hash: optional, but 16 hex digits when present
    train_config back;
    snprintf(c.tokenizer_hash, sizeof c.tokenizer_hash, "0123456789abcdef");
    char *j3 = train_config_to_json(&c);
    CHECK(train_config_from_json(&back, j3, "t") == WGT_OK && !strcmp(back.tokenizer_hash, c.tokenizer_hash),
          "hash round trip: %s", wgt_last_error());
    char *x = strstr(j3, "0123456789abcdef");
    if (x) x[3] = 'Z';
    CHECK(train_config_from_json(&back, j3, "t") != WGT_OK && has("tokenizer_fnv1a64"), "bad hash: %s", wgt_last_error());
    free(j3);
    // --batch x --seq x --grad-accum beyond int32
    train_config big = c;
    big.batch = 1 << 20, big.seq = 1 << 12, big.model.max_seq = 1 << 12;
    CHECK(train_config_finish(&big) != WGT_OK && has("tokens per update"), "huge batch: %s", wgt_last_error());
    free(json);
    free(file);
}

// ------------------------------------------------------------------ data directory integrity

static void write_corpus(const char *path, int variant) {
    FILE *f = fopen(path, "wb");
    const char *w[] = {"the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "far", "away", "home"};
    uint64_t r = 12345 + (uint64_t)variant;
    for (int d = 0; d < 40; d++) {
        for (int k = 0; k < 200; k++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            const char *word = w[(r >> 33) % 12];
            fprintf(f, "%s%s", k ? " " : "", variant ? word + 1 : word);
        }
        fprintf(f, ".\n<|endoftext|>\n");
    }
    fclose(f);
}

static void test_data_integrity(void) {
    char corpus1[1024], corpus2[1024];
    snprintf(corpus1, sizeof corpus1, "%s", tp("corpus.txt"));
    snprintf(corpus2, sizeof corpus2, "%s", tp("corpus2.txt"));
    write_corpus(corpus1, 0);
    const char *in[] = {corpus1};
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", tp("data"));
    CHECK(prepare_corpus(in, 1, dir, 300, 0.2, 0) == WGT_OK, "prepare: %s", wgt_last_error());
    size_t ml;
    char *meta = (char *)test_slurp(tp("data/meta.json"), &ml);
    CHECK(meta && strstr(meta, "\"version\": 2") && strstr(meta, "\"tokenizer_fnv1a64\": \"") && strstr(meta, "\"crc32\": \""),
          "meta.json records checksums: %s", meta ? meta : "");
    dataset *ds = NULL;
    CHECK(dataset_open(&ds, dir) == WGT_OK, "open: %s", wgt_last_error());
    char hash[17] = "";
    if (ds) {
        snprintf(hash, sizeof hash, "%s", dataset_tokenizer_hash(ds));
        CHECK(strlen(hash) == 16, "fingerprint %s", hash);
        CHECK(dataset_check_tokenizer(ds, hash, dir, "the run") == WGT_OK, "same tokenizer");
        CHECK(dataset_check_tokenizer(ds, "", dir, "the run") == WGT_OK, "run without a recorded tokenizer");
        CHECK(dataset_check_tokenizer(ds, "0000000000000000", dir, "the run") != WGT_OK && has("another tokenizer"),
              "another tokenizer: %s", wgt_last_error());
        // a shard truncated while in use: an error from the batch, not SIGBUS
        size_t sl;
        uint8_t *shard_bytes = test_slurp(tp("data/train_000.bin"), &sl);
        if (truncate(tp("data/train_000.bin"), 1024 + 20) != 0) perror("truncate");
        int32_t in32[4 * 16], tg32[4 * 16];
        uint64_t rng = 5;
        wgt_status st = WGT_OK;
        for (int k = 0; k < 20 && st == WGT_OK; k++) st = dataset_train_batch(ds, &rng, 4, 16, in32, tg32);
        CHECK(st != WGT_OK && has("truncated"), "shard truncated while open: %s", st ? wgt_last_error() : "not noticed");
        test_spit(tp("data/train_000.bin"), shard_bytes, sl);
        free(shard_bytes);
        dataset_free(ds);
    }
    // a token changed in place (same size): the CRC says so
    size_t sl;
    uint8_t *sb = test_slurp(tp("data/val_000.bin"), &sl);
    sb[sl - 2] ^= 1;
    test_spit(tp("data/val_000.bin"), sb, sl);
    CHECK(dataset_open(&ds, dir) != WGT_OK && has("checksum") && has("val_000.bin"), "changed shard: %s", wgt_last_error());
    sb[sl - 2] ^= 1;
    test_spit(tp("data/val_000.bin"), sb, sl);
    free(sb);
    CHECK(dataset_open(&ds, dir) == WGT_OK, "restored: %s", wgt_last_error());
    dataset_free(ds);
    // another valid tokenizer of the same size in place of the data's
    size_t tl;
    uint8_t *tb = test_slurp(tp("data/tokenizer.bin"), &tl);
    uint8_t *t2 = malloc(tl);
    memcpy(t2, tb, tl);
    t2[32] = 253, t2[33] = 0, t2[34] = 254, t2[35] = 0;  // merge 0 := (253, 254)
    uint32_t crc = (uint32_t)crc32(0L, t2, (uInt)(tl - 4));
    memcpy(t2 + tl - 4, &crc, 4);
    test_spit(tp("data/tokenizer.bin"), t2, tl);
    CHECK(dataset_open(&ds, dir) != WGT_OK && has("fingerprint"), "swapped tokenizer: %s", wgt_last_error());
    test_spit(tp("data/tokenizer.bin"), tb, tl);
    free(t2);
    free(tb);
    // meta.json variants: version 1, a duplicate key, an absurd vocab_size (was an undefined cast)
    struct { const char *from, *to, *msg; } edits[] = {
        {"\"version\": 2", "\"version\": 1", "without checksums"},
        {"\"version\": 2", "\"version\": 2, \"version\": 2", "twice"},
        {"\"vocab_size\": ", "\"vocab_size\": 1e300, \"x\": ", "vocab_size"},
        {"\"format\": \"wgtrain-data\"", "\"format\": \"wgtrain-data\"}x", "after the JSON"},
        {"\"file\": \"train_000.bin\"", "\"file\": \"../data/train_000.bin\"", "plain file name"},
    };
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        char *at = meta ? strstr(meta, edits[i].from) : NULL;
        if (!at) { CHECK(0, "edit %zu: '%s' not in meta.json", i, edits[i].from); continue; }
        size_t fl = strlen(edits[i].from), tl2 = strlen(edits[i].to);
        char *m2 = malloc(ml + tl2 + 1);
        size_t pre = (size_t)(at - meta);
        memcpy(m2, meta, pre);
        memcpy(m2 + pre, edits[i].to, tl2);
        memcpy(m2 + pre + tl2, at + fl, ml - pre - fl);
        test_spit(tp("data/meta.json"), m2, ml - fl + tl2);
        free(m2);
        wgt_status st = dataset_open(&ds, dir);
        CHECK(st != WGT_OK && has(edits[i].msg), "meta edit %zu: want '%s', got %s", i, edits[i].msg,
              st ? wgt_last_error() : "accepted");
        if (st == WGT_OK) dataset_free(ds);
    }
    test_spit(tp("data/meta.json"), meta, ml);
    free(meta);
    // an interrupted prepare leaves no meta.json: refused, not read as an llm.c directory
    rename(tp("data/meta.json"), tp("meta.saved"));
    CHECK(dataset_open(&ds, dir) != WGT_OK && has("did not finish"), "no meta.json: %s", wgt_last_error());
    rename(tp("meta.saved"), tp("data/meta.json"));
    // a prepare that fails half-way over the existing directory (the val shard cannot be
    // written): the new tokenizer and train shard must not be usable with the old val shard
    write_corpus(corpus2, 1);
    const char *in2[] = {corpus2};
    unlink(tp("data/val_000.bin"));
    mkdir(tp("data/val_000.bin"), 0755);
    CHECK(prepare_corpus(in2, 1, dir, 300, 0.2, 0) != WGT_OK && has("val_000.bin"), "prepare over a blocked shard: %s",
          wgt_last_error());
    CHECK(access(tp("data/meta.json"), F_OK) != 0, "the old meta.json is gone");
    CHECK(dataset_open(&ds, dir) != WGT_OK && has("did not finish"), "half-prepared directory refused: %s",
          wgt_last_error());
    rmdir(tp("data/val_000.bin"));
    // a second prepare while one holds the directory
    run_lock l = {0};
    CHECK(run_lock_acquire(&l, dir, "prepare") == WGT_OK, "lock");
    CHECK(prepare_corpus(in2, 1, dir, 300, 0.2, 0) != WGT_OK && has("in use"), "concurrent prepare: %s", wgt_last_error());
    run_lock_release(&l);
    CHECK(prepare_corpus(in2, 1, dir, 300, 0.2, 0) == WGT_OK && dataset_open(&ds, dir) == WGT_OK, "prepare again: %s",
          wgt_last_error());
    if (ds) {
        CHECK(dataset_check_tokenizer(ds, hash, dir, "the run") != WGT_OK, "the re-prepared data has another tokenizer");
        dataset_free(ds);
    }
}

// ------------------------------------------------------------------ metrics.jsonl

static void test_metrics_rewind(void) {
    const char *p = tp("metrics.jsonl");
    const char *text = "{\"step\": 1, \"loss\": 5.0}\n"
                       "{\"step\": 1e300, \"loss\": 4.0}\n"      // was an undefined cast to long
                       "{\"step\": -3, \"loss\": 4.0}\n"
                       "{\"step\": 2.5, \"loss\": 4.0}\n"
                       "{\"step\": 2, \"loss\": 4.5} junk\n"      // trailing garbage
                       "{\"step\": 2, \"step\": 9, \"loss\": 4.5}\n"
                       "{\"step\": 3, \"loss\": 4.25}\n"
                       "{\"step\": 9, \"loss\": 1.0}\n"           // past the checkpoint
                       "{\"step\": 4, \"lo";                      // half a line
    test_spit(p, text, strlen(text));
    metrics_history h = {0};
    CHECK(metrics_log_rewind(p, 5, &h) == WGT_OK, "rewind: %s", wgt_last_error());
    CHECK(h.n == 2 && h.step[0] == 1 && h.step[1] == 3 && h.loss[1] == 4.25, "kept rows: %zu", h.n);
    size_t n;
    uint8_t *b = test_slurp(p, &n);
    CHECK(b && !strcmp((char *)b, "{\"step\": 1, \"loss\": 5.0}\n{\"step\": 3, \"loss\": 4.25}\n"), "rewritten: %s", b);
    free(b);
    metrics_history_free(&h);
}


// ------------------------------------------------------------------ third audit: JSON readers, plot

// A Hugging Face config.json is read as transformers reads it or refused: a duplicate key (Python
// keeps the last, cJSON the first), trailing data, a NUL with junk, a byte order mark; and too
// deep a nesting is said to be too deep.
static void test_hf_config_strict(void) {
    const char *good = "{\"model_type\": \"llama\", \"hidden_size\": 32, \"intermediate_size\": 64, "
                       "\"num_attention_heads\": 4, \"num_hidden_layers\": 1, \"vocab_size\": 64, "
                       "\"max_position_embeddings\": 16}";
    model_config c;
    CHECK(model_config_from_hf_json(&c, good, "good") == WGT_OK && c.n_head == 4, "the plain config: %s", wgt_last_error());
    char dup[1024];
    snprintf(dup, sizeof dup, "%.*s, \"num_attention_heads\": 2}", (int)strlen(good) - 1, good);
    CHECK(model_config_from_hf_json(&c, dup, "dup") != WGT_OK && strstr(wgt_last_error(), "num_attention_heads") &&
          strstr(wgt_last_error(), "twice"), "a duplicate key is refused by name: %s", wgt_last_error());
    char tail[1024];
    snprintf(tail, sizeof tail, "%s garbage", good);
    CHECK(model_config_from_hf_json(&c, tail, "tail") != WGT_OK && strstr(wgt_last_error(), "after the JSON value"),
          "trailing data: %s", wgt_last_error());
    // through the file reader: a NUL and junk after the object, and a byte order mark
    const char *p = tp("config.json");
    char buf[1024];
    size_t n = (size_t)snprintf(buf, sizeof buf, "%s", good);
    memcpy(buf + n, "\0junk", 5);
    test_spit(p, buf, n + 5);
    CHECK(model_config_from_hf_file(&c, p) != WGT_OK && strstr(wgt_last_error(), "NUL"), "a NUL and junk: %s",
          wgt_last_error());
    n = (size_t)snprintf(buf, sizeof buf, "\xEF\xBB\xBF%s", good);
    test_spit(p, buf, n);
    CHECK(model_config_from_hf_file(&c, p) != WGT_OK && strstr(wgt_last_error(), "byte order mark"), "a BOM: %s",
          wgt_last_error());
    char *deep = malloc(10002);
    for (int i = 0; i < 5000; i++) deep[i] = '[', deep[5000 + i] = ']';
    deep[10000] = 0;
    CHECK(model_config_from_hf_json(&c, deep, "deep") != WGT_OK && strstr(wgt_last_error(), "too deep"),
          "5000 levels are said to be too deep: %s", wgt_last_error());
    free(deep);
    // a checkpoint's model JSON too
    CHECK(model_config_from_json(&c, "{\"arch\": \"gpt2\", \"arch\": \"llama\"}", "ck") != WGT_OK &&
          strstr(wgt_last_error(), "twice"), "a checkpoint's model JSON with a duplicate key: %s", wgt_last_error());
}

// train --config: one setting under two spellings is a contradiction, refused naming both.
static void test_config_two_spellings(void) {
    const char *cases[][3] = {
        {"{\"steps\": 5, \"train\": {\"steps\": 2}}", "\"steps\"", "\"train.steps\""},
        {"{\"val_every\": 5, \"val-every\": 2}", "\"val_every\"", "\"val-every\""},
        {"{\"log\": {\"val_every\": 5, \"val-every\": 2}}", "\"log.val_every\"", "\"log.val-every\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *p = tp("cfg.json");
        test_spit(p, cases[i][0], strlen(cases[i][0]));
        train_config c;
        train_flags fl;
        CHECK(train_config_read_file(&c, &fl, p) != WGT_OK && strstr(wgt_last_error(), cases[i][1]) &&
              strstr(wgt_last_error(), cases[i][2]) && strstr(wgt_last_error(), "twice"),
              "case %zu: %s", i, wgt_last_error());
    }
    const char *ok = "{\"steps\": 5, \"train\": {\"lr\": 0.01}}";
    test_spit(tp("cfg.json"), ok, strlen(ok));
    train_config c;
    train_flags fl;
    CHECK(train_config_read_file(&c, &fl, tp("cfg.json")) == WGT_OK && c.steps == 5 && c.lr == 0.01, "distinct keys: %s",
          wgt_last_error());
}

// The plot survives every value a metrics file can hold: the denormal 5e-324 (whose decade
// pow(10, -324) is 0), +-1.7e308 (whose sums and rounded bounds are infinite), NaN, infinity,
// huge steps. Each case must finish (an alarm ends a loop that never does: the test then dies),
// give a file of bounded size, and print no non-finite coordinate.
static void on_plot_alarm(int sig) {
    static const char msg[] = "FAIL: the plot did not finish within 20 s (an endless tick loop)\n0 passed, 1 failed\n";
    ssize_t r = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)r, (void)sig;
    _exit(1);
}

static void test_plot_extremes(void) {
    signal(SIGALRM, on_plot_alarm);
    const double ex[] = {5e-324, -5e-324, 1.7e308, -1.7e308, 1e-300, NAN, INFINITY, -INFINITY, 0, 1, 2.5};
    const size_t NE = sizeof ex / sizeof ex[0];
    for (size_t a = 0; a < NE; a++)
        for (int field = 0; field < 4; field++) {
            metrics_history h = {0};
            for (long s = 1; s <= 6; s++) {
                metrics_row r = {s, 3.0, s % 3 ? NAN : 2.9, 1e-3, 0.5, 100, 1, s == 4, NAN, 0, NULL};
                double v = ex[(a + (size_t)s * (s == 2)) % NE];  // mostly one value, step 2 another
                if (field == 0) r.loss = v;
                if (field == 1) r.val_loss = v, r.step = s;
                if (field == 2) r.lr = v;
                if (field == 3) r.grad_norm = v;
                metrics_history_add(&h, &r);
            }
            alarm(20);
            wgt_status st = plot_loss_svg(tp("loss.svg"), &h, ex[a] == ex[a] ? 3.1 : NAN, "t <&>");
            alarm(0);
            size_t n = 0;
            uint8_t *b = test_slurp(tp("loss.svg"), &n);
            CHECK(st == WGT_OK && b && n < 200000 && strstr((char *)b, "</svg>"), "value %g in field %d: %zu bytes", ex[a],
                  field, n);
            CHECK(b && !strstr((char *)b, "nan") && !strstr((char *)b, "inf"), "value %g in field %d: a non-finite "
                  "coordinate", ex[a], field);
            free(b);
            metrics_history_free(&h);
        }
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "%s/wgt_files_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 2; }
    test_atomic_write();
    test_nonregular_inputs();
    test_runlock();
    test_json_strict();
    test_npy();
    test_safetensors();
    test_safetensors_index();
    test_tokenizer_duplicate_merge();
    test_checkpoint_contents();
    test_data_integrity();
    test_metrics_rewind();
    test_hf_config_strict();
    test_config_two_spellings();
    test_plot_extremes();
    nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return test_finish();
}
