// wgpu.js — the WebGPU C API functions that wgtrain's WebGPU backend calls (their declarations:
// src/backend/webgpu/wgpu_abi.h), implemented on the browser's navigator.gpu for the wasm32
// build (docs/web.md). Objects cross into C as small integer handles. Structs are read and
// written at their wasm32 offsets (4-byte pointers and size_t, 8-byte aligned uint64_t; a struct
// passed by value arrives as a pointer to a copy, a one-field struct such as WGPUFuture as its
// field). Asynchronous calls give a future; the callback runs when C waits on it with
// wgpuInstanceWaitAny, the one import that suspends the wasm stack (JSPI), so C's blocking waits
// become awaits on the browser's promises.

const WHOLE_SIZE = 0xffffffffffffffffn;
const STRLEN = 0xffffffff;  // SIZE_MAX on wasm32: a NUL-terminated string view

// WGPUFeatureName ids of wgpu_abi.h <-> the browser's names. timestamp-query is not offered:
// the browser has no encoder-level writeTimestamp, and only profiling and bench use it.
const FEATURES = { 0x0a: 'shader-f16', 0x11: 'subgroups' };
const FEATURE_IDS = Object.fromEntries(Object.entries(FEATURES).map(([id, name]) => [name, Number(id)]));

// WGPULimits in the pinned ABI's order: [name, offset, is 64-bit]
const LIMITS = [
  ['maxTextureDimension1D', 4], ['maxTextureDimension2D', 8], ['maxTextureDimension3D', 12],
  ['maxTextureArrayLayers', 16], ['maxBindGroups', 20], ['maxBindGroupsPlusVertexBuffers', 24],
  ['maxBindingsPerBindGroup', 28], ['maxDynamicUniformBuffersPerPipelineLayout', 32],
  ['maxDynamicStorageBuffersPerPipelineLayout', 36], ['maxSampledTexturesPerShaderStage', 40],
  ['maxSamplersPerShaderStage', 44], ['maxStorageBuffersPerShaderStage', 48],
  ['maxStorageTexturesPerShaderStage', 52], ['maxUniformBuffersPerShaderStage', 56],
  ['maxUniformBufferBindingSize', 64, true], ['maxStorageBufferBindingSize', 72, true],
  ['minUniformBufferOffsetAlignment', 80], ['minStorageBufferOffsetAlignment', 84], ['maxVertexBuffers', 88],
  ['maxBufferSize', 96, true], ['maxVertexAttributes', 104], ['maxVertexBufferArrayStride', 108],
  ['maxInterStageShaderVariables', 112], ['maxColorAttachments', 116], ['maxColorAttachmentBytesPerSample', 120],
  ['maxComputeWorkgroupStorageSize', 124], ['maxComputeInvocationsPerWorkgroup', 128],
  ['maxComputeWorkgroupSizeX', 132], ['maxComputeWorkgroupSizeY', 136], ['maxComputeWorkgroupSizeZ', 140],
  ['maxComputeWorkgroupsPerDimension', 144], ['maxImmediateSize', 148],
];
const LIMITS_SIZE = 152;

// A task (not a microtask) for the browser to deliver GPU results in: a MessageChannel message
// runs sooner than setTimeout(0), which browsers clamp after a few nestings.
function yieldTask() {
  return new Promise((resolve) => {
    const ch = new MessageChannel();
    ch.port1.onmessage = () => { ch.port1.close(); resolve(); };
    ch.port2.postMessage(0);
  });
}

export class Wgpu {
  constructor() {
    this.instance = null;     // the wasm instance (set by attach)
    this.objects = [null];    // handle -> object; 0 is NULL
    this.free = [];
    this.futures = new Map(); // future id -> {done, fire, promise}
    this.nextFuture = 1n;
    this.mapped = new Map();  // buffer handle -> [wasm pointers of mapped copies]
    this.adapterInfo = null;  // what the last chosen adapter said about itself (for the page)
  }

  attach(instance) { this.instance = instance; }

