// The compliance report (docs/compliance_report.md): one row per call with
// its decision, approvers, outcome and cost, from GET /v1/audit/report.
// The filters live in the URL ("#/report?...") like the audit search's;
// "Download CSV" saves the same rows as the CSV the CLI writes (with each
// row's inclusion proofs when asked). Every cell is agent-supplied text and
// is shown as text (dom.js's h()).
import { download, explain } from './api.js';
import { badge, field, h, notice, toLocal, toUtc, verdictBadge, viewLink, when } from './dom.js';

const TEXT_FILTERS = [['agent', 'Agent'], ['session', 'Session'], ['tool', 'Tool (an alias counts under the tool it expands to)']];
const API_FILTERS = ['org', 'agent', 'session', 'tool', 'verdict', 'since', 'until'];

// The report's query string for the filters in `params`.
export function reportQuery(params, format, proofs) {
  const q = new URLSearchParams();
  for (const k of API_FILTERS) if (params.get(k)) q.set(k, params.get(k));
  q.set('format', format);
  if (proofs) q.set('proofs', '1');
  return q.toString();
}

// JSON lines as rows; a line that is not JSON is skipped (the server
// writes one object a line).
export function parseRows(text) {
  const rows = [];
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    try { rows.push(JSON.parse(line)); } catch (e) { /* not a row */ }
  }
  return rows;
}

function filterForm(me, params) {
  const inputs = {};
  const fields = [];
  if (me.org_id === '*') {
    inputs.org = h('input', { name: 'org', value: params.get('org') || '', autocomplete: 'off' });
    fields.push(field('Org', inputs.org));
  }
  for (const [k, label] of TEXT_FILTERS) {
    inputs[k] = h('input', { name: k, value: params.get(k) || '', autocomplete: 'off' });
    fields.push(field(label, inputs[k]));
  }
  inputs.verdict = h('select', { name: 'verdict' }, ['', 'allow', 'deny', 'ask'].map((v) =>
    h('option', { value: v, selected: (params.get('verdict') || '') === v }, v || 'any')));
  inputs.since = h('input', { type: 'datetime-local', name: 'since', value: params.get('since') ? toLocal(params.get('since')) : '' });
  inputs.until = h('input', { type: 'datetime-local', name: 'until', value: params.get('until') ? toLocal(params.get('until')) : '' });
  inputs.proofs = h('input', { type: 'checkbox', name: 'proofs', id: 'r-proofs', checked: params.get('proofs') === '1' });
  fields.push(field('Verdict', inputs.verdict), field('From (your time)', inputs.since), field('Until (your time)', inputs.until),
    h('div', { class: 'field check' }, inputs.proofs, h('label', { for: 'r-proofs' }, 'Proofs in the download')));
  const form = h('form', { class: 'filters', 'aria-label': 'Report filters' }, fields,
    h('div', { class: 'actions' },
      h('button', { type: 'submit' }, 'Show'),
      h('button', { type: 'button', class: 'secondary', 'data-action': 'csv' }, 'Download CSV')));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const q = new URLSearchParams();
    for (const [k, el] of Object.entries(inputs)) {
      if (k === 'proofs') { if (el.checked) q.set('proofs', '1'); }
      else if (k === 'since' || k === 'until') { if (el.value) q.set(k, toUtc(el.value)); }
      else if (el.value.trim()) q.set(k, el.value.trim());
    }
    location.hash = `#/report?${q}`;
  });
  return form;
}

function save(blob, name) {
  const a = h('a', {});
  a.href = URL.createObjectURL(blob);  // a blob: URL of our own making
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 60000);
}

export function renderReport(main, { me, params }) {
  const form = filterForm(me, params);
  const status = h('div', { 'aria-live': 'polite' });
  const table = h('table', { class: 'events report' });
  main.append(h('h1', {}, 'Compliance report'), form, status, h('div', { class: 'table-wrap' }, table));

  form.querySelector('[data-action=csv]').addEventListener('click', async () => {
    status.replaceChildren(notice('Preparing the CSV…'));
    try {
      const blob = await download(`/v1/audit/report?${reportQuery(params, 'csv', params.get('proofs') === '1')}`);
      save(blob, `tollgate-report-${new Date().toISOString().replace(/[:.]/g, '-')}.csv`);
      status.replaceChildren(notice('Downloaded. The same rows come from `tollgate audit report --format csv`.'));
    } catch (e) {
      status.replaceChildren(notice(`Download failed: ${explain(e)}`, 'error'));
    }
  });

  let live = true;
  (async () => {
    status.replaceChildren(notice('Loading…'));
    try {
      const rows = parseRows(await (await download(`/v1/audit/report?${reportQuery(params, 'jsonl', false)}`)).text());
      if (!live) return;
      status.replaceChildren(rows.length ? notice(`${rows.length} call${rows.length === 1 ? '' : 's'}.`)
        : notice('No call matches these filters.'));
      showRows(table, rows);
    } catch (e) {
      if (live) status.replaceChildren(notice(`Report failed: ${explain(e)}`, 'error'));
    }
  })();
  return () => { live = false; };
}

const COLUMNS = ['Time', 'Agent', 'Session', 'Request', 'Tool', 'Invocation', 'Verdict', 'Rule', 'Reason',
  'Policy', 'Approvers', 'Outcome', 'Cost (USD)'];

function showRows(table, rows) {
  table.replaceChildren(
    h('thead', {}, h('tr', {}, COLUMNS.map((c) => h('th', { scope: 'col' }, c)))),
    h('tbody', {}, rows.map((r) => h('tr', { 'data-request': r.request_id },
      h('td', {}, when(r.time)),
      h('td', {}, r.agent_id),
      h('td', {}, r.session_id ? viewLink('session', r.session_id) : ''),
      h('td', {}, h('a', { href: `#/audit?request=${encodeURIComponent(r.request_id)}&desc=false` }, r.request_id)),
      h('td', {}, h('code', {}, r.tool)),
      h('td', {}, r.invocation ? h('code', {}, r.invocation) : '—'),
      h('td', {}, verdictBadge(r.verdict)),
      h('td', {}, r.rule || ''),
      h('td', {}, r.reason || ''),
      h('td', {}, r.policy_version || ''),
      h('td', { class: 'approvers' }, approvers(r.approvals || [])),
      h('td', {}, outcome(r)),
      h('td', {}, cost(r))))));
}

function approvers(list) {
  if (!list.length) return h('span', { class: 'muted' }, '—');
  return h('ul', { class: 'plain' }, list.map((a) => h('li', {},
    h('strong', {}, a.approver), ` ${a.decision}`,
    typeof a.wait_s === 'number' ? ` after ${a.wait_s.toFixed(1)} s` : '',
    a.comment ? h('q', {}, a.comment) : null)));
}

function outcome(r) {
  const kind = { completed: 'ok', pending: 'warn' }[r.outcome] || 'bad';
  return [badge(r.outcome || '—', kind), r.error_code ? h('code', {}, ` ${r.error_code}`) : null];
}

function cost(r) {
  if (typeof r.cost_usd === 'number') return r.cost_usd.toFixed(4);
  if (typeof r.reserved_usd === 'number') return h('span', { title: 'reserved, not spent' }, `(${r.reserved_usd.toFixed(4)})`);
  return '—';
}
