// `up --otlp-endpoint`: one OTLP/HTTP JSON span per tool call, sent to a
// collector stand-in (a node HTTP server on 127.0.0.1 that records what it
// is sent), each span checked against the request's events in the log
// (docs/operations.md, "Trace context"). A collector that is down costs
// nothing but the spans. Run by ctest as Ops.SpansAreExportedAsOtlp.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { spawnSync } from 'node:child_process';
import { Up, TOLLGATE, waitFor } from '../mcp/harness.mjs';

const posts = [];
let collector, up;

before(async () => {
  collector = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => { body += d; });
    req.on('end', () => {
      posts.push({ path: req.url, type: req.headers['content-type'], body: JSON.parse(body) });
      res.setHeader('Content-Type', 'application/json');
      res.end('{}');
    });
  });
  await new Promise((r) => collector.listen(0, '127.0.0.1', r));
  up = await new Up({ extraArgs: ['--otlp-endpoint', `http://127.0.0.1:${collector.address().port}`] }).start();
});
after(async () => {
  await up?.stop();
  collector?.close();
});

function submit(u, tool, args, session, traceparent) {
  const r = spawnSync(TOLLGATE, ['submit', '--data', u.data, '--agent', 'otlp-agent', '--session', session,
    '--tool', tool, '--args', JSON.stringify(args), '--wait',
    ...(traceparent ? ['--traceparent', traceparent] : [])], { encoding: 'utf8' });
  const out = r.stdout.trim();
  return JSON.parse(out.slice(out.lastIndexOf('\n{') + 1));
}

const spans = () => posts.flatMap((p) => p.body.resourceSpans.flatMap((r) => r.scopeSpans.flatMap((s) => s.spans)));
const attrs = (span) => Object.fromEntries(span.attributes.map((a) => [a.key, a.value.stringValue]));
const micros = (iso) => {
  const m = /^(.*T\d\d:\d\d:\d\d)(?:\.(\d+))?Z$/.exec(iso);
  return BigInt(Date.parse(m[1] + 'Z')) * 1000n + BigInt((m[2] ?? '').padEnd(6, '0').slice(0, 6));
};

test('each call is one execute_tool span in its trace, its timeline the log\'s', async () => {
  const tp = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
  const ok = submit(up, 'echo', { text: 'not for the collector' }, 'o1', tp);
  assert.equal(ok.status, 'completed');
  const denied = submit(up, 'read_file', { path: '/etc/shadow' }, 'o2');
  assert.equal(denied.status, 'denied');
  const byCall = await waitFor('both spans at the collector', () => {
    const m = new Map(spans().map((s) => [attrs(s)['gen_ai.tool.call.id'], s]));
    return m.has(ok.request_id) && m.has(denied.request_id) ? m : null;
  });
  for (const p of posts) {
    assert.equal(p.path, '/v1/traces');
    assert.match(p.type, /^application\/json/);
    assert.deepEqual(p.body.resourceSpans[0].resource.attributes,
      [{ key: 'service.name', value: { stringValue: 'tollgate' } }]);
  }

  const s = byCall.get(ok.request_id);
  assert.equal(s.traceId, '0af7651916cd43dd8448eb211c80319c', 'the caller\'s trace');
  assert.equal(s.parentSpanId, 'b7ad6b7169203331', 'under the caller\'s span');
  assert.match(s.spanId, /^[0-9a-f]{16}$/);
  assert.equal(s.name, 'execute_tool echo');
  assert.equal(s.kind, 1);
  assert.deepEqual(s.status, { code: 1 });
  assert.deepEqual(attrs(s), {
    'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'echo', 'gen_ai.tool.call.id': ok.request_id,
    'gen_ai.agent.id': 'otlp-agent', 'gen_ai.conversation.id': 'o1', 'tollgate.org_id': 'default',
    'tollgate.outcome': 'completed', 'tollgate.verdict': 'allow',
  });
  const events = await up.events({ request: ok.request_id });
  assert.deepEqual(s.events.map((e) => e.name), events.map((e) => e.type));
  assert.deepEqual(s.events.map((e) => BigInt(e.timeUnixNano)), events.map((e) => micros(e.time) * 1000n));
  assert.equal(BigInt(s.startTimeUnixNano), micros(events[0].time) * 1000n);
  assert.equal(BigInt(s.endTimeUnixNano), micros(events.at(-1).time) * 1000n);

  const d = byCall.get(denied.request_id);
  const dEvents = await up.events({ request: denied.request_id });
  assert.equal(`00-${d.traceId}-${d.parentSpanId}-01`, dEvents[0].data.traceparent, 'tollgate\'s own trace');
  assert.deepEqual(d.status, { code: 2, message: 'E_POLICY_DENIED' });
  assert.equal(attrs(d)['error.type'], 'E_POLICY_DENIED');
  assert.equal(attrs(d)['tollgate.outcome'], 'denied');
  assert.deepEqual(d.events.map((e) => e.name), ['request.received', 'decision.made']);

  const wire = JSON.stringify(posts);
  assert.ok(!wire.includes('not for the collector') && !wire.includes('/etc/shadow'), 'no arguments are exported');
  const metrics = await (await fetch(up.http + '/metrics', { headers: { Authorization: `Bearer ${up.adminToken}` } })).text();
  assert.match(metrics, /^tollgate_otlp_spans_total\{outcome="ended"\} [2-9]\d*$/m);
});

test('a collector that is down costs the spans, never a call', async () => {
  const port = await new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port: p } = s.address();
      s.close(() => resolve(p));
    });
  });
  const down = await new Up({ extraArgs: ['--otlp-endpoint', `http://127.0.0.1:${port}/v1/traces`] }).start();
  try {
    assert.equal(submit(down, 'echo', { text: 'x' }, 'd1').status, 'completed');
    await waitFor('the batch given up after its retries', async () => {
      const text = await (await fetch(down.http + '/metrics', { headers: { Authorization: `Bearer ${down.adminToken}` } })).text();
      return /^tollgate_otlp_batches_total\{outcome="failed"\} 1$/m.test(text);
    }, 30000);
    assert.equal(submit(down, 'echo', { text: 'y' }, 'd1').status, 'completed', 'still serving');
  } finally {
    await down.stop();
  }
});
