// 07_loss.wgsl — fused softmax cross-entropy (docs/kernels.md#cross_entropy) and the loss sum.
//
// cross_entropy: one workgroup of CE_WG threads per row of logits, in place (dlogits overwrite
// the logits). The logits are bound as vec4s; a row starts at an arbitrary element, so each row
// is split into a scalar head (up to 3 elements before its first whole vec4), a vec4 body and a
// scalar tail (up to 3), the head and tail touched by component (never a whole vec4 that a
// neighbouring row's workgroup also writes). With CE_VEC false every element goes through the
// scalar path (strided over the row), the original layout.
// Pass 1 walks the row once keeping, per thread, a running max and a sum of exp rescaled to it
// (online softmax) plus the plain logit sum for label smoothing; workgroup reductions (subgroup
// operations then one short sequential stage when CE_SG, else a tree in workgroup memory) give
// the row max, the denominator and (only when alpha > 0) the logit sum; pass 2 writes dlogits.
// So that pass 2 need not re-read the whole 200 KB row from memory, each thread keeps its first
// CE_REG body vec4s in registers and its next CE_SM vec4s in workgroup memory; only the rest is
// re-read (in reverse order when CE_REV, so the most recently read part, the likeliest still in
// L2, comes first). Every slot is read and written by the same thread: no barrier is needed
// between a thread's reads and its writes, and the row is never copied elsewhere.
// Reductions run in a fixed order, so results are deterministic for a given configuration.
//
// Constants from the host (wg_ops_loss.c): CE_WG, CE_VEC, CE_SG, CE_SGS (subgroup size when
// CE_SG), CE_REG, CE_SM, CE_REV, and ce_sg_add / ce_sg_max (subgroupAdd / subgroupMax when
// CE_SG, unused stubs otherwise, so this file compiles without the subgroups extension).
//
// Non-finite logits follow the C reference (fmaxf / fmax semantics), decided on the bits
// because WGSL compilers may assume floats are finite:
//   - NaN is skipped by the max; -Inf is part of it and adds exp(-Inf) = 0 to the sum;
//   - a row holding NaN or +Inf has an undefined denominator (NaN in the reference), so its
//     loss and dlogits are NaN: a diverged model shows a NaN loss rather than a finite one;
//   - everything after that is the plain formula, so NaN and Inf travel as IEEE says.
// A workgroup touches only its own row, so a bad row never affects another one.

struct CeParams {
    R : u32,          // rows in this dispatch (the host splits R so a binding fits the device)
    V : u32,
    alpha : f32,      // label smoothing
    beta : f32,       // z-loss weight
    inv_norm : f32,   // 1 / number of rows whose target is < V
    lbase : u32,      // element offsets of row 0 inside the three bindings (binding offsets
    tbase : u32,      // must be 256-byte aligned, row starts need not be)
    obase : u32,
    sbase : u32,      // element offset of the loss scale inside ce_scale
    has_scale : u32,  // 0: no loss scale (ce_scale is a placeholder), dlogits scaled by inv_norm alone
};

// bound with its size rounded up to whole vec4s (buffers are allocated in 256-byte units);
// elements past the rows are never written
@group(0) @binding(0) var<storage, read_write> ce_l4 : array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> ce_losses : array<f32>;
@group(0) @binding(2) var<storage, read> ce_targets : array<u32>;
// the loss scale word of the optimizer status (src/backend/opt_status.h): dlogits carry it
@group(0) @binding(3) var<storage, read> ce_scale : array<f32>;
@group(0) @binding(4) var<uniform> ce_params : CeParams;

const CE_SM_N : u32 = max(CE_SM * CE_WG, 1u);
const CE_REG_N : u32 = max(CE_REG, 1u);
const CE_RED_N : u32 = select(CE_WG, CE_WG / CE_SGS, CE_SG);
var<workgroup> ce_sm : array<vec4<f32>, CE_SM_N>;
var<workgroup> ce_red : array<f32, CE_RED_N>;

// Bit patterns of the infinities: WGSL has no infinity literal and a constant expression may not
// produce one, so they are loaded from a private variable at run time.
var<private> ce_pos_inf_bits : u32 = 0x7f800000u;

fn ce_is_nan(x : f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }

fn ce_ld(e : u32) -> f32 { return ce_l4[e >> 2u][e & 3u]; }
fn ce_st(e : u32, x : f32) { ce_l4[e >> 2u][e & 3u] = x; }

