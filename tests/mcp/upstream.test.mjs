// Upstream MCP servers behind the gate (docs/mcp.md, "Upstream MCP
// servers"): a real `up` whose policy declares the reference "everything"
// server and tests/mcp/counting_server.mjs (both over stdio, sandboxed), a
// client using the official SDK through `tollgate mcp`. The counting server
// writes every tools/call it receives to calls.jsonl in its own directory
// (<data>/mcp/counting), which proves what reached it. Run by ctest as
// Mcp.UpstreamServersBehindTheGate.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { Up, TOLLGATE, cli, waitFor } from './harness.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const everything = path.join(here, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js');
const counting = path.join(here, 'counting_server.mjs');
const hostile = path.join(here, 'hostile_server.py');  // answers 200,000 levels deep

const policy = (servers, extra = '') => `
version: 1
mode: ask
approval_threshold: HIGH
tools:
  mcp__counting__shout: {danger: LOW, read_only: true}
  mcp__counting__fail:  {danger: LOW, read_only: true}
  "mcp:everything/echo": {danger: SAFE, read_only: true}
  "mcp:remote/*":       {danger: LOW, read_only: true}
  "mcp:broken/*":       {danger: LOW, read_only: true}
  "mcp:hostile/*":      {danger: LOW, read_only: true}
  "mcp:lister/*":       {danger: LOW, read_only: true}
deny:
  - "mcp__counting__wipe"
execute:
${extra}
  mcp_servers:
${servers}
`;

const stdioServers = `
    counting:
      command: [node, ${counting}]
      read_only: [${here}]
    everything:
      command: [node, ${everything}, stdio]
      read_only: [${here}/node_modules]
    broken:
      command: [node, -e, "process.stderr.write('no config here'); process.exit(3)"]
    hostile:
      command: [/usr/bin/python3, ${hostile}, call]
      read_only: [${here}]
    lister:
      command: [/usr/bin/python3, ${hostile}, list]
      read_only: [${here}]
`;

let up;
before(async () => {
  up = await new Up({ policy: policy(stdioServers) }).start();
});
after(async () => { await up?.stop(); });

async function connect(u = up, session = `up-${Date.now()}-${Math.random()}`) {
  const client = new Client({ name: 'tollgate-upstream-test', version: '1.0.0' });
  await client.connect(new StdioClientTransport({
    command: TOLLGATE,
    args: ['mcp', '--data', u.data, '--org', 'default', '--agent', 'up-agent', '--session', session],
    stderr: 'pipe',
  }));
  return client;
}

const calls = (u = up, server = 'counting') => {
  try {
    return fs.readFileSync(path.join(u.data, 'mcp', server, 'calls.jsonl'), 'utf8')
      .split('\n').filter(Boolean).map((l) => JSON.parse(l));
  } catch { return []; }
};
const types = (events) => events.map((e) => e.type);

test('the upstream servers tools are listed through tollgate, denied ones left out', async () => {
  const client = await connect();
  const names = await waitFor('the upstream tools in tools/list', async () => {
    const { tools } = await client.listTools();
    const n = tools.map((t) => t.name);
    return n.includes('mcp__counting__shout') && n.includes('mcp__everything__echo') ? tools : null;
  });
  const shout = names.find((t) => t.name === 'mcp__counting__shout');
  assert.equal(shout.description, 'Upper-cases text.');
  assert.deepEqual(shout.inputSchema.required, ['text']);
  assert.ok(!names.some((t) => t.name === 'mcp__counting__wipe'), 'a denied tool is not offered');
  await client.close();
});

test('an allowed upstream call runs through decide and execute and is on the record', async () => {
  const client = await connect();
  const r = await client.callTool({ name: 'mcp__counting__shout', arguments: { text: 'hello' } });
  assert.equal(r.isError, false, JSON.stringify(r));
  assert.equal(r.content[0].text, 'HELLO');
  assert.deepEqual(r.structuredContent, { shouted: 'HELLO' });
  const events = await up.events({ request: r._meta['io.tollgate/request_id'] });
  assert.deepEqual(types(events), ['request.received', 'decision.made', 'execution.started', 'execution.completed']);
  assert.equal(events[0].data.tool ?? events[0].data.request?.tool, 'mcp:counting/shout');
  assert.equal(events[1].data.verdict, 'allow');
  assert.equal(events[2].data.executor, 'mcp');
  assert.deepEqual(events[3].data.result.data.structuredContent, { shouted: 'HELLO' });
  assert.deepEqual(calls().filter((c) => c.name === 'shout').map((c) => c.arguments.text), ['hello']);

  const e = await client.callTool({ name: 'mcp__everything__echo', arguments: { message: 'through the gate' } });
  assert.equal(e.isError, false, JSON.stringify(e));
  assert.match(e.content[0].text, /through the gate/);
  await client.close();
});

