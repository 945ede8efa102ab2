// Structured logs (docs/operations.md, "Logs"): a real `up` writes one JSON
// object per line on stderr ({ts, level, stage, msg}), librdkafka's own
// lines included, and plain lines with --log-format text. A policy edit
// that does not load is what makes decide log here. Run by ctest as
// Ops.LogsAreOneJsonObjectPerLine.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { Up, waitFor } from '../mcp/harness.mjs';

const policy = 'version: 1\nmode: ask\n';
const refuse = async (up) => {
  // Written beside and renamed over, as an editor saves.
  const p = path.join(up.dir, 'policy.yaml');
  fs.writeFileSync(p + '.new', 'mode: [unclosed <script>\n');
  fs.renameSync(p + '.new', p);
  await waitFor('decide to log the refused policy file', () => /policy file refused/.test(up.stderr));
};

test('every stderr line of up is a JSON object with ts, level, stage and msg', async () => {
  const up = await new Up({ policy }).start();
  try {
    await refuse(up);
    const lines = up.stderr.split('\n').filter((l) => l.length > 0);
    assert.ok(lines.length >= 1);
    for (const line of lines) {
      const j = JSON.parse(line);  // throws on a line that is not JSON
      for (const k of ['ts', 'level', 'stage', 'msg']) assert.ok(k in j, `${k} missing in ${line}`);
      assert.match(j.ts, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
    }
    const refused = lines.map((l) => JSON.parse(l)).find((j) => /policy file refused/.test(j.msg));
    assert.equal(refused.level, 'error');
    assert.equal(refused.stage, 'decide');
  } finally {
    await up.stop();
  }
});

test('--log-format text writes plain lines for people', async () => {
  const up = await new Up({ policy, extraArgs: ['--log-format', 'text'] }).start();
  try {
    await refuse(up);
    const line = up.stderr.split('\n').find((l) => /policy file refused/.test(l));
    assert.match(line, /^tollgate: decide: policy file refused: /);
    assert.throws(() => JSON.parse(line));
  } finally {
    await up.stop();
  }
});
