// app.js — the page (index.html): text in, `wgtrain prepare` + `wgtrain train` run through
// wgtrain.js, a live loss plot from the trainer's progress lines, stop/resume, samples at each
// checkpoint, the checkpoint and a Hugging Face export as downloads. URL parameters preset,
// steps, seed, batch, seq, vocab, corpus (a URL of a text file), sample_device (webgpu or cpu)
// and auto=1 (start at once) make
// it automatable; a run started by auto=1 ends with one console line `wgtrain-result {JSON}`.
import { Wgtrain, jspiSupported } from './wgtrain.js';

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
const auto = params.get('auto') === '1';
const wg = new Wgtrain();
// vocabulary of the BPE tokenizer `wgtrain prepare` trains, per preset (the model's lm_head
// grows with it: small for the presets meant to train in seconds or minutes)
const VOCAB = { micro: 512, tiny: 2048, 'llama-tiny': 2048, small: 8192 };

let corpus = null;          // {name, bytes}
let preparedFor = null;     // the corpus and vocabulary /data was prepared from
let points = [];            // [{step, loss}] and val points
let valPoints = [];
let lastCkptStep = 0;
let sampling = false;
// stop_at=N (with auto=1): press Stop at step N, then Resume: the headless test of both buttons
const stopAt = Number(params.get('stop_at') || 0);
let stopSent = false;

function log(line) {
  if (auto) console.log(line);  // a headless run's log (run_headless.mjs --verbose shows it)
  const el = $('log');
  el.textContent += line + '\n';
  if (el.textContent.length > 200000) el.textContent = el.textContent.slice(-100000);
  el.scrollTop = el.scrollHeight;
}
function status(s) { $('status').textContent = s; }
function fail(msg) { $('error').textContent = msg; status('stopped'); if (auto) console.log(`error: ${msg}`); }
function buttons(running) {
  $('train').disabled = running;
  $('stop').disabled = !running;
  const haveRun = wg.list('/run').includes('ckpt.bin');
  $('resume').disabled = running || !haveRun;
  $('sampleBtn').disabled = !haveRun || sampling;
  $('export').disabled = running || !haveRun;
}
function num(id, name) {
  const v = params.get(name) ?? $(id).value;
  if (v === '' || v == null) return null;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name} must be a whole number, not '${v}'`);
  return n;
}

// ------------------------------------------------------------------ plot
function plot() {
  const c = $('plot'), g = c.getContext('2d');
  const W = c.width, H = c.height, L = 48, B = 24;
  g.clearRect(0, 0, W, H);
  const all = points.concat(valPoints);
  if (!all.length) return;
  const maxStep = Math.max(...all.map((p) => p.step), 1);
  let lo = Math.min(...all.map((p) => p.loss)), hi = Math.max(...all.map((p) => p.loss));
  if (hi - lo < 1e-3) { hi += 0.5; lo -= 0.5; }
  const x = (s) => L + (W - L - 10) * s / maxStep, y = (v) => 8 + (H - B - 8) * (hi - v) / (hi - lo);
  g.strokeStyle = '#ccc'; g.fillStyle = '#555'; g.font = '11px sans-serif';
  for (let i = 0; i <= 4; i++) {
    const v = lo + (hi - lo) * i / 4;
    g.beginPath(); g.moveTo(L, y(v)); g.lineTo(W - 10, y(v)); g.stroke();
    g.fillText(v.toFixed(2), 4, y(v) + 4);
  }
  g.fillText(`step ${maxStep}`, W - 70, H - 6);
  const line = (pts, color, width) => {
    g.strokeStyle = color; g.lineWidth = width; g.beginPath();
    pts.forEach((p, i) => (i ? g.lineTo(x(p.step), y(p.loss)) : g.moveTo(x(p.step), y(p.loss))));
    g.stroke(); g.lineWidth = 1;
  };
  line(points, '#36c', 1.5);
  line(valPoints, '#d60', 2.5);
  g.fillStyle = '#36c'; g.fillText('train', L + 8, 18);
  g.fillStyle = '#d60'; g.fillText('validation', L + 48, 18);
}

// ------------------------------------------------------------------ running commands
function onTrainLine(line) {
  log(line);
  let m = /^step +(\d+)\/(\d+) \| loss ([0-9.eE+-]+|nan|inf)/.exec(line);
  if (m) {
    points.push({ step: +m[1], loss: +m[3] });
    status(`step ${m[1]} of ${m[2]}, loss ${(+m[3]).toFixed(4)}`);
    plot();
    if (auto && stopAt && +m[1] === stopAt && !stopSent) { stopSent = true; wg.stop(); }
    return;
  }
  m = /^step (\d+): val loss ([0-9.eE+-]+)/.exec(line);
  if (m) { valPoints.push({ step: +m[1], loss: +m[2] }); plot(); return; }
  m = /^checkpoint: step (\d+) written/.exec(line);
  if (m) { lastCkptStep = +m[1]; if (!auto) sample(); }
}

async function corpusBytes() {
  if (corpus) return corpus;
  const url = params.get('corpus') || 'corpus.txt';
  const r = await fetch(url);
  if (!r.ok) throw new Error(`cannot fetch the corpus ${url}: HTTP ${r.status}`);
  corpus = { name: url, bytes: new Uint8Array(await r.arrayBuffer()) };
  $('corpusinfo').textContent = `${url}: ${corpus.bytes.length} bytes`;
  return corpus;
}

async function prepare(preset) {
  const c = await corpusBytes();
  const vocab = num('vocab', 'vocab') ?? VOCAB[preset] ?? 4096;
  const key = `${c.name}:${c.bytes.length}:${vocab}`;
  if (preparedFor === key) return;
  wg.writeFile('/input/corpus.txt', c.bytes);
  for (const f of wg.list('/data')) wg.remove(`/data/${f}`);
  status('tokenizing…');
  const rc = await wg.run(['prepare', '--input', '/input/corpus.txt', '--out', '/data', '--vocab', String(vocab)], log, log);
  if (rc !== 0) throw new Error(`wgtrain prepare failed (exit ${rc}); see the log`);
  preparedFor = key;
}

async function train(resume) {
  $('error').textContent = '';
  buttons(true);
  const t0 = performance.now();
  let rc;
  const preset = params.get('preset') || $('preset').value;
  try {
    const args = ['train', '--out', '/run', '--log-every', '1', '--device', 'webgpu'];
    const steps = num('steps', 'steps'), batch = num('batch', 'batch'), seq = num('seq', 'seq'), seed = num('seed', 'seed');
    if (!resume) {
      await prepare(preset);
      for (const f of wg.list('/run')) wg.remove(`/run/${f}`);
      points = []; valPoints = []; lastCkptStep = 0;
      args.push('--data', '/data', '--preset', preset);
      if (batch != null) args.push('--batch', String(batch));
      if (seq != null) args.push('--seq', String(seq));
      if (seed != null) args.push('--seed', String(seed));
      // a checkpoint (and so a sample) about every quarter of the run
      if (!auto) args.push('--ckpt-every', String(Math.max(1, Math.round((steps ?? 200) / 4))));
    } else {
      args.push('--resume');
    }
    if (steps != null) args.push('--steps', String(steps));
    status(resume ? 'resuming…' : 'compiling the kernels…');
    rc = await wg.run(args, onTrainLine, onTrainLine);
    if (rc === 130) status(`stopped at step ${lastCkptStep}: Resume continues from there`);  // Stop, as Ctrl-C
    else if (rc !== 0) fail(`wgtrain train stopped with exit status ${rc}; the log says why`);
    else status(`done: ${points.length ? points[points.length - 1].step : 0} steps in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  } catch (e) {
    fail(String(e && e.message ? e.message : e));
    rc = 1;
  }
  buttons(false);
  if (wg.list('/run').includes('ckpt.bin')) {
    offerDownload('ckpt.bin', wg.readFile('/run/ckpt.bin'));
    if (!auto) await sample();
  }
  return { rc, seconds: (performance.now() - t0) / 1000, preset };
}

