// The console's Report view (issue 32), for console.test.mjs: the calls of
// console-s1 to write_file (one approved by alice, one denied with a
// comment, by the earlier tests) are one row each with their approvers,
// and "Download CSV" saves a file that Python's csv module reads back with
// the same approvers.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

// The text of every blob the page turns into a download, kept in the page
// (an earlier test may have wrapped createObjectURL already: each blob can
// then be saved twice, so the first is read).
const CAPTURE = `window.__saved = [];
  const make = URL.createObjectURL.bind(URL);
  URL.createObjectURL = (b) => { b.text().then((t) => window.__saved.push(t)); return make(b); };
  return true;`;

// Needs an auditor of org "default" logged in, and the approvals tests run.
export async function checkReportView({ browser, up }) {
  await browser.go(`${up.http}/#/report?session=console-s1&tool=write_file`);
  const cells = await browser.until('the rows', "const r = [...document.querySelectorAll('table.report tbody tr')]; return r.length >= 2 && r.map((tr) => tr.querySelector('td.approvers').textContent)");
  assert.ok(cells.some((c) => c.includes('alice') && c.includes('granted')), `approvers: ${cells}`);
  assert.ok(cells.some((c) => c.includes('denied') && c.includes('not today')), `approvers: ${cells}`);

  await browser.run(CAPTURE);
  await browser.click(await browser.find('[data-action=csv]'));
  const [csv] = await browser.until('the download', 'return window.__saved.length >= 1 && window.__saved');
  const file = path.join(up.dir, 'report.csv');
  fs.writeFileSync(file, csv);
  // A spreadsheet-style reader: Python's csv module, header row as keys.
  const py = spawnSync('/usr/bin/python3', ['-c', `
import csv, json, sys
with open(sys.argv[1], newline='') as f:
    print(json.dumps(list(csv.DictReader(f))))`, file], { encoding: 'utf8' });
  assert.equal(py.status, 0, py.stderr);
  const rows = JSON.parse(py.stdout);
  assert.equal(rows.length, cells.length);
  for (const r of rows) {
    assert.equal(r.session, 'console-s1');
    assert.equal(r.tool, 'write_file');
  }
  assert.ok(rows.some((r) => r.approvers.includes('alice')), JSON.stringify(rows));
  assert.ok(rows.some((r) => r.approvers.includes('not today')), JSON.stringify(rows));
}
