// Upstream MCP servers of either protocol era behind the gate (docs/mcp.md,
// "Upstream MCP servers"): a real `up` whose policy declares four servers
// written with the official SDKs (tests/mcp/eras_server.mjs), each with one
// `echo` tool answering "<mode>: <text>":
//   v2stdio, v2http  SDK v2 (2.4.0), 2026-07-28 only (legacy: 'reject':
//                    initialize is refused), over stdio (sandboxed) and over
//                    Streamable HTTP on 127.0.0.1
//   v1stdio, v1http  SDK v1 (1.32.2), which knows nothing of 2026-07-28
// and `asker`, a hand-written 2026-07-28 server whose tools/call answers
// resultType "input_required". tollgate probes each with server/discover
// and speaks the era the answer says; a call through `tollgate mcp` that
// one of them answers proves the era (an SDK v2 server here answers only
// enveloped requests with the right headers, an SDK v1 one only after
// initialize), and the log line of each server's first readiness names the
// era picked. Run by ctest as Mcp.UpstreamServersOfEitherEra.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { Up, TOLLGATE, waitFor } from './harness.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const eras = path.join(here, 'eras_server.mjs');
const MODERN = '2026-07-28';

const policy = (ports) => `
version: 1
mode: ask
approval_threshold: HIGH
tools:
  "mcp:v2stdio/*": {danger: LOW, read_only: true}
  "mcp:v2http/*":  {danger: LOW, read_only: true}
  "mcp:v1stdio/*": {danger: LOW, read_only: true}
  "mcp:v1http/*":  {danger: LOW, read_only: true}
  "mcp:asker/*":   {danger: LOW, read_only: true}
execute:
  network: {allow_cidrs: [127.0.0.0/8]}
  mcp_servers:
    v2stdio:
      command: [node, ${eras}, v2-stdio]
      read_only: [${here}]
    v1stdio:
      command: [node, ${eras}, v1-stdio]
      read_only: [${here}]
    asker:
      command: [node, ${eras}, input-required]
      read_only: [${here}]
    v2http:
      url: http://127.0.0.1:${ports['v2-http']}/mcp
    v1http:
      url: http://127.0.0.1:${ports['v1-http']}/mcp
`;

// An HTTP server of eras_server.mjs on loopback, and the port it printed.
async function serve(mode) {
  const proc = spawn('node', [eras, mode], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise((resolve, reject) => {
    proc.once('exit', (code) => reject(new Error(`${mode} exited with ${code} before listening`)));
    proc.stdout.once('data', (d) => resolve(JSON.parse(d).port));
  });
  return { proc, port };
}

let up;
const http = {};
before(async () => {
  for (const mode of ['v2-http', 'v1-http']) http[mode] = await serve(mode);
  up = await new Up({ policy: policy({ 'v2-http': http['v2-http'].port, 'v1-http': http['v1-http'].port }) }).start();
});
after(async () => {
  await up?.stop();
  for (const s of Object.values(http)) s.proc.kill('SIGKILL');
});

async function connect() {
  const client = new Client({ name: 'tollgate-eras-test', version: '1.0.0' });
  await client.connect(new StdioClientTransport({
    command: TOLLGATE,
    args: ['mcp', '--data', up.data, '--org', 'default', '--agent', 'eras-agent', '--session', `eras-${Date.now()}`],
    stderr: 'pipe',
  }));
  return client;
}

// A call, tried again while the server still counts as starting (its
// supervisor connects in the background, the probe first).
async function call(client, name, args) {
  return waitFor(`an answer to ${name}`, async () => {
    const x = await client.callTool({ name, arguments: args });
    const starting = x.isError && x.structuredContent?.error?.code === 'E_UPSTREAM_UNAVAILABLE' &&
      /starting/.test(x.content[0].text);
    return starting ? null : x;
  });
}

// The era each server was first found ready in, from up's log: one line
// per connection, "upstream MCP server 'S' is ready: era E, N tools".
function erasLogged() {
  const out = {};
  for (const line of up.stderr.split('\n')) {
    let msg;
    try { msg = JSON.parse(line).msg; } catch { continue; }
    const m = /^upstream MCP server '([^']+)' is ready: era ([^,]+),/.exec(msg ?? '');
    if (m && !(m[1] in out)) out[m[1]] = m[2];
  }
  return out;
}

for (const [server, mode] of [['v2stdio', 'v2-stdio'], ['v2http', 'v2-http'], ['v1stdio', 'v1-stdio'], ['v1http', 'v1-http']]) {
  test(`mcp:${server}/echo is answered by the ${mode} server through the gate`, async () => {
    const client = await connect();
    try {
      const r = await call(client, `mcp__${server}__echo`, { text: 'through the gate' });
      assert.equal(r.isError, false, JSON.stringify(r));
      assert.equal(r.content[0].text, `${mode}: through the gate`);
      const events = await up.events({ request: r._meta['io.tollgate/request_id'] });
      assert.deepEqual(events.map((e) => e.type),
        ['request.received', 'decision.made', 'execution.started', 'execution.completed']);
      assert.equal(events[3].data.result.data.content[0].text, `${mode}: through the gate`);
    } finally {
      await client.close();
    }
  });
}

test('each server is spoken to in the era its answer to server/discover named', async () => {
  const got = await waitFor('a readiness line for every server', () => {
    const e = erasLogged();
    return ['v2stdio', 'v2http', 'v1stdio', 'v1http', 'asker'].every((s) => s in e) ? e : null;
  });
  assert.equal(got.v2stdio, MODERN);
  assert.equal(got.v2http, MODERN);
  assert.equal(got.asker, MODERN);
  // The v1 servers: the legacy revision their initialize named.
  for (const s of ['v1stdio', 'v1http']) {
    assert.match(got[s], /^\d{4}-\d{2}-\d{2}$/, s);
    assert.notEqual(got[s], MODERN, s);
  }
});

test('the tools of a 2026-07-28 server are listed through tollgate as a legacy ones are', async () => {
  const client = await connect();
  try {
    const tools = await waitFor('the echo tools of all four in tools/list', async () => {
      const { tools } = await client.listTools();
      const n = tools.map((t) => t.name);
      return ['v2stdio', 'v2http', 'v1stdio', 'v1http'].every((s) => n.includes(`mcp__${s}__echo`)) ? tools : null;
    });
    for (const s of ['v2stdio', 'v2http', 'v1stdio', 'v1http']) {
      const echo = tools.find((t) => t.name === `mcp__${s}__echo`);
      assert.equal(echo.description, 'Echoes text, naming the server');
      assert.deepEqual(echo.inputSchema.required, ['text'], s);
    }
  } finally {
    await client.close();
  }
});

test('a 2026-07-28 result asking for input is refused: tollgate serves no input requests', async () => {
  const client = await connect();
  try {
    const r = await call(client, 'mcp__asker__ask', {});
    assert.equal(r.isError, true, JSON.stringify(r));
    assert.equal(r.structuredContent.error.code, 'E_UPSTREAM_PROTOCOL');
    assert.match(r.content[0].text, /asker.*input_required/);
    assert.equal(up.proc.exitCode, null, 'up is still running');
    // One refused result leaves the server serving: it is asked again.
    const again = await client.callTool({ name: 'mcp__asker__ask', arguments: {} });
    assert.equal(again.structuredContent.error.code, 'E_UPSTREAM_PROTOCOL', JSON.stringify(again));
  } finally {
    await client.close();
  }
});
