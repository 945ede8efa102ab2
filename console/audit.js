// Audit search: every get_audit_log filter, kept in the URL ("#/audit?...")
// so a search can be shared and the back button works; paging by cursor;
// one event's detail with its hash and chain position; an export of the
// filter as a selection export that `tollgate audit verify --file` checks.
import { api, download, explain } from './api.js';
import { badge, field, h, jsonBlock, notice, verdictBadge, viewLink, when } from './dom.js';

const TEXT_FILTERS = [
  ['agent', 'Agent'], ['session', 'Session'], ['request', 'Request'], ['tool', 'Tool'],
];
const TYPES = [
  'request.received', 'request.rejected', 'decision.made', 'approval.requested', 'approval.granted',
  'approval.denied', 'approval.expired', 'approval.refused', 'execution.started', 'execution.completed',
  'policy.updated', 'credential.added', 'credential.revoked', 'tools.available',
];

// A datetime-local value (the viewer's zone) as RFC 3339 UTC, and back.
function toUtc(local) {
  const d = new Date(local);
  return Number.isNaN(d.getTime()) ? '' : d.toISOString();
}
function toLocal(iso) {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '';
  const pad = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

// The query string of the filters in `params` that the API takes.
function apiQuery(params, extra = {}) {
  const q = new URLSearchParams();
  for (const k of ['org', 'agent', 'session', 'request', 'tool', 'verdict', 'since', 'until', 'limit', 'desc']) {
    if (params.get(k)) q.set(k, params.get(k));
  }
  for (const t of params.getAll('type')) q.append('type', t);
  for (const [k, v] of Object.entries(extra)) if (v) q.set(k, v);
  return q.toString();
}

export function renderAudit(main, { me, params }) {
  const inputs = {};
  const fields = [];
  if (me.org_id === '*') {
    inputs.org = h('input', { name: 'org', value: params.get('org') || '' });
    fields.push(field('Org', inputs.org));
  }
  for (const [k, label] of TEXT_FILTERS) {
    inputs[k] = h('input', { name: k, value: params.get(k) || '', autocomplete: 'off' });
    fields.push(field(label, inputs[k]));
  }
  inputs.type = h('select', { name: 'type' }, h('option', { value: '' }, 'any'),
    TYPES.map((t) => h('option', { value: t, selected: params.get('type') === t }, t)));
  inputs.verdict = h('select', { name: 'verdict' }, ['', 'allow', 'deny', 'ask'].map((v) =>
    h('option', { value: v, selected: (params.get('verdict') || '') === v }, v || 'any')));
  inputs.since = h('input', { type: 'datetime-local', name: 'since', value: params.get('since') ? toLocal(params.get('since')) : '' });
  inputs.until = h('input', { type: 'datetime-local', name: 'until', value: params.get('until') ? toLocal(params.get('until')) : '' });
  inputs.desc = h('input', { type: 'checkbox', name: 'desc', checked: params.get('desc') !== 'false' });
  fields.push(field('Event type', inputs.type), field('Verdict', inputs.verdict),
    field('From (your time)', inputs.since), field('Until (your time)', inputs.until),
    h('div', { class: 'field check' }, inputs.desc, h('label', { for: 'f-desc' }, 'Newest first')));
  inputs.desc.id = 'f-desc';

  const form = h('form', { class: 'filters', 'aria-label': 'Audit filters' }, fields,
    h('div', { class: 'actions' },
      h('button', { type: 'submit' }, 'Search'),
      h('button', { type: 'button', class: 'secondary', 'data-action': 'export' }, 'Export JSON lines')));
  const status = h('div', { 'aria-live': 'polite' });
  const table = h('table', { class: 'events' });
  const pager = h('div', { class: 'pager' });
  const detail = h('section', { class: 'detail', 'aria-label': 'Event detail', tabindex: -1, hidden: true });
  main.append(h('h1', {}, 'Audit log'), form, status, h('div', { class: 'table-wrap' }, table), pager, detail);

  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const q = new URLSearchParams();
    for (const [k, el] of Object.entries(inputs)) {
      if (k === 'desc') q.set('desc', el.checked ? 'true' : 'false');
      else if (k === 'since' || k === 'until') { if (el.value) q.set(k, toUtc(el.value)); }
      else if (el.value.trim()) q.set(k, el.value.trim());
    }
    location.hash = `#/audit?${q}`;
  });
  form.querySelector('[data-action=export]').addEventListener('click', async () => {
    status.replaceChildren(notice('Exporting…'));
    try {
      const blob = await download(`/v1/audit/export?${apiQuery(params)}`);
      const a = h('a', {});
      a.href = URL.createObjectURL(blob);  // a blob: URL of our own making
      a.download = `tollgate-audit-${new Date().toISOString().replace(/[:.]/g, '-')}.jsonl`;
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(a.href), 60000);
      status.replaceChildren(notice('Exported. Check it offline with `tollgate audit verify --file <file>`.'));
    } catch (e) {
      status.replaceChildren(notice(`Export failed: ${explain(e)}`, 'error'));
    }
  });

  const cursors = [''];  // the cursor of each page shown so far
  let head = null;
  async function load(page) {
    status.replaceChildren(notice('Searching…'));
    try {
      const [{ data }, health] = await Promise.all([
        api(`/v1/audit?${apiQuery(params, { cursor: cursors[page], desc: params.get('desc') || 'true', limit: params.get('limit') || '50' })}`),
        fetch('/healthz', { cache: 'no-store' }).then((r) => r.json()).catch(() => null),
      ]);
      head = health ? health.head_seq : null;
      if (data.next_cursor) cursors[page + 1] = data.next_cursor;
      show(data.events, page, Boolean(data.next_cursor));
    } catch (e) {
      status.replaceChildren(notice(`Search failed: ${explain(e)}`, 'error'));
    }
  }

  function show(events, page, more) {
    status.replaceChildren(events.length ? notice(`${events.length} events on page ${page + 1}.`) :
      notice(page ? 'No more events.' : 'No event matches these filters.'));
    table.replaceChildren(
      h('thead', {}, h('tr', {}, ['Seq', 'Time', 'Type', 'Agent', 'Session', 'Tool', 'Outcome'].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, events.map((e) => {
        const open = h('button', { type: 'button', class: 'link', 'aria-label': `Open event ${e.seq}` }, String(e.seq));
        open.addEventListener('click', () => showDetail(e));
        return h('tr', { 'data-seq': e.seq },
          h('td', {}, open), h('td', {}, when(e.time)), h('td', {}, h('code', {}, e.type)),
          h('td', {}, e.agent_id), h('td', {}, e.session_id ? viewLink('session', e.session_id) : ''),
          h('td', {}, e.tool ? h('code', {}, e.tool) : ''), h('td', {}, outcome(e)));
      })));
    pager.replaceChildren();
    if (page > 0) pager.append(button('Previous page', () => load(page - 1)));
    if (more) pager.append(button('Next page', () => load(page + 1)));
  }

  function showDetail(e) {
    detail.hidden = false;
    detail.replaceChildren(
      h('h2', {}, `Event ${e.seq}: `, h('code', {}, e.type)),
      h('dl', { class: 'facts' },
        h('dt', {}, 'Chain position'), h('dd', {}, `seq ${e.seq}${head ? ` of ${head}` : ''}`),
        h('dt', {}, 'Hash'), h('dd', {}, h('code', { class: 'hash' }, e.hash)),
        h('dt', {}, 'Previous hash'), h('dd', {}, h('code', { class: 'hash' }, e.prev_hash)),
        h('dt', {}, 'Event id'), h('dd', {}, h('code', {}, e.id)),
        h('dt', {}, 'Time'), h('dd', {}, when(e.time)),
        h('dt', {}, 'Request'), h('dd', {}, e.request_id ? h('a', { href: `#/audit?request=${encodeURIComponent(e.request_id)}&desc=false` }, e.request_id) : '—')),
      h('p', { class: 'muted' }, 'hash = SHA-256(previous hash ‖ the record without its two hashes); see docs/log_format.md.'),
      jsonBlock(e, 'The record'));
    detail.focus?.();
    detail.scrollIntoView({ block: 'nearest' });
  }

  load(0);
  return () => {};
}

function outcome(e) {
  const d = e.data || {};
  if (e.type === 'decision.made') return verdictBadge(d.verdict);
  if (e.type === 'execution.completed') {
    const r = d.result || {};
    return r.success ? badge('success', 'ok') : badge((r.error && r.error.code) || 'failed', 'bad');
  }
  if (e.type.startsWith('approval.')) return d.approver ? `${d.approver}` : '';
  return '';
}

function button(label, onclick) {
  const b = h('button', { type: 'button', class: 'secondary' }, label);
  b.addEventListener('click', onclick);
  return b;
}
