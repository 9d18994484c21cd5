// 06_activation.wgsl — FFN activations: GeLU in place or into another buffer, fused silu(gate)*up
// and gelu(gate)*up (docs/kernels.md#gelu_inplace, #gelu_forward, #swiglu_combine, #geglu_combine).
// One thread per element (or per 4 elements), no shared memory, no barriers. The host defines
// the element type EW (and EU, the matching u32 type): f32, or vec4<f32> when n is a multiple of 4 — 16-byte
// loads and stores move the same bytes with a quarter of the instructions. All the math below is
// component-wise, so one source serves both.

struct Params { n : u32, p0 : u32, p1 : u32, p2 : u32 };

// tanh-approximated GeLU. The clamp only bounds the cubic inside tanh (docs/kernels.md#gelu_inplace):
// clamping the output too would make gelu(1000) = 100. 0.5 (1 + tanh z) is computed as sigmoid(2z)
// from e = exp(-2|z|): 1 / (1 + e) for z >= 0, e / (1 + e) below. exp never sees a positive
// argument (so no driver can return Inf / Inf = NaN for a large z), and there is no 1 + tanh z,
// which cancels where tanh z is near -1 (relative error ~1e-7 / e^{2z} for z << 0: all of it
// by x = -5; docs/numerics.md#activations).
fn gelu(x : EW) -> EW {
    let xc = clamp(x, EW(-100.0), EW(100.0));
    let z = 0.7978845608 * (xc + 0.044715 * xc * xc * xc);
    let e = exp(-2.0 * abs(z));
    let r = 1.0 / (1.0 + e);
    return x * select(e * r, r, z >= EW(0.0));
}

// sigmoid with exp only ever seeing a non-positive argument (no Inf/Inf = NaN):
// 1 / (1 + e^-x) for x >= 0, e^x / (1 + e^x) below, both from e = exp(-|x|)
fn sigmoid_stable(x : EW) -> EW {
    let e = exp(-abs(x));
    return select(e / (1.0 + e), 1.0 / (1.0 + e), x >= EW(0.0));
}

@group(0) @binding(0) var<storage, read_write> x : array<EW>;
@group(0) @binding(1) var<uniform> params : Params;

@compute @workgroup_size(256)
fn gelu_inplace(@builtin(global_invocation_id) gid : vec3<u32>, @builtin(num_workgroups) nwg : vec3<u32>) {
    let i = flat_id(gid, nwg);
    if (i >= params.n) { return; }
    x[i] = gelu(x[i]);
}

@group(0) @binding(0) var<storage, read_write> gf_out : array<EW>;
@group(0) @binding(1) var<storage, read> gf_inp : array<EW>;
@group(0) @binding(2) var<uniform> gf_params : Params;

// out = gelu(inp) into another buffer (the bits of gelu_inplace)
@compute @workgroup_size(256)
fn gelu_forward(@builtin(global_invocation_id) gid : vec3<u32>, @builtin(num_workgroups) nwg : vec3<u32>) {
    let i = flat_id(gid, nwg);
    if (i >= gf_params.n) { return; }
    gf_out[i] = gelu(gf_inp[i]);
}

@group(0) @binding(0) var<storage, read_write> hidden : array<EW>;
@group(0) @binding(1) var<storage, read> gate : array<EW>;
@group(0) @binding(2) var<storage, read> up : array<EW>;
@group(0) @binding(3) var<uniform> params_sw : Params;

@compute @workgroup_size(256)
fn swiglu_combine(@builtin(global_invocation_id) gid : vec3<u32>, @builtin(num_workgroups) nwg : vec3<u32>) {
    let i = flat_id(gid, nwg);
    if (i >= params_sw.n) { return; }
    let g = gate[i];
    hidden[i] = g * sigmoid_stable(g) * up[i];
}

@group(0) @binding(0) var<storage, read_write> gg_hidden : array<EW>;
@group(0) @binding(1) var<storage, read> gg_gate : array<EW>;
@group(0) @binding(2) var<storage, read> gg_up : array<EW>;
@group(0) @binding(3) var<uniform> gg_params : Params;

@compute @workgroup_size(256)
fn geglu_combine(@builtin(global_invocation_id) gid : vec3<u32>, @builtin(num_workgroups) nwg : vec3<u32>) {
    let i = flat_id(gid, nwg);
    if (i >= gg_params.n) { return; }
    gg_hidden[i] = gelu(gg_gate[i]) * gg_up[i];
}
