// 01_embedding.wgsl — token + position embedding: out[p, c] = wte[tokens[p], c] + wpe[p % T, c].
// One thread per output element (flat_id: B*T*C may exceed 65535*256). The host may split the
// vocabulary into row windows of wte (a GPT-2 wte is larger than one binding on some devices):
// each dispatch then writes only the positions whose token falls in its window [v0, v1), and
// the first dispatch also writes positions with an invalid token (outside [0, V)) as wpe alone,
// so that every element of out is written exactly once.

struct EmbParams {
    n : u32,         // elements in this dispatch: (positions in the window) * C
    C : u32, T : u32, V : u32,
    p0 : u32,        // first position of this dispatch
    v0 : u32, v1 : u32,
    flags : u32,     // 1: this dispatch owns the invalid tokens
    tok_off : u32, wte_off : u32, wpe_off : u32, out_off : u32,
};

@group(0) @binding(0) var<storage, read_write> ef_out : array<f32>;
@group(0) @binding(1) var<storage, read> ef_tokens : array<i32>;
@group(0) @binding(2) var<storage, read> ef_wte : array<f32>;
@group(0) @binding(3) var<storage, read> ef_wpe : array<f32>;
@group(0) @binding(4) var<uniform> ef_p : EmbParams;

@compute @workgroup_size(256)
fn embedding_forward(@builtin(global_invocation_id) gid : vec3<u32>, @builtin(num_workgroups) nwg : vec3<u32>) {
    let i = flat_id(gid, nwg);
    if (i >= ef_p.n) { return; }
    let pl = i / ef_p.C;            // position inside this dispatch
    let c = i - pl * ef_p.C;
    let pos = ef_p.p0 + pl;
    let tok = ef_tokens[ef_p.tok_off + pos];
    let t = pos % ef_p.T;
    let pe = ef_wpe[ef_p.wpe_off + t * ef_p.C + c];
    if (tok >= 0 && u32(tok) < ef_p.V) {
        let v = u32(tok);
        if (v < ef_p.v0 || v >= ef_p.v1) { return; }   // another window's dispatch writes it
        ef_out[ef_p.out_off + i] = ef_wte[ef_p.wte_off + (v - ef_p.v0) * ef_p.C + c] + pe;
    } else if ((ef_p.flags & 1u) != 0u) {
        ef_out[ef_p.out_off + i] = pe;                  // invalid token: no token embedding
    }
}
