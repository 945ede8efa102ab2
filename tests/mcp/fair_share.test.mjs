// Fair sharing under an agent flood (issue 28; docs/http_api.md, "Limits"):
// against a real `tollgate up`, one agent token opens MCP event streams,
// makes calls that ask for approval and then hangs up, opens thousands of
// MCP sessions, and holds idle sockets open, all at once; meanwhile an
// approver of another org lists and approves its agent's pending call
// through the API, /healthz answers, and that agent completes calls with
// the official SDK. After the flood every slot is free again within 10 s.
//
// TOLLGATE_FAIR_SHARE_SCALE scales the flood (1 = 200 streams, 200 asking
// calls, 5,000 sessions, 100 idle sockets; ctest runs it smaller,
// scripts/load_fair_share.sh at full size). Run by ctest as
// Mcp.FairShareUnderAnAgentFlood.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Up, cli, waitFor } from './harness.mjs';

const scale = Number(process.env.TOLLGATE_FAIR_SHARE_SCALE || '1');
const N = Object.fromEntries(Object.entries({ streams: 200, calls: 200, sessions: 5000, idle: 100 })
  .map(([k, v]) => [k, Math.max(1, Math.round(v * scale))]));

let up;
const tokens = {};
before(async () => {
  up = await new Up().start();
  tokens.flood = up.agentToken('default', 'flood');
  tokens.worker = up.agentToken('beta', 'worker');
  tokens.approver = cli(['tokens', 'add', '--data', up.data, '--identity', 'carol', '--org', 'beta', '--role', 'approver']).trim();
});
after(async () => { await up?.stop(); });

const ms = (t0) => Math.round(performance.now() - t0);

// The raw MCP HTTP transport, as an attacker writes it.
function mcpHeaders(token, session) {
  const h = { Authorization: `Bearer ${token}`, Accept: 'application/json, text/event-stream', 'Content-Type': 'application/json' };
  if (session) h['Mcp-Session-Id'] = session;
  return h;
}
async function initialize(token) {
  const res = await fetch(`${up.http}/mcp`, {
    method: 'POST', headers: mcpHeaders(token),
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'flood', version: '1' } } }),
  });
  await res.text();
  return { status: res.status, session: res.headers.get('mcp-session-id') };
}

// Runs `n` tasks, `width` at a time; each task's answer is counted by status.
async function pool(n, width, task, counts) {
  let next = 0;
  const worker = async () => {
    while (next < n) {
      const i = next++;
      const status = await task(i).catch(() => 'error');
      counts[status] = (counts[status] || 0) + 1;
    }
  };
  await Promise.all(Array.from({ length: width }, worker));
}

