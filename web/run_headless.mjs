// run_headless.mjs — opens a wgtrain page in headless Chromium and prints the run's result: the
// JSON of its `wgtrain-result` console line, on stdout. Talks to Chromium over the DevTools
// protocol with Node's own WebSocket (Node 20: run with --experimental-websocket); nothing to
// install. Usage (tests/test_web.sh, docs/web.md):
//   node --experimental-websocket web/run_headless.mjs URL [--timeout S] [--verbose]
// Chromium's flags: WebGPU is behind --enable-unsafe-webgpu on Linux; without a GPU its adapter
// is SwiftShader (Vulkan on the CPU), which --use-webgpu-adapter=swiftshader asks for.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const args = process.argv.slice(2);
const url = args.find((a) => !a.startsWith('--'));
const timeoutS = Number(args.includes('--timeout') ? args[args.indexOf('--timeout') + 1] : 300);
const verbose = args.includes('--verbose');
if (!url) { console.error('usage: run_headless.mjs URL [--timeout S] [--verbose]'); process.exit(2); }
if (typeof WebSocket !== 'function') { console.error('run_headless.mjs: this Node has no WebSocket: run it with --experimental-websocket (Node 20) or use Node 22+'); process.exit(2); }

const browser = process.env.CHROMIUM || 'chromium';
const profile = mkdtempSync(join(tmpdir(), 'wgtrain-chromium-'));
const chrome = spawn(browser, [
  '--headless=new', '--no-sandbox', '--disable-gpu-sandbox', '--no-first-run', '--no-default-browser-check',
  '--disable-extensions', '--disable-background-timer-throttling', '--disable-renderer-backgrounding',
  ...(process.env.WGTRAIN_CHROMIUM_FLAGS ? process.env.WGTRAIN_CHROMIUM_FLAGS.split(' ') : ['--enable-unsafe-webgpu', '--enable-features=Vulkan', '--use-webgpu-adapter=swiftshader', '--use-angle=swiftshader']),
  `--user-data-dir=${profile}`, '--remote-debugging-port=0', 'about:blank',
], { stdio: ['ignore', 'ignore', 'pipe'] });

let finished = false;
function finish(code, msg) {
  if (finished) return;
  finished = true;
  if (msg) console.error(msg);
  try { chrome.kill('SIGKILL'); } catch { /* already gone */ }
  setTimeout(() => { try { rmSync(profile, { recursive: true, force: true }); } catch { /* left for the OS */ } process.exit(code); }, 300);
}
const timer = setTimeout(() => finish(1, `run_headless.mjs: no wgtrain-result within ${timeoutS} s`), timeoutS * 1000);
chrome.on('exit', (c) => finish(1, `run_headless.mjs: Chromium exited (status ${c}) before the page reported a result`));
chrome.on('error', (e) => finish(1, `run_headless.mjs: cannot start ${browser}: ${e.message} (apt-get install chromium, or run scripts/setup.sh)`));

let err = '';
chrome.stderr.on('data', (d) => {
  err += d.toString();
  if (verbose) process.stderr.write(d);
  const m = /DevTools listening on (ws:\/\/\S+)/.exec(err);
  if (m && !globalThis.started) { globalThis.started = true; drive(m[1]); }
});

function drive(wsUrl) {
  const ws = new WebSocket(wsUrl);
  let id = 0;
  const pending = new Map();
  const send = (method, params = {}, sessionId) => new Promise((resolve, reject) => {
    const n = ++id;
    pending.set(n, { resolve, reject });
    ws.send(JSON.stringify({ id: n, method, params, ...(sessionId ? { sessionId } : {}) }));
  });
  ws.onmessage = (ev) => {
    const msg = JSON.parse(ev.data);
    if (msg.id && pending.has(msg.id)) {
      const p = pending.get(msg.id);
      pending.delete(msg.id);
      if (msg.error) p.reject(new Error(msg.error.message)); else p.resolve(msg.result);
      return;
    }
    if (msg.method === 'Runtime.consoleAPICalled') {
      const text = msg.params.args.map((a) => (a.value !== undefined ? String(a.value) : a.description || '')).join(' ');
      if (text.startsWith('wgtrain-result ')) {
        clearTimeout(timer);
        process.stdout.write(text.slice('wgtrain-result '.length) + '\n');
        finish(0);
      } else if (verbose) {
        console.error(`[page] ${text}`);
      }
    } else if (msg.method === 'Runtime.exceptionThrown') {
      const d = msg.params.exceptionDetails;
      console.error(`[page exception] ${d.exception ? d.exception.description : d.text}`);
    }
  };
  ws.onerror = () => finish(1, 'run_headless.mjs: the DevTools connection failed');
  ws.onopen = async () => {
    try {
      const { targetId } = await send('Target.createTarget', { url: 'about:blank' });
      const { sessionId } = await send('Target.attachToTarget', { targetId, flatten: true });
      await send('Runtime.enable', {}, sessionId);
      await send('Page.enable', {}, sessionId);
      await send('Page.navigate', { url }, sessionId);
    } catch (e) {
      finish(1, `run_headless.mjs: ${e.message}`);
    }
  };
}
