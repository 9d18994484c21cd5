// 07_loss.wgsl — fused softmax cross-entropy (seed document 002) and the loss sum.
//
// cross_entropy: one workgroup of 256 threads per row of logits. Each thread walks its strided
// slots of the row (v = lid, lid + 256, ...) once, keeping a running max and a running sum of
// exp rescaled to that max (online softmax), plus the plain sum of logits for label smoothing;
// workgroup reductions then give the row max, the denominator and (only when alpha > 0) the
// logit sum; then the loss, and finally the same thread overwrites the same slots with
// dlogits. Every slot is read by the thread that later writes it, so the in-place update is
// race-free without a second [R, V] buffer, and the row is read twice instead of three times.
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
};

@group(0) @binding(0) var<storage, read_write> ce_logits : array<f32>;
@group(0) @binding(1) var<storage, read> ce_targets : array<u32>;
@group(0) @binding(2) var<storage, read_write> ce_losses : array<f32>;
@group(0) @binding(3) var<uniform> ce_params : CeParams;

// Bit patterns of the infinities: WGSL has no infinity literal and a constant expression may not
// produce one, so they are loaded from a private variable at run time.
var<private> ce_pos_inf_bits : u32 = 0x7f800000u;

fn ce_is_nan(x : f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }

@compute @workgroup_size(256)
fn cross_entropy(@builtin(workgroup_id) wid : vec3<u32>, @builtin(num_workgroups) nwg : vec3<u32>,
                 @builtin(local_invocation_index) lid : u32) {
    let row = flat_wg(wid, nwg);
    if (row >= ce_params.R) { return; }  // the excess of a 2-D grid (uniform per workgroup)
    let V = ce_params.V;
    let base = ce_params.lbase + row * V;
    let t = ce_targets[ce_params.tbase + row];

    if (t >= V) {  // ignored row (padding): loss 0 and a zero gradient row
        for (var v = lid; v < V; v = v + WG_SIZE) { ce_logits[base + v] = 0.0; }
        if (lid == 0u) { ce_losses[ce_params.obase + row] = 0.0; }
        return;
    }

    let pos_inf = bitcast<f32>(ce_pos_inf_bits);
    let neg_inf = -pos_inf;

    // pass 1: running max m and sum s of exp(l - m) over this thread's slots
    var m = neg_inf;
    var s = 0.0;
    var sl = 0.0;
    var bad = false;  // saw NaN or +Inf: the denominator is undefined
    for (var v = lid; v < V; v = v + WG_SIZE) {
        let l = ce_logits[base + v];
        let bits = bitcast<u32>(l);
        sl = sl + l;
        if (ce_is_nan(l)) {
            bad = true;                              // NaN: not part of the max
        } else if (bits == 0x7f800000u) {
            bad = true;                              // +Inf: the max, and Inf - Inf in the sum
            m = l;
        } else if (l > m) {
            s = s * exp(m - l) + 1.0;                // s is 0 while m is still -Inf
            m = l;
        } else if (bits != 0xff800000u) {
            s = s + exp(l - m);                      // -Inf adds nothing
        }
    }

    let mx = wg_reduce_max(m, lid);
    // rescale this thread's sum to the row max; a thread that saw only -Inf (s = 0) adds 0
    // rather than 0 * exp(-Inf - -Inf) = NaN
    var part = select(s * exp(m - mx), 0.0, s == 0.0);
    if (bad) { part = pos_inf; }
    let denom = wg_reduce_sum(part, lid);
    var sum_l = 0.0;
    if (ce_params.alpha > 0.0) { sum_l = wg_reduce_sum(sl, lid); }

    // the reference's floor (denom < 1e-30 ? 1e-30 : denom); a row holding NaN or +Inf has an
    // undefined denominator, NaN there, so the loss of a diverged row is NaN, never a finite lie.
    // The NaN is built from a uniform value: a constant expression may not produce one.
    let dbits = bitcast<u32>(denom);
    let nan_v = bitcast<f32>(0x7fc00000u + ce_params.R * 0u);
    let d = select(nan_v, select(1e-30, denom, denom > 1e-30), (dbits & 0x7f800000u) != 0x7f800000u);
    let lse = mx + log(d);
    let a = ce_params.alpha;
    let b = ce_params.beta;

    // the thread that owns slot t reads l[t] (before writing it below) and writes the loss
    if (lid == t % WG_SIZE) {
        let lt = ce_logits[base + t];
        ce_losses[ce_params.obase + row] = lse - (1.0 - a) * lt - a * (sum_l / f32(V)) + select(0.0, b * lse * lse, b != 0.0);
    }

    // pass 2: dlogits over the same slots
    let inv_d = 1.0 / d;
    let zl = 2.0 * b * lse;
    let smoothing = a / f32(V);
    let inv_norm = ce_params.inv_norm;
    for (var v = lid; v < V; v = v + WG_SIZE) {
        let p = exp(ce_logits[base + v] - mx) * inv_d;
        let tgt = select(0.0, 1.0 - a, v == t) + smoothing;
        ce_logits[base + v] = ((p - tgt) + zl * p) * inv_norm;
    }
}

// sum_losses: one workgroup; each thread adds a strided share, then one workgroup reduction.
struct SumParams { n : u32, p0 : u32, p1 : u32, p2 : u32 };

@group(0) @binding(0) var<storage, read> sum_in : array<f32>;
@group(0) @binding(1) var<storage, read_write> sum_out : array<f32>;
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
    if (lid == 0u) { sum_out[0] = total; }
}
