// wg_settings.c — parsing of the WebGPU backend's settings from the environment (the list and
// the meaning of each variable are in wg_settings.h and docs/webgpu-settings.md).
#include "backend/webgpu/wg_settings.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// One variable: its name and the accepted form (for messages).
typedef struct { const char *name, *form; } setting_def;

static const setting_def defs[] = {
    {"WGTRAIN_ROBUST", "0 or 1"},
    {"WGTRAIN_MM_TILE", "auto, big, small or a tile BMxBNxBK/TMxTN (TM, TN 4 or 8; BM, BN multiples of 16 up to 256; "
                        "BK 4, 8, 16 or 32; 64, 128 or 256 threads; e.g. 128x128x16/8x8)"},
    {"WGTRAIN_MM_PREFETCH", "auto, 0 or 1"},
    {"WGTRAIN_MM_WARP", "auto, 0, 4, 8 or 16"},
    {"WGTRAIN_MM_PAIR", "auto, 0 or 1"},
    {"WGTRAIN_MM_EDGE_FIRST", "auto, 0 or 1"},
    {"WGTRAIN_WG_ZERO_INIT", "auto, 0 or 1"},
    {"WGTRAIN_MM_SPLITK", "auto, off or an integer 0..1024"},
    {"WGTRAIN_MM_STREAMK", "auto, 0 or 1"},
    {"WGTRAIN_MM_VEC4", "auto, 0, 1, 2 or 3"},
    {"WGTRAIN_MM_GROUP", "auto or an integer 1..1024"},
    {"WGTRAIN_MM_TCOPY", "auto, 0, 1 or w"},
    {"WGTRAIN_ATTN_FWD_CFG", "comma-separated key=value pairs: v=tile|reg and integers nl, tr, bc, sg, wg, pf (e.g. "
                             "nl=8,tr=2,bc=64,sg=1 or v=reg,nl=4,tr=2,bc=32)"},
    {"WGTRAIN_ATTN_BWD_CFG", "comma-separated key=value pairs: v=auto|stream|split|short|fused|reg|reg-ds, kv=, q=, st=BQxBK "
                             "or BQxBK/RQSxRKS, rkv=, rq=RLxRRxRB, ncp=, rt=, pf=, dqb=, dqk=, dqm=integer (e.g. "
                             "v=fused,kv=16x64,q=64x16/4x2)"},
    {"WGTRAIN_ATTN_UNROLL", "auto, 0 or 1"},
    {"WGTRAIN_CE_CFG", "comma-separated key=integer pairs: wg=64..1024 (a power of 2), vec=0|1, sg=0|1, reg=0..16, "
                       "sm=0..1024, rev=0|1 (e.g. wg=1024,reg=4,sm=2)"},
    {"WGTRAIN_F16", "auto, packed or native"},
    {"WGTRAIN_TUNE_CACHE", "auto, off or the path of the tuning cache file (at most 4095 bytes)"},
    {"WGTRAIN_AUTOTUNE", "auto, 0 or 1"},
    {"WGTRAIN_DECODE_SPLIT", "auto, off or an integer 1..64"},
    {"WGTRAIN_DECODE_TILES", "auto, off, 0 or 1"},
    {"WGTRAIN_TEST_BINDING_LIMIT", "0 (the device's limit) or an element count of at least 256"},
};
#define N_DEFS (sizeof defs / sizeof defs[0])

void wg_settings_default(wg_settings *s) {
    memset(s, 0, sizeof *s);
    s->robust = 0;
    s->mm_tile = WG_MM_TILE_AUTO;
    s->mm_splitk = s->mm_streamk = s->mm_vec4 = s->mm_group = s->mm_tcopy = WG_AUTO;
    s->wg_zero_init = s->mm_prefetch = s->mm_warp = s->mm_pair = s->mm_edge_first = WG_AUTO;
    s->attn_unroll = WG_AUTO;
    wg_ce_settings ce = {WG_AUTO, WG_AUTO, WG_AUTO, WG_AUTO, WG_AUTO, WG_AUTO};
    s->ce = ce;
    s->binding_limit = 0;
    s->autotune = WG_AUTO;
    s->decode_split = WG_AUTO;
    s->decode_tiles = WG_AUTO;
}