// Workgroup reductions over CE_WG threads; every thread calls them and gets the result.
// With subgroups: invocations fill subgroups in local index order (as on every Vulkan driver
// for a 1-D workgroup), so subgroup k holds threads k*CE_SGS .. k*CE_SGS + CE_SGS - 1.
fn ce_reduce(v : f32, lid : u32, is_max : bool) -> f32 {
    if (CE_SG) {
        var r = v;
        if (is_max) { r = ce_sg_max(v); } else { r = ce_sg_add(v); }
        if (lid % CE_SGS == 0u) { ce_red[lid / CE_SGS] = r; }
        workgroupBarrier();
        var t = ce_red[0];
        for (var k = 1u; k < CE_WG / CE_SGS; k = k + 1u) {
            if (is_max) { t = max(t, ce_red[k]); } else { t = t + ce_red[k]; }
        }
        workgroupBarrier();
        return t;
    }
    ce_red[lid] = v;
    workgroupBarrier();
    for (var s = CE_WG / 2u; s > 0u; s = s >> 1u) {
        if (lid < s) {
            if (is_max) { ce_red[lid] = max(ce_red[lid], ce_red[lid + s]); }
            else { ce_red[lid] = ce_red[lid] + ce_red[lid + s]; }
        }
        workgroupBarrier();
    }
    let r = ce_red[0];
    workgroupBarrier();
    return r;
}

struct CeAcc {
    m : f32,     // running max
    s : f32,     // sum of exp(l - m)
    sl : f32,    // sum of logits
    bad : bool,  // saw NaN or +Inf: the denominator is undefined
};

fn ce_acc1(a : ptr<function, CeAcc>, l : f32) {
    let bits = bitcast<u32>(l);
    (*a).sl = (*a).sl + l;
    if (ce_is_nan(l)) {
        (*a).bad = true;                               // NaN: not part of the max
    } else if (bits == 0x7f800000u) {
        (*a).bad = true;                               // +Inf: the max, and Inf - Inf in the sum
        (*a).m = l;
    } else if (l > (*a).m) {
        (*a).s = (*a).s * exp((*a).m - l) + 1.0;       // s is 0 while m is still -Inf
        (*a).m = l;
    } else if (bits != 0xff800000u) {
        (*a).s = (*a).s + exp(l - (*a).m);             // -Inf adds nothing
    }
}

fn ce_acc4(a : ptr<function, CeAcc>, x : vec4<f32>) {
    let b = bitcast<vec4<u32>>(x);
    (*a).sl = (*a).sl + ((x.x + x.y) + (x.z + x.w));
    // NaN or +Inf: the row's result is NaN whatever m and s hold, so they are left alone
    if (any((b & vec4<u32>(0x7fffffffu)) > vec4<u32>(0x7f800000u)) || any(b == vec4<u32>(0x7f800000u))) {
        (*a).bad = true;
        return;
    }
    let mx4 = max(max(x.x, x.y), max(x.z, x.w));
    if (mx4 > (*a).m) {
        if ((*a).s != 0.0) { (*a).s = (*a).s * exp((*a).m - mx4); }  // s = 0 while m is -Inf
        (*a).m = mx4;
    }
    // -Inf elements add nothing (and, with m = -Inf, exp(NaN) is discarded by the select)
    let e = select(exp(x - vec4<f32>((*a).m)), vec4<f32>(0.0), b == vec4<u32>(0xff800000u));
    (*a).s = (*a).s + ((e.x + e.y) + (e.z + e.w));
}

// dlogits of 4 logits whose element indices inside the row are j0 .. j0 + 3
struct CeGrad { mx : f32, inv_d : f32, zl : f32, smoothing : f32, hit : f32, inv_norm : f32, t : u32 };

fn ce_grad4(g : CeGrad, x : vec4<f32>, j0 : u32) -> vec4<f32> {
    let p = exp(x - vec4<f32>(g.mx)) * g.inv_d;
    let is_t = vec4<u32>(j0) + vec4<u32>(0u, 1u, 2u, 3u) == vec4<u32>(g.t);
    let tgt = select(vec4<f32>(0.0), vec4<f32>(g.hit), is_t) + g.smoothing;
    return ((p - tgt) + g.zl * p) * g.inv_norm;
}

fn ce_grad1(g : CeGrad, l : f32, j : u32) -> f32 {
    let p = exp(l - g.mx) * g.inv_d;
    let tgt = select(0.0, g.hit, j == g.t) + g.smoothing;
    return ((p - tgt) + g.zl * p) * g.inv_norm;
}