test('one agent token flooding the gateway takes nothing from approvers, /healthz or another org', async () => {
  const t0 = performance.now();
  const counts = { streams: {}, calls: {}, sessions: {} };
  const held = [];  // AbortControllers of the streams and calls the server took
  let flooding = true;

  // 1. Idle sockets: a few bytes of a request line, then nothing; each one
  // the server cuts is opened again while the flood lasts.
  const idle = new Set();
  let idleOpened = 0;
  const openIdle = () => {
    if (!flooding) return;
    const s = net.connect(new URL(up.http).port, '127.0.0.1', () => s.write('GET /mcp HTTP/1.1\r\n'));
    idleOpened++;
    idle.add(s);
    s.on('error', () => {});
    s.resume();  // read (and drop) what the server says, so its close is seen
    s.on('close', () => { idle.delete(s); setTimeout(openIdle, 10); });
  };
  for (let i = 0; i < N.idle; i++) openIdle();

  // 2. Event streams, all at once on a few sessions; the ones the server
  // takes are held open until the end.
  const sessions = [];
  for (let i = 0; i < 4; i++) sessions.push((await initialize(tokens.flood)).session);
  const streams = Promise.all(Array.from({ length: N.streams }, async (_, i) => {
    const abort = new AbortController();
    try {
      const res = await fetch(`${up.http}/mcp`, { headers: mcpHeaders(tokens.flood, sessions[i % 4]), signal: abort.signal });
      counts.streams[res.status] = (counts.streams[res.status] || 0) + 1;
      if (res.status === 200) held.push(abort); else await res.text();
    } catch { counts.streams.error = (counts.streams.error || 0) + 1; }
  }));

  // 3. Calls that ask (write_file waits for a human), each dropped a moment
  // after the server took it: the client just goes away.
  const calls = pool(N.calls, 24, async (i) => {
    const abort = new AbortController();
    const res = await fetch(`${up.http}/mcp`, {
      method: 'POST', headers: mcpHeaders(tokens.flood, sessions[i % 4]), signal: abort.signal,
      body: JSON.stringify({ jsonrpc: '2.0', id: 1000 + i, method: 'tools/call', params: { name: 'write_file', arguments: { path: `flood-${i}.txt`, content: 'x' } } }),
    });
    if (res.status !== 200) {
      await res.text();
      return res.status;
    }
    await new Promise((r) => setTimeout(r, 300));
    abort.abort();
    return 200;
  }, counts.calls);

  // 4. Thousands of sessions, never ended.
  const bulk = pool(N.sessions, 32, async () => (await initialize(tokens.flood)).status, counts.sessions);

  // Meanwhile, the others are served.
  await waitFor('the flood to be under way', () => idleOpened >= N.idle && held.length > 0, 10000);
  let t = performance.now();
  const health = await fetch(`${up.http}/healthz`);
  assert.equal(health.status, 200);
  console.log(`/healthz: ${ms(t)} ms`);

  t = performance.now();
  const client = new Client({ name: 'worker', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(up.http + '/mcp'), {
    requestInit: { headers: { Authorization: `Bearer ${tokens.worker}` } },
  });
  await client.connect(transport);
  for (let i = 0; i < 3; i++) {
    const r = await client.callTool({ name: 'echo', arguments: { text: `beta ${i}` } });
    assert.equal(r.isError, false, JSON.stringify(r));
  }
  console.log(`another org's agent: connected and 3 calls completed in ${ms(t)} ms`);

  t = performance.now();
  const asked = client.callTool({ name: 'write_file', arguments: { path: 'fair-share.txt', content: 'approved under load' } },
    undefined, { timeout: 60000 });
  const approverApi = (path, opts) => up.api(path, { ...opts, token: tokens.approver });
  const pending = await waitFor('the worker\'s call in the approver\'s inbox', async () => {
    let cursor = '';
    do {
      const r = await approverApi(`/v1/approvals?limit=50${cursor ? `&cursor=${cursor}` : ''}`);
      assert.equal(r.status, 200, JSON.stringify(r.body));
      const mine = r.body.approvals.find((p) => p.session_id === transport.sessionId);
      if (mine) return mine;
      cursor = r.body.next_cursor;
    } while (cursor);
    return null;
  }, 20000);
  const listed = ms(t);
  const verdict = await approverApi(`/v1/approvals/${pending.request_id}`, { method: 'POST', body: { decision: 'approve' } });
  assert.equal(verdict.status, 200, JSON.stringify(verdict.body));
  assert.equal(verdict.body.outcome, 'granted');
  const done = await asked;
  assert.equal(done.isError, false, JSON.stringify(done));
  console.log(`approver: listed after ${listed} ms, approved and the call completed after ${ms(t)} ms`);
  await client.close();

  // The flood ends: streams and calls dropped, idle sockets closed.
  await Promise.all([streams, calls, bulk]);
  flooding = false;
  for (const a of held) a.abort();
  for (const s of idle) s.destroy();
  console.log(`flood (${ms(t0)} ms): streams ${JSON.stringify(counts.streams)}, asking calls ${JSON.stringify(counts.calls)}, ` +
    `sessions ${JSON.stringify(counts.sessions)}, idle sockets opened ${idleOpened}`);
  assert.ok((counts.streams[429] || 0) > 0, 'the streams past the agent\'s share were refused');
  assert.ok((counts.calls[429] || 0) > 0, 'the calls past the token\'s share were refused');

  // Every slot comes back: connections, streams, calls; every dropped call
  // was withdrawn, so nothing of the flood waits for approvers.
  t = performance.now();
  const free = await waitFor('every slot free again', async () => {
    const c = await up.api('/v1/connections');
    const p = await up.api('/v1/approvals?org=default&agent=flood&limit=1');
    const s = c.body;
    return s.connections.agent === 0 && s.connections.unauthenticated === 0 && s.mcp.streams === 0 &&
      s.mcp.calls === 0 && p.body.total === 0 ? s : null;
  }, 10000);
  console.log(`every slot free ${ms(t)} ms after the flood: ${JSON.stringify(free.connections)}, mcp sessions ` +
    `${free.mcp.sessions}, refused ${JSON.stringify(free.refused)}`);
  assert.ok(free.mcp.sessions <= free.mcp.limits.max_sessions_per_agent + 4,
    `the flood's sessions stay within its agent's share (${free.mcp.sessions})`);
  const withdrawn = (await up.events({ agent: 'flood', type: 'approval.denied', limit: 1000 }))
    .filter((e) => e.data.withdrawn === true);
  assert.ok(withdrawn.length > 0, 'the dropped calls were withdrawn on the record');
});
