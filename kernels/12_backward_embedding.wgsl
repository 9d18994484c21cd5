// 12_backward_embedding.wgsl — embedding backward without float atomics:
//   embedding_backward:     dwte[v, :] += Σ over positions p with tokens[p] = v of dout[p, :]
//   embedding_backward_wpe: dwpe[t, :] += Σ_b dout[b, t, :]   (one thread per (t, c), loop over b)
//
// dwte design: one workgroup per position i (flat_wg: B*T may exceed 65535). Only the workgroup
// of the FIRST occurrence of a token does any work: it alone owns that row of dwte, so there is
// no write conflict and the order of the sum (increasing position) is fixed — deterministic.
// The workgroup scans the token list in chunks of 256 positions: each thread compares one token
// and sets a bit of a 256-bit match mask in workgroup memory (atomicOr: the mask does not depend
// on the order). In chunks before i, any match means i is not the first occurrence and the
// workgroup leaves; from i on, every thread walks the set bits in order and adds those rows of
// dout for the columns it owns (a row is read by 256 threads at once: coalesced).
// Cost: ~BT²/2 token comparisons over all workgroups (about 34 M for B*T = 8192: far less than
// a vocab-parallel scan, V*BT = 412 M for GPT-2) plus one pass over dout per distinct token.
// The host may split dwte into windows of vocabulary rows [v0, v1) and dout into windows of
// positions [p0, p1) (binding size): each dispatch covers one pair; positions whose token is
// outside the vocabulary window (or invalid) leave at once, and the owner of a token adds only
// the dout rows of the position window (the windows run in a fixed order: still deterministic).

struct EBParams {
    BT : u32, C : u32, v0 : u32, v1 : u32,
    tok_off : u32, dout_off : u32, dwte_off : u32, p0 : u32,
    p1 : u32, pad0 : u32, pad1 : u32, pad2 : u32,
};

@group(0) @binding(0) var<storage, read_write> eb_dwte : array<f32>;
@group(0) @binding(1) var<storage, read> eb_dout : array<f32>;
@group(0) @binding(2) var<storage, read> eb_tokens : array<i32>;
@group(0) @binding(3) var<uniform> eb_p : EBParams;

const EB_CPT : u32 = 4u;   // columns per thread per pass: 1024 columns per scan of the tokens

// three mask buffers rotate so that one barrier per chunk suffices (see the loop)
var<workgroup> eb_mask : array<array<atomic<u32>, 8>, 3>;
var<workgroup> eb_stop : u32;

@compute @workgroup_size(256)
fn embedding_backward(@builtin(local_invocation_index) lid : u32, @builtin(workgroup_id) wid : vec3<u32>,
                      @builtin(num_workgroups) nwg : vec3<u32>) {
    let i = flat_wg(wid, nwg);
    if (i >= eb_p.BT) { return; }
    let tok = eb_tokens[eb_p.tok_off + i];
    if (tok < 0 || u32(tok) < eb_p.v0 || u32(tok) >= eb_p.v1) { return; }  // uniform: one token per workgroup
    if (i >= eb_p.p1) { return; }   // a first occurrence at or after p1 has no rows in this window
    let C = eb_p.C;
    let lo = max(i, eb_p.p0);        // the rows this workgroup adds: [lo, p1)
    let nchunks = (eb_p.p1 + 255u) / 256u;   // chunks before i (the scan) and up to p1 (the sum)
    for (var cb = 0u; cb < C; cb += 256u * EB_CPT) {
        var acc : array<f32, EB_CPT>;
        for (var q = 0u; q < EB_CPT; q++) { acc[q] = 0.0; }
        if (lid < 8u) { atomicStore(&eb_mask[0][lid], 0u); }
        workgroupBarrier();
        for (var ch = 0u; ch < nchunks; ch++) {
            let base = ch * 256u;
            let cur = ch % 3u;
            // Before the barrier: fill this chunk's mask and clear the one for the next chunk.
            // The cleared buffer was last read two chunks ago, before the previous barrier.
            if (lid < 8u) { atomicStore(&eb_mask[(ch + 1u) % 3u][lid], 0u); }
            let j = base + lid;
            if (j < eb_p.p1 && eb_tokens[eb_p.tok_off + j] == tok) {
                atomicOr(&eb_mask[cur][lid / 32u], 1u << (lid % 32u));
            }
            workgroupBarrier();
            if (base < i) {  // uniform: this chunk holds positions before i
                if (lid == 0u) {
                    var before = 0u;
                    for (var w = 0u; w < 8u; w++) {
                        let first = base + w * 32u;
                        var bits = atomicLoad(&eb_mask[cur][w]);
                        if (first + 32u > i) { bits = select(bits & ((1u << (i - first)) - 1u), 0u, first >= i); }
                        before |= bits;
                    }
                    eb_stop = before;
                }
                if (workgroupUniformLoad(&eb_stop) != 0u) { return; }   // not the first occurrence
            }
            if (base + 256u > lo) {  // uniform: this chunk holds positions from lo on
                for (var w = 0u; w < 8u; w++) {
                    let first = base + w * 32u;
                    var bits = atomicLoad(&eb_mask[cur][w]);
                    if (first < lo) { bits = select(bits & ~((1u << (lo - first)) - 1u), 0u, lo - first >= 32u); }
                    while (bits != 0u) {
                        let b = firstTrailingBit(bits);
                        bits &= bits - 1u;
                        let row = eb_p.dout_off + (first + b - eb_p.p0) * C;
                        for (var q = 0u; q < EB_CPT; q++) {
                            let c = cb + lid + q * 256u;
                            if (c < C) { acc[q] += eb_dout[row + c]; }
                        }
                    }
                }
            }
        }
        let out = eb_p.dwte_off + (u32(tok) - eb_p.v0) * C;
        for (var q = 0u; q < EB_CPT; q++) {
            let c = cb + lid + q * 256u;
            if (c < C) { eb_dwte[out + c] += acc[q]; }
        }
        workgroupBarrier();   // the next column pass reuses the masks
    }
}

struct EBWParams { T : u32, C : u32, B : u32, n : u32, dout_off : u32, dwpe_off : u32, p0 : u32, p1 : u32 };

@group(0) @binding(0) var<storage, read_write> ew_dwpe : array<f32>;
@group(0) @binding(1) var<storage, read> ew_dout : array<f32>;
@group(0) @binding(2) var<uniform> ew_p : EBWParams;

@compute @workgroup_size(256)
fn embedding_backward_wpe(@builtin(global_invocation_id) gid : vec3<u32>, @builtin(num_workgroups) nwg : vec3<u32>) {
    let i = flat_id(gid, nwg);   // = t * C + c
    if (i >= ew_p.n) { return; }
    let stride = ew_p.T * ew_p.C;
    var s = 0.0;
    for (var b = 0u; b < ew_p.B; b++) { s += ew_dout[ew_p.dout_off + b * stride + i]; }
    ew_dwpe[ew_p.dwpe_off + i] += s;
}
