// 08_cast.wgsl — f32 <-> f16 for mixed precision: `cast_f16` writes the f16 copy of an f32 tensor
// (the weights after each optimizer step, the activations saved for the backward), `cast_f32`
// widens an f16 tensor back to f32 (an f16 activation that an f32-only kernel reads).
//
// Storage: an f16 tensor is pairs of halves in 4-byte words, element 2i in the low 16 bits of word
// i (the byte layout of an array<f16>); an odd count leaves the last high half 0. Each thread owns
// one whole word, so no two threads ever write the two halves of one word.
//
// The conversion is integer arithmetic on the bits, round to nearest, ties to even, in both storage
// paths: WGSL leaves f32 -> f16 of a value outside the f16 range indeterminate (for the
// conversion and for pack2x16float alike) and does not pin the rounding, and the C reference
// (backend/half.h) must get the same bits. Overflow gives ±Inf, NaN stays NaN, -0 stays -0,
// subnormals are rounded, not flushed.
//
// Host defines (wg_ops_cast.c): alias CF_OUT_T = u32 with `fn cf_store(i, w) { cf_out[i] = w; }`
// (packed path), or alias CF_OUT_T = vec2<f16> storing bitcast<vec2<f16>>(w) (native path, where
// the device has shader-f16). The bytes written are the same.

struct CastParams { n : u32, words : u32, out_off : u32, inp_off : u32 };

@group(0) @binding(0) var<storage, read_write> cf_out : array<CF_OUT_T>;
@group(0) @binding(1) var<storage, read> cf_inp : array<f32>;
@group(0) @binding(2) var<uniform> cf_p : CastParams;

// f32 bits -> f16 bits (in the low 16 bits), round to nearest even.
fn f32_to_f16_bits(x : u32) -> u32 {
    let sign = (x >> 16u) & 0x8000u;
    let e = (x >> 23u) & 0xffu;
    let mant = x & 0x7fffffu;
    if (e == 0xffu) { return sign | 0x7c00u | select(0u, 0x200u | (mant >> 13u), mant != 0u); }
    let he = i32(e) - 112;
    if (he >= 31) { return sign | 0x7c00u; }
    if (he <= 0) {
        if (he < -10) { return sign; }
        let m = mant | 0x800000u;
        let shift = u32(14 - he);
        var r = m >> shift;
        let rem = m & ((1u << shift) - 1u);
        let half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (r & 1u) != 0u)) { r += 1u; }
        return sign | r;
    }
    var r = (u32(he) << 10u) | (mant >> 13u);
    let rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1u) != 0u)) { r += 1u; }
    return sign | r;
}

// out word i = halves of inp[2i], inp[2i+1] (0 past n)
@compute @workgroup_size(256)
fn cast_f16(@builtin(global_invocation_id) gid : vec3<u32>, @builtin(num_workgroups) nwg : vec3<u32>) {
    let i = flat_id(gid, nwg);
    if (i >= cf_p.words) { return; }
    let e = 2u * i;
    let lo = f32_to_f16_bits(bitcast<u32>(cf_inp[cf_p.inp_off + e]));
    var hi = 0u;
    if (e + 1u < cf_p.n) { hi = f32_to_f16_bits(bitcast<u32>(cf_inp[cf_p.inp_off + e + 1u])); }
    cf_store(cf_p.out_off + i, lo | (hi << 16u));
}

// f16 bits -> f32 bits, exact (subnormal halves become normal f32). Integer arithmetic so that no
// compiler flushes a subnormal on the way.
fn f16_bits_to_f32(h : u32) -> u32 {
    let sign = (h & 0x8000u) << 16u;
    let e = (h >> 10u) & 0x1fu;
    let m = h & 0x3ffu;
    if (e == 0x1fu) { return sign | 0x7f800000u | (m << 13u); }
    if (e != 0u) { return sign | ((e + 112u) << 23u) | (m << 13u); }
    if (m == 0u) { return sign; }
    let top = firstLeadingBit(m);  // 0..9: m = 2^top + rest
    let sh = 10u - top;
    return sign | ((113u - sh) << 23u) | (((m << sh) & 0x3ffu) << 13u);
}

struct WidenParams { n : u32, words : u32, out_off : u32, inp_off : u32 };

@group(0) @binding(0) var<storage, read_write> cw_out : array<u32>;
@group(0) @binding(1) var<storage, read> cw_inp : array<u32>;
@group(0) @binding(2) var<uniform> cw_p : WidenParams;

// out[2i], out[2i+1] = the halves of inp word i (the second only below n); f32 bits written as u32
@compute @workgroup_size(256)
fn cast_f32(@builtin(global_invocation_id) gid : vec3<u32>, @builtin(num_workgroups) nwg : vec3<u32>) {
    let i = flat_id(gid, nwg);
    if (i >= cw_p.words) { return; }
    let w = cw_inp[cw_p.inp_off + i];
    let e = 2u * i;
    cw_out[cw_p.out_off + e] = f16_bits_to_f32(w & 0xffffu);
    if (e + 1u < cw_p.n) { cw_out[cw_p.out_off + e + 1u] = f16_bits_to_f32(w >> 16u); }
}
