// The seeds' documented examples (tests/seeds/*.json, docs/seeds.md) through
// MCP with the official SDK over Streamable HTTP, against a real `tollgate
// up` on the conformance policy: the same examples kafka_conformance_test
// sends on Kafka, the same fields and codes asserted. Prints each suite's
// coverage. Run by ctest as Mcp.SeedConformance.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Up } from './harness.mjs';
import { loadSuite, coverage, check, covers, substitute } from '../seeds/seed_suite.mjs';

// fetch_url's page and extract_links' links (relative, absolute, repeated).
const PAGE = '<html><body><a href="/page1">1</a> <a href=\'https://example.com/x\'>x</a> <a href="/page1">again</a></body></html>';
const SEEDS = path.resolve(import.meta.dirname, '../seeds');
let up, client, server, got, origin, closed;

before(async () => {
  server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => { body += d; });
    req.on('end', () => {
      let json = null;
      try { json = body ? JSON.parse(body) : null; } catch { json = null; }
      const q = req.url.indexOf('?');
      got = { json, headers: req.headers, query: q < 0 ? '' : req.url.slice(q + 1) };
      if (req.url.startsWith('/big')) { res.setHeader('Content-Type', 'text/plain'); return res.end('x'.repeat(50000)); }
      if (req.url.startsWith('/page') || req.url.startsWith('/links.html')) {
        res.setHeader('Content-Type', 'text/html');
        return res.end(PAGE);
      }
      const reply = () => { res.setHeader('Content-Type', 'application/json'); res.end('{"items":[1,2,3]}'); };
      if (req.url.startsWith('/slow')) setTimeout(reply, 1500); else reply();
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  origin = `http://127.0.0.1:${server.address().port}`;
  const probe = http.createServer();
  await new Promise((r) => probe.listen(0, '127.0.0.1', r));
  closed = `http://127.0.0.1:${probe.address().port}`;
  await new Promise((r) => probe.close(r));

  // The policy names the loopback server ({{server}}: base_url).
  const policy = substitute(fs.readFileSync(path.join(SEEDS, 'conformance_policy.yaml'), 'utf8'), origin, '');
  up = await new Up({ policy }).start();
  const token = up.agentToken('default', 'seed-agent');
  client = new Client({ name: 'seed-conformance', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(up.http + '/mcp'), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  }));
});
after(async () => {
  await client?.close();
  await up?.stop();
  server?.close();
});

// A fresh workspace with the example's files (and a repository with one
// staged change when it asks for one).
function prepare(ex) {
  const ws = path.join(up.data, 'workspaces', 'default', 'seed-agent');
  fs.rmSync(ws, { recursive: true, force: true });
  fs.mkdirSync(ws, { recursive: true });
  for (const [p, content] of Object.entries(ex.files ?? {})) {
    fs.mkdirSync(path.dirname(path.join(ws, p)), { recursive: true });
    fs.writeFileSync(path.join(ws, p), content);
  }
  if (ex.git) {
    const git = (...a) => execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', ...a], { cwd: ws });
    fs.writeFileSync(path.join(ws, 'README.md'), 'seed\n');
    git('init', '-q'); git('add', '-A'); git('commit', '-qm', 'init');
    fs.appendFileSync(path.join(ws, 'README.md'), 'staged\n');
    git('add', 'README.md');
  }
}

// The ToolResult an MCP client sees: structuredContent is the data of a
// success and {status, error, data} of a failure; the meta rides in _meta.
function toolResultOf(r) {
  const meta = r._meta?.['io.tollgate/tool_meta'];
  if (!r.isError) return { success: true, data: r.structuredContent, error: null, meta };
  return { success: false, data: r.structuredContent?.data ?? null, error: r.structuredContent?.error, meta };
}

// A suite with its own runner (Duragent's, duragent_conformance_test) is not run here.
const own = (f) => 'runner' in loadSuite(path.join(SEEDS, f));
for (const file of fs.readdirSync(SEEDS).filter((f) => f.endsWith('.json') && !own(f)).sort()) {
  test(`${file}: every documented example comes back over MCP with its fields and codes`, async () => {
    const suite = loadSuite(path.join(SEEDS, file));
    const served = new Set();
    const failures = [];
    // The danger the gate gives each tool, as tools/list says it.
    const { tools } = await client.listTools();
    const dangerOf = Object.fromEntries(tools.map((t) => [t.name, t._meta?.['io.tollgate/danger']]));
    for (const ex of suite.examples) {
      prepare(ex);
      got = undefined;
      const args = substitute(ex.args, origin, closed);
      let r;
      try {
        r = await client.callTool({ name: ex.mcp_tool ?? ex.tool, arguments: args });
      } catch (e) {
        failures.push(`${ex.name}: ${e.message}`);
        continue;
      }
      const why = check(ex, toolResultOf(r), got, dangerOf[ex.name_of ?? ex.tool]);
      if (why) failures.push(`${ex.name}: ${why}: ${JSON.stringify(r).slice(0, 600)}`);
      else for (const c of covers(suite, ex)) served.add(c);
    }
    console.log(coverage(suite, served));
    assert.deepEqual(failures, []);
  });
}