async function sample() {
  if (sampling || !wg.list('/run').includes('ckpt.bin')) return '';
  sampling = true;
  buttons(wg.trainer != null);
  let text = '';
  const seed = num('seed', 'seed') ?? 1;
  // sample_device=cpu: the C backend samples (the headless test's choice: a software GPU takes
  // minutes to compile the decoder's kernels, which a real GPU does in a second)
  const device = params.get('sample_device') === 'cpu' ? 'cpu' : 'webgpu';
  const rc = await wg.run(['sample', '--run', '/run', '--device', device, '--max-tokens', '60', '--seed', String(seed)],
                          (l) => { text += l + '\n'; }, (l) => log(l));
  $('sample').textContent = rc === 0 ? `(step ${lastCkptStep})\n${text}` : '(sampling failed: see the log)';
  sampling = false;
  buttons(wg.trainer != null);
  return rc === 0 ? text : '';
}

function offerDownload(name, bytes, label) {
  const box = $('downloads');
  if (box.dataset.filled !== '1') { box.textContent = ''; box.dataset.filled = '1'; }
  const old = box.querySelector(`a[download="${name}"]`);
  if (old) { URL.revokeObjectURL(old.href); old.remove(); }
  const a = document.createElement('a');
  a.href = URL.createObjectURL(new Blob([bytes], { type: 'application/octet-stream' }));
  a.download = name;
  a.textContent = `${label || name} (${(bytes.length / 1024).toFixed(0)} KiB)`;
  box.appendChild(a);
}

