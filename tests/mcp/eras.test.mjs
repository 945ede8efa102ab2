// Both MCP eras on both transports (issue 34; docs/mcp.md "Protocol
// revisions"): the official SDK v2 client pinned to 2026-07-28, in auto mode
// and in its default legacy mode, over stdio (`tollgate mcp`) and Streamable
// HTTP (/mcp of a real `up`), lists tools and calls echo; the v1 SDK still
// works; a modern call's tollgate session comes from _meta
// io.tollgate/session (or the trace, or the agent) and request.received says
// which; the 2026-07-28 errors (version, envelope, headers, methods) come
// back as the spec words them. Run by ctest as Mcp.BothProtocolEras.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Client as ClientV2, StreamableHTTPClientTransport as HttpV2 } from '@modelcontextprotocol/client';
import { StdioClientTransport as StdioV2 } from '@modelcontextprotocol/client/stdio';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as HttpV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Up, TOLLGATE } from './harness.mjs';

const MODERN = '2026-07-28';
const MODES = { pinned: { mode: { pin: MODERN } }, auto: { mode: 'auto' }, legacy: null };

let up;
let token;
before(async () => {
  up = await new Up().start();
  token = up.agentToken('default', 'eras-agent');
});
after(async () => { await up?.stop(); });

const types = (events) => events.map((e) => e.type);

function v2(mode) {
  const options = MODES[mode] ? { versionNegotiation: MODES[mode] } : {};
  return new ClientV2({ name: `eras-${mode}`, version: '1.0.0' }, options);
}

const transports = {
  stdio: () => new StdioV2({
    command: TOLLGATE,
    args: ['mcp', '--data', up.data, '--org', 'default', '--agent', 'eras-agent'],
    env: { ...process.env },
    stderr: 'ignore',
  }),
  http: () => new HttpV2(new URL(up.http + '/mcp'), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  }),
};

for (const [tname, transport] of Object.entries(transports)) {
  for (const mode of Object.keys(MODES)) {
    test(`${tname}, SDK v2 ${mode}: lists tools and calls echo in the era it negotiated`, async () => {
      const client = v2(mode);
      await client.connect(transport());
      try {
        const version = client.getNegotiatedProtocolVersion();
        if (mode === 'legacy') assert.notEqual(version, MODERN);
        else assert.equal(version, MODERN);
        const { tools } = await client.listTools();
        assert.ok(tools.some((t) => t.name === 'echo'), tools.map((t) => t.name).join(','));
        const r = await client.callTool({ name: 'echo', arguments: { text: `${tname} ${mode}` } });
        assert.equal(r.isError, false, JSON.stringify(r));
        assert.match(r.content[0].text, new RegExp(`${tname} ${mode}`));
        const rid = r._meta['io.tollgate/request_id'];
        const events = await up.events({ request: rid });
        assert.deepEqual(types(events), ['request.received', 'decision.made', 'execution.started', 'execution.completed']);
        const meta = events[0].data.request.metadata;
        assert.equal(meta.mcp_protocol, mode === 'legacy' ? 'legacy' : MODERN);
        assert.equal(events[0].agent_id, 'eras-agent');
      } finally {
        await client.close();
      }
    });
  }
}

test('http, SDK v1: still works against the same endpoint', async () => {
  const client = new ClientV1({ name: 'eras-v1', version: '1.0.0' });
  await client.connect(new HttpV1(new URL(up.http + '/mcp'), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  }));
  try {
    const r = await client.callTool({ name: 'echo', arguments: { text: 'v1 still' } });
    assert.equal(r.isError, false, JSON.stringify(r));
    assert.match(r.content[0].text, /v1 still/);
  } finally {
    await client.close();
  }
});

// Raw 2026-07-28 requests over HTTP: what a client without the SDK sees.
const envelope = (extra = {}) => ({
  'io.modelcontextprotocol/protocolVersion': MODERN,
  'io.modelcontextprotocol/clientCapabilities': {},
  'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' },
  ...extra,
});

async function post(body, headers = {}) {
  const method = body.method;
  const h = {
    Authorization: `Bearer ${token}`,
    Accept: 'application/json, text/event-stream',
    'Content-Type': 'application/json',
    'MCP-Protocol-Version': MODERN,
    'Mcp-Method': method,
    ...(method === 'tools/call' ? { 'Mcp-Name': body.params.name } : {}),
    ...headers,
  };
  for (const [k, v] of Object.entries(h)) if (v === null) delete h[k];
  const res = await fetch(`${up.http}/mcp`, { method: 'POST', headers: h, body: JSON.stringify(body) });
  const text = await res.text();
  // An event stream's last message, or the JSON body.
  const data = text.startsWith('{') ? text : text.split('\n').filter((l) => l.startsWith('data: ')).pop()?.slice(6);
  return { status: res.status, headers: res.headers, body: data ? JSON.parse(data) : null };
}

