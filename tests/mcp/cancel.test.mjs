// Cancelled and abandoned HTTP MCP calls never run (issue 31; docs/mcp.md,
// "Calls that ask a human"). Against a real `tollgate up` with the official
// SDK: 50 calls of write_file (which asks, and writes a file when it runs),
// half cancelled by the SDK (notifications/cancelled, sent while the call may
// still be on its way), half abandoned by dropping the connection. Then an
// approver approves every pending call through the API, as long as any is
// pending. None may run: every one that reached the log ends withdrawn, and
// no file is written. Run by ctest as Mcp.CancelledCallsNeverRun.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { Readable } from 'node:stream';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Up, waitFor } from './harness.mjs';

// A wave of 5 calls per agent: calls that stay in flight must not run into
// the connection caps (16 per token, 32 per agent) on today's code.
const WAVES = 10;
const agentOf = (wave) => `canceller-${wave}`;
const PER_WAVE = 5;
const delay = (ms) => new Promise((r) => setTimeout(r, ms));

let up;
const cancellers = []; // clients that cancel stay connected until the end
before(async () => { up = await new Up().start(); });
after(async () => {
  for (const c of cancellers) await c.client.close();
  await up?.stop();
});

// fetch over a connection of its own that closes with its response: the
// server's per-agent connection cap then counts exactly the calls in flight
// (no idle keep-alive sockets), and dropping a call drops its connection.
function closingFetch(url, init = {}) {
  return new Promise((resolve, reject) => {
    const headers = Object.fromEntries(new Headers(init.headers).entries());
    const req = http.request(url, { method: init.method || 'GET', headers, agent: false }, (res) => {
      const h = new Headers();
      for (const [k, v] of Object.entries(res.headers)) h.set(k, Array.isArray(v) ? v.join(', ') : v);
      const empty = [204, 205, 304].includes(res.statusCode);
      resolve(new Response(empty ? null : Readable.toWeb(res), { status: res.statusCode, headers: h }));
    });
    req.on('error', reject);
    const onAbort = () => { req.destroy(); reject(init.signal.reason ?? new Error('aborted')); };
    init.signal?.addEventListener('abort', onAbort, { once: true });
    req.on('close', () => init.signal?.removeEventListener('abort', onAbort));
    req.end(init.body ?? undefined);
  });
}

// An SDK client whose outgoing messages the test can await: `sends` holds
// {method, done} per message (a notification's `done` resolves once the
// server answered it; a tools/call's once its event stream opened).
async function connect(token) {
  const transport = new StreamableHTTPClientTransport(new URL(up.http + '/mcp'), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
    fetch: closingFetch,
  });
  const sends = [];
  const send = transport.send.bind(transport);
  transport.send = (msg, opts) => {
    const done = send(msg, opts);
    sends.push({ method: msg.method, done: done.catch(() => {}) });
    return done;
  };
  const client = new Client({ name: 'cancel-test', version: '1.0.0' });
  await client.connect(transport);
  return { client, transport, sends };
}

const writeCall = (i) => ({ name: 'write_file', arguments: { path: `cancelled-${i}.txt`, content: 'must never be written' } });

// Five calls on one session (an SDK client that stays connected to the end,
// as an agent that cancels goes on working), each cancelled 0-20 ms after it
// was made.
async function cancelWave({ client, sends }, wave) {
  const calls = [];
  for (let k = 0; k < PER_WAVE; k++) {
    const abort = new AbortController();
    const call = client.callTool(writeCall(wave * PER_WAVE + k), undefined, { signal: abort.signal, timeout: 120000 });
    calls.push(call.then(() => 'answered', () => 'rejected'));
    const ms = (k * 5) % 25;
    if (ms === 0) abort.abort('changed my mind'); else setTimeout(() => abort.abort('changed my mind'), ms);
  }
  const outcomes = await Promise.all(calls);
  assert.ok(outcomes.every((o) => o === 'rejected'), `a cancelled call was answered: ${outcomes}`);
  // Every notifications/cancelled answered by the gateway.
  await Promise.all(sends.filter((s) => s.method === 'notifications/cancelled').map((s) => s.done));
}

// Five calls, each on its own connection, dropped 0-20 ms after its stream opened.
async function dropWave(token, wave) {
  await Promise.all(Array.from({ length: PER_WAVE }, async (_, k) => {
    const { client, transport, sends } = await connect(token);
    const call = client.callTool(writeCall(wave * PER_WAVE + k), undefined, { timeout: 120000 }).catch(() => {});
    await waitFor('the call sent', () => sends.find((s) => s.method === 'tools/call'));
    await sends.find((s) => s.method === 'tools/call').done;
    await delay((k * 5) % 25);
    await transport.close(); // aborts the call's event stream: its connection is gone
    await call;
  }));
}

