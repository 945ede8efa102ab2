// notifications/tools/list_changed: a policy edit that takes a tool away
// from the agent reaches clients of both transports, and their next
// tools/list no longer offers it. Run by ctest as Mcp.ToolListChangesAreAnnounced.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { Up, TOLLGATE, waitFor } from './harness.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const defaultPolicy = fs.readFileSync(path.join(here, '../../config/default-policy.yaml'), 'utf8');

let up;
before(async () => { up = await new Up({ policy: defaultPolicy }).start(); });
after(async () => { await up?.stop(); });

test('a policy edit that denies a tool is announced to stdio and HTTP clients, and the tool leaves their lists', async () => {
  const token = up.agentToken('default', 'watcher');
  const clients = [];
  const changed = [];
  for (const transport of [
    new StdioClientTransport({ command: TOLLGATE, args: ['mcp', '--data', up.data, '--agent', 'watcher', '--watch-ms', '200'] }),
    new StreamableHTTPClientTransport(new URL(up.http + '/mcp'), {
      requestInit: { headers: { Authorization: `Bearer ${token}` } },
    }),
  ]) {
    const c = new Client({ name: 'watcher', version: '1.0.0' });
    const i = clients.length;
    changed.push(0);
    c.setNotificationHandler(ToolListChangedNotificationSchema, () => { changed[i] += 1; });
    await c.connect(transport);
    const { tools } = await c.listTools();
    assert.ok(tools.some((t) => t.name === 'get_system_info'));
    clients.push(c);
  }
  // Give the HTTP client's GET stream time to open: wait until the server
  // has seen it answer a ping after initialize.
  await clients[1].ping();

  fs.writeFileSync(path.join(up.dir, 'policy.yaml'),
    defaultPolicy.replace('deny:\n', 'deny:\n  - "builtin:get_system_info"\n'));
  await waitFor('list_changed on both transports', () => changed.every((n) => n > 0), 20000)
    .catch((e) => { throw new Error(e.message + ' ' + JSON.stringify(changed) + up.stderr.slice(-2000)); });
  for (const c of clients) {
    const { tools } = await c.listTools();
    assert.ok(!tools.some((t) => t.name === 'get_system_info'));
    assert.ok(tools.some((t) => t.name === 'echo'));
    await c.close();
  }
});
