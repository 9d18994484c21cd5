// 18_lora.wgsl — add_cols, the op that LoRA adapters need beside the GEMMs: one thread per element
// of an N x W column window, out[n, oo + j] = (accumulate ? out[n, oo + j] : 0) + scale *
// inp[n, io + j], the rows of out and inp OS and IS elements apart (docs/lora.md). out_off and
// in_off place the bound views inside their 256-byte-aligned bindings.

struct ColsParams {
    N : u32, OS : u32, IS : u32, W : u32,
    oo : u32, io : u32, scale : f32, acc : u32,
    out_off : u32, in_off : u32, p0 : u32, p1 : u32,
};

@group(0) @binding(0) var<storage, read_write> ac_out : array<f32>;
@group(0) @binding(1) var<storage, read> ac_inp : array<f32>;
@group(0) @binding(2) var<uniform> ac_p : ColsParams;

@compute @workgroup_size(256)
fn add_cols(@builtin(global_invocation_id) gid : vec3<u32>, @builtin(num_workgroups) nwg : vec3<u32>) {
    let i = flat_id(gid, nwg);
    if (i >= ac_p.N * ac_p.W) { return; }
    let n = i / ac_p.W;
    let j = i - n * ac_p.W;
    let o = ac_p.out_off + n * ac_p.OS + ac_p.oo + j;
    let x = ac_p.scale * ac_inp[ac_p.in_off + n * ac_p.IS + ac_p.io + j];
    if (ac_p.acc != 0u) {
        ac_out[o] = ac_out[o] + x;
    } else {
        ac_out[o] = x;
    }
}
