// An asked call as a durable task (issue 34; docs/mcp.md "Calls awaiting
// approval"). With the official SDK v2 client and the Tasks extension's
// requester, against a real `up`: an asked write_file returns a task once
// approval.requested is in the log; `up` is killed with -9 and started
// again; a new client's tasks/get still answers "working, awaiting
// approval"; an approver approves; the task completes, with exactly one
// execution.completed in the log. A cancelled task never runs; another
// agent cannot see a task. Run by ctest as Mcp.AskedCallsAsDurableTasks.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { Up, TOLLGATE, cli, waitFor } from './harness.mjs';
import { connectWithTasks } from './tasks_client.mjs';

let up;
let token;
before(async () => {
  up = await new Up().start();
  token = up.agentToken('default', 'task-agent');
});
after(async () => { await up?.stop(); });

const types = (events) => events.map((e) => e.type);
const http = () => new StreamableHTTPClientTransport(new URL(up.http + '/mcp'), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});

// The raw 2026-07-28 envelope of a client with the Tasks extension.
const TASKS_META = {
  'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientCapabilities': { extensions: { 'io.modelcontextprotocol/tasks': {} } },
};

// An asked write_file made a task by a client that then leaves (without
// cancelling it): its task id.
async function askedTask(name) {
  const { client, session } = await connectWithTasks(http());
  try {
    const exec = await session.callTool('write_file', { path: `${name}-${Date.now()}.txt`, content: name });
    assert.equal(exec.kind, 'task');
    await exec.handoff(() => {});
    return exec.handle.taskId;
  } finally {
    await client.close();
  }
}

async function killAndRestart() {
  const done = new Promise((r) => up.proc.on('exit', r));
  up.proc.kill('SIGKILL');
  await done;
  await up.start();
}

test('http: an asked write_file is a task that survives kill -9 of up and of its client, then completes once', async () => {
  const file = `task-${Date.now()}.txt`;
  let { client, session } = await connectWithTasks(http());
  const exec = await session.callTool('write_file', { path: file, content: 'written by a task' });
  assert.equal(exec.kind, 'task');
  const taskId = exec.handle.taskId;
  // Durably created: the approval request is in the log when the task is answered.
  const before = await up.events({ request: taskId });
  assert.ok(types(before).includes('approval.requested'), types(before).join(','));
  let ref;
  await exec.handoff((r) => { ref = r; });
  await client.close(); // the client goes away without cancelling

  await killAndRestart();
  ({ client, session } = await connectWithTasks(http(), 'tasks-test-again'));
  try {
    const snap = await session.task(taskId).snapshot();
    assert.equal(snap.status, 'working');
    assert.match(snap.statusMessage, /awaiting approval: 0 of 1 approvals/);

    cli(['approvals', 'approve', taskId, '--data', up.data, '--comment', 'after kill -9']);
    const resumed = await session.resumeTask(ref);
    const { outcome } = await resumed.settle();
    assert.equal(outcome.status, 'completed', JSON.stringify(outcome));
    assert.equal(outcome.result.isError, false, JSON.stringify(outcome.result));
    assert.equal(outcome.result._meta['io.tollgate/request_id'], taskId);
  } finally {
    await client.close();
  }
  const events = await up.events({ request: taskId });
  assert.equal(events.filter((e) => e.type === 'execution.completed').length, 1, types(events).join(','));
  assert.equal(events.filter((e) => e.type === 'approval.requested').length, 1);
});

test('stdio: a cancelled task is withdrawn and never runs, even when approved after', async () => {
  const file = `cancelled-task-${Date.now()}.txt`;
  const { client, session } = await connectWithTasks(new StdioClientTransport({
    command: TOLLGATE,
    args: ['mcp', '--data', up.data, '--org', 'default', '--agent', 'task-agent'],
    env: { ...process.env },
    stderr: 'ignore',
  }));
  try {
    const exec = await session.callTool('write_file', { path: file, content: 'must never be written' });
    assert.equal(exec.kind, 'task');
    const taskId = exec.handle.taskId;
    await exec.cancel();
    const events = await waitFor('the withdrawal on the record', async () => {
      const ev = await up.events({ request: taskId });
      return ev.some((e) => e.type === 'approval.denied' && e.data.withdrawn) ? ev : null;
    });
    // An approval after the withdrawal changes nothing.
    try { cli(['approvals', 'approve', taskId, '--data', up.data]); } catch { /* refused: nothing pending */ }
    const snap = await session.task(taskId).snapshot();
    assert.equal(snap.status, 'cancelled');
    const after = await up.events({ request: taskId });
    assert.ok(!types(after).includes('execution.started'), types(after).join(','));
    assert.ok(types(events).includes('approval.requested'));
  } finally {
    await client.close();
  }
});

test('http: another agent cannot read or cancel a task', async () => {
  const taskId = await askedTask('other');
  const other = up.agentToken('default', 'other-agent');
  for (const method of ['tasks/get', 'tasks/cancel']) {
    const res = await fetch(`${up.http}/mcp`, {
      method: 'POST',
      headers: {
        Authorization: `Bearer ${other}`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream',
        'MCP-Protocol-Version': '2026-07-28', 'Mcp-Method': method, 'Mcp-Name': taskId,
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params: { taskId, _meta: TASKS_META } }),
    });
    const body = await res.json();
    assert.equal(body.error?.code, -32602, JSON.stringify(body));
  }
  // Still pending: the other agent's cancel withdrew nothing.
  assert.ok(up.pending().some((p) => p.request_id === taskId));
  cli(['approvals', 'deny', taskId, '--data', up.data, '--comment', 'test over']);
});

