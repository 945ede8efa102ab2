// GET /metrics per org (issue 28): a real `up`, calls from two orgs, and a
// real Prometheus scraping it twice, once with an org's operator token and
// once with the deployment's admin token. The org's scrape holds that org's
// series and nothing else (no other org, nothing deployment-wide); the
// deployment's holds both orgs (docs/operations.md). Run by ctest as
// Ops.AnOrgsMetricsAreItsOwn.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { spawn, spawnSync } from 'node:child_process';
import { Up, TOLLGATE, cli, waitFor } from '../mcp/harness.mjs';

let up;
let prom;
before(async () => { up = await new Up().start(); });
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

function submit(org, i) {
  const r = spawnSync(TOLLGATE, ['submit', '--data', up.data, '--org', org, '--agent', 'bot', '--session', `m-${org}`,
    '--tool', 'echo', '--args', JSON.stringify({ text: `hi ${i}` }), '--wait'], { encoding: 'utf8' });
  const out = r.stdout.trim();
  return JSON.parse(out.slice(out.lastIndexOf('\n{') + 1));
}

async function scrape(token) {
  const res = await fetch(up.http + '/metrics', { headers: { Authorization: `Bearer ${token}` } });
  assert.equal(res.status, 200);
  return res.text();
}

const samples = (text) => text.split('\n').filter((l) => l && !l.startsWith('#'));

test("an org's operator scrapes its org's series only; the deployment's sees every org", async () => {
  for (let i = 0; i < 2; i++) assert.equal(submit('acme', i).status, 'completed');
  assert.equal(submit('default', 0).status, 'completed');
  const acmeOps = cli(['tokens', 'add', '--data', up.data, '--identity', 'ops', '--org', 'acme', '--role', 'operator']).trim();
  // Another org may use the same identity name (identities are per org).
  const defaultAdmin = cli(['tokens', 'add', '--data', up.data, '--identity', 'ops', '--org', 'default', '--role', 'admin']).trim();

  const acme = await scrape(acmeOps);
  const lint = spawnSync('promtool', ['check', 'metrics'], { input: acme, encoding: 'utf8' });
  assert.equal(lint.status, 0, `promtool check metrics:\n${lint.stdout}${lint.stderr}`);
  assert.ok(samples(acme).length >= 4, acme);
  for (const line of samples(acme)) assert.match(line, /[{,]org="acme"[,}]/, `acme's scrape holds ${line}`);
  assert.match(acme, /^tollgate_requests_total\{outcome="received",org="acme"\} 2$/m);
  assert.doesNotMatch(acme, /tollgate_log_head_seq \d/, 'deployment-wide gauges are not an org\'s');
  assert.match(await scrape(defaultAdmin), /^tollgate_requests_total\{outcome="received",org="default"\} 1$/m);
  const all = await scrape(up.adminToken);
  assert.match(all, /^tollgate_requests_total\{outcome="received",org="acme"\} 2$/m);
  assert.match(all, /^tollgate_requests_total\{outcome="received",org="default"\} 1$/m);
  assert.match(all, /^tollgate_log_head_seq \d+$/m);

  // The same through a real Prometheus: one job per token.
  const port = await freePort();
  const dir = fs.mkdtempSync(path.join(up.dir, 'prom-'));
  const target = new URL(up.http).host;
  const job = (name, token) => [
    `  - job_name: ${name}`,
    '    metrics_path: /metrics',
    `    authorization: {credentials: "${token}"}`,
    `    static_configs: [{targets: ["${target}"]}]`,
  ];
  fs.writeFileSync(path.join(dir, 'prometheus.yml'), [
    'global: {scrape_interval: 1s, evaluation_interval: 1s}',
    'scrape_configs:',
    ...job('tollgate-acme', acmeOps),
    ...job('tollgate-all', up.adminToken),
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
      if (body.status !== 'success') return undefined;
      return body.data.result.length ? Number(body.data.result[0].value[1]) : null;
    } catch { return undefined; }
  };
  for (const j of ['tollgate-acme', 'tollgate-all']) {
    await waitFor(`Prometheus scraping ${j} (${promErr})`, async () => (await query(`up{job="${j}"}`)) === 1, 60000);
  }
  const expect = {
    'sum(tollgate_requests_total{job="tollgate-acme",outcome="received"})': 2,
    'sum(tollgate_requests_total{job="tollgate-all",outcome="received"})': 3,
    'sum(tollgate_executions_total{job="tollgate-acme",tool="echo",code="ok"})': 2,
  };
  for (const [q, want] of Object.entries(expect)) {
    let got = null;
    await waitFor(`${q} = ${want} in Prometheus`, async () => (got = await query(q)) === want, 30000).catch(() => {});
    assert.equal(got, want, q);
  }
  // Nothing of another org, and nothing deployment-wide, was ever scraped with acme's token.
  assert.equal(await query('count({job="tollgate-acme",__name__=~"tollgate_.*",org!="acme"})'), null);
  assert.ok((await query('count({job="tollgate-all",__name__=~"tollgate_.*",org="default"})')) >= 1);
});
