// 04_rope.wgsl — rotary position embedding (docs/kernels.md#rope), Hugging Face LLaMA's
// rotate-half convention, in place on the q (NH heads) and k (NKV heads) parts of a fused
// qkv[B, T, W], W = (NH + 2·NKV)·HS; v is not touched. Position t = the row's index in its
// sequence (from 0) selects row t of the [maxT, HS] cos / sin tables (cpu_rope_tables); with
// packed examples (has_doc, binding 3: doc_start u32 [B,T]) row (b, t) is at t - doc_start[b,t].
// One thread per (row, q-or-k head, d < HS/2) owns the pair x1 = x[d], x2 = x[d + HS/2]:
//   rope_forward   x1' = x1·cos[d] - x2·sin[d],           x2' = x2·cos[d+H2] + x1·sin[d+H2]
//   rope_backward  (the transpose) dx1 = g1·cos[d] + g2·sin[d+H2],  dx2 = g2·cos[d+H2] - g1·sin[d]
// Reading both halves before writing them makes the update in place safe. Element offsets in the
// params let the host bind 256-byte-aligned windows (wg_binding_window).

struct RopeParams {
    n : u32,      // pairs: B·T·(NH + NKV)·HS/2
    T : u32,
    W : u32,      // qkv's row width
    HS : u32,
    H2 : u32,     // HS / 2
    nhk : u32,    // NH + NKV: the rotated heads of a row
    x_off : u32, c_off : u32, s_off : u32,
    has_doc : u32, d_off : u32, p2 : u32,  // doc_start bound; its element offset
};

@group(0) @binding(0) var<storage, read_write> rp_x : array<f32>;
@group(0) @binding(1) var<storage, read> rp_cos : array<f32>;
@group(0) @binding(2) var<storage, read> rp_sin : array<f32>;
@group(0) @binding(3) var<storage, read> rp_doc : array<u32>;
@group(0) @binding(4) var<uniform> rp_p : RopeParams;

// pair i -> (index of x1 in rp_x, index of column d of the row's position in the tables)
fn rp_at(i : u32) -> vec2<u32> {
    let d = i % rp_p.H2;
    let rest = i / rp_p.H2;
    let head = rest % rp_p.nhk;
    let row = rest / rp_p.nhk;  // b·T + t
    var pos = row % rp_p.T;
    if (rp_p.has_doc != 0u) { pos = pos - min(rp_doc[rp_p.d_off + row], pos); }
    return vec2<u32>(rp_p.x_off + row * rp_p.W + head * rp_p.HS + d, pos * rp_p.HS + d);
}

@compute @workgroup_size(256)
fn rope_forward(@builtin(global_invocation_id) gid : vec3<u32>, @builtin(num_workgroups) nwg : vec3<u32>) {
    let i = flat_id(gid, nwg);
    if (i >= rp_p.n) { return; }
    let a = rp_at(i);
    let h2 = rp_p.H2;
    let x1 = rp_x[a.x];
    let x2 = rp_x[a.x + h2];
    rp_x[a.x] = x1 * rp_cos[rp_p.c_off + a.y] - x2 * rp_sin[rp_p.s_off + a.y];
    rp_x[a.x + h2] = x2 * rp_cos[rp_p.c_off + a.y + h2] + x1 * rp_sin[rp_p.s_off + a.y + h2];
}

@compute @workgroup_size(256)
fn rope_backward(@builtin(global_invocation_id) gid : vec3<u32>, @builtin(num_workgroups) nwg : vec3<u32>) {
    let i = flat_id(gid, nwg);
    if (i >= rp_p.n) { return; }
    let a = rp_at(i);
    let h2 = rp_p.H2;
    let g1 = rp_x[a.x];
    let g2 = rp_x[a.x + h2];
    rp_x[a.x] = g1 * rp_cos[rp_p.c_off + a.y] + g2 * rp_sin[rp_p.s_off + a.y + h2];
    rp_x[a.x + h2] = g2 * rp_cos[rp_p.c_off + a.y + h2] - g1 * rp_sin[rp_p.s_off + a.y];
}
