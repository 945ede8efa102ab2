// Lists an agent's tools through tollgate and calls echo, over stdio, with
// the official MCP SDK. Usage: node examples/mcp/client.mjs TOLLGATE DATA AGENT
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const sdk = createRequire(path.join(here, '../../tests/mcp/package.json'));
const { Client } = await import(sdk.resolve('@modelcontextprotocol/sdk/client/index.js'));
const { StdioClientTransport } = await import(sdk.resolve('@modelcontextprotocol/sdk/client/stdio.js'));

const [tollgate = 'build/cli/tollgate', data = 'tollgate-data', agent = 'research-bot'] = process.argv.slice(2);
const client = new Client({ name: 'tollgate-example', version: '1.0.0' });
await client.connect(new StdioClientTransport({ command: tollgate, args: ['mcp', '--data', data, '--agent', agent] }));

const { tools } = await client.listTools();
for (const t of tools) {
  const asks = t._meta?.['io.tollgate/asks'] ? ' (asks a human)' : '';
  console.log(`${t.name}${asks}: ${t.description}`);
}
const result = await client.callTool({ name: 'echo', arguments: { text: 'hello through the gate' } });
console.log('echo ->', result.content[0].text, `(request ${result._meta['io.tollgate/request_id']})`);
await client.close();