test('http: server/discover advertises 2026-07-28 and the Tasks extension, and mints no session', async () => {
  const r = await post({ jsonrpc: '2.0', id: 'd1', method: 'server/discover', params: { _meta: envelope() } });
  assert.equal(r.status, 200);
  assert.equal(r.headers.get('mcp-session-id'), null);
  assert.equal(r.body.result.resultType, 'complete');
  assert.deepEqual(r.body.result.supportedVersions, [MODERN]);
  assert.deepEqual(r.body.result.capabilities.extensions, { 'io.modelcontextprotocol/tasks': {} });
  assert.equal(r.body.result._meta['io.modelcontextprotocol/serverInfo'].name, 'tollgate');
});

test('http: the spec\'s errors for versions, envelopes, headers and methods', async () => {
  const list = (meta, headers) => post({ jsonrpc: '2.0', id: 7, method: 'tools/list', params: { _meta: meta } }, headers);
  let r = await list(envelope({ 'io.modelcontextprotocol/protocolVersion': '2099-01-01' }), { 'MCP-Protocol-Version': '2099-01-01' });
  assert.equal(r.status, 400);
  assert.equal(r.body.error.code, -32022);
  assert.deepEqual(r.body.error.data, { supported: [MODERN], requested: '2099-01-01' });

  const noCaps = envelope();
  delete noCaps['io.modelcontextprotocol/clientCapabilities'];
  r = await list(noCaps);
  assert.equal(r.status, 400);
  assert.equal(r.body.error.code, -32602);
  assert.equal(r.body.error.data.envelope.key, 'io.modelcontextprotocol/clientCapabilities');

  r = await list(envelope(), { 'MCP-Protocol-Version': '2025-11-25' });
  assert.equal(r.status, 400);
  assert.equal(r.body.error.code, -32020);
  r = await list(envelope(), { 'Mcp-Method': 'prompts/list' });
  assert.equal(r.body.error.code, -32020);
  r = await list(envelope(), { 'Mcp-Method': null });
  assert.equal(r.body.error.code, -32020);
  r = await post({ jsonrpc: '2.0', id: 8, method: 'tools/call', params: { name: 'echo', arguments: { text: 'x' }, _meta: envelope() } },
    { 'Mcp-Name': 'read_file' });
  assert.equal(r.status, 400);
  assert.equal(r.body.error.code, -32020);
  // The header's base64 form names the same tool: accepted.
  r = await post({ jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'echo', arguments: { text: 'b64' }, _meta: envelope() } },
    { 'Mcp-Name': `=?base64?${Buffer.from('echo').toString('base64')}?=` });
  assert.equal(r.status, 200);
  assert.equal(r.body.result.resultType, 'complete');
  assert.equal(r.body.result.isError, false);

  r = await post({ jsonrpc: '2.0', id: 10, method: 'ping', params: { _meta: envelope() } });
  assert.equal(r.status, 404);
  assert.equal(r.body.error.code, -32601);
  // A modern header on a request without the envelope.
  r = await post({ jsonrpc: '2.0', id: 11, method: 'tools/list', params: {} });
  assert.equal(r.status, 400);
  assert.equal(r.body.error.code, -32602);
  // tasks/* without the Tasks extension declared.
  r = await post({ jsonrpc: '2.0', id: 12, method: 'tasks/get', params: { taskId: 'x', _meta: envelope() } }, { 'Mcp-Name': 'x' });
  assert.equal(r.status, 400);
  assert.equal(r.body.error.code, -32021);
  const get = await fetch(`${up.http}/mcp`, { headers: { Authorization: `Bearer ${token}`, 'MCP-Protocol-Version': MODERN, Accept: 'text/event-stream' } });
  assert.equal(get.status, 405);
  await get.text();
});

test('http: a modern call\'s session is the one its _meta names, else its trace, else its agent; request.received says which', async () => {
  const call = async (id, meta, headers) => {
    const r = await post({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'echo', arguments: { text: `s${id}` }, _meta: meta } }, headers);
    assert.equal(r.body.result.isError, false, JSON.stringify(r.body));
    const events = await up.events({ request: r.body.result._meta['io.tollgate/request_id'] });
    return events[0];
  };
  let e = await call(1, envelope({ 'io.tollgate/session': 'research-42' }));
  assert.equal(e.session_id, 'research-42');
  assert.equal(e.data.request.metadata.session_from, 'meta');
  const trace = '0af7651916cd43dd8448eb211c80319c';
  e = await call(2, envelope({ traceparent: `00-${trace}-b7ad6b7169203331-01` }));
  assert.equal(e.session_id, `trace-${trace}`);
  assert.equal(e.data.request.metadata.session_from, 'trace');
  e = await call(3, envelope());
  assert.equal(e.session_id, 'agent-eras-agent');
  assert.equal(e.data.request.metadata.session_from, 'agent');
  // A session name that is not one is refused, not cleaned up.
  const r = await post({ jsonrpc: '2.0', id: 4, method: 'tools/call',
    params: { name: 'echo', arguments: { text: 'x' }, _meta: envelope({ 'io.tollgate/session': 'a b\n' }) } });
  assert.equal(r.body.error.code, -32602);
});