// ADR-012's discover_tools and Kaizen's formats, on every way in: GET
// /v1/tools, `tollgate tools list` and MCP's tools/list (core/tool_discovery.h).
test('discovery filters by category, safe_only and keyword in MCP, OpenAI and Anthropic form', async () => {
  const q = (params) => up.api('/v1/tools?' + new URLSearchParams({ org: 'default', agent: 'seed-agent', ...params }));
  const fsTools = await q({ category: 'filesystem' });
  assert.equal(fsTools.status, 200);
  assert.ok(fsTools.body.tools.length >= 5 && fsTools.body.tools.every((t) => t.category === 'filesystem'),
    JSON.stringify(fsTools.body.tools.map((t) => t.name)));
  const safe = await q({ safe_only: 'true' });
  assert.ok(safe.body.tools.length > 0 && safe.body.tools.every((t) => t.danger === 'SAFE'));
  const openai = await q({ keyword: 'READ_FILE', format: 'openai' });
  const rf = openai.body.tools.find((t) => t.function.name === 'read_file');
  assert.equal(rf.type, 'function');
  assert.equal(rf.function.parameters.type, 'object');
  assert.ok('path' in rf.function.parameters.properties);
  const anthropic = await q({ keyword: 'read_file', format: 'anthropic' });
  assert.ok(anthropic.body.tools.find((t) => t.name === 'read_file').input_schema.properties.path);
  assert.equal((await q({ format: 'yaml' })).status, 400);

  const fromCli = JSON.parse(execFileSync(process.env.TOLLGATE_BIN, ['tools', 'list', '--data', up.data,
    '--org', 'default', '--agent', 'seed-agent', '--category', 'network', '--format', 'mcp'], { encoding: 'utf8' }));
  assert.ok(fromCli.tools.length > 0 && fromCli.tools.every((t) => 'inputSchema' in t && !('category' in t)));
  assert.deepEqual(fromCli.tools.map((t) => t.name), (await q({ category: 'network', format: 'mcp' })).body.tools.map((t) => t.name));

  // tools/list takes the same filters as params (a tollgate extension).
  const listed = await client.request({ method: 'tools/list', params: { category: 'filesystem', keyword: 'delete' } },
    (await import('@modelcontextprotocol/sdk/types.js')).ListToolsResultSchema);
  assert.deepEqual(listed.tools.map((t) => t.name), ['delete_file']);
});

// ADR-012's execute_tool_chain as `tollgate submit --chain`: each step its
// own request (decided, logged), run in order; the chain stops at the first
// step that does not complete unless told to go on.
test('a tool chain runs its steps in order and stops on the first error', async () => {
  prepare({});
  const file = path.join(up.dir, 'chain.json');
  const run = (chain, ...flags) => {
    fs.writeFileSync(file, JSON.stringify(chain));
    try {
      return { code: 0, out: JSON.parse(execFileSync(process.env.TOLLGATE_BIN, ['submit', '--data', up.data,
        '--org', 'default', '--agent', 'seed-agent', '--session', 'chain', '--chain', file, ...flags], { encoding: 'utf8' })) };
    } catch (e) {
      return { code: e.status, out: JSON.parse(e.stdout) };
    }
  };
  const steps = [
    { tool_name: 'write_file', params: { path: 'chain.txt', content: 'step one' } },
    { tool_name: 'read_file', params: { path: 'missing.txt' } },
    { tool_name: 'read_file', params: { path: 'chain.txt' } },
  ];
  const stopped = run({ executions: steps, stop_on_error: true });
  assert.equal(stopped.code, 1);
  assert.deepEqual(stopped.out.map((r) => r.status), ['completed', 'failed']);
  assert.equal(stopped.out[1].result.error.code, 'E_FILE_NOT_FOUND');
  const all = run(steps, '--continue-on-error');
  assert.deepEqual(all.out.map((r) => r.status), ['completed', 'failed', 'completed']);
  assert.equal(all.out[2].result.data.content, 'step one');
  // Every step is its own request on the record.
  const events = await up.events({ request: all.out[2].request_id });
  assert.ok(events.some((e) => e.type === 'decision.made'), JSON.stringify(events.map((e) => e.type)));
});