  // ---- memory
  get mem() { return this.instance.exports.memory.buffer; }
  dv() { return new DataView(this.mem); }
  u32(p) { return this.dv().getUint32(p, true); }
  u64(p) { return this.dv().getBigUint64(p, true); }
  num64(p) { return Number(this.u64(p)); }
  f64(p) { return this.dv().getFloat64(p, true); }
  setU32(p, v) { this.dv().setUint32(p, v >>> 0, true); }
  setU64(p, v) { this.dv().setBigUint64(p, BigInt(v), true); }
  malloc(n) {
    const p = this.instance.exports.malloc(Math.max(1, n));
    if (!p) throw new Error(`wgpu.js: out of wasm memory (${n} bytes)`);
    return p;
  }
  freeMem(p) { if (p) this.instance.exports.free(p); }
  cstr(p) {
    if (!p) return '';
    const b = new Uint8Array(this.mem);
    let e = p;
    while (b[e]) e++;
    return new TextDecoder().decode(b.subarray(p, e));
  }
  // a WGPUStringView at address p
  sv(p) {
    const data = this.u32(p), len = this.u32(p + 4);
    if (!data) return undefined;
    if (len === STRLEN) return this.cstr(data);
    return new TextDecoder().decode(new Uint8Array(this.mem, data, len));
  }
  // a malloc'd NUL-terminated copy of s: [pointer, byte length]
  allocStr(s) {
    const bytes = new TextEncoder().encode(s || '');
    const p = this.malloc(bytes.length + 1);
    new Uint8Array(this.mem).set(bytes, p);
    new Uint8Array(this.mem)[p + bytes.length] = 0;
    return [p, bytes.length];
  }
  // calls fn(pointer of a WGPUStringView of s), then frees it
  withSv(s, fn) {
    const [data, len] = this.allocStr(s);
    const p = this.malloc(8);
    this.setU32(p, data);
    this.setU32(p + 4, len);
    try { return fn(p); } finally { this.freeMem(p); this.freeMem(data); }
  }
  fn(index) { return this.instance.exports.__indirect_function_table.get(index); }

  // ---- handles
  put(obj) {
    if (obj == null) return 0;
    const h = this.free.length ? this.free.pop() : this.objects.length;
    this.objects[h] = obj;
    return h;
  }
  get(h) {
    const o = this.objects[h];
    if (o == null) throw new Error(`wgpu.js: handle ${h} is not a live WebGPU object`);
    return o;
  }
  drop(h) {
    if (h && this.objects[h] != null) { this.objects[h] = null; this.free.push(h); }
  }

  // ---- futures: `work` is a promise of a function that calls the C callback
  future(work) {
    const id = this.nextFuture++;
    const f = { done: false, fire: null };
    f.promise = work.then((fire) => { f.done = true; f.fire = fire; },
                          (err) => { f.done = true; f.fire = () => { throw err; }; });
    this.futures.set(id, f);
    return id;
  }
  // the callback info (mode, callback, userdata1, userdata2) at p
  cbInfo(p) { return { cb: this.u32(p + 8), u1: this.u32(p + 12), u2: this.u32(p + 16) }; }

  async waitAny(count, infos, timeoutNs) {
    const list = [];
    for (let i = 0; i < count; i++) {
      const id = this.u64(infos + 16 * i);
      const f = this.futures.get(id);
      if (!f) return 3;  // WGPUWaitStatus_Error: an unknown future
      list.push([i, id, f]);
    }
    if (!list.some(([, , f]) => f.done)) {
      if (timeoutNs === 0n) {
        await yieldTask();  // a poll still lets the browser deliver results
      } else {
        const ms = Math.min(Number(timeoutNs / 1000000n), 2 ** 31 - 1);
        let timer;
        const expired = new Promise((r) => { timer = setTimeout(r, ms); });
        await Promise.race([expired, ...list.map(([, , f]) => f.promise)]);
        clearTimeout(timer);
      }
    }
    let any = false;
    for (const [i, id, f] of list) {
      if (!f.done) continue;
      any = true;
      this.futures.delete(id);
      this.setU32(infos + 16 * i + 8, 1);
      f.fire();
    }
    return any ? 1 : 2;  // Success or TimedOut
  }

  // ---- limits and adapter description
  writeLimits(p, limits) {
    new Uint8Array(this.mem, p + 4, LIMITS_SIZE - 4).fill(0);
    for (const [name, off, wide] of LIMITS) {
      const v = limits[name];
      if (v === undefined) continue;
      if (wide) this.setU64(p + off, BigInt(v)); else this.setU32(p + off, Math.min(v, 0xffffffff));
    }
  }
  readLimits(p, adapterLimits) {
    const out = {};
    for (const [name, off, wide] of LIMITS) {
      if (!(name in adapterLimits)) continue;  // a limit this browser does not know cannot be asked for
      const v = wide ? this.num64(p + off) : this.u32(p + off);
      if (v) out[name] = v;
    }
    return out;
  }

