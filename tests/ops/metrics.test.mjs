// GET /metrics scraped by a real Prometheus (Debian's package; a loopback
// scrape config written here) after a run of known size: the request,
// decision and execution counters Prometheus stores equal what was sent,
// and `promtool check metrics` passes on the exposition (docs/operations.md).
// Run by ctest as Ops.PrometheusScrapesWhatWasSent.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { spawn, spawnSync } from 'node:child_process';
import { Up, TOLLGATE, cli, waitFor } from '../mcp/harness.mjs';

let up;
let prom;
// The default policy with one more budget, whose share the run fills to 6/8.
const policy = fs.readFileSync(new URL('../../config/default-policy.yaml', import.meta.url), 'utf8')
  .replace(/^budgets:\n/m, 'budgets:\n  - {name: metrics-session-calls, scope: session, window: session, max_calls: 8}\n');
before(async () => { up = await new Up({ policy }).start(); });
after(async () => {
  prom?.kill('SIGKILL');
  await up?.stop();
});

const freePort = () => new Promise((resolve) => {
  const s = net.createServer().listen(0, '127.0.0.1', () => {
    const { port } = s.address();
    s.close(() => resolve(port));
  });
});

// `submit --wait` exits 1 for a call that did not complete; the result,
// printed last (indented), is there either way.
function submit(tool, args, session) {
  const r = spawnSync(TOLLGATE, ['submit', '--data', up.data, '--agent', 'metrics-agent', '--session', session,
    '--tool', tool, '--args', JSON.stringify(args), '--wait'], { encoding: 'utf8' });
  const out = r.stdout.trim();
  return JSON.parse(out.slice(out.lastIndexOf('\n{') + 1));
}

async function scrape(token) {
  const res = await fetch(up.http + '/metrics', { headers: token ? { Authorization: `Bearer ${token}` } : {} });
  return { status: res.status, type: res.headers.get('content-type'), text: await res.text() };
}

test('only an operator or admin token reads /metrics', async () => {
  assert.equal((await scrape()).status, 401);
  const approver = cli(['tokens', 'add', '--data', up.data, '--identity', 'ann', '--org', 'default', '--role', 'approver']).trim();
  assert.equal((await scrape(approver)).status, 403);
  const operator = cli(['tokens', 'add', '--data', up.data, '--identity', 'ops', '--org', '*', '--role', 'operator']).trim();
  const r = await scrape(operator);
  assert.equal(r.status, 200);
  assert.match(r.type, /^text\/plain; version=0\.0\.4/);
});

test('Prometheus stores the counters of a run of known size', async () => {
  const allowed = 6;
  const denied = 3;
  for (let i = 0; i < allowed; i++) assert.equal(submit('echo', { text: `hi ${i}` }, 'm1').status, 'completed');
  for (let i = 0; i < denied; i++) assert.equal(submit('read_file', { path: '/etc/shadow' }, 'm2').status, 'denied');

  const text = (await scrape(up.adminToken)).text;
  const lint = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
  assert.equal(lint.status, 0, `promtool check metrics:\n${lint.stdout}${lint.stderr}`);
  assert.match(text, /^tollgate_decisions_total\{verdict="allow",rule_kind="[a-z.]+",org="default"\} \d+$/m);

  const port = await freePort();
  const dir = fs.mkdtempSync(path.join(up.dir, 'prom-'));
  const target = new URL(up.http).host;
  fs.writeFileSync(path.join(dir, 'prometheus.yml'), [
    'global: {scrape_interval: 1s, evaluation_interval: 1s}',
    'scrape_configs:',
    '  - job_name: tollgate',
    '    metrics_path: /metrics',
    `    authorization: {credentials: "${up.adminToken}"}`,
    `    static_configs: [{targets: ["${target}"]}]`,
    '',
  ].join('\n'));
  prom = spawn('prometheus', [
    `--config.file=${path.join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${path.join(dir, 'data')}`,
    `--web.listen-address=127.0.0.1:${port}`, '--log.level=warn',
  ], { stdio: ['ignore', 'ignore', 'pipe'] });
  let promErr = '';
  prom.stderr.on('data', (d) => { promErr += d; });

  const query = async (q) => {
    try {
      const res = await fetch(`http://127.0.0.1:${port}/api/v1/query?` + new URLSearchParams({ query: q }));
      const body = await res.json();
      return body.data?.result?.[0] ? Number(body.data.result[0].value[1]) : null;
    } catch { return null; }
  };
  await waitFor(`Prometheus scraping tollgate (${promErr})`, async () => (await query('up{job="tollgate"}')) === 1, 60000);
  const expect = {
    'sum(tollgate_requests_total{outcome="received"})': allowed + denied,
    'sum(tollgate_decisions_total{verdict="allow"})': allowed,
    'sum(tollgate_decisions_total{verdict="deny"})': denied,
    'sum(tollgate_executions_total{tool="echo",code="ok"})': allowed,
    'sum(tollgate_request_duration_seconds_count{outcome="completed"})': allowed,
    'sum(tollgate_request_duration_seconds_count{outcome="denied"})': denied,
  };
  // Each scrape sees the finished run: wait for the value, then say what
  // Prometheus holds if it never got there.
  for (const [q, want] of Object.entries(expect)) {
    let got = null;
    await waitFor(`${q} = ${want} in Prometheus`, async () => (got = await query(q)) === want, 30000).catch(() => {});
    assert.equal(got, want, q);
  }
  assert.ok((await query('tollgate_log_head_seq')) >= 2 * allowed + denied);
  assert.ok((await query('sum(tollgate_stage_batches_total{stage="decide"})')) >= 1);
  // Per-batch time histograms: every committed batch of decide is in them.
  const batches = await query('sum(tollgate_stage_batches_total{stage="decide"})');
  assert.equal(await query('sum(tollgate_stage_process_seconds_count{stage="decide"})'), batches);
  assert.ok((await query('sum(tollgate_stage_append_seconds_bucket{stage="decide",le="+Inf"})')) >= 1);
  // Every request was answered: no stage has input left to read.
  assert.equal(await query('sum(tollgate_consumer_lag_messages{stage="decide"})'), 0);
  // The log's own timings and size.
  assert.ok((await query('tollgate_log_write_seconds_count')) >= 1);
  assert.ok((await query('tollgate_log_fsync_seconds_count')) >= 1);
  assert.ok((await query('tollgate_log_size_bytes')) > 0);
  // Execute's pool is idle once every call is answered.
  assert.equal(await query('tollgate_stage_workers_busy{stage="execute"}'), 0);
  assert.equal(await query('tollgate_stage_workers_queued{stage="execute"}'), 0);
  // echo costs nothing; the family is there for the org all the same.
  assert.equal(await query('sum(tollgate_cost_usd_total{org="default"})'), 0);
  // Session m1 made 6 of its 8 calls; m2's denied calls count for nothing.
  assert.equal(await query('tollgate_budget_usage_ratio{org="default",budget="metrics-session-calls"}'), 0.75);
  assert.equal(await query('tollgate_budget_usage_ratio{org="default",budget="session-usd"}'), 0);
});