test('http: subscriptions/listen acknowledges the agent\'s own tasks and sends each change of them', async () => {
  const taskId = await askedTask('listened');
  const abort = new AbortController();
  const res = await fetch(`${up.http}/mcp`, {
    method: 'POST',
    signal: abort.signal,
    headers: {
      Authorization: `Bearer ${token}`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream',
      'MCP-Protocol-Version': '2026-07-28', 'Mcp-Method': 'subscriptions/listen',
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 'listen-1', method: 'subscriptions/listen',
      params: { notifications: { toolsListChanged: true, taskIds: [taskId, 'mcp-not-a-task-of-mine'] }, _meta: TASKS_META } }),
  });
  assert.equal(res.status, 200);
  const messages = [];
  const reader = res.body.getReader();
  let buf = '';
  const next = async (what, pred) => waitFor(what, async () => {
    const found = messages.find(pred);
    if (found) return found;
    const { value, done } = await reader.read();
    if (done) throw new Error(`the stream ended before ${what}`);
    buf += Buffer.from(value).toString('utf8');
    for (let i; (i = buf.indexOf('\n\n')) >= 0; buf = buf.slice(i + 2)) {
      const data = buf.slice(0, i).split('\n').find((l) => l.startsWith('data: '));
      if (data) messages.push(JSON.parse(data.slice(6)));
    }
    return messages.find(pred);
  }, 30000);
  try {
    const ack = await next('the acknowledgement', (m) => m.method === 'notifications/subscriptions/acknowledged');
    assert.deepEqual(ack.params.notifications, { toolsListChanged: true, taskIds: [taskId] });
    assert.equal(ack.params._meta['io.modelcontextprotocol/subscriptionId'], 'listen-1');
    const working = await next('the task working', (m) => m.method === 'notifications/tasks' && m.params.status === 'working');
    assert.equal(working.params.taskId, taskId);
    assert.match(working.params.statusMessage, /awaiting approval/);
    cli(['approvals', 'approve', taskId, '--data', up.data]);
    const done = await next('the task completed', (m) => m.method === 'notifications/tasks' && m.params.status === 'completed');
    assert.equal(done.params.result.isError, false, JSON.stringify(done.params));
    assert.equal(done.params._meta['io.modelcontextprotocol/subscriptionId'], 'listen-1');
  } finally {
    abort.abort();
  }
});

test('clients without tasks are held, told "pending approval", and the identical call attaches to the same request', async () => {
  // Short holds for the test: `up --mcp-hold` and `tollgate mcp --hold`.
  await up.stop();
  up.extraArgs = ['--mcp-hold', '2'];
  await up.start();
  const { Client } = await import('@modelcontextprotocol/client');
  const stdio = () => new StdioClientTransport({
    command: TOLLGATE,
    args: ['mcp', '--data', up.data, '--org', 'default', '--agent', 'holder', '--hold', '2'],
    env: { ...process.env },
    stderr: 'ignore',
  });
  const holdToken = up.agentToken('default', 'holder');
  const httpLegacy = () => new StreamableHTTPClientTransport(new URL(up.http + '/mcp'), {
    requestInit: { headers: { Authorization: `Bearer ${holdToken}` } },
  });
  for (const [name, transport] of [['http', httpLegacy], ['stdio', stdio]]) {
    const args = { path: `held-${name}-${Date.now()}.txt`, content: `held over ${name}` };
    const connect = async () => {
      const client = new Client({ name: `hold-${name}`, version: '1.0.0' }); // legacy mode: no tasks
      await client.connect(transport());
      return client;
    };
    const call = async (client) => {
      let progress = 0;
      const r = await client.callTool({ name: 'write_file', arguments: args },
        { timeout: 60000, onprogress: () => { progress++; } });
      return { r, progress };
    };
    // First call: held, then told it is pending, with the request id.
    const a = await connect();
    const first = await call(a);
    await a.close();
    assert.equal(first.r.isError, true);
    assert.equal(first.r.structuredContent.status, 'pending_approval', JSON.stringify(first.r));
    assert.match(first.r.content[0].text, /^E_PENDING_APPROVAL: request \S+ is awaiting approval/);
    const rid = first.r.structuredContent.request_id;
    assert.ok(first.progress >= 1, `progress while held: ${first.progress}`);
    // The same call again, from a new connection (for stdio, a new process
    // of tollgate mcp): the same request, still pending; no second approval.
    const b = await connect();
    try {
      const second = await call(b);
      assert.equal(second.r.structuredContent.request_id, rid, JSON.stringify(second.r));
      // Approved; the next identical call returns its outcome.
      cli(['approvals', 'approve', rid, '--data', up.data]);
      await waitFor('the call run', async () => (await up.events({ request: rid })).some((e) => e.type === 'execution.completed'));
      const third = await call(b);
      assert.equal(third.r.isError, false, JSON.stringify(third.r));
      assert.equal(third.r._meta['io.tollgate/request_id'], rid);
    } finally {
      await b.close();
    }
    const events = await up.events({ request: rid });
    assert.equal(events.filter((e) => e.type === 'approval.requested').length, 1);
    assert.equal(events.filter((e) => e.type === 'execution.completed').length, 1);
    const pendingOfAgent = up.pending().filter((p) => p.agent_id === 'holder');
    assert.deepEqual(pendingOfAgent, [], 'no second approval was asked');
    assert.equal(fs.readFileSync(path.join(up.data, 'workspaces', 'default', 'holder', args.path), 'utf8'), args.content);
  }
});
