// The web console in real headless Chromium (Debian's chromium and
// chromedriver) against a real `tollgate up`: an approver clears and
// denies write_file calls, an auditor searches the log, opens an event and
// a session timeline and runs a what-if; agent-supplied HTML stays text;
// a token of one org sees nothing of another. With TOLLGATE_SCREENSHOTS=DIR
// it also writes the screenshots shown in the README.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { Up, cli, waitFor, TOLLGATE } from '../mcp/harness.mjs';
import { Browser } from './webdriver.mjs';
import { checkProofsView } from './audit_proofs.mjs';
import { checkReportView } from './report_view.mjs';

const SHOTS = process.env.TOLLGATE_SCREENSHOTS;

// A screenshot of the whole view (a taller window, from the top).
async function shot(name, height = 1000) {
  if (!SHOTS) return;
  await browser.setSize(1280, height);
  await browser.run('window.scrollTo(0, 0); return true;');
  await browser.screenshot(path.join(SHOTS, name));
  await browser.setSize(1280, 900);
}
let up;
let browser;
let tokenA;   // approver + auditor of org "default"
let tokenA2;  // a second approver of "default"
let tokenB;   // approver + auditor of org "other"

function submit(org, session, tool, args) {
  const r = spawnSync(TOLLGATE, ['submit', '--data', up.data, '--org', org, '--agent', 'console-agent',
    '--session', session, '--tool', tool, '--args', JSON.stringify(args)], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout.trim().split('\n').pop()).request_id;
}

async function pendingIn(org, rid) {
  const r = await up.api(`/v1/approvals?org=${org}`);
  return r.body.approvals.some((p) => p.request_id === rid);
}

async function eventsOf(org, rid) {
  return (await up.api(`/v1/audit?${new URLSearchParams({ org, request: rid })}`)).body.events;
}

async function login(token) {
  await browser.go('about:blank');
  await browser.go(`${up.http}/#/login`);
  const input = await browser.find('input[name=token]');
  await browser.type(input, token);
  await browser.click(await browser.find('form.login button[type=submit]'));
  await browser.until('the inbox after login', "return location.hash === '#/inbox' && document.querySelector('#who').textContent.length > 0");
}

const cardOf = (rid) => `document.querySelector('li.approval[data-request-id="${rid}"]')`;

before(async () => {
  up = await new Up().start();
  const add = (identity, org, ...roles) => cli(['tokens', 'add', '--data', up.data, '--identity', identity, '--org', org,
    ...roles.flatMap((r) => ['--role', r])]).trim();
  tokenA = add('alice', 'default', 'approver', 'auditor');
  tokenA2 = add('bob', 'default', 'approver');
  tokenB = add('mallory', 'other', 'approver', 'auditor');
  browser = await Browser.start();
  if (SHOTS) fs.mkdirSync(SHOTS, { recursive: true });
});

after(async () => {
  if (browser) await browser.quit();
  if (up) await up.stop();
});

