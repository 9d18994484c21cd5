// 15_copy.wgsl — fill_zero, the backend's fill of a view with zeros, and copy_vec4: dst = src, one
// vec4 (16 bytes) a thread.
//
// fill_zero: elements [off, off + n) of the binding (a 256-byte-aligned window, off its remainder)
// set to 0, one thread an element (fill_zero4 below: a vec4). A dispatch rather than the API's
// ClearBuffer: a clear is a command outside the compute pass, so each one ended the pass (on the
// H200 the GPU idled between passes, and the clear engine wrote more slowly than kernels do).

struct FillParams { n : u32, off : u32, p0 : u32, p1 : u32 };

@group(0) @binding(0) var<storage, read_write> fz_dst : array<f32>;
@group(0) @binding(1) var<uniform> fz_p : FillParams;

@compute @workgroup_size(256)
fn fill_zero(@builtin(global_invocation_id) gid : vec3<u32>, @builtin(num_workgroups) nwg : vec3<u32>) {
    let i = flat_id(gid, nwg);
    if (i < fz_p.n) { fz_dst[fz_p.off + i] = 0.0; }
}

// fill_zero4: the same one vec4 a thread, n and off counted in vec4, where the view's length and
// offset are multiples of 4 (a GPT-2 124M step's two fills on the H200: 0.375 -> 0.24 ms).
@group(0) @binding(0) var<storage, read_write> fz4_dst : array<vec4<f32>>;

@compute @workgroup_size(256)
fn fill_zero4(@builtin(global_invocation_id) gid : vec3<u32>, @builtin(num_workgroups) nwg : vec3<u32>) {
    let i = flat_id(gid, nwg);
    if (i < fz_p.n) { fz4_dst[fz_p.off + i] = vec4<f32>(0.0); }
}

// copy_vec4: the benchmarks' ceiling for
// memory-bound kernels: a device-to-device copy through the same compiler and dispatch path as
// every kernel (the API's buffer-to-buffer copy runs through another engine and measured well
// below what kernels reach on the H200, so it is no ceiling for them). Sizes are in vec4; the host
// binds 256-byte-aligned windows, adds the remainders as offsets and splits more than 65535
// workgroups into a 2-D grid (flat_id).

struct CopyParams { n4 : u32, src_off4 : u32, dst_off4 : u32, p0 : u32 };

@group(0) @binding(0) var<storage, read> cp_src : array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> cp_dst : array<vec4<f32>>;
@group(0) @binding(2) var<uniform> cp_p : CopyParams;

@compute @workgroup_size(256)
fn copy_vec4(@builtin(global_invocation_id) gid : vec3<u32>, @builtin(num_workgroups) nwg : vec3<u32>) {
    let i = flat_id(gid, nwg);
    if (i < cp_p.n4) { cp_dst[cp_p.dst_off4 + i] = cp_src[cp_p.src_off4 + i]; }
}
