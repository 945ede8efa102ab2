// Hostile and malformed input to both MCP transports, without the SDK (it
// would never send these): each gets the spec's JSON-RPC error code, and
// the server goes on serving. Run by ctest as Mcp.GatewayRefusesBadInput.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import readline from 'node:readline';
import { Up, TOLLGATE } from './harness.mjs';

let up;
let tokenA;
let tokenB;
before(async () => {
  up = await new Up().start();
  tokenA = up.agentToken('default', 'raw-a');
  tokenB = up.agentToken('default', 'raw-b');
});
after(async () => { await up?.stop(); });

const init = { jsonrpc: '2.0', id: 0, method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '0' } } };

test('stdio: malformed JSON, batches, unknown methods and bad params get their codes; the server lives on', async () => {
  const proc = spawn(TOLLGATE, ['mcp', '--data', up.data, '--agent', 'raw-a'], { stdio: ['pipe', 'pipe', 'ignore'] });
  const lines = readline.createInterface({ input: proc.stdout });
  const replies = [];
  const waiting = [];
  lines.on('line', (l) => { const m = JSON.parse(l); (waiting.shift() ?? ((x) => replies.push(x)))(m); });
  const next = () => (replies.length ? Promise.resolve(replies.shift()) : new Promise((r) => waiting.push(r)));
  const send = (s) => proc.stdin.write(s + '\n');

  send(JSON.stringify(init));
  assert.equal((await next()).result.protocolVersion, '2025-06-18');
  send('{"jsonrpc":"2.0","id":1,"method":');
  assert.equal((await next()).error.code, -32700);
  send('[{"jsonrpc":"2.0","id":2,"method":"ping"}]');
  assert.equal((await next()).error.code, -32600);
  send(JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'resources/list' }));
  let r = await next();
  assert.equal(r.id, 3);
  assert.equal(r.error.code, -32601);
  send(JSON.stringify({ jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 7 } }));
  assert.equal((await next()).error.code, -32602);
  send(JSON.stringify({ jsonrpc: '2.0', id: 5, method: 'tools/call', params: { name: 'echo', arguments: [1] } }));
  assert.equal((await next()).error.code, -32602);
  send('x'.repeat(5 << 20));
  assert.equal((await next()).error.code, -32600);
  send(JSON.stringify({ jsonrpc: '2.0', id: 6, method: 'ping' }));
  r = await next();
  assert.deepEqual([r.id, r.result], [6, {}]);
  proc.stdin.end();
  await new Promise((res) => proc.on('exit', res));
  assert.equal(proc.exitCode, 0);
});

async function post(body, { token = tokenA, session, headers = {} } = {}) {
  const h = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', ...headers };
  if (token) h.Authorization = `Bearer ${token}`;
  if (session) h['Mcp-Session-Id'] = session;
  const res = await fetch(up.http + '/mcp', { method: 'POST', headers: h, body: typeof body === 'string' ? body : JSON.stringify(body) });
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* an event stream or nothing */ }
  return { status: res.status, json, text, session: res.headers.get('mcp-session-id') };
}

test('http: only an agent token opens a session, and a session is its own agent\'s', async () => {
  assert.equal((await post(init, { token: null })).status, 401);
  assert.equal((await post(init, { token: up.adminToken })).status, 403);
  const a = await post(init);
  assert.equal(a.status, 200);
  assert.match(a.session, /^mcp-[0-9a-f]{32}$/);
  const ping = { jsonrpc: '2.0', id: 1, method: 'ping' };
  assert.equal((await post(ping, { session: a.session })).status, 200);
  assert.equal((await post(ping, { token: tokenB, session: a.session })).status, 404);
  assert.equal((await post(ping)).status, 400);
  assert.equal((await post(ping, { session: 'mcp-00000000000000000000000000000000' })).status, 404);
});

test('http: malformed messages, foreign origins and oversize bodies are refused with their codes', async () => {
  const a = await post(init);
  const s = a.session;
  let r = await post('{"jsonrpc":', { session: s });
  assert.deepEqual([r.status, r.json.error.code], [400, -32700]);
  r = await post([{ jsonrpc: '2.0', id: 1, method: 'ping' }], { session: s });
  assert.deepEqual([r.status, r.json.error.code], [400, -32600]);
  r = await post({ jsonrpc: '2.0', id: 2, method: 'prompts/list' }, { session: s });
  assert.deepEqual([r.status, r.json.error.code], [200, -32601]);
  r = await post({ jsonrpc: '2.0', id: 3, method: 'ping' }, { session: s, headers: { Origin: 'https://evil.example' } });
  assert.equal(r.status, 403);
  r = await post({ jsonrpc: '2.0', id: 4, method: 'ping' }, { session: s, headers: { 'MCP-Protocol-Version': '1999-01-01' } });
  assert.equal(r.status, 400);
  r = await post({ jsonrpc: '2.0', id: 5, method: 'ping', params: { pad: 'x'.repeat(2 << 20) } }, { session: s });
  assert.equal(r.status, 413);
  assert.equal(r.json.error.code, -32600);
  r = await post({ jsonrpc: '2.0', method: 'notifications/initialized' }, { session: s });
  assert.equal(r.status, 202);
  const del = await fetch(up.http + '/mcp', { method: 'DELETE', headers: { Authorization: `Bearer ${tokenA}`, 'Mcp-Session-Id': s } });
  assert.equal(del.status, 204);
  assert.equal((await post({ jsonrpc: '2.0', id: 6, method: 'ping' }, { session: s })).status, 404);
});