test('the console is served with a strict policy: no inline script, nothing from elsewhere', async () => {
  const res = await fetch(`${up.http}/`);
  assert.equal(res.status, 200);
  const csp = res.headers.get('content-security-policy');
  assert.match(csp, /default-src 'none'/);
  assert.match(csp, /script-src 'self'(;|$)/);
  assert.match(csp, /frame-ancestors 'none'/);
  assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
  const html = await res.text();
  assert.doesNotMatch(html, /<script(?![^>]*\bsrc=)/, 'no inline script');
  assert.doesNotMatch(html, /https?:\/\//, 'nothing loaded from another origin');
  const js = await fetch(`${up.http}/console/app.js`);
  assert.match(js.headers.get('content-type'), /javascript/);
  assert.equal((await fetch(`${up.http}/console/nope.js`)).status, 404);
});

test('the console source never parses strings as HTML or code', () => {
  const dir = path.join(import.meta.dirname, '../../console');
  for (const f of fs.readdirSync(dir).filter((n) => n.endsWith('.js'))) {
    const src = fs.readFileSync(path.join(dir, f), 'utf8');
    for (const sink of ['innerHTML', 'outerHTML', 'insertAdjacentHTML', 'document.write', 'eval(', 'new Function']) {
      assert.ok(!src.includes(sink), `${f} uses ${sink}`);
    }
  }
});

test('a wrong token is refused at login with a clear message', async () => {
  await browser.go(`${up.http}/#/login`);
  await browser.type(await browser.find('input[name=token]'), 'not-a-token');
  await browser.click(await browser.find('form.login button[type=submit]'));
  const msg = await browser.until('the refusal', "const n = document.querySelector('.notice.error'); return n && n.textContent");
  assert.match(msg, /unknown, expired or revoked/);
  assert.equal(await browser.run("return sessionStorage.getItem('tollgate.token')"), null);
});

test('an approver sees a pending write_file, approves it, and it leaves the inbox and completes', async () => {
  await login(tokenA);
  const key = 'sk-proj-AAAAbbbbCCCCddddEEEE1234';
  // A secret inside an argument (write_file takes path and content only).
  const rid = submit('default', 'console-s1', 'write_file', { path: 'notes/a.txt', content: `hello ${key}` });
  await browser.until('the card', `return ${cardOf(rid)}`);
  const text = await browser.run(`return ${cardOf(rid)}.textContent`);
  assert.ok(!text.includes(key), 'a secret in the arguments is not shown');
  assert.match(text, /\[REDACTED\]/);
  assert.match(text, /secrets redacted/);
  assert.match(text, /write_file/);
  assert.match(text, /notes\/a\.txt/);
  assert.match(text, /console-agent/);
  assert.match(text, /0 of 1/);
  // "Approve always" says the rule the approve stage would add: this exact
  // call (write_file's path), not the whole tool.
  const always = await browser.run(`return ${cardOf(rid)}.querySelector('[data-action=approve-always]').title`);
  assert.match(always, /allow rule for agent console-agent matching this exact call only: write_file:notes\/a\.txt\./);
  assert.match(always, /other arguments still asks/);
  assert.doesNotMatch(always, /allow this tool/);
  await shot('console-inbox.png', 760);
  await browser.run(`${cardOf(rid)}.querySelector('[data-action=approve-once]').click(); return true;`);
  await browser.until('the card to leave', `return !${cardOf(rid)}`);
  await waitFor('the request to complete', async () => (await eventsOf('default', rid)).some((e) => e.type === 'execution.completed'));
  const granted = (await eventsOf('default', rid)).find((e) => e.type === 'approval.granted');
  assert.equal(granted.data.approver, 'alice');
});

test('an approver denies another with a comment that the log keeps', async () => {
  const rid = submit('default', 'console-s1', 'write_file', { path: 'notes/b.txt', content: 'no' });
  await browser.until('the card', `return ${cardOf(rid)}`);
  const comment = await browser.run(`return ${cardOf(rid)}.querySelector('textarea[name=comment]')`);
  await browser.type(comment[Object.keys(comment)[0]], 'not today');
  await browser.run(`${cardOf(rid)}.querySelector('[data-action=deny]').click(); return true;`);
  await browser.until('the card to leave', `return !${cardOf(rid)}`);
  const denied = await waitFor('approval.denied', async () => (await eventsOf('default', rid)).find((e) => e.type === 'approval.denied'));
  assert.equal(denied.data.comment, 'not today');
});

test('a decision made elsewhere leaves every open inbox', async () => {
  const rid = submit('default', 'console-s2', 'write_file', { path: 'notes/c.txt', content: 'elsewhere' });
  await browser.until('the card', `return ${cardOf(rid)}`);
  const r = await up.api(`/v1/approvals/${rid}`, { method: 'POST', token: tokenA2, body: { decision: 'approve' } });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  await browser.until('the card to leave', `return !${cardOf(rid)}`);
});

test('arguments holding HTML and script are shown as text and no script runs', async () => {
  const evil = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>';
  const rid = submit('default', 'console-s3', 'write_file', { path: `x"><svg onload=window.__pwned=3>`, content: `${evil} javascript:window.__pwned=4` });
  await browser.until('the card', `return ${cardOf(rid)}`);
  const card = await browser.run(`const c = ${cardOf(rid)}; return { text: c.textContent, html: c.querySelectorAll('script, img, svg, iframe, [onerror], [onload]').length, links: [...c.querySelectorAll('a')].map((a) => a.getAttribute('href')) };`);
  // As JSON text: the quotes are escaped, the markup is not interpreted.
  assert.ok(card.text.includes(JSON.stringify(evil).slice(1, -1)), 'the arguments appear as the agent wrote them');
  assert.ok(card.text.includes('<script>window.__pwned=2</script>'));
  assert.equal(card.html, 0, 'no element was made from the arguments');
  assert.ok(card.links.every((h) => h.startsWith('#/')), `links: ${card.links}`);
  await browser.run(`${cardOf(rid)}.querySelector('[data-action=deny]').click(); return true;`);
  await browser.until('the card to leave', `return !${cardOf(rid)}`);
  // Its session timeline and the audit detail show the same text, still inert.
  await browser.go(`${up.http}/#/session/console-s3`);
  await browser.until('the timeline', "return document.querySelectorAll('li.step').length === 1");
  await browser.run("document.querySelectorAll('details').forEach((d) => d.open = true); return true;");
  assert.equal(await browser.run('return window.__pwned === undefined'), true, 'no agent script ran');
  assert.equal(await browser.run("return document.querySelectorAll('main script, main img, main svg').length"), 0);
});

test('an auditor searches the log by session and opens an event with its hash and place in the chain', async () => {
  await browser.go(`${up.http}/#/audit`);
  const session = await browser.find('input[name=session]');
  await browser.type(session, 'console-s1');
  await browser.click(await browser.find('form.filters button[type=submit]'));
  await browser.until('results', "return location.hash.includes('session=console-s1') && document.querySelectorAll('table.events tbody tr').length > 0");
  const rows = await browser.run("return [...document.querySelectorAll('table.events tbody tr')].map((r) => r.children[4].textContent)");
  assert.ok(rows.every((s) => s === 'console-s1'), `sessions: ${rows}`);
  const expected = (await up.api('/v1/audit?session=console-s1&desc=true&limit=1')).body.events[0];
  await browser.run("document.querySelector('table.events tbody tr button').click(); return true;");
  const detail = await browser.until('the detail', "const d = document.querySelector('section.detail'); return !d.hidden && d.textContent");
  assert.ok(detail.includes(expected.hash), 'the detail shows the event hash');
  assert.ok(detail.includes(expected.prev_hash));
  assert.match(detail, new RegExp(`seq ${expected.seq} of \\d+`));
  await shot('console-audit.png', 1500);
});

test('the export of a filter verifies offline', async () => {
  const res = await fetch(`${up.http}/v1/audit/export?session=console-s1`, { headers: { Authorization: `Bearer ${tokenA}` } });
  assert.equal(res.status, 200);
  const file = path.join(up.dir, 'export.jsonl');
  fs.writeFileSync(file, await res.text());
  const v = spawnSync(TOLLGATE, ['audit', 'verify', '--file', file], { encoding: 'utf8' });
  assert.equal(v.status, 0, v.stdout + v.stderr);
  assert.match(v.stdout, /SELECTION: \d+ events/);
  // One changed byte in a record is found.
  const lines = fs.readFileSync(file, 'utf8').split('\n');
  lines[1] = lines[1].replace('console-agent', 'console-agenT');
  fs.writeFileSync(file, lines.join('\n'));
  assert.equal(spawnSync(TOLLGATE, ['audit', 'verify', '--file', file]).status, 1);
  // The button in the page asks for the same file.
  await browser.click(await browser.find('[data-action=export]'));
  await browser.until('the export to finish', "return document.body.textContent.includes('Exported.')");
});


test('the audit view with proofs shows its checkpoint, marks each event, and its downloads verify offline', () => checkProofsView({ browser, up }));
test('the report view shows each call with its approvers, and its CSV reads back in a spreadsheet parser', () => checkReportView({ browser, up }));
test('a session timeline shows the requests, their decisions and approvals, and that it verifies', async () => {
  await browser.go(`${up.http}/#/session/console-s1`);
  await browser.until('two requests', "return document.querySelectorAll('li.step').length === 2");
  const steps = await browser.run("return [...document.querySelectorAll('li.step')].map((s) => s.textContent)");
  assert.match(steps[0], /granted by alice/);
  assert.match(steps[0], /succeeded/);
  assert.match(steps[1], /denied by alice/);
  assert.match(steps[1], /not today/);
  const verify = await browser.until('the verification', "const v = document.querySelector('section.verify h2'); return v && v.textContent.includes('clean') && v.textContent");
  assert.match(verify, /clean/);
});

test('the what-if box\'s placeholder is a policy that loads', async () => {
  const example = await browser.run("return document.querySelector('textarea[name=policy]').placeholder");
  const file = path.join(up.dir, 'placeholder.yaml');
  fs.writeFileSync(file, example);
  const check = spawnSync(TOLLGATE, ['policy', 'check', file], { encoding: 'utf8' });
  assert.equal(check.status, 0, `tollgate policy check: ${check.stdout}${check.stderr}`);
  const res = await fetch(`${up.http}/v1/replay/sessions/console-s1/what-if`, {
    method: 'POST', headers: { Authorization: `Bearer ${tokenA}`, 'Content-Type': 'text/plain' }, body: example });
  assert.equal(res.status, 200, await res.text());
});

test('a what-if that denies write_file flips the approved call, and marks it', async () => {
  const policy = fs.readFileSync(path.join(import.meta.dirname, '../../config/default-policy.yaml'), 'utf8')
    .replace(/^deny:\n/m, 'deny:\n  - "builtin:write_file"\n');
  const area = await browser.find('textarea[name=policy]');
  await browser.run('arguments[0].value = arguments[1]; return true;', { 'element-6066-11e4-a52e-4f735466cecf': area }, policy);
  await browser.click(await browser.find('form.what-if button[type=submit]'));
  const out = await browser.until('the what-if', "const t = document.querySelector('table.changes'); return t && t.textContent");
  assert.match(out, /write_file/);
  assert.match(out, /ask/);
  assert.match(out, /deny/);
  assert.equal(await browser.run("return document.querySelectorAll('li.step.flipped').length"), 2);
  await shot('console-session.png', 1900);
});

test('a token of another org sees none of this org\'s approvals, events or sessions', async () => {
  const ridA = submit('default', 'console-s4', 'write_file', { path: 'notes/d.txt', content: 'org A' });
  await waitFor('pending in default', () => pendingIn('default', ridA));
  await login(tokenB);
  const ridB = submit('other', 'console-b1', 'write_file', { path: 'notes/e.txt', content: 'org B' });
  await browser.until('org B\'s card', `return ${cardOf(ridB)}`);
  assert.equal(await browser.run(`return ${cardOf(ridA)}`), null, 'org A\'s approval is not in org B\'s inbox');
  await browser.go(`${up.http}/#/audit?session=console-s1`);
  await browser.until('the empty result', "return document.body.textContent.includes('No event matches these filters.')");
  await browser.go(`${up.http}/#/audit`);
  await browser.until('results', "return document.querySelectorAll('table.events tbody tr').length > 0");
  const sessions = await browser.run("return [...document.querySelectorAll('table.events tbody tr')].map((r) => r.children[4].textContent)");
  assert.ok(!sessions.some((s) => s.startsWith('console-s')), `org B sees: ${sessions}`);
  await browser.go(`${up.http}/#/session/console-s1`);
  await browser.until('not found', "return document.body.textContent.includes('No session \"console-s1\" in your org.')");
  await browser.go(`${up.http}/#/sessions`);
  await browser.until('the sessions list', "return document.querySelector('main table') || document.body.textContent.includes('No session')");
  assert.ok(!(await browser.run('return document.querySelector("main").textContent')).includes('console-s1'));
  const exp = await (await fetch(`${up.http}/v1/audit/export?session=console-s1`, { headers: { Authorization: `Bearer ${tokenB}` } })).text();
  assert.equal(exp.split('\n').filter(Boolean).length, 2, 'an empty selection: header and end line');
});

test('a revoked token is told so on the next poll', async () => {
  const creds = (await up.api('/v1/credentials?org=other&kind=token')).body.credentials;
  const mine = creds.find((c) => c.identity === 'mallory');
  await browser.go(`${up.http}/#/inbox`);
  await browser.until('the inbox', "return document.querySelector('ul.cards')");
  assert.equal((await up.api(`/v1/credentials/${mine.key_id}`, { method: 'DELETE' })).status, 200);
  const msg = await browser.until('the expired notice', "return document.querySelector('form.login .notice.error')?.textContent");
  assert.match(msg, /refused/);
});

test('the inbox is usable at a phone\'s width', async () => {
  await login(tokenA);
  await browser.setSize(400, 900);
  await browser.until('a card', "return document.querySelector('li.approval')");
  const overflow = await browser.run('return document.documentElement.scrollWidth - document.documentElement.clientWidth');
  assert.ok(overflow <= 0, `the page is ${overflow}px wider than the screen`);
  await browser.setSize(1280, 900);
});
