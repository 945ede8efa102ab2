// Audit search: every get_audit_log filter, kept in the URL ("#/audit?...")
// so a search can be shared and the back button works; paging by cursor;
// one event's detail with its hash and chain position; an export of the
// filter as a selection export that `tollgate audit verify --file` checks.
// "With proofs" (proofs=1 in the URL) asks /v1/audit?proofs=1: the signed
// checkpoint the page is proven against, a mark per event (proven, or not
// covered yet), and downloads of the checkpoint and of the proven records
// with their tlog-proofs, the files `tollgate audit verify-proof` reads.
import { api, download, explain } from './api.js';
import { badge, field, h, jsonBlock, notice, toLocal, toUtc, verdictBadge, viewLink, when } from './dom.js';

const TEXT_FILTERS = [
  ['agent', 'Agent'], ['session', 'Session'], ['request', 'Request'], ['tool', 'Tool'],
];
const TYPES = [
  'request.received', 'request.rejected', 'decision.made', 'approval.requested', 'approval.granted',
  'approval.denied', 'approval.expired', 'approval.refused', 'execution.started', 'execution.completed',
  'policy.updated', 'credential.added', 'credential.revoked', 'tools.available',
];

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
  inputs.proofs = h('input', { type: 'checkbox', name: 'proofs', id: 'f-proofs', checked: params.get('proofs') === '1' });
  fields.push(h('div', { class: 'field check' }, inputs.proofs, h('label', { for: 'f-proofs' }, 'With proofs')));

  const form = h('form', { class: 'filters', 'aria-label': 'Audit filters' }, fields,
    h('div', { class: 'actions' },
      h('button', { type: 'submit' }, 'Search'),
      h('button', { type: 'button', class: 'secondary', 'data-action': 'export' }, 'Export JSON lines')));
  const status = h('div', { 'aria-live': 'polite' });
  const proven = h('section', { class: 'proofs', 'aria-label': 'Proofs', hidden: true });
  const table = h('table', { class: 'events' });
  const pager = h('div', { class: 'pager' });
  const detail = h('section', { class: 'detail', 'aria-label': 'Event detail', tabindex: -1, hidden: true });
  main.append(h('h1', {}, 'Audit log'), form, status, proven, h('div', { class: 'table-wrap' }, table), pager, detail);

  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const q = new URLSearchParams();
    for (const [k, el] of Object.entries(inputs)) {
      if (k === 'desc') q.set('desc', el.checked ? 'true' : 'false');
      else if (k === 'proofs') { if (el.checked) q.set('proofs', '1'); }
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
  const withProofs = params.get('proofs') === '1';
  async function load(page) {
    status.replaceChildren(notice('Searching…'));
    try {
      const path = `/v1/audit?${apiQuery(params, { cursor: cursors[page], desc: params.get('desc') || 'true', limit: params.get('limit') || '50', proofs: withProofs ? '1' : '' })}`;
      // With proofs, the answer's text too: the records are saved as sent.
      const [answer, health] = await Promise.all([
        withProofs ? download(path).then((b) => b.text()).then((text) => ({ text, data: JSON.parse(text) })) : api(path),
        fetch('/healthz', { cache: 'no-store' }).then((r) => r.json()).catch(() => null),
      ]);
      const { data } = answer;
      head = health ? health.head_seq : null;
      if (data.next_cursor) cursors[page + 1] = data.next_cursor;
      show(data.events, page, Boolean(data.next_cursor));
      if (withProofs) showProofs(proven, data.checkpoint, data.events, rawEvents(answer.text), status);
    } catch (e) {
      status.replaceChildren(notice(`Search failed: ${explain(e)}`, 'error'));
    }
  }

  function show(events, page, more) {
    status.replaceChildren(events.length ? notice(`${events.length} events on page ${page + 1}.`) :
      notice(page ? 'No more events.' : 'No event matches these filters.'));
    const columns = ['Seq', 'Time', 'Type', 'Agent', 'Session', 'Tool', 'Outcome'].concat(withProofs ? ['Proof'] : []);
    table.replaceChildren(
      h('thead', {}, h('tr', {}, columns.map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, events.map((e) => {
        const open = h('button', { type: 'button', class: 'link', 'aria-label': `Open event ${e.seq}` }, String(e.seq));
        open.addEventListener('click', () => showDetail(e));
        return h('tr', { 'data-seq': e.seq },
          h('td', {}, open), h('td', {}, when(e.time)), h('td', {}, h('code', {}, e.type)),
          h('td', {}, e.agent_id), h('td', {}, e.session_id ? viewLink('session', e.session_id) : ''),
          h('td', {}, e.tool ? h('code', {}, e.tool) : ''), h('td', {}, outcome(e)),
          withProofs ? h('td', { class: 'proof' }, proofMark(e)) : null);
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
      e.proof ? h('h3', {}, 'Inclusion proof (C2SP tlog-proof)') : null,
      e.proof ? h('pre', { class: 'json', tabindex: 0, 'aria-label': 'Inclusion proof' }, e.proof) : null,
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

// Proofs: whether the page's checkpoint covers the event.
function proofMark(e) {
  if (typeof e.proof === 'string') return badge('proven ✓', 'ok');
  return badge('not covered yet', 'warn');
}

// The origin, size and root of a signed checkpoint note (its first three
// lines: docs/log_format.md, "Checkpoints"); null when it is not one.
export function checkpointFacts(note) {
  if (typeof note !== 'string' || !note) return null;
  const [origin, size, root] = note.split('\n');
  return origin && /^\d+$/.test(size || '') && root ? { origin, size, root } : null;
}

// The text of each element of the answer's "events" array ({"events":[...],
// as /v1/audit writes it), as sent: a record parsed and written again could
// change a number (1.0, or past 2^53) and so its hash.
export function rawEvents(text) {
  const out = [];
  let depth = 0;
  let inString = false;
  let escaped = false;
  let from = -1;
  for (let i = text.indexOf('['); i >= 0 && i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (escaped) escaped = false;
      else if (c === '\\') escaped = true;
      else if (c === '"') inString = false;
    } else if (c === '"') {
      inString = true;
    } else if (c === '{' || c === '[') {
      if (depth === 1) from = i;
      depth++;
    } else if (c === '}' || c === ']') {
      depth--;
      if (depth === 1) out.push(text.slice(from, i + 1));
      if (depth === 0) break;
    }
  }
  return out;
}

// The records that carry a proof, one JSON line each as sent (`raw`, from
// rawEvents): what `tollgate audit verify-proof --record` reads (each proof
// holds its checkpoint). Records not covered yet are left out: they have no
// proof.
export function provenRecords(events, raw) {
  const lines = raw && raw.length === events.length ? raw : events.map((e) => JSON.stringify(e));
  return lines.filter((_, i) => typeof events[i].proof === 'string').map((l) => `${l}\n`).join('');
}

function save(text, name, type) {
  const a = h('a', {});
  a.href = URL.createObjectURL(new Blob([text], { type }));  // a blob: URL of our own making
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 60000);
}

// The checkpoint the page is proven against and the downloads of it and of
// the proven records.
function showProofs(section, note, events, raw, status) {
  section.hidden = false;
  const facts = checkpointFacts(note);
  const n = events.filter((e) => typeof e.proof === 'string').length;
  if (!facts) {
    section.replaceChildren(h('h2', {}, 'Proofs'),
      notice('No checkpoint has been signed yet: no event on this page is covered yet.'));
    return;
  }
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const saveProofs = button('Download proofs', () => {
    save(provenRecords(events, raw), `tollgate-proofs-${stamp}.jsonl`, 'application/x-ndjson');
    status.replaceChildren(notice(`Saved ${n} records with their proofs. Check them offline with ` +
      '`tollgate audit verify-proof --key <checkpoint key> --checkpoint <checkpoint file> --record <file>`.'));
  });
  saveProofs.setAttribute('data-action', 'proofs');
  const saveCheckpoint = button('Download checkpoint', () => save(note, `tollgate-checkpoint-${facts.size}.txt`, 'text/plain'));
  saveCheckpoint.setAttribute('data-action', 'checkpoint');
  section.replaceChildren(h('h2', {}, 'Proofs'),
    h('p', {}, `${n} of ${events.length} events on this page are proven against this signed checkpoint:`),
    h('dl', { class: 'facts' },
      h('dt', {}, 'Origin'), h('dd', {}, h('code', {}, facts.origin)),
      h('dt', {}, 'Size'), h('dd', { 'data-size': facts.size }, `${facts.size} events`),
      h('dt', {}, 'Root'), h('dd', {}, h('code', { class: 'hash' }, facts.root))),
    h('div', { class: 'actions' }, saveProofs, saveCheckpoint));
}

function button(label, onclick) {
  const b = h('button', { type: 'button', class: 'secondary' }, label);
  b.addEventListener('click', onclick);
  return b;
}
