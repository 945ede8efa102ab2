// `tollgate submit --traceparent` against a real `up`: the caller's trace
// is on every event of its request and on the result; a malformed one is
// refused with a warning and tollgate's own trace is recorded instead
// (docs/operations.md, "Trace context"). Run by ctest as
// Ops.SubmitContinuesTheCallersTrace.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { Up, TOLLGATE } from '../mcp/harness.mjs';

let up;
before(async () => { up = await new Up().start(); });
after(async () => { await up?.stop(); });

const W3C = /^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/;

function submit(session, traceparent) {
  const r = spawnSync(TOLLGATE, ['submit', '--data', up.data, '--agent', 'trace-agent', '--session', session,
    '--tool', 'echo', '--args', '{"text":"hi"}', '--traceparent', traceparent, '--wait'], { encoding: 'utf8' });
  const out = r.stdout.trim();
  return { result: JSON.parse(out.slice(out.lastIndexOf('\n{') + 1)), stderr: r.stderr };
}

test('the caller\'s traceparent is on every event of the request and on its result', async () => {
  const tp = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
  const { result, stderr } = submit('t1', tp);
  assert.equal(result.status, 'completed', JSON.stringify(result));
  assert.equal(stderr.includes('not a W3C'), false);
  const events = await up.events({ request: result.request_id });
  assert.ok(events.length >= 4, JSON.stringify(events.map((e) => e.type)));
  for (const e of events) assert.equal(e.data.traceparent, tp, e.type);
});

test('a malformed traceparent is refused with a warning, and tollgate starts its own', async () => {
  const bad = '00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01';  // upper case
  const { result, stderr } = submit('t2', bad);
  assert.equal(result.status, 'completed');
  assert.match(stderr, /not a W3C version-00 traceparent/);
  const events = await up.events({ request: result.request_id });
  const recorded = new Set(events.map((e) => e.data.traceparent));
  assert.equal(recorded.size, 1, [...recorded].join(' '));
  const [own] = recorded;
  assert.match(own, W3C);
  assert.notEqual(own.toLowerCase(), bad.toLowerCase());
});
