// One `echo` tool served by either era's official SDK, for
// upstream_eras.test.mjs (docs/mcp.md, "Upstream MCP servers"):
//   eras_server.mjs v2-stdio   SDK v2 (2.4.0) over stdio, 2026-07-28 only
//   eras_server.mjs v2-http    SDK v2 createMcpHandler over Streamable HTTP,
//                              2026-07-28 only
//   eras_server.mjs v1-stdio   SDK v1 (1.32.2) over stdio, legacy only
//   eras_server.mjs v1-http    SDK v1 stateless Streamable HTTP, legacy only
//   eras_server.mjs input-required
//                              hand-written 2026-07-28 stdio server whose
//                              tools/call of `ask` answers resultType
//                              "input_required" (it wants to ask the client
//                              something), which tollgate refuses
// The v2 servers refuse the legacy era (legacy: 'reject': `initialize` is
// answered -32022), so a call they answer proves tollgate spoke 2026-07-28
// to them; the v1 servers know nothing newer, so a call they answer proves
// it fell back to `initialize`. echo answers "<mode>: <text>", naming the
// server that answered. An HTTP server listens on 127.0.0.1 only, on a port
// of the system's choosing, and prints {"port": N} once listening.
import http from 'node:http';

const mode = process.argv[2];
const echoed = (text) => ({ content: [{ type: 'text', text: `${mode}: ${text}` }] });

// Serves `handle(req, res, body)` on loopback; prints the port.
function listen(handle) {
  const srv = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    try {
      await handle(req, res, Buffer.concat(chunks));
    } catch (e) {
      if (!res.headersSent) res.writeHead(500);
      res.end(String(e));
    }
  });
  srv.listen(0, '127.0.0.1', () => process.stdout.write(JSON.stringify({ port: srv.address().port }) + '\n'));
}

// A factory: the SDK v2 entry points build a server per connection or request.
async function v2Factory() {
  const { McpServer } = await import('@modelcontextprotocol/server');
  const z = await import('zod');
  return () => {
    const s = new McpServer({ name: `eras-${mode}`, version: '1.0.0' }, { capabilities: { tools: {} } });
    s.registerTool('echo', { description: 'Echoes text, naming the server', inputSchema: z.object({ text: z.string() }) },
      async ({ text }) => echoed(text));
    return s;
  };
}

async function v1Server() {
  const { McpServer } = await import('@modelcontextprotocol/sdk/server/mcp.js');
  const { z } = await import('zod');
  const s = new McpServer({ name: `eras-${mode}`, version: '1.0.0' });
  s.registerTool('echo', { description: 'Echoes text, naming the server', inputSchema: { text: z.string() } },
    async ({ text }) => echoed(text));
  return s;
}

if (mode === 'v2-stdio') {
  const { serveStdio } = await import('@modelcontextprotocol/server/stdio');
  serveStdio(await v2Factory(), { legacy: 'reject' });
} else if (mode === 'v2-http') {
  const { createMcpHandler } = await import('@modelcontextprotocol/server');
  const handler = createMcpHandler(await v2Factory(), { legacy: 'reject' });
  // createMcpHandler is fetch-shaped: node:http request in, Response out.
  listen(async (req, res, body) => {
    const headers = new Headers();
    for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string') headers.set(k, v);
    const withBody = req.method !== 'GET' && req.method !== 'HEAD';
    const response = await handler.fetch(new Request(`http://127.0.0.1${req.url}`,
      { method: req.method, headers, body: withBody ? body : undefined }));
    res.writeHead(response.status, Object.fromEntries(response.headers));
    res.end(Buffer.from(await response.arrayBuffer()));
  });
} else if (mode === 'v1-stdio') {
  const { StdioServerTransport } = await import('@modelcontextprotocol/sdk/server/stdio.js');
  await (await v1Server()).connect(new StdioServerTransport());
} else if (mode === 'v1-http') {
  const { StreamableHTTPServerTransport } = await import('@modelcontextprotocol/sdk/server/streamableHttp.js');
  // Stateless: a server and transport per request, as the SDK's example does.
  listen(async (req, res, body) => {
    const t = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    await (await v1Server()).connect(t);
    await t.handleRequest(req, res, body.length ? JSON.parse(body) : undefined);
  });
} else if (mode === 'input-required') {
  const readline = await import('node:readline');
  const out = (m) => process.stdout.write(JSON.stringify(m) + '\n');
  const complete = { resultType: 'complete', ttlMs: 0, cacheScope: 'private' };
  readline.createInterface({ input: process.stdin }).on('line', (line) => {
    const m = JSON.parse(line);
    if (m.id === undefined) return;
    const v = m.params?._meta?.['io.modelcontextprotocol/protocolVersion'];
    if (v !== '2026-07-28') {
      return out({ jsonrpc: '2.0', id: m.id, error: { code: -32022, message: 'Unsupported protocol version',
        data: { supported: ['2026-07-28'], requested: v ?? null } } });
    }
    if (m.method === 'server/discover') {
      return out({ jsonrpc: '2.0', id: m.id, result: { ...complete, supportedVersions: ['2026-07-28'], capabilities: { tools: {} } } });
    }
    if (m.method === 'tools/list') {
      return out({ jsonrpc: '2.0', id: m.id, result: { ...complete, tools: [{ name: 'ask', inputSchema: { type: 'object' } }] } });
    }
    if (m.method === 'tools/call') {
      return out({ jsonrpc: '2.0', id: m.id, result: { resultType: 'input_required', requestState: 'r1',
        inputRequests: { confirm: { method: 'elicitation/create', params: { message: 'Sure?', requestedSchema: { type: 'object', properties: {} } } } } } });
    }
    out({ jsonrpc: '2.0', id: m.id, error: { code: -32601, message: 'Method not found' } });
  });
} else {
  process.stderr.write('usage: eras_server.mjs v2-stdio|v2-http|v1-stdio|v1-http|input-required\n');
  process.exit(2);
}
