// A small W3C WebDriver client for the console's browser tests: Debian's
// chromedriver driving Debian's headless Chromium, both on loopback. Only
// the commands the tests use; no npm package needed.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

const ELEMENT = 'element-6066-11e4-a52e-4f735466cecf';

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

export function findChromium() {
  for (const b of ['/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome']) {
    if (fs.existsSync(b)) return b;
  }
  return null;
}

export class Browser {
  static async start({ width = 1280, height = 900 } = {}) {
    const b = new Browser();
    const port = await freePort();
    b.profile = fs.mkdtempSync(path.join(os.tmpdir(), 'tollgate-chromium-'));
    b.driver = spawn('chromedriver', [`--port=${port}`, '--allowed-ips=127.0.0.1'], { stdio: 'ignore' });
    b.base = `http://127.0.0.1:${port}`;
    const until = Date.now() + 20000;
    for (;;) {
      try {
        const r = await fetch(`${b.base}/status`);
        if ((await r.json()).value.ready) break;
      } catch { /* not listening yet */ }
      if (Date.now() > until) throw new Error('chromedriver did not start');
      await new Promise((r) => setTimeout(r, 100));
    }
    const args = ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage',
      `--window-size=${width},${height}`, `--user-data-dir=${b.profile}`, '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'];
    const s = await b.cmd('POST', '/session', {
      capabilities: { alwaysMatch: { browserName: 'chrome', 'goog:chromeOptions': { binary: findChromium(), args } } },
    });
    b.id = s.sessionId;
    return b;
  }

  async cmd(method, p, body) {
    const r = await fetch(this.base + p, {
      method,
      headers: { 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const j = await r.json();
    if (!r.ok) throw new Error(`webdriver ${method} ${p}: ${j.value && j.value.message}`);
    return j.value;
  }

  s(p, method = 'GET', body) {
    return this.cmd(method, `/session/${this.id}${p}`, body);
  }

  async quit() {
    try { if (this.id) await this.s('', 'DELETE'); } catch { /* already gone */ }
    this.driver.kill('SIGKILL');
    fs.rmSync(this.profile, { recursive: true, force: true });
  }

  go(url) { return this.s('/url', 'POST', { url }); }
  run(script, ...args) { return this.s('/execute/sync', 'POST', { script, args }); }
  async find(css) { return (await this.s('/element', 'POST', { using: 'css selector', value: css }))[ELEMENT]; }
  async findAll(css) { return (await this.s('/elements', 'POST', { using: 'css selector', value: css })).map((e) => e[ELEMENT]); }
  click(el) { return this.s(`/element/${el}/click`, 'POST', {}); }
  type(el, text) { return this.s(`/element/${el}/value`, 'POST', { text }); }
  text(el) { return this.s(`/element/${el}/text`); }
  async screenshot(file) { fs.writeFileSync(file, Buffer.from(await this.s('/screenshot'), 'base64')); }
  setSize(width, height) { return this.s('/window/rect', 'POST', { width, height }); }

  // Waits until `script` (run in the page) returns a truthy value; returns it.
  async until(what, script, timeoutMs = 20000, ...args) {
    const end = Date.now() + timeoutMs;
    for (;;) {
      const v = await this.run(script, ...args).catch(() => null);
      if (v) return v;
      if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}
