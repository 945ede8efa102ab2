// The audit view "with proofs" (issue 32), for console.test.mjs: a
// checkpoint is signed, then one more call is made; the view shows the
// checkpoint it was proven against (origin, size, root, as
// GET /v1/audit/checkpoint serves it), marks each event proven or not
// covered yet, and its downloads verify offline with
// `tollgate audit verify-proof`. Its calls go to a session of their own.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { TOLLGATE, waitFor } from '../mcp/harness.mjs';

// The text of every blob the page turns into a download, kept in the page.
const CAPTURE = `window.__saved = [];
  const make = URL.createObjectURL.bind(URL);
  URL.createObjectURL = (b) => { b.text().then((t) => window.__saved.push(t)); return make(b); };
  return true;`;

const SESSION = 'console-proofs';

// An echo call in SESSION (whatever its verdict, its events are logged); its
// request id, once the log holds its decision.
async function call(up, text) {
  const r = spawnSync(TOLLGATE, ['submit', '--data', up.data, '--org', 'default', '--agent', 'console-agent',
    '--session', SESSION, '--tool', 'echo', '--args', JSON.stringify({ text })], { encoding: 'utf8' });
  const rid = JSON.parse(r.stdout.trim().split('\n').pop()).request_id;
  await waitFor(`the decision of ${rid}`, async () => (await up.api(`/v1/audit?${new URLSearchParams({ org: 'default', request: rid })}`))
    .body.events.some((e) => e.type === 'decision.made'));
  return rid;
}

// Needs an auditor of org "default" logged in.
export async function checkProofsView({ browser, up }) {
  await call(up, 'before the checkpoint');
  const fresh = await up.api('/v1/audit/checkpoint?fresh=1');
  assert.notEqual(fresh.status, 404, 'up signs checkpoints');
  await call(up, 'after the checkpoint');  // not covered by it

  await browser.go(`${up.http}/#/audit?session=${SESSION}&desc=true&proofs=1`);
  const shown = await browser.until('the checkpoint', "const s = document.querySelector('section.proofs'); return s && !s.hidden && s.querySelector('dl') && s.textContent");
  // The checkpoint the page was proven against (up may have signed a newer
  // one meanwhile, so it is read off the page), as the API serves it.
  const size = await browser.run("return document.querySelector('section.proofs [data-size]').dataset.size");
  const res = await fetch(`${up.http}/v1/audit/checkpoint?size=${size}`, { headers: { Authorization: `Bearer ${up.adminToken}` } });
  assert.equal(res.status, 200);
  const note = await res.text();
  const [origin, noteSize, root] = note.split('\n');
  assert.equal(noteSize, size);
  assert.ok(shown.includes(origin) && shown.includes(root), shown);
  const marks = await browser.until('the marks', "const m = [...document.querySelectorAll('table.events tbody td.proof')].map((td) => td.textContent); return m.length && m");
  const rows = await browser.run("return [...document.querySelectorAll('table.events tbody tr')].map((r) => Number(r.dataset.seq))");
  assert.equal(rows.length, marks.length);
  rows.forEach((seq, i) => assert.equal(marks[i], seq <= Number(size) ? 'proven ✓' : 'not covered yet', `seq ${seq}`));
  assert.ok(marks.includes('proven ✓'), `marks: ${marks}`);

  await browser.run(CAPTURE);
  await browser.click(await browser.find('section.proofs [data-action=proofs]'));
  await browser.click(await browser.find('section.proofs [data-action=checkpoint]'));
  const saved = await browser.until('both downloads', 'return window.__saved.length === 2 && window.__saved');
  const records = saved.find((t) => t.startsWith('{'));
  const checkpoint = saved.find((t) => !t.startsWith('{'));
  assert.equal(checkpoint, note);
  const recordsFile = path.join(up.dir, 'proofs.jsonl');
  const checkpointFile = path.join(up.dir, 'checkpoint.txt');
  fs.writeFileSync(recordsFile, records);
  fs.writeFileSync(checkpointFile, checkpoint);
  const key = (await up.api('/v1/audit/checkpoint-key')).body.verifier_key;
  const verify = () => spawnSync(TOLLGATE, ['audit', 'verify-proof', '--key', key, '--checkpoint', checkpointFile,
    '--record', recordsFile], { encoding: 'utf8' });
  const v = verify();
  assert.equal(v.status, 0, v.stdout + v.stderr);
  assert.equal(records.trim().split('\n').length, marks.filter((m) => m === 'proven ✓').length);
  // One changed byte in a record is found.
  fs.writeFileSync(recordsFile, records.replace('console-agent', 'console-agenT'));
  assert.equal(verify().status, 1);
}
