// A real `tollgate up` for the MCP tests: its own data dir, the default
// policy (or one given), the HTTP API on a loopback port. Everything the
// tests do goes through the real binary, the embedded Kafka-protocol broker
// and the official MCP SDK.
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export const TOLLGATE = process.env.TOLLGATE_BIN;
if (!TOLLGATE) throw new Error('set TOLLGATE_BIN to the tollgate binary (ctest does)');

export async function waitFor(what, fn, timeoutMs = 30000) {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export function cli(args, opts = {}) {
  return execFileSync(TOLLGATE, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], ...opts });
}

export class Up {
  constructor({ policy, extraArgs = [] } = {}) {
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tollgate-mcp-'));
    this.data = path.join(this.dir, 'data');
    this.policy = policy;
    this.extraArgs = extraArgs;
  }

  async start() {
    const args = ['up', '--data', this.data, '--http', '127.0.0.1:0', ...this.extraArgs];
    if (this.policy) {
      const p = path.join(this.dir, 'policy.yaml');
      fs.writeFileSync(p, this.policy);
      args.push('--policy', p);
    }
    this.proc = spawn(TOLLGATE, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    this.stderr = '';
    this.proc.stderr.on('data', (d) => { this.stderr += d; });
    const ep = await waitFor('endpoints.json with the API', () => {
      try {
        const e = JSON.parse(fs.readFileSync(path.join(this.data, 'endpoints.json'), 'utf8'));
        return e.http && e.pid === this.proc.pid ? e : null;
      } catch { return null; }
    });
    this.http = ep.http;
    this.adminToken = fs.readFileSync(path.join(this.data, 'admin.token'), 'utf8').trim();
    return this;
  }

  async stop() {
    if (!this.proc || this.proc.exitCode !== null) return;
    const done = new Promise((r) => this.proc.on('exit', r));
    this.proc.kill('SIGTERM');
    await done;
  }

  agentToken(org, agent) {
    return cli(['tokens', 'add', '--data', this.data, '--identity', agent, '--org', org, '--role', 'agent']).trim();
  }

  async api(pathAndQuery, { method = 'GET', token = this.adminToken, body } = {}) {
    const res = await fetch(this.http + pathAndQuery, {
      method,
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, body: await res.json().catch(() => null) };
  }

  // Every event of one request, or of a filter, as the audit API returns.
  async events(query) {
    const r = await this.api('/v1/audit?' + new URLSearchParams({ org: 'default', ...query }));
    if (r.status !== 200) throw new Error(`audit query ${JSON.stringify(query)}: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body.events;
  }

  pending() {
    return cli(['approvals', 'list', '--data', this.data]).split('\n').filter(Boolean).map((l) => JSON.parse(l));
  }
}
