// wgtrain.js — runs the wgtrain command (wgtrain.wasm, the same C program as the native build)
// in the browser: each command is a fresh instance of the compiled module over one in-memory
// file system that lives as long as the page (WASI through @bjorn3/browser_wasi_shim), with the
// WebGPU imports of wgpu.js. The wasm's entry point (wgt_web_main, web/web_stubs.c) is wrapped with JSPI's
// WebAssembly.promising, so the C code's waits on the GPU suspend it instead of blocking.
import { WASI, WASIProcExit, File, Directory, PreopenDirectory, ConsoleStdout, OpenFile } from './wasi/index.js';
import { Wgpu } from './wgpu.js';

// The command's stdout and stderr: lines to a callback, shown to the C program as a pipe (not a
// terminal), so that the trainer prints a line per progress report rather than redrawing one.
function lineOutput(fn) {
  const fd = ConsoleStdout.lineBuffered(fn);
  const stat = fd.fd_fdstat_get.bind(fd);
  fd.fd_fdstat_get = () => {
    const r = stat();
    r.fdstat.fs_filetype = 0;  // FILETYPE_UNKNOWN: isatty() is false
    return r;
  };
  return fd;
}

export function jspiSupported() {
  return typeof WebAssembly.Suspending === 'function' && typeof WebAssembly.promising === 'function';
}

export class Wgtrain {
  constructor() {
    this.root = new PreopenDirectory('/', new Map());
    this.module = null;
    this.running = 0;       // commands running now (a sample may run beside a train)
    this.trainer = null;    // the instance running `wgtrain train`, if any
    this.adapterInfo = null;  // what the last command's WebGPU adapter said about itself
  }

  async load(url = 'wgtrain.wasm') {
    this.module = await WebAssembly.compileStreaming(fetch(url));
  }

  // ---- files (absolute paths such as /data/meta.json)
  dirOf(path, create) {
    let dir = this.root.dir;
    const parts = path.split('/').filter(Boolean);
    for (const name of parts) {
      let next = dir.contents.get(name);
      if (!next) {
        if (!create) return null;
        next = new Directory(new Map());
        next.parent = dir;
        dir.contents.set(name, next);
      }
      if (!(next instanceof Directory)) return null;
      dir = next;
    }
    return dir;
  }
  writeFile(path, bytes) {
    const i = path.lastIndexOf('/');
    const dir = this.dirOf(path.slice(0, i), true);
    dir.contents.set(path.slice(i + 1), new File(bytes));
  }
  readFile(path) {
    const i = path.lastIndexOf('/');
    const dir = this.dirOf(path.slice(0, i), false);
    const f = dir && dir.contents.get(path.slice(i + 1));
    return f instanceof File ? f.data : null;
  }
  list(path) {
    const dir = this.dirOf(path, false);
    return dir ? [...dir.contents.keys()] : [];
  }
  remove(path) {
    const i = path.lastIndexOf('/');
    const dir = this.dirOf(path.slice(0, i), false);
    if (dir) dir.contents.delete(path.slice(i + 1));
  }

  // Runs `wgtrain ...args`; out(line) and err(line) get its output lines. Resolves to the exit status.
  async run(args, out = console.log, err = console.warn) {
    const fds = [new OpenFile(new File([])), lineOutput(out), lineOutput(err), this.root];
    const wasi = new WASI(['wgtrain', ...args], [], fds, { debug: false });
    const wgpu = new Wgpu();
    // wgtrain opens files with O_NONBLOCK (a FIFO must not block the open) and then clears it;
    // files in memory never block, so that flag change succeeds here as a no-op (the shim refuses it)
    const sys = { ...wasi.wasiImport, fd_fdstat_set_flags: () => 0 };
    const inst = await WebAssembly.instantiate(this.module, {
      wasi_snapshot_preview1: sys,
      env: wgpu.imports(),
    });
    wasi.inst = inst;
    wgpu.attach(inst);
    this.running++;
    if (args[0] === 'train') this.trainer = inst;
    try {
      inst.exports._initialize();
      await WebAssembly.promising(inst.exports.wgt_web_main)();
      return 0;
    } catch (e) {
      if (e instanceof WASIProcExit) return e.code;
      err(`wgtrain ${args[0]}: ${e && e.stack ? e.stack : e}`);
      return 70;
    } finally {
      this.running--;
      if (this.trainer === inst) this.trainer = null;
      if (wgpu.adapterInfo) this.adapterInfo = wgpu.adapterInfo;
      wgpu.instance = null;
    }
  }

  // Asks a running `wgtrain train` to stop after its step (it writes its checkpoint), as Ctrl-C does.
  stop() {
    if (this.trainer) this.trainer.exports.trainer_request_stop();
  }
}