@compute @workgroup_size(CE_WG)
fn cross_entropy(@builtin(workgroup_id) wid : vec3<u32>, @builtin(num_workgroups) nwg : vec3<u32>,
                 @builtin(local_invocation_index) lid : u32) {
    let row = flat_wg(wid, nwg);
    if (row >= ce_params.R) { return; }  // the excess of a 2-D grid (uniform per workgroup)
    let V = ce_params.V;
    let base = ce_params.lbase + row * V;
    let t = ce_targets[ce_params.tbase + row];

    // row layout: scalar head [base, base + nhead), vec4 body (vec4 indices h4 .. h4 + nb - 1),
    // scalar tail [ts, base + V); element j of the scalar list is base + j or ts + j - nhead
    var h4 = (base + 3u) / 4u;
    let e4 = (base + V) / 4u;
    var nb = select(0u, e4 - h4, e4 > h4);
    var nhead = min(h4 * 4u, base + V) - base;
    var ts = max(e4 * 4u, h4 * 4u);
    if (!CE_VEC) { nb = 0u; nhead = V; ts = base + V; }
    let nsc = nhead + (base + V - min(ts, base + V));
    let b0 = h4 * 4u - base;  // index inside the row of the body's first element

    if (t >= V) {  // ignored row (padding): loss 0 and a zero gradient row
        for (var j = lid; j < nb; j = j + CE_WG) { ce_l4[h4 + j] = vec4<f32>(0.0); }
        for (var j = lid; j < nsc; j = j + CE_WG) { ce_st(select(ts + j - nhead, base + j, j < nhead), 0.0); }
        if (lid == 0u) { ce_losses[ce_params.obase + row] = 0.0; }
        return;
    }

    let pos_inf = bitcast<f32>(ce_pos_inf_bits);
    var acc = CeAcc(-pos_inf, 0.0, 0.0, false);
    // the thread whose slots hold the target reads its logit now, before it overwrites it in pass 2
    let tv = t - b0;  // the target's index from the body's first element (wraps when before it)
    var tq = t;       // else its index in the scalar list
    if (base + t >= ts) { tq = nhead + (base + t - ts); }
    let own_t = select(tq % CE_WG == lid, (tv / 4u) % CE_WG == lid, tv < 4u * nb);
    var lt = 0.0;
    if (own_t) { lt = ce_ld(base + t); }

    // pass 1. Segment bounds (vec4 indices inside the body): registers [0, r_end), workgroup
    // memory [r_end, s_end), streamed [s_end, nb).
    var rc : array<vec4<f32>, CE_REG_N>;
    for (var k = 0u; k < CE_REG; k = k + 1u) {
        let j = lid + k * CE_WG;
        if (j < nb) { rc[k] = ce_l4[h4 + j]; }
    }
    for (var k = 0u; k < CE_REG; k = k + 1u) {
        let j = lid + k * CE_WG;
        if (j < nb) {
            ce_acc4(&acc, rc[k]);
        }
    }
    let r_end = CE_REG * CE_WG;
    for (var k = 0u; k < CE_SM; k = k + 1u) {
        let j = r_end + lid + k * CE_WG;
        if (j < nb) { ce_sm[lid + k * CE_WG] = ce_l4[h4 + j]; }
    }
    for (var k = 0u; k < CE_SM; k = k + 1u) {
        let j = r_end + lid + k * CE_WG;
        if (j < nb) {
            ce_acc4(&acc, ce_sm[lid + k * CE_WG]);
        }
    }
    let s_end = r_end + CE_SM * CE_WG;
    var j = s_end + lid;
    for (; j + 3u * CE_WG < nb; j = j + 4u * CE_WG) {  // 4 loads in flight per thread
        let x0 = ce_l4[h4 + j];
        let x1 = ce_l4[h4 + j + CE_WG];
        let x2 = ce_l4[h4 + j + 2u * CE_WG];
        let x3 = ce_l4[h4 + j + 3u * CE_WG];
        ce_acc4(&acc, x0);
        ce_acc4(&acc, x1);
        ce_acc4(&acc, x2);
        ce_acc4(&acc, x3);
    }
    for (; j < nb; j = j + CE_WG) {
        ce_acc4(&acc, ce_l4[h4 + j]);
    }
    for (var q = lid; q < nsc; q = q + CE_WG) {
        ce_acc1(&acc, ce_ld(select(ts + q - nhead, base + q, q < nhead)));
    }

    let mx = ce_reduce(acc.m, lid, true);
    // rescale this thread's sum to the row max; a thread that saw only -Inf (s = 0) adds 0
    // rather than 0 * exp(-Inf - -Inf) = NaN
    var part = select(acc.s * exp(acc.m - mx), 0.0, acc.s == 0.0);
    if (acc.bad) { part = pos_inf; }
    let denom = ce_reduce(part, lid, false);
    var sum_l = 0.0;
    if (ce_params.alpha > 0.0) { sum_l = ce_reduce(acc.sl, lid, false); }

    // the reference's floor (denom < 1e-30 ? 1e-30 : denom); a row holding NaN or +Inf has an
    // undefined denominator, NaN there, so the loss of a diverged row is NaN, never a finite lie.
    // The NaN is built from a uniform value: a constant expression may not produce one.
    let dbits = bitcast<u32>(denom);
    let nan_v = bitcast<f32>(0x7fc00000u + ce_params.R * 0u);
    let d = select(nan_v, select(1e-30, denom, denom > 1e-30), (dbits & 0x7f800000u) != 0x7f800000u);
    let lse = mx + log(d);
    let a = ce_params.alpha;
    let b = ce_params.beta;
    if (own_t) {
        ce_losses[ce_params.obase + row] = lse - (1.0 - a) * lt - a * (sum_l / f32(V)) + select(0.0, b * lse * lse, b != 0.0);
    }

    // pass 2: dlogits; the streamed segment first, its last-read part first when CE_REV
    var inv_norm = ce_params.inv_norm;
    if (ce_params.has_scale != 0u) { inv_norm = inv_norm * ce_scale[ce_params.sbase]; }
    let g = CeGrad(mx, 1.0 / d, 2.0 * b * lse, a / f32(V), 1.0 - a, inv_norm, t);
    if (nb > s_end) {
        let n_st = (nb - s_end + CE_WG - 1u) / CE_WG;  // strided steps of the streamed segment
        for (var i = 0u; i < n_st; i = i + 1u) {
            let k = select(i, n_st - 1u - i, CE_REV);
            let jj = s_end + lid + k * CE_WG;
            if (jj < nb) { ce_l4[h4 + jj] = ce_grad4(g, ce_l4[h4 + jj], b0 + 4u * jj); }
        }
    }
    for (var k = 0u; k < CE_SM; k = k + 1u) {
        let jj = r_end + lid + k * CE_WG;
        if (jj < nb) { ce_l4[h4 + jj] = ce_grad4(g, ce_sm[lid + k * CE_WG], b0 + 4u * jj); }
    }
    for (var k = 0u; k < CE_REG; k = k + 1u) {
        let jj = lid + k * CE_WG;
        if (jj < nb) { ce_l4[h4 + jj] = ce_grad4(g, rc[k], b0 + 4u * jj); }
    }
    for (var q = lid; q < nsc; q = q + CE_WG) {
        let e = select(ts + q - nhead, base + q, q < nhead);
        ce_st(e, ce_grad1(g, ce_ld(e), e - base));
    }
}

// sum_losses: one workgroup; each thread adds a strided share, then one workgroup reduction.
struct SumParams { n : u32, out_off : u32, accumulate : u32, p2 : u32 };

@group(0) @binding(0) var<storage, read_write> sum_out : array<f32>;
@group(0) @binding(1) var<storage, read> sum_in : array<f32>;
@group(0) @binding(2) var<uniform> sum_params : SumParams;

@compute @workgroup_size(256)
fn sum_losses(@builtin(local_invocation_index) lid : u32) {
    // blocks of 64 summed separately keep the f32 rounding error growing with n / 16384 + 64
    // terms instead of n / 256 when n is large
    var acc = 0.0;
    var blk = 0.0;
    var k = 0u;
    for (var i = lid; i < sum_params.n; i = i + WG_SIZE) {
        blk = blk + sum_in[i];
        k = k + 1u;
        if (k == 64u) { acc = acc + blk; blk = 0.0; k = 0u; }
    }
    let total = wg_reduce_sum(acc + blk, lid);
    if (lid == 0u) {
        let prev = select(0.0, sum_out[sum_params.out_off], sum_params.accumulate != 0u);
        sum_out[sum_params.out_off] = prev + total;
    }
}
