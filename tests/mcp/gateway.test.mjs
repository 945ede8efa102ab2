// The MCP gateway driven by the official TypeScript SDK over both
// transports: `tollgate mcp` over stdio and /mcp over Streamable HTTP,
// against a real `tollgate up` (docs/mcp.md). Run by ctest as
// Mcp.GatewayWithTheOfficialSdk.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Up, TOLLGATE, cli, waitFor } from './harness.mjs';

let up;
let agentToken;
before(async () => {
  up = await new Up().start();
  agentToken = up.agentToken('default', 'mcp-agent');
});
after(async () => { await up?.stop(); });

// One client per transport; `session` is the tollgate session its calls land in.
const transports = {
  async stdio() {
    const session = `stdio-${Date.now()}`;
    const client = new Client({ name: 'tollgate-test', version: '1.0.0' });
    await client.connect(new StdioClientTransport({
      command: TOLLGATE,
      args: ['mcp', '--data', up.data, '--org', 'default', '--agent', 'mcp-agent', '--session', session],
      stderr: 'pipe',
    }));
    return { client, session };
  },
  async http() {
    const client = new Client({ name: 'tollgate-test', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(new URL(up.http + '/mcp'), {
      requestInit: { headers: { Authorization: `Bearer ${agentToken}` } },
    });
    await client.connect(transport);
    return { client, session: transport.sessionId };
  },
};

const types = (events) => events.map((e) => e.type);

for (const [name, connect] of Object.entries(transports)) {
  test(`${name}: tools/list offers the agent's tools with schemas`, async () => {
    const { client } = await connect();
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name);
    assert.ok(names.includes('echo') && names.includes('write_file'), names.join(','));
    const echo = tools.find((t) => t.name === 'echo');
    assert.equal(echo.inputSchema.type, 'object');
    assert.ok(echo.description.length > 0);
    assert.equal(echo.annotations.readOnlyHint, true);
    await client.close();
  });

  test(`${name}: an allowed echo completes and the log holds its whole history`, async () => {
    const { client, session } = await connect();
    const r = await client.callTool({ name: 'echo', arguments: { text: `hello over ${name}` } });
    assert.equal(r.isError, false, JSON.stringify(r));
    assert.match(r.content[0].text, new RegExp(`hello over ${name}`));
    const rid = r._meta['io.tollgate/request_id'];
    const events = await up.events({ request: rid });
    assert.deepEqual(types(events), ['request.received', 'decision.made', 'execution.started', 'execution.completed']);
    assert.equal(events[0].session_id, session);
    assert.equal(events[0].agent_id, 'mcp-agent');
    await client.close();
  });

  test(`${name}: a denied call is an error result with E_POLICY_DENIED, on the record`, async () => {
    const { client } = await connect();
    const r = await client.callTool({ name: 'read_file', arguments: { path: '/etc/shadow' } });
    assert.equal(r.isError, true);
    assert.equal(r.structuredContent.error.code, 'E_POLICY_DENIED');
    assert.match(r.content[0].text, /^E_POLICY_DENIED: /);
    const events = await up.events({ request: r._meta['io.tollgate/request_id'] });
    assert.deepEqual(types(events), ['request.received', 'decision.made']);
    assert.equal(events[1].data.verdict, 'deny');
    await client.close();
  });

  test(`${name}: a call that asks waits, with progress, until a human approves it through the CLI`, async () => {
    const { client, session } = await connect();
    const progress = [];
    const call = client.callTool(
      { name: 'write_file', arguments: { path: `notes-${name}.txt`, content: 'approved by a human' } },
      undefined,
      { onprogress: (p) => progress.push(p), timeout: 120000, resetTimeoutOnProgress: true },
    );
    const pending = await waitFor('the pending approval', () => up.pending().find((p) => p.session_id === session));
    assert.equal(pending.tool, 'write_file');
    await waitFor('a progress notification', () => progress.length > 0);
    cli(['approvals', 'approve', pending.request_id, '--data', up.data, '--comment', 'ok from the test']);
    const r = await call;
    assert.equal(r.isError, false, JSON.stringify(r));
    assert.ok(progress.some((p) => /awaiting approval|pipeline/.test(p.message ?? '')), JSON.stringify(progress));
    const events = await up.events({ request: pending.request_id });
    assert.deepEqual(types(events), ['request.received', 'decision.made', 'approval.requested', 'approval.granted',
      'execution.started', 'execution.completed']);
    await client.close();
  });

  test(`${name}: cancelling a call that waits for a human withdraws its approval, on the record`, async () => {
    const { client, session } = await connect();
    const abort = new AbortController();
    const call = client.callTool(
      { name: 'write_file', arguments: { path: `never-${name}.txt`, content: 'withdrawn' } },
      undefined,
      { signal: abort.signal, timeout: 120000 },
    );
    const pending = await waitFor('the pending approval', () => up.pending().find((p) => p.session_id === session));
    abort.abort('the user changed their mind');
    await assert.rejects(call);
    const events = await waitFor('the withdrawal in the log', async () => {
      const ev = await up.events({ request: pending.request_id });
      return ev.some((e) => e.type === 'approval.denied') ? ev : null;
    });
    const denied = events.find((e) => e.type === 'approval.denied');
    assert.equal(denied.data.withdrawn, true);
    assert.equal(denied.data.approver, 'mcp-agent');
    assert.ok(!types(events).includes('execution.started'));
    assert.equal(up.pending().find((p) => p.request_id === pending.request_id), undefined);
    await client.close();
  });

  test(`${name}: a traceparent in _meta is on every event of the call; a malformed one is not`, async () => {
    const { client } = await connect();
    const tp = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const r = await client.callTool({ name: 'echo', arguments: { text: 'traced' }, _meta: { traceparent: tp } });
    assert.equal(r.isError, false, JSON.stringify(r));
    const events = await up.events({ request: r._meta['io.tollgate/request_id'] });
    assert.equal(events.length, 4);
    for (const e of events) assert.equal(e.data.traceparent, tp, e.type);
    assert.equal(r._meta.traceparent, tp, 'the result names the trace it ran in');

    const bad = tp.toUpperCase();
    const r2 = await client.callTool({ name: 'echo', arguments: { text: 'badly traced' }, _meta: { traceparent: bad } });
    assert.equal(r2.isError, false, JSON.stringify(r2));
    const started = (await up.events({ request: r2._meta['io.tollgate/request_id'] })).map((e) => e.data.traceparent);
    assert.match(started[0], /^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    assert.ok(started.every((t) => t === started[0] && t !== bad), JSON.stringify(started));
    assert.equal(r2._meta.traceparent, started[0], 'the trace ingest started');
    await client.close();
  });

  test(`${name}: arguments of the wrong type are refused with -32602 and nothing is submitted`, async () => {
    const { client, session } = await connect();
    await assert.rejects(client.callTool({ name: 'echo', arguments: { text: 42 } }), (e) => e.code === -32602);
    const r = await client.callTool({ name: 'echo', arguments: { text: 'after the refusal' } });
    assert.equal(r.isError, false);
    const events = await up.events({ session });
    assert.equal(events.filter((e) => e.type === 'request.received').length, 1);
    await client.close();
  });
}

test('http: the traceparent header of POST /mcp is the trace of a call whose _meta has none', async () => {
  const fromHeader = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
  const fromMeta = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00';
  const client = new Client({ name: 'tollgate-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(up.http + '/mcp'), {
    requestInit: { headers: { Authorization: `Bearer ${agentToken}`, traceparent: fromHeader } },
  }));
  const traces = async (r) => (await up.events({ request: r._meta['io.tollgate/request_id'] })).map((e) => e.data.traceparent);
  const r1 = await client.callTool({ name: 'echo', arguments: { text: 'header' } });
  assert.deepEqual(await traces(r1), Array(4).fill(fromHeader));
  const r2 = await client.callTool({ name: 'echo', arguments: { text: 'meta' }, _meta: { traceparent: fromMeta } });
  assert.deepEqual(await traces(r2), Array(4).fill(fromMeta));
  await client.close();
});

test('tools list, GET /v1/tools and tools/list give the same tools; an agent token lists only its own', async () => {
  const fromCli = JSON.parse(cli(['tools', 'list', '--data', up.data, '--agent', 'mcp-agent', '--json']));
  const { client } = await transports.http();
  const { tools } = await client.listTools();
  assert.deepEqual(fromCli.tools.map((t) => t.name), tools.map((t) => t._meta['io.tollgate/tool']));
  const write = fromCli.tools.find((t) => t.name === 'write_file');
  assert.deepEqual([write.asks, write.read_only, write.danger], [true, false, 'MEDIUM']);
  assert.ok(!fromCli.tools.some((t) => t.name === 'no_such_tool'));
  const own = await up.api('/v1/tools?agent=mcp-agent', { token: agentToken });
  assert.equal(own.status, 200);
  const other = await up.api('/v1/tools?agent=someone-else', { token: agentToken });
  assert.equal(other.status, 403);
  await client.close();
});
