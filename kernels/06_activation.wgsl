// 06_activation.wgsl — FFN activations (seed document 003): GeLU in place, fused silu(gate)*up.
// One thread per element, no shared memory, no barriers.

struct Params { n : u32, p0 : u32, p1 : u32, p2 : u32 };

// tanh-approximated GeLU. The clamp only bounds the cubic inside tanh (seed review finding 1):
// clamping the output too would make gelu(1000) = 100. tanh of a large argument is computed
// from exp of a non-positive number so that no driver can return NaN for it.
fn tanh_safe(z : f32) -> f32 {
    let e = exp(-2.0 * abs(z));
    let t = (1.0 - e) / (1.0 + e);
    return select(-t, t, z >= 0.0);
}

fn gelu(x : f32) -> f32 {
    let xc = clamp(x, -100.0, 100.0);
    let inner = 0.7978845608 * (xc + 0.044715 * xc * xc * xc);
    return 0.5 * x * (1.0 + tanh_safe(inner));
}

// sigmoid with exp only ever seeing a non-positive argument (no Inf/Inf = NaN)
fn sigmoid_stable(x : f32) -> f32 {
    if (x >= 0.0) { return 1.0 / (1.0 + exp(-x)); }
    let e = exp(x);
    return e / (1.0 + e);
}

@group(0) @binding(0) var<storage, read_write> x : array<f32>;
@group(0) @binding(1) var<uniform> params : Params;

@compute @workgroup_size(256)
fn gelu_inplace(@builtin(global_invocation_id) gid : vec3<u32>, @builtin(num_workgroups) nwg : vec3<u32>) {
    let i = flat_id(gid, nwg);
    if (i >= params.n) { return; }
    x[i] = gelu(x[i]);
}

@group(0) @binding(0) var<storage, read> gate : array<f32>;
@group(0) @binding(1) var<storage, read> up : array<f32>;
@group(0) @binding(2) var<storage, read_write> hidden : array<f32>;
@group(0) @binding(3) var<uniform> params_sw : Params;

@compute @workgroup_size(256)
fn swiglu_combine(@builtin(global_invocation_id) gid : vec3<u32>, @builtin(num_workgroups) nwg : vec3<u32>) {
    let i = flat_id(gid, nwg);
    if (i >= params_sw.n) { return; }
    let g = gate[i];
    hidden[i] = g * sigmoid_stable(g) * up[i];
}