// `wgtrain export`: the run as a Hugging Face model directory; each file a download
async function exportHf() {
  for (const f of wg.list('/hf')) wg.remove(`/hf/${f}`);
  const rc = await wg.run(['export', '--run', '/run', '--out', '/hf', '--force'], log, log);
  if (rc !== 0) { fail(`wgtrain export failed (exit ${rc}); see the log`); return []; }
  const files = wg.list('/hf');
  for (const f of files) offerDownload(f, wg.readFile(`/hf/${f}`), `HF ${f}`);
  return files.map((f) => ({ name: f, bytes: wg.readFile(`/hf/${f}`).length }));
}

// the median time between consecutive steps of metrics.jsonl (a resume's restart is one outlier)
function medianStep(rows) {
  const d = [];
  for (let i = 1; i < rows.length; i++) if (rows[i].time_s > rows[i - 1].time_s) d.push(rows[i].time_s - rows[i - 1].time_s);
  d.sort((a, b) => a - b);
  return d.length ? d[d.length >> 1] : null;
}

// ------------------------------------------------------------------ start
async function main() {
  if (!navigator.gpu) {
    fail('This browser has no WebGPU (navigator.gpu is missing). Use a current Chrome, Edge or Safari, or Firefox ' +
         'with WebGPU enabled; on Linux, Chrome needs --enable-unsafe-webgpu (and --enable-features=Vulkan).');
    if (auto) console.log('wgtrain-result ' + JSON.stringify({ error: 'no WebGPU' }));
    return;
  }
  if (!jspiSupported()) {
    fail('This browser lacks WebAssembly JSPI (WebAssembly.Suspending), which wgtrain needs to wait on the GPU; ' +
         'Chrome 137 and later have it.');
    if (auto) console.log('wgtrain-result ' + JSON.stringify({ error: 'no JSPI' }));
    return;
  }
  const adapter = await navigator.gpu.requestAdapter();
  if (!adapter) {
    fail('WebGPU is there but offers no adapter: the GPU may be blocklisted or disabled in this browser.');
    if (auto) console.log('wgtrain-result ' + JSON.stringify({ error: 'no adapter' }));
    return;
  }
  for (const [k, id] of [['preset', 'preset'], ['steps', 'steps'], ['batch', 'batch'], ['seq', 'seq'], ['seed', 'seed'],
                         ['vocab', 'vocab']])
    if (params.has(k)) $(id).value = params.get(k);
  await wg.load('wgtrain.wasm');
  status('ready');
  buttons(false);

  const pick = async (file) => {
    corpus = { name: file.name, bytes: new Uint8Array(await file.arrayBuffer()) };
    preparedFor = null;
    $('corpusinfo').textContent = `${file.name}: ${corpus.bytes.length} bytes`;
  };
  $('file').addEventListener('change', (e) => e.target.files[0] && pick(e.target.files[0]));
  const drop = $('drop');
  drop.addEventListener('dragover', (e) => { e.preventDefault(); drop.classList.add('over'); });
  drop.addEventListener('dragleave', () => drop.classList.remove('over'));
  drop.addEventListener('drop', (e) => {
    e.preventDefault(); drop.classList.remove('over');
    if (e.dataTransfer.files[0]) pick(e.dataTransfer.files[0]);
  });
  $('bundled').addEventListener('click', () => { corpus = null; preparedFor = null; corpusBytes(); });
  $('train').addEventListener('click', () => train(false));
  $('resume').addEventListener('click', () => train(true));
  $('stop').addEventListener('click', () => { wg.stop(); status('stopping after this step…'); });
  $('sampleBtn').addEventListener('click', () => sample());
  $('export').addEventListener('click', () => exportHf());

  if (auto) {
    let r = await train(false);
    const stopped = r.rc === 130 ? lastCkptStep : null;
    if (stopAt && r.rc === 130) {
      const first = r.seconds;
      r = await train(true);
      r.seconds += first;
    }
    if (r.rc === 0) await sample();
    const metrics = new TextDecoder().decode(wg.readFile('/run/metrics.jsonl') || new Uint8Array());
    const rows = metrics.split('\n').filter(Boolean).map((l) => JSON.parse(l));
    const vals = rows.filter((x) => x.val_loss !== undefined);
    const text = $('sample').textContent;
    const files = r.rc === 0 ? await exportHf() : [];
    console.log('wgtrain-result ' + JSON.stringify({
      rc: r.rc, preset: r.preset, stopped_at: stopped, steps: rows.length ? rows[rows.length - 1].step : 0,
      losses: rows.map((x) => x.loss), val_loss: vals.length ? vals[vals.length - 1].val_loss : null,
      seconds: r.seconds, step_s: medianStep(rows),
      adapter: wg.adapterInfo, sample: text, plotted: points.length + valPoints.length, export: files,
    }));
  }
}

main().catch((e) => {
  fail(String(e && e.stack ? e.stack : e));
  if (auto) console.log('wgtrain-result ' + JSON.stringify({ error: String(e) }));
});