test('a denied upstream call never reaches the upstream server', async () => {
  const client = await connect();
  const r = await client.callTool({ name: 'mcp__counting__wipe', arguments: { target: 'prod' } });
  assert.equal(r.isError, true);
  assert.equal(r.structuredContent.error.code, 'E_POLICY_DENIED');
  const events = await up.events({ request: r._meta['io.tollgate/request_id'] });
  assert.deepEqual(types(events), ['request.received', 'decision.made']);
  // A later allowed call reached it: everything before it would have too.
  const after = await client.callTool({ name: 'mcp__counting__shout', arguments: { text: 'after' } });
  assert.equal(after.isError, false);
  const got = calls();
  assert.ok(got.some((c) => c.name === 'shout' && c.arguments.text === 'after'));
  assert.equal(got.filter((c) => c.name === 'wipe').length, 0, JSON.stringify(got));
  await client.close();
});

test('an upstream tool error and a dead server are clear error codes', async () => {
  const client = await connect();
  const f = await client.callTool({ name: 'mcp__counting__fail', arguments: {} });
  assert.equal(f.isError, true, JSON.stringify(f));
  assert.equal(f.structuredContent.error.code, 'E_UPSTREAM_TOOL_ERROR');
  assert.match(f.content[0].text, /it broke/);

  // `broken` exits at once, every time: a call to it fails closed, saying why.
  const b = await client.callTool({ name: 'mcp__broken__anything', arguments: {} });
  assert.equal(b.isError, true, JSON.stringify(b));
  assert.equal(b.structuredContent.error.code, 'E_UPSTREAM_UNAVAILABLE');
  assert.match(b.content[0].text, /broken.*(exited|down)/);
  const events = await up.events({ request: b._meta['io.tollgate/request_id'] });
  assert.deepEqual(types(events), ['request.received', 'decision.made', 'execution.started', 'execution.completed']);
  assert.equal(events[3].data.result.error.code, 'E_UPSTREAM_UNAVAILABLE');
  await client.close();
});

test('a server killed mid-run is restarted and serves again', async () => {
  const client = await connect();
  const pidOf = () => {
    for (const p of fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
      try {
        const cmd = fs.readFileSync(`/proc/${p}/cmdline`, 'utf8');
        if (cmd.split('\0')[0].endsWith('/node') && cmd.includes(counting)) return Number(p);
      } catch { /* gone */ }
    }
    return 0;
  };
  const first = await waitFor('the counting server process', pidOf);
  process.kill(first, 'SIGKILL');
  const r = await waitFor('a call served by the restarted server', async () => {
    const x = await client.callTool({ name: 'mcp__counting__shout', arguments: { text: 'again' } });
    if (x.isError) assert.equal(x.structuredContent.error.code, 'E_UPSTREAM_UNAVAILABLE', JSON.stringify(x));
    return x.isError ? null : x;
  });
  assert.equal(r.content[0].text, 'AGAIN');
  assert.notEqual(pidOf(), first);
  await client.close();
});