// Every event of the cancelling agents, but for the marker calls.
async function eventsOfCalls(markers) {
  let events = [];
  let cursor = '';
  do {
    const r = await up.api('/v1/audit?' + new URLSearchParams({ org: 'default', limit: '1000', cursor }));
    assert.equal(r.status, 200, JSON.stringify(r.body));
    events = events.concat(r.body.events);
    cursor = r.body.next_cursor;
  } while (cursor);
  return events.filter((e) => e.agent_id.startsWith('canceller-') && /^mcp-/.test(e.request_id ?? '') &&
    !markers.includes(e.request_id));
}

function byRequest(events) {
  const m = new Map();
  for (const e of events) {
    if (!m.has(e.request_id)) m.set(e.request_id, []);
    m.get(e.request_id).push(e);
  }
  return m;
}

const FINAL = new Set(['approval.denied', 'approval.expired', 'execution.completed', 'request.rejected']);

function filesUnder(dir, re, out = []) {
  for (const d of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, d.name);
    if (d.isDirectory()) filesUnder(p, re, out);
    else if (re.test(d.name)) out.push(p);
  }
  return out;
}

test('50 cancelled or abandoned HTTP MCP calls: none runs, even when an approver approves every pending one', async () => {
  const t0 = Date.now();
  for (let w = 0; w < WAVES; w++) {
    if (w % 2 === 1) {
      await dropWave(up.agentToken('default', agentOf(w)), w);
      continue;
    }
    cancellers.push(await connect(up.agentToken('default', agentOf(w))));
    await cancelWave(cancellers.at(-1), w);
  }
  // The gateway has given up every call (none in flight any more): each
  // one's withdrawal is on its way, or it was never submitted.
  const settled = await waitFor('no MCP call in flight at the gateway', async () => {
    const r = await up.api('/v1/connections');
    return r.status === 200 && r.body.mcp.calls === 0;
  }, 15000).then(() => true, () => false);

  // A call after them, on the same agent's partition, has been through
  // ingest: every call of that agent submitted before it is in the log.
  const markers = await Promise.all(Array.from({ length: WAVES }, async (_, w) => {
    const { client } = await connect(up.agentToken('default', agentOf(w)));
    const marker = await client.callTool({ name: 'echo', arguments: { text: 'after the cancellations' } });
    assert.equal(marker.isError, false, JSON.stringify(marker));
    await client.close();
    return marker._meta['io.tollgate/request_id'];
  }));

  // The approver approves whatever is pending until every call has ended.
  let approvedByUs = 0;
  let lastOpen = [];
  await waitFor('every call ended', async () => {
    const list = await up.api('/v1/approvals?org=default');
    for (const p of list.body.approvals) {
      const r = await up.api(`/v1/approvals/${encodeURIComponent(p.request_id)}?org=default`, { method: 'POST', body: { decision: 'approve' } });
      if (r.status === 200) approvedByUs++;
    }
    const reqs = byRequest(await eventsOfCalls(markers));
    const open = [...reqs.values()].filter((ev) => !ev.some((e) => FINAL.has(e.type)));
    if (open.length) lastOpen = open.map((ev) => ev.map((e) => e.type).join(','));
    return open.length === 0;
  }, 30000).catch((e) => { throw new Error(`${e.message}: still open: ${JSON.stringify(lastOpen)}`); });

  const requests = byRequest(await eventsOfCalls(markers));
  const ran = [...requests.values()].filter((ev) => ev.some((e) => e.type === 'execution.started'));
  const withdrawn = [...requests.values()].filter((ev) => ev.some((e) => e.type === 'approval.denied' && e.data.withdrawn === true));
  const held = [...requests.values()].filter((ev) => ev.some((e) => e.type === 'approval.requested'));
  const written = filesUnder(up.dir, /^cancelled-\d+\.txt$/);
  console.log(`# ${requests.size} of 50 calls reached the log, ${withdrawn.length} withdrawn ` +
    `(${withdrawn.length - held.length} before they were held), ${ran.length} ran, ` +
    `${approvedByUs} approvals accepted, ${written.length} files written; gateway idle: ${settled}; ${Date.now() - t0} ms`);
  assert.equal(ran.length, 0, `${ran.length} calls ran, the first: ${JSON.stringify(ran[0]?.map((e) => [e.type, e.data.code ?? '', e.data.message ?? '']))}`);
  assert.deepEqual(written, []);
  assert.ok(settled, 'a call was still waiting at the gateway after its client gave up');
  assert.ok(requests.size <= 50);
  for (const [rid, ev] of requests) {
    const denied = ev.find((e) => e.type === 'approval.denied');
    assert.ok(denied && denied.data.withdrawn === true && denied.data.approver === ev[0].agent_id, `${rid}: ${ev.map((e) => e.type)}`);
  }
});
