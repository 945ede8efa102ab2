// An MCP call waiting for a human survives a restart of `up` (issue 31;
// docs/mcp.md, "A restart of up"). Over stdio, `tollgate mcp` is a process
// of its own: it reconnects where DATA/endpoints.json says and the client
// gets its result once the call is approved after the restart. Over HTTP
// the server itself restarts: the client's stream ends without a result,
// but the call is not lost: it is still pending after the restart and runs
// when approved. Run by ctest as Mcp.WaitingCallsSurviveARestartOfUp.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { Up, TOLLGATE, cli, waitFor } from './harness.mjs';

let up;
before(async () => { up = await new Up().start(); });
after(async () => { await up?.stop(); });

const types = (events) => events.map((e) => e.type);

async function restart() {
  const pid = up.proc.pid;
  await up.stop();
  await up.start();
  assert.notEqual(up.proc.pid, pid);
}

// Settles with `p`, or fails after `ms` naming `what`.
function within(ms, what, p) {
  let timer;
  const late = new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`no ${what} within ${ms} ms`)), ms); });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

test('stdio: a call waiting for approval gets its result when approved after a restart of up', async () => {
  const session = `restart-stdio-${Date.now()}`;
  const transport = new StdioClientTransport({
    command: TOLLGATE,
    args: ['mcp', '--data', up.data, '--org', 'default', '--agent', 'restart-stdio', '--session', session],
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (d) => { stderr += d; });
  const client = new Client({ name: 'restart-test', version: '1.0.0' });
  await client.connect(transport);
  try {
    await waitAcrossARestart(client, session, () => stderr);
  } finally {
    await client.close();
  }
});

async function waitAcrossARestart(client, session, stderr) {
  const call = client.callTool(
    { name: 'write_file', arguments: { path: 'after-restart.txt', content: 'approved after a restart' } },
    undefined,
    { timeout: 120000, resetTimeoutOnProgress: true, onprogress: () => {} },
  );
  const pending = await waitFor('the pending approval', () => up.pending().find((p) => p.session_id === session));

  await restart();
  assert.ok(up.pending().some((p) => p.request_id === pending.request_id), 'still pending after the restart');
  cli(['approvals', 'approve', pending.request_id, '--data', up.data, '--comment', 'after the restart']);
  const r = await within(30000, 'result over stdio', call).catch((e) => { throw new Error(`${e.message}\n${stderr()}`); });
  assert.equal(r.isError, false, JSON.stringify(r));
  assert.equal(r._meta['io.tollgate/request_id'], pending.request_id);
  const events = await up.events({ request: pending.request_id });
  assert.deepEqual(types(events), ['request.received', 'decision.made', 'approval.requested', 'approval.granted',
    'execution.started', 'execution.completed']);
}

test('http: a waiting call is not lost in a restart of up: its stream ends, it stays pending, and runs when approved', async () => {
  const token = up.agentToken('default', 'restart-http');
  const headers = (session) => ({
    Authorization: `Bearer ${token}`, Accept: 'application/json, text/event-stream', 'Content-Type': 'application/json',
    ...(session ? { 'Mcp-Session-Id': session } : {}),
  });
  const init = await fetch(`${up.http}/mcp`, {
    method: 'POST', headers: headers(),
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } }),
  });
  assert.equal(init.status, 200);
  await init.text();
  const session = init.headers.get('mcp-session-id');
  const res = await fetch(`${up.http}/mcp`, {
    method: 'POST', headers: headers(session),
    body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'write_file', arguments: { path: 'http-restart.txt', content: 'not lost' } } }),
  });
  assert.equal(res.status, 200);
  const stream = res.text(); // the event stream, until the server ends it
  const pending = await waitFor('the pending approval', () => up.pending().find((p) => p.session_id === session));

  await restart();
  const body = await within(10000, 'end of the event stream', stream.catch(() => ''));
  assert.ok(!body.includes('"result"'), `the stream ended with a result: ${body}`);
  assert.ok(up.pending().some((p) => p.request_id === pending.request_id), 'still pending after the restart');
  cli(['approvals', 'approve', pending.request_id, '--data', up.data]);
  const events = await waitFor('the call run', async () => {
    const ev = await up.events({ request: pending.request_id });
    return ev.some((e) => e.type === 'execution.completed') ? ev : null;
  });
  assert.equal(events.filter((e) => e.type === 'execution.started').length, 1);
});
