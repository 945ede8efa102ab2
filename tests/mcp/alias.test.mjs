// http_request aliases through the MCP gateway (docs/tools.md, "http_request
// aliases"): a real `up` whose policy gives one agent `create_ticket`, a
// POST the operator configured, and a client using the official SDK through
// `tollgate mcp`. A node HTTP server on 127.0.0.1 records what reached it.
// Run by ctest as Mcp.HttpAliasesAreToolsOfTheirOwn.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { Up, TOLLGATE } from './harness.mjs';

const received = [];
let server, up;

before(async () => {
  server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => { body += d; });
    req.on('end', () => {
      received.push({ method: req.method, url: req.url, auth: req.headers.authorization, body });
      res.setHeader('Content-Type', 'application/json');
      res.end(JSON.stringify({ id: received.length }));
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const origin = `http://127.0.0.1:${server.address().port}`;
  process.env.TOLLGATE_TEST_TICKETS_TOKEN = 'tok-mcp-7';
  up = await new Up({ policy: `
version: 1
mode: ask
execute:
  network:
    allow_cidrs: [127.0.0.0/8]
orgs:
  default:
    agents:
      support:
        rules: [{tools: create_ticket, verdict: allow}]
        http_request:
          base_url: "${origin}/api/"
          aliases:
            create_ticket:
              description: Open a ticket in the tracker
              method: POST
              url: "projects/{project}/tickets"
              headers: {Authorization: "Bearer \${env:TOLLGATE_TEST_TICKETS_TOKEN}"}
              input_schema:
                type: object
                required: [project, title]
                additionalProperties: false
                properties:
                  project: {type: string}
                  title: {type: string}
` }).start();
});
after(async () => {
  await up?.stop();
  server?.close();
});

async function connect(agent) {
  const client = new Client({ name: 'tollgate-alias-test', version: '1.0.0' });
  await client.connect(new StdioClientTransport({
    command: TOLLGATE,
    args: ['mcp', '--data', up.data, '--org', 'default', '--agent', agent, '--session', `alias-${Date.now()}`],
    stderr: 'pipe',
  }));
  return client;
}

test('an alias is listed with its schema, runs as the request it expands to, and is on the record', async () => {
  const client = await connect('support');
  const { tools } = await client.listTools();
  const ticket = tools.find((t) => t.name === 'create_ticket');
  assert.ok(ticket, `create_ticket in ${tools.map((t) => t.name)}`);
  assert.equal(ticket.description, 'Open a ticket in the tracker');
  assert.deepEqual(ticket.inputSchema.required, ['project', 'title']);

  const r = await client.callTool({ name: 'create_ticket', arguments: { project: 'ops/../admin', title: 'disk full' } });
  assert.equal(r.isError, false, JSON.stringify(r));
  assert.equal(received.length, 1);
  assert.deepEqual(received[0], {
    method: 'POST', url: '/api/projects/ops%2F..%2Fadmin/tickets', auth: 'Bearer tok-mcp-7',
    body: JSON.stringify({ title: 'disk full' }),
  });
  const events = await up.events({ request: r._meta['io.tollgate/request_id'] });
  assert.deepEqual(events.map((e) => e.type),
    ['request.received', 'decision.made', 'execution.started', 'execution.completed']);
  assert.equal(events[0].tool, 'create_ticket');
  assert.match(events[1].data.invocation, /^http_request:POST http:\/\/127\.0\.0\.1:\d+\/api\/projects\/ops%2F\.\.%2Fadmin\/tickets$/);
  assert.ok(!JSON.stringify(events).includes('tok-mcp-7'), 'the alias header never reaches the log');
  await client.close();
});

test('an agent without the alias is not offered it, and calling it is denied before anything is sent', async () => {
  const client = await connect('other');
  const { tools } = await client.listTools();
  assert.ok(!tools.some((t) => t.name === 'create_ticket'));
  const before = received.length;
  const r = await client.callTool({ name: 'create_ticket', arguments: { project: 'ops', title: 't' } });
  assert.equal(r.isError, true);
  assert.equal(r.structuredContent.error.code, 'E_UNKNOWN_TOOL');
  assert.equal(received.length, before);
  await client.close();
});
