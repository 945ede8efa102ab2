// Policy over a session's history (issue 33; docs/policy.md, "History")
// through MCP with the official SDK, against a real `tollgate up`: the three
// worked examples (a POST after untrusted content, the network after a
// secret was read, a fourth delete within ten minutes). Each sequence is
// refused in its session, and the same calls in the other order, or in
// another session of the same agent, are allowed. A `tollgate mcp` client's
// session is its --session; an HTTP client's is its Mcp-Session-Id. A node
// HTTP server on 127.0.0.1 records what reached it (not localhost, so its
// results are untrusted). Run by ctest as Mcp.HistoryRulesThroughMcp.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Up, TOLLGATE, cli, waitFor } from './harness.mjs';

const AGENT = 'historian';
const POLICY = `
version: 1
mode: ask
allow: ["builtin:read_file", "builtin:delete_file", "http_request:*"]
http_request: {allowed_methods: [GET, POST]}
labels:
  trusted_hosts: [localhost]
  secret: ["read_file:*/secrets/*"]
rules:
  - name: no-post-after-untrusted
    after: {result: {integrity: untrusted}}
    within: {calls: 20}
    then: {tool: http_request, when: {method: POST}}
    verdict: deny
  - name: no-network-with-secrets
    tool: http_request
    when: {session: {confidentiality: secret}}
    verdict: deny
  - name: ask-after-three-deletes
    after: {tool: delete_file, count: 3}
    within: {minutes: 10}
    then: {tool: delete_file}
    verdict: ask
execute:
  writes_enabled: true
  network: {allow_cidrs: ["127.0.0.0/8"], max_redirects: 0}
`;

const received = [];
const clients = [];
let server, origin, up, workspace;

