// An upstream MCP server for the tests, written with the official SDK's
// low-level Server: it appends every tools/call it receives to calls.jsonl
// in its working directory (the test reads that file to prove a denied call
// never reached it). Tools: `shout` {text} -> upper-cased text and
// structuredContent; `wipe` {target} (a tool the policy denies); `fail`
// (answers isError). Over stdio by default; `--http PORT` serves Streamable
// HTTP on 127.0.0.1 instead.
import fs from 'node:fs';
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const log = process.env.CALLS_FILE || 'calls.jsonl';

function makeServer() {
  const server = new Server({ name: 'counting', version: '1.0.0' }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [
      {
        name: 'shout',
        description: 'Upper-cases text.',
        inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
        annotations: { readOnlyHint: true },
      },
      {
        name: 'wipe',
        description: 'Pretends to wipe a target.',
        inputSchema: { type: 'object', properties: { target: { type: 'string' } }, required: ['target'] },
      },
      { name: 'fail', description: 'Always fails.', inputSchema: { type: 'object', properties: {} } },
    ],
  }));
  server.setRequestHandler(CallToolRequestSchema, async (req) => {
    fs.appendFileSync(log, JSON.stringify({ name: req.params.name, arguments: req.params.arguments }) + '\n');
    const args = req.params.arguments || {};
    if (req.params.name === 'shout') {
      const out = String(args.text).toUpperCase();
      return { content: [{ type: 'text', text: out }], structuredContent: { shouted: out } };
    }
    if (req.params.name === 'wipe') return { content: [{ type: 'text', text: `wiped ${args.target}` }] };
    if (req.params.name === 'fail') return { content: [{ type: 'text', text: 'it broke' }], isError: true };
    throw new Error(`no tool ${req.params.name}`);
  });
  return server;
}

const httpAt = process.argv.indexOf('--http');
if (httpAt < 0) {
  await makeServer().connect(new StdioServerTransport());
} else {
  const transports = new Map();
  const srv = http.createServer(async (req, res) => {
    let body = '';
    for await (const chunk of req) body += chunk;
    const parsed = body ? JSON.parse(body) : undefined;
    const sid = req.headers['mcp-session-id'];
    let t = sid ? transports.get(sid) : undefined;
    if (!t) {
      if (sid) {
        res.writeHead(404).end();
        return;
      }
      t = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => transports.set(id, t),
      });
      await makeServer().connect(t);
    }
    await t.handleRequest(req, res, parsed);
  });
  srv.listen(Number(process.argv[httpAt + 1]) || 0, '127.0.0.1', () => {
    process.stdout.write(JSON.stringify({ port: srv.address().port }) + '\n');
  });
}