  // ---- the imports
  imports() {
    const w = this;
    const adapterType = (a) => (a.info && a.info.isFallbackAdapter) || a.isFallbackAdapter ? 3 : 4;  // CPU or Unknown
    return {
      wgpuCreateInstance: () => (navigator.gpu ? w.put({ kind: 'instance' }) : 0),
      wgpuInstanceRelease: (h) => w.drop(h),
      wgpuInstanceProcessEvents: () => {},
      wgpuInstanceRequestAdapter(inst, opts, ci) {
        const { cb, u1, u2 } = w.cbInfo(ci);
        const o = {};
        if (opts) {
          const pp = w.u32(opts + 8);
          if (pp === 1) o.powerPreference = 'low-power';
          if (pp === 2) o.powerPreference = 'high-performance';
          if (w.u32(opts + 12)) o.forceFallbackAdapter = true;
        }
        return w.future(navigator.gpu.requestAdapter(o).then(
          (a) => () => w.withSv(a ? '' : 'no adapter of this kind', (msg) => w.fn(cb)(a ? 1 : 3, w.put(a), msg, u1, u2)),
          (e) => () => w.withSv(String(e), (msg) => w.fn(cb)(4, 0, msg, u1, u2))));
      },
      wgpuInstanceWaitAny: new WebAssembly.Suspending((inst, count, infos, timeout) => w.waitAny(count, infos, timeout)),

      wgpuAdapterGetInfo(h, p) {
        const a = w.get(h), info = a.info || {};
        // the name: the device, else its description, else vendor and architecture (SwiftShader gives only these)
        const name = info.device || info.description || [info.vendor, info.architecture].filter(Boolean).join(' ');
        const strs = [info.vendor, info.architecture, name, info.description];
        for (let i = 0; i < 4; i++) {
          const [data, len] = w.allocStr(strs[i] || '');
          w.setU32(p + 4 + 8 * i, data);
          w.setU32(p + 8 + 8 * i, len);
        }
        w.setU32(p + 36, 2);  // WGPUBackendType_WebGPU
        w.setU32(p + 40, adapterType(a));
        w.setU32(p + 44, 0);
        w.setU32(p + 48, 0);
        w.setU32(p + 52, info.subgroupMinSize || 0);
        w.setU32(p + 56, info.subgroupMaxSize || 0);
        w.adapterInfo = { vendor: info.vendor || '', architecture: info.architecture || '', device: info.device || '',
                          description: info.description || '', fallback: adapterType(a) === 3,
                          features: [...a.features].sort() };
        return 1;
      },
      wgpuAdapterInfoFreeMembers(p) { for (let i = 0; i < 4; i++) w.freeMem(w.u32(p + 4 + 8 * i)); },
      wgpuAdapterGetLimits(h, p) { w.writeLimits(p, w.get(h).limits); return 1; },
      wgpuAdapterHasFeature: (h, id) => (FEATURES[id] && w.get(h).features.has(FEATURES[id]) ? 1 : 0),
      wgpuAdapterGetFeatures(h, p) {
        const ids = [...w.get(h).features].map((n) => FEATURE_IDS[n]).filter((x) => x !== undefined);
        const arr = w.malloc(4 * ids.length);
        ids.forEach((id, i) => w.setU32(arr + 4 * i, id));
        w.setU32(p, ids.length);
        w.setU32(p + 4, arr);
      },
      wgpuSupportedFeaturesFreeMembers(p) { w.freeMem(w.u32(p + 4)); },
      wgpuAdapterRequestDevice(h, d, ci) {
        const a = w.get(h);
        const { cb, u1, u2 } = w.cbInfo(ci);
        const desc = { requiredFeatures: [], requiredLimits: {} };
        let lost = null, err = null;
        if (d) {
          desc.label = w.sv(d + 4);
          const nf = w.u32(d + 12), fp = w.u32(d + 16);
          for (let i = 0; i < nf; i++) {
            const name = FEATURES[w.u32(fp + 4 * i)];
            if (name && a.features.has(name)) desc.requiredFeatures.push(name);
          }
          const lp = w.u32(d + 20);
          if (lp) desc.requiredLimits = w.readLimits(lp, a.limits);
          lost = { cb: w.u32(d + 44), u1: w.u32(d + 48), u2: w.u32(d + 52) };
          err = { cb: w.u32(d + 60), u1: w.u32(d + 64), u2: w.u32(d + 68) };
        }
        return w.future(a.requestDevice(desc).then((dev) => () => {
          const hd = w.put(dev);
          const devPtr = w.malloc(4);  // the `const WGPUDevice *` the error and lost callbacks get
          w.setU32(devPtr, hd);
          const errTypes = { GPUValidationError: 2, GPUOutOfMemoryError: 3, GPUInternalError: 4 };
          if (err && err.cb)
            dev.addEventListener('uncapturederror', (ev) => {
              const e = ev.error;
              if (!w.instance) return;
              w.withSv(e.message, (msg) => w.fn(err.cb)(devPtr, errTypes[e.constructor.name] || 5, msg, err.u1, err.u2));
            });
          if (lost && lost.cb)
            dev.lost.then((info) => {
              if (!w.instance) return;
              const reason = info.reason === 'destroyed' ? 2 : 1;
              w.withSv(info.message, (msg) => w.fn(lost.cb)(devPtr, reason, msg, lost.u1, lost.u2));
            });
          w.withSv('', (msg) => w.fn(cb)(1, hd, msg, u1, u2));
        }, (e) => () => w.withSv(String(e), (msg) => w.fn(cb)(3, 0, msg, u1, u2))));
      },
      wgpuAdapterRelease: (h) => w.drop(h),

      wgpuDeviceGetQueue: (h) => w.put(w.get(h).queue),
      wgpuDeviceGetLimits(h, p) { w.writeLimits(p, w.get(h).limits); return 1; },
      wgpuDeviceCreateBuffer(h, d) {
        return w.put(w.get(h).createBuffer({ label: w.sv(d + 4), usage: w.num64(d + 16), size: w.num64(d + 24),
                                             mappedAtCreation: !!w.u32(d + 32) }));
      },
      wgpuDeviceCreateShaderModule(h, d) {
        let code = '';
        for (let c = w.u32(d); c; c = w.u32(c)) if (w.u32(c + 4) === 2) code = w.sv(c + 8);  // WGPUShaderSourceWGSL
        return w.put(w.get(h).createShaderModule({ label: w.sv(d + 4), code }));
      },
      wgpuDeviceCreateComputePipeline(h, d) {
        const layout = w.u32(d + 12), cs = d + 16;
        const compute = { module: w.get(w.u32(cs + 4)) };
        const entry = w.sv(cs + 8);
        if (entry) compute.entryPoint = entry;
        const nc = w.u32(cs + 16), cp = w.u32(cs + 20);
        if (nc) {
          compute.constants = {};
          for (let i = 0; i < nc; i++) compute.constants[w.sv(cp + 24 * i + 4)] = w.f64(cp + 24 * i + 16);
        }
        return w.put(w.get(h).createComputePipeline({ label: w.sv(d + 4), layout: layout ? w.get(layout) : 'auto', compute }));
      },
      wgpuDeviceCreateBindGroup(h, d) {
        const n = w.u32(d + 16), ep = w.u32(d + 20), entries = [];
        for (let i = 0; i < n; i++) {
          const e = ep + 40 * i, size = w.u64(e + 24);
          const resource = { buffer: w.get(w.u32(e + 8)), offset: w.num64(e + 16) };
          if (size !== WHOLE_SIZE) resource.size = Number(size);
          entries.push({ binding: w.u32(e + 4), resource });
        }
        return w.put(w.get(h).createBindGroup({ label: w.sv(d + 4), layout: w.get(w.u32(d + 12)), entries }));
      },
      wgpuDeviceCreateCommandEncoder: (h, d) => w.put(w.get(h).createCommandEncoder(d ? { label: w.sv(d + 4) } : {})),
      wgpuDeviceCreateQuerySet: () => 0,  // timestamp-query is never offered (FEATURES)
      wgpuDeviceDestroy: (h) => w.get(h).destroy(),
      wgpuDeviceRelease: (h) => w.drop(h),

      wgpuShaderModuleGetCompilationInfo(h, ci) {
        const { cb, u1, u2 } = w.cbInfo(ci);
        return w.future(w.get(h).getCompilationInfo().then((info) => () => {
          const msgs = info.messages, types = { error: 1, warning: 2, info: 3 };
          const arr = w.malloc(48 * msgs.length), strs = [];
          new Uint8Array(w.mem, arr, 48 * msgs.length).fill(0);
          msgs.forEach((m, i) => {
            const p = arr + 48 * i, [data, len] = w.allocStr(m.message);
            strs.push(data);
            w.setU32(p + 4, data);
            w.setU32(p + 8, len);
            w.setU32(p + 12, types[m.type] || 3);
            w.setU64(p + 16, m.lineNum);
            w.setU64(p + 24, m.linePos);
            w.setU64(p + 32, m.offset);
            w.setU64(p + 40, m.length);
          });
          const ip = w.malloc(12);
          w.setU32(ip, 0);
          w.setU32(ip + 4, msgs.length);
          w.setU32(ip + 8, arr);
          try { w.fn(cb)(1, ip, u1, u2); } finally { strs.forEach((s) => w.freeMem(s)); w.freeMem(arr); w.freeMem(ip); }
        }));
      },
      wgpuShaderModuleRelease: (h) => w.drop(h),
      wgpuComputePipelineGetBindGroupLayout: (h, i) => w.put(w.get(h).getBindGroupLayout(i)),
      wgpuComputePipelineRelease: (h) => w.drop(h),
      wgpuBindGroupLayoutRelease: (h) => w.drop(h),
      wgpuBindGroupRelease: (h) => w.drop(h),

      wgpuCommandEncoderBeginComputePass: (h, d) => w.put(w.get(h).beginComputePass(d ? { label: w.sv(d + 4) } : {})),
      wgpuCommandEncoderCopyBufferToBuffer(h, src, so, dst, doff, size) {
        w.get(h).copyBufferToBuffer(w.get(src), Number(so), w.get(dst), Number(doff), Number(size));
      },
      wgpuCommandEncoderClearBuffer(h, b, off, size) {
        if (size === WHOLE_SIZE) w.get(h).clearBuffer(w.get(b), Number(off));
        else w.get(h).clearBuffer(w.get(b), Number(off), Number(size));
      },
      wgpuCommandEncoderResolveQuerySet() { throw new Error('wgpu.js: no timestamp queries in the browser build'); },
      wgpuCommandEncoderWriteTimestamp() { throw new Error('wgpu.js: no timestamp queries in the browser build'); },
      wgpuCommandEncoderFinish: (h, d) => w.put(w.get(h).finish(d ? { label: w.sv(d + 4) } : {})),
      wgpuCommandEncoderRelease: (h) => w.drop(h),
      wgpuCommandBufferRelease: (h) => w.drop(h),

      wgpuComputePassEncoderSetPipeline: (h, p) => w.get(h).setPipeline(w.get(p)),
      wgpuComputePassEncoderSetBindGroup(h, i, bg, n, offs) {
        if (n) w.get(h).setBindGroup(i, w.get(bg), new Uint32Array(w.mem, offs, n).slice());
        else w.get(h).setBindGroup(i, bg ? w.get(bg) : null);
      },
      wgpuComputePassEncoderDispatchWorkgroups: (h, x, y, z) => w.get(h).dispatchWorkgroups(x, y, z),
      wgpuComputePassEncoderWriteTimestamp() { throw new Error('wgpu.js: no timestamp queries in the browser build'); },
      wgpuComputePassEncoderEnd: (h) => w.get(h).end(),
      wgpuComputePassEncoderRelease: (h) => w.drop(h),

      wgpuQueueSubmit(h, n, p) {
        const cbs = [];
        for (let i = 0; i < n; i++) cbs.push(w.get(w.u32(p + 4 * i)));
        w.get(h).submit(cbs);
      },
      wgpuQueueWriteBuffer(h, b, off, data, size) { w.get(h).writeBuffer(w.get(b), Number(off), w.mem, data, size); },
      wgpuQueueOnSubmittedWorkDone(h, ci) {
        const { cb, u1, u2 } = w.cbInfo(ci);
        return w.future(w.get(h).onSubmittedWorkDone().then(() => () => w.withSv('', (msg) => w.fn(cb)(1, msg, u1, u2))));
      },
      wgpuQueueRelease: (h) => w.drop(h),

      wgpuBufferMapAsync(h, mode, off, size, ci) {
        const { cb, u1, u2 } = w.cbInfo(ci);
        const sz = size === STRLEN ? undefined : size;  // WGPU_WHOLE_MAP_SIZE
        return w.future(w.get(h).mapAsync(Number(mode), off, sz).then(
          () => () => w.withSv('', (msg) => w.fn(cb)(1, msg, u1, u2)),
          (e) => () => w.withSv(String(e), (msg) => w.fn(cb)(3, msg, u1, u2))));  // WGPUMapAsyncStatus_Error
      },
      // a copy of the mapped range in wasm memory, freed at unmap
      wgpuBufferGetConstMappedRange(h, off, size) {
        const b = w.get(h);
        const src = new Uint8Array(b.getMappedRange(off, size === STRLEN ? undefined : size));
        const p = w.malloc(src.length);
        new Uint8Array(w.mem, p, src.length).set(src);
        if (!w.mapped.has(h)) w.mapped.set(h, []);
        w.mapped.get(h).push(p);
        return p;
      },
      wgpuBufferUnmap(h) {
        for (const p of w.mapped.get(h) || []) w.freeMem(p);
        w.mapped.delete(h);
        w.get(h).unmap();
      },
      wgpuBufferDestroy: (h) => w.get(h).destroy(),
      wgpuBufferRelease: (h) => w.drop(h),
      wgpuQuerySetRelease: (h) => w.drop(h),
    };
  }
}