// A decimal integer in [lo, hi], the whole text.
static int parse_int(const char *v, long long lo, long long hi, long long *out) {
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (end == v || *end || errno == ERANGE || x < lo || x > hi) return 0;
    *out = x;
    return 1;
}

// "auto" -> WG_AUTO, an integer in [lo, hi] -> it; `off` (when not NULL) -> *off.
static int parse_auto_int(const char *v, long long lo, long long hi, const int *off, int *out) {
    long long x;
    if (!strcmp(v, "auto")) { *out = WG_AUTO; return 1; }
    if (off && !strcmp(v, "off")) { *out = *off; return 1; }
    if (!parse_int(v, lo, hi, &x)) return 0;
    *out = (int)x;
    return 1;
}

// WGTRAIN_CE_CFG: "k=v,k=v" over the existing fields (keys left out keep their value).
static int parse_ce(const char *s, wg_ce_settings *c) {
    char buf[256];
    if (strlen(s) >= sizeof buf) return 0;
    strcpy(buf, s);
    wg_ce_settings r = *c;
    for (char *tok = strtok(buf, ", "); tok; tok = strtok(NULL, ", ")) {
        char *eq = strchr(tok, '=');
        if (!eq) return 0;
        *eq = 0;
        const char *k = tok, *v = eq + 1;
        long long x;
        if (!strcmp(k, "wg")) {
            if (!parse_int(v, 64, 1024, &x) || (x & (x - 1))) return 0;
            r.wg = (int)x;
        } else if (!strcmp(k, "reg")) {
            if (!parse_int(v, 0, 16, &x)) return 0;
            r.reg = (int)x;
        } else if (!strcmp(k, "sm")) {
            if (!parse_int(v, 0, 1024, &x)) return 0;
            r.sm = (int)x;
        } else {
            int *f = !strcmp(k, "vec") ? &r.vec : !strcmp(k, "sg") ? &r.sg : !strcmp(k, "rev") ? &r.rev : NULL;
            if (!f || !parse_int(v, 0, 1, &x)) return 0;
            *f = (int)x;
        }
    }
    *c = r;
    return 1;
}

int wg_mm_tile_spec_valid(const wg_mm_tile_spec *t) {
    if ((t->tm != 4 && t->tm != 8) || (t->tn != 4 && t->tn != 8)) return 0;
    if (t->bm < 16 || t->bm > 256 || t->bm % 16 || t->bn < 16 || t->bn > 256 || t->bn % 16) return 0;
    if (t->bk != 4 && t->bk != 8 && t->bk != 16 && t->bk != 32) return 0;
    int wg = (t->bm / t->tm) * (t->bn / t->tn);
    if (wg != 64 && wg != 128 && wg != 256) return 0;
    return t->bm * t->bk / 4 <= 4 * wg && t->bn * t->bk / 4 <= 4 * wg;  // at most 4 load passes a tile
}

// "BMxBNxBK/TMxTN", the whole text.
int wg_mm_tile_spec_parse(const char *v, wg_mm_tile_spec *t) {
    int n = 0;
    wg_mm_tile_spec r;
    if (strspn(v, "0123456789x/") != strlen(v)) return 0;  // no signs or blanks, which sscanf would take
    if (sscanf(v, "%3dx%3dx%2d/%1dx%1d%n", &r.bm, &r.bn, &r.bk, &r.tm, &r.tn, &n) != 5 || v[n]) return 0;
    if (!wg_mm_tile_spec_valid(&r)) return 0;
    *t = r;
    return 1;
}