before(async () => {
  server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => { body += d; });
    req.on('end', () => {
      received.push({ method: req.method, url: req.url, body });
      res.setHeader('Content-Type', 'application/json');
      res.end(JSON.stringify({ n: received.length }));
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  origin = `http://127.0.0.1:${server.address().port}`;
  up = await new Up({ policy: POLICY }).start();
  workspace = path.join(up.data, 'workspaces', 'default', AGENT);
  fs.mkdirSync(path.join(workspace, 'app', 'secrets'), { recursive: true });
  fs.writeFileSync(path.join(workspace, 'app', 'secrets', 'token.txt'), 'not a real token\n');
});
after(async () => {
  // A client left open (a failed assertion) would keep its `tollgate mcp` alive.
  for (const c of clients) await c.close().catch(() => {});
  await up?.stop();
  server?.close();
});

// A stdio client: every call of it is in tollgate session `session`.
async function connect(session) {
  const client = new Client({ name: 'tollgate-history-test', version: '1.0.0' });
  await client.connect(new StdioClientTransport({
    command: TOLLGATE,
    args: ['mcp', '--data', up.data, '--org', 'default', '--agent', AGENT, '--session', session],
    stderr: 'pipe',
  }));
  clients.push(client);
  return client;
}

// An HTTP client of the same agent: its session is its Mcp-Session-Id.
async function connectHttp() {
  const client = new Client({ name: 'tollgate-history-test', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(up.http + '/mcp'), {
    requestInit: { headers: { Authorization: `Bearer ${up.agentToken('default', AGENT)}` } },
  });
  await client.connect(transport);
  clients.push(client);
  return { client, session: transport.sessionId };
}

const rid = (r) => r._meta['io.tollgate/request_id'];
const types = (events) => events.map((e) => e.type);

// A call that must run: its result, and the seq of its execution.completed.
async function ran(client, name, args) {
  const r = await client.callTool({ name, arguments: args });
  assert.equal(r.isError, false, JSON.stringify(r));
  const events = await up.events({ request: rid(r) });
  const done = events.find((e) => e.type === 'execution.completed');
  assert.ok(done, JSON.stringify(types(events)));
  return { r, events, seq: done.seq };
}

// A call a history deny rule refuses: named in the text with what the
// history held, nothing run. Its decision.
async function refused(client, name, args, rule, matched) {
  const r = await client.callTool({ name, arguments: args });
  assert.equal(r.isError, true, JSON.stringify(r));
  assert.equal(r.structuredContent.error.code, 'E_POLICY_DENIED');
  assert.match(r.content[0].text, new RegExp(`'${rule}' \\(history: seq ${matched[0]}\\b`), r.content[0].text);
  const decision = r.structuredContent.decision;
  assert.equal(decision.verdict, 'deny');
  assert.equal(decision.history.rule, rule);
  assert.deepEqual(decision.history.matched, matched);
  assert.deepEqual(types(await up.events({ request: rid(r) })), ['request.received', 'decision.made']);
  return decision;
}

const get = (p) => ({ url: origin + p, method: 'GET' });
const post = (p, body) => ({ url: origin + p, method: 'POST', json: body });
const hits = (method, url) => received.filter((q) => q.method === method && q.url === url).length;

test('a POST after untrusted content is denied in its session; POST then GET, or another session, runs', async () => {
  const s = `hist-a-${Date.now()}`;
  const client = await connect(s);
  const page = await ran(client, 'http_request', get('/a/page'));
  const decision = await refused(client, 'http_request', post('/a/exfil', { stolen: 'page' }),
    'no-post-after-untrusted', [page.seq]);
  assert.equal(decision.history.integrity, 'untrusted');
  assert.equal(hits('POST', '/a/exfil'), 0, 'the denied POST never reached the server');

  // The other order: the POST comes first, then the untrusted page.
  const other = await connect(`${s}-reversed`);
  await ran(other, 'http_request', post('/a/first', { n: 1 }));
  await ran(other, 'http_request', get('/a/page'));
  assert.equal(hits('POST', '/a/first'), 1);

  // Another session of the same agent, over HTTP, while the first still holds its page.
  const { client: fresh, session } = await connectHttp();
  assert.ok(session && session !== s);
  const p = await ran(fresh, 'http_request', post('/a/elsewhere', { n: 2 }));
  assert.equal(p.events[0].session_id, session);
  assert.equal(p.events[1].data.history.integrity, 'trusted');
  assert.equal(hits('POST', '/a/elsewhere'), 1);
});

test('the network after a secret was read is denied in that session; the other order or session runs', async () => {
  const s = `hist-b-${Date.now()}`;
  const client = await connect(s);
  const read = await ran(client, 'read_file', { path: 'app/secrets/token.txt' });
  assert.match(read.r.content[0].text, /not a real token/);
  const decision = await refused(client, 'http_request', get('/b/leak'), 'no-network-with-secrets', [read.seq]);
  assert.equal(decision.history.confidentiality, 'secret');
  assert.equal(hits('GET', '/b/leak'), 0, 'the denied GET never reached the server');

  // The other order: the network first, then the secret.
  const other = await connect(`${s}-reversed`);
  await ran(other, 'http_request', get('/b/first'));
  await ran(other, 'read_file', { path: 'app/secrets/token.txt' });

  // Another session: the first session's secret is not its own.
  const fresh = await connect(`${s}-other`);
  const g = await ran(fresh, 'http_request', get('/b/elsewhere'));
  assert.equal(g.events[1].data.history.confidentiality, 'public');
  assert.equal(hits('GET', '/b/elsewhere'), 1);
});

test('a fourth delete within ten minutes waits for a human; another session deletes without asking', async () => {
  const s = `hist-c-${Date.now()}`;
  const file = (n) => `c-${n}.txt`;
  for (let n = 1; n <= 5; n++) fs.writeFileSync(path.join(workspace, file(n)), `file ${n}\n`);
  const client = await connect(s);
  const deleted = [];
  for (let n = 1; n <= 3; n++) deleted.push((await ran(client, 'delete_file', { path: file(n) })).seq);

  const call = client.callTool({ name: 'delete_file', arguments: { path: file(4) } }, undefined,
    { onprogress: () => {}, timeout: 120000, resetTimeoutOnProgress: true });
  const pending = await waitFor('the fourth delete pending', () => up.pending().find((p) => p.session_id === s));
  assert.deepEqual(up.pending().filter((p) => p.session_id === s).map((p) => p.request?.args?.path), [file(4)]);
  assert.equal(pending.decision.verdict, 'ask');
  assert.match(pending.decision.reason, /'ask-after-three-deletes' \(history: seq \d+, \d+, \d+ matched its after: within the last 10 minutes\)/);
  assert.deepEqual(pending.decision.history.matched, deleted);

  // Another session of the agent, while the first one's fourth delete waits.
  const fresh = await connect(`${s}-other`);
  await ran(fresh, 'delete_file', { path: file(5) });
  assert.ok(!fs.existsSync(path.join(workspace, file(5))));

  // The human says no: the call ends refused and the file is still there.
  cli(['approvals', 'deny', pending.request_id, '--data', up.data, '--comment', 'too many deletes']);
  const r = await call;
  assert.equal(r.isError, true, JSON.stringify(r));
  assert.equal(r.structuredContent.error.code, 'E_APPROVAL_DENIED');
  assert.match(r.structuredContent.decision.reason, /'ask-after-three-deletes' \(history: /);
  assert.equal(r.structuredContent.decision.history.rule, 'ask-after-three-deletes');
  assert.ok(fs.existsSync(path.join(workspace, file(4))));
  assert.ok(!types(await up.events({ request: pending.request_id })).includes('execution.started'));
});