test('a Streamable HTTP upstream is reached only where allow_cidrs lets it', async () => {
  const server = spawn('node', [counting, '--http', '0'], { cwd: fs.mkdtempSync(path.join(up.dir, 'remote-')), stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    const port = await new Promise((resolve) => server.stdout.once('data', (d) => resolve(JSON.parse(d).port)));
    const remote = `
    remote:
      url: http://127.0.0.1:${port}/mcp
`;
    for (const [allowed, expect] of [[false, 'E_URL_FORBIDDEN'], [true, null]]) {
      const net = allowed ? '  network: {allow_cidrs: [127.0.0.0/8]}' : '';
      const u = await new Up({ policy: policy(remote, net) }).start();
      try {
        const client = await connect(u);
        const r = await waitFor('an answer from the remote server', async () => {
          const x = await client.callTool({ name: 'mcp__remote__shout', arguments: { text: 'over http' } });
          // While the supervisor connects the server counts as starting.
          return x.isError && x.structuredContent.error.code === 'E_UPSTREAM_UNAVAILABLE' &&
            /starting/.test(x.content[0].text) ? null : x;
        });
        if (expect) {
          assert.equal(r.isError, true);
          assert.equal(r.structuredContent.error.code, 'E_UPSTREAM_UNAVAILABLE', JSON.stringify(r));
          assert.match(r.content[0].text, /forbidden address: 127.0.0.1 is loopback/);
        } else {
          assert.equal(r.isError, false, JSON.stringify(r));
          assert.equal(r.content[0].text, 'OVER HTTP');
        }
        await client.close();
      } finally {
        await u.stop();
      }
    }
  } finally {
    server.kill('SIGKILL');
  }
});

test('an upstream answer nested 200,000 levels deep ends its call, and up serves on', async () => {
  const client = await connect();
  // As deep as tollgate takes (63 levels) reaches the client whole.
  const edge = await client.callTool({ name: 'mcp__hostile__edge', arguments: {} });
  assert.equal(edge.isError, false, JSON.stringify(edge));
  let arrays = 0;
  for (let v = edge.structuredContent.v; Array.isArray(v); v = v[0]) arrays++;
  assert.equal(arrays, 60);
  const r = await client.callTool({ name: 'mcp__hostile__deep', arguments: {} });
  assert.equal(r.isError, true, JSON.stringify(r));
  assert.equal(r.structuredContent.error.code, 'E_UPSTREAM_PROTOCOL');
  assert.match(r.content[0].text, /E_JSON_TOO_DEEP/);
  const events = await up.events({ request: r._meta['io.tollgate/request_id'] });
  assert.deepEqual(types(events), ['request.received', 'decision.made', 'execution.started', 'execution.completed']);
  assert.equal(up.proc.exitCode, null, 'up is still running');
  const other = await client.callTool({ name: 'mcp__counting__shout', arguments: { text: 'still here' } });
  assert.equal(other.content[0].text, 'STILL HERE');
  // The hostile server's stream was out of step: it is restarted and serves.
  const ok = await waitFor('a call served by the restarted hostile server', async () => {
    const x = await client.callTool({ name: 'mcp__hostile__ok', arguments: {} });
    if (x.isError) assert.equal(x.structuredContent.error.code, 'E_UPSTREAM_UNAVAILABLE', JSON.stringify(x));
    return x.isError ? null : x;
  });
  assert.equal(ok.content[0].text, 'fine');
  await client.close();
});

test('a tool list nested 200,000 levels deep is refused, saying why', async () => {
  const client = await connect();
  const { tools } = await client.listTools();
  assert.ok(!tools.some((t) => t.name.startsWith('mcp__lister__')), 'nothing of the refused list is offered');
  const r = await client.callTool({ name: 'mcp__lister__deep', arguments: {} });
  assert.equal(r.isError, true, JSON.stringify(r));
  assert.equal(r.structuredContent.error.code, 'E_UPSTREAM_UNAVAILABLE');
  assert.match(r.content[0].text, /lister.*refuses.*E_JSON_TOO_DEEP/);
  assert.match(up.stderr, /upstream MCP server 'lister' sent a message tollgate refuses/, 'and it is logged');
  await client.close();
});

// The upstream's inputSchema holds on the Kafka path too (execute checks
// its shape, core/tool_args.h): a call missing a required argument is
// refused before it reaches the server.
test('a Kafka call missing an upstream tools required argument never reaches it', async () => {
  const before = calls().length;
  let out;
  try {
    out = cli(['submit', '--data', up.data, '--org', 'default', '--agent', 'up-agent', '--session', 'kafka-up',
      '--tool', 'mcp:counting/shout', '--args', '{"txt":"typo"}', '--wait']);
  } catch (e) {
    out = e.stdout;
  }
  const r = JSON.parse(out);
  assert.equal(r.status, 'failed', out);
  assert.equal(r.result.error.code, 'E_INVALID_ARGS');
  assert.match(r.result.error.message, /missing required argument 'text'/);
  assert.equal(calls().length, before, 'the server saw nothing');
});