void wg_mm_tile_spec_text(const wg_mm_tile_spec *t, char *buf, size_t cap) {
    snprintf(buf, cap, "%dx%dx%d/%dx%d", t->bm, t->bn, t->bk, t->tm, t->tn);
}

// Parses v into a copy of the settings; 1 when well-formed (then *s is updated). NULL or ""
// gives the field its default.
static int set_one(wg_settings *s, const char *name, const char *v) {
    static const int off = 0;
    wg_settings d, t = *s;
    wg_settings_default(&d);
    const int dflt = !v || !*v;
    long long x = 0;
    int ok = 1;
    if (!strcmp(name, "WGTRAIN_ROBUST")) {
        ok = dflt || parse_int(v, 0, 1, &x);
        t.robust = dflt ? d.robust : (int)x;
    } else if (!strcmp(name, "WGTRAIN_MM_TILE")) {
        if (dflt || !strcmp(v, "auto")) t.mm_tile = WG_MM_TILE_AUTO;
        else if (!strcmp(v, "big")) t.mm_tile = WG_MM_TILE_BIG;
        else if (!strcmp(v, "small")) t.mm_tile = WG_MM_TILE_SMALL;
        else if (wg_mm_tile_spec_parse(v, &t.mm_spec)) t.mm_tile = WG_MM_TILE_SPEC;
        else ok = 0;
    } else if (!strcmp(name, "WGTRAIN_MM_PREFETCH")) {
        t.mm_prefetch = d.mm_prefetch;
        ok = dflt || parse_auto_int(v, 0, 1, NULL, &t.mm_prefetch);
    } else if (!strcmp(name, "WGTRAIN_MM_WARP")) {
        t.mm_warp = d.mm_warp;
        ok = dflt || (parse_auto_int(v, 0, 16, NULL, &t.mm_warp) &&
                      (t.mm_warp == WG_AUTO || t.mm_warp == 0 || t.mm_warp == 4 || t.mm_warp == 8 || t.mm_warp == 16));
    } else if (!strcmp(name, "WGTRAIN_MM_PAIR")) {
        t.mm_pair = d.mm_pair;
        ok = dflt || parse_auto_int(v, 0, 1, NULL, &t.mm_pair);
    } else if (!strcmp(name, "WGTRAIN_MM_EDGE_FIRST")) {
        t.mm_edge_first = d.mm_edge_first;
        ok = dflt || parse_auto_int(v, 0, 1, NULL, &t.mm_edge_first);
    } else if (!strcmp(name, "WGTRAIN_WG_ZERO_INIT")) {
        t.wg_zero_init = d.wg_zero_init;
        ok = dflt || parse_auto_int(v, 0, 1, NULL, &t.wg_zero_init);
    } else if (!strcmp(name, "WGTRAIN_MM_SPLITK")) {
        t.mm_splitk = d.mm_splitk;
        ok = dflt || parse_auto_int(v, 0, 1024, &off, &t.mm_splitk);
    } else if (!strcmp(name, "WGTRAIN_MM_STREAMK")) {
        t.mm_streamk = d.mm_streamk;
        ok = dflt || parse_auto_int(v, 0, 1, NULL, &t.mm_streamk);
    } else if (!strcmp(name, "WGTRAIN_MM_VEC4")) {
        t.mm_vec4 = d.mm_vec4;
        ok = dflt || parse_auto_int(v, 0, 3, NULL, &t.mm_vec4);
    } else if (!strcmp(name, "WGTRAIN_MM_GROUP")) {
        t.mm_group = d.mm_group;
        ok = dflt || parse_auto_int(v, 1, 1024, NULL, &t.mm_group);
    } else if (!strcmp(name, "WGTRAIN_MM_TCOPY")) {
        t.mm_tcopy = d.mm_tcopy;
        if (!dflt && !strcmp(v, "w")) t.mm_tcopy = WG_TCOPY_W;
        else ok = dflt || parse_auto_int(v, 0, 1, NULL, &t.mm_tcopy);
    } else if (!strcmp(name, "WGTRAIN_ATTN_FWD_CFG") || !strcmp(name, "WGTRAIN_ATTN_BWD_CFG")) {
        int bwd = !strcmp(name, "WGTRAIN_ATTN_BWD_CFG");
        char *dst = bwd ? t.attn_bwd : t.attn_fwd;
        ok = dflt || (strlen(v) < sizeof t.attn_fwd && wg_attention_cfg_parses(v, bwd));
        if (dflt) dst[0] = 0;
        else if (ok) memcpy(dst, v, strlen(v) + 1);
    } else if (!strcmp(name, "WGTRAIN_ATTN_UNROLL")) {
        t.attn_unroll = d.attn_unroll;
        ok = dflt || parse_auto_int(v, 0, 1, NULL, &t.attn_unroll);
    } else if (!strcmp(name, "WGTRAIN_CE_CFG")) {
        t.ce = d.ce;  // the keys given over the defaults, as from the environment
        ok = dflt || parse_ce(v, &t.ce);
    } else if (!strcmp(name, "WGTRAIN_F16")) {
        if (dflt || !strcmp(v, "auto")) t.f16 = WG_F16_AUTO;
        else if (!strcmp(v, "packed")) t.f16 = WG_F16_PACKED;
        else if (!strcmp(v, "native")) t.f16 = WG_F16_NATIVE;
        else ok = 0;
    } else if (!strcmp(name, "WGTRAIN_TUNE_CACHE")) {
        ok = dflt || strlen(v) < sizeof t.tune_cache;
        if (ok) snprintf(t.tune_cache, sizeof t.tune_cache, "%s", dflt || !strcmp(v, "auto") ? "" : v);
    } else if (!strcmp(name, "WGTRAIN_AUTOTUNE")) {
        t.autotune = d.autotune;
        ok = dflt || parse_auto_int(v, 0, 1, NULL, &t.autotune);
    } else if (!strcmp(name, "WGTRAIN_DECODE_SPLIT")) {
        const int one = 1;
        t.decode_split = d.decode_split;
        ok = dflt || parse_auto_int(v, 1, 64, &one, &t.decode_split);
    } else if (!strcmp(name, "WGTRAIN_DECODE_TILES")) {
        const int zero = 0;
        t.decode_tiles = d.decode_tiles;
        ok = dflt || parse_auto_int(v, 0, 1, &zero, &t.decode_tiles);
    } else if (!strcmp(name, "WGTRAIN_TEST_BINDING_LIMIT")) {
        ok = dflt || (parse_int(v, 0, (long long)1 << 62, &x) && (x == 0 || x >= 256));
        t.binding_limit = (uint64_t)x;
    } else {
        ok = 0;
    }
    if (ok) *s = t;
    return ok;
}

wgt_status wg_settings_set(wg_settings *s, const char *name, const char *value) {
    for (size_t i = 0; i < N_DEFS; i++) {
        if (strcmp(defs[i].name, name)) continue;
        if (set_one(s, name, value)) return WGT_OK;
        return wgt_fail(WGT_ERR_ARG, "%s='%s' is not a valid setting; expected %s (see docs/webgpu-settings.md)", name,
                        value, defs[i].form);
    }
    return wgt_fail(WGT_ERR_ARG, "unknown WebGPU setting '%s' (see docs/webgpu-settings.md)", name);
}

wgt_status wg_settings_from_env(wg_settings *s) {
    wg_settings t;
    wg_settings_default(&t);
    for (size_t i = 0; i < N_DEFS; i++) {
        const char *v = getenv(defs[i].name);
        if (v && *v) WGT_TRY(wg_settings_set(&t, defs[i].name, v));
    }
    *s = t;
    return WGT_OK;
}
