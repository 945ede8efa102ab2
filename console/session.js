// Sessions: the recent sessions of the org, and one session's replay
// timeline (GET /v1/replay/sessions/{id}) with the answer of --verify and a
// what-if panel that re-decides the session under a pasted policy.
import { api, explain } from './api.js';
import { badge, duration, field, h, historyFacts, jsonBlock, notice, verdictBadge, viewLink, when } from './dom.js';

export function renderSessions(main, { go }) {
  const input = h('input', { name: 'session', autocomplete: 'off', required: true });
  const form = h('form', { class: 'filters', 'aria-label': 'Open a session' }, field('Session id', input),
    h('div', { class: 'actions' }, h('button', { type: 'submit' }, 'Open timeline')));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    go(`#/session/${encodeURIComponent(input.value.trim())}`);
  });
  const list = h('div', { 'aria-live': 'polite' }, notice('Loading recent sessions…'));
  main.append(h('h1', {}, 'Sessions'), form, h('h2', {}, 'Recent sessions'), list);
  (async () => {
    try {
      const { data } = await api('/v1/audit?type=request.received&desc=true&limit=500');
      const sessions = new Map();
      for (const e of data.events) {
        const s = sessions.get(e.session_id) || { id: e.session_id, agent: e.agent_id, last: e.time, requests: 0 };
        s.requests += 1;
        sessions.set(e.session_id, s);
      }
      if (!sessions.size) return list.replaceChildren(notice('No session has sent a request yet.'));
      list.replaceChildren(h('table', { class: 'events' },
        h('thead', {}, h('tr', {}, ['Session', 'Agent', 'Last request', 'Requests (recent)'].map((c) => h('th', { scope: 'col' }, c)))),
        h('tbody', {}, [...sessions.values()].map((s) => h('tr', {},
          h('td', {}, viewLink('session', s.id)), h('td', {}, s.agent), h('td', {}, when(s.last)), h('td', {}, String(s.requests)))))));
    } catch (e) {
      list.replaceChildren(notice(`Could not list sessions: ${explain(e)}`, 'error'));
    }
  })();
  input.focus();
  return () => {};
}

// The what-if box's placeholder: a small policy that loads as it is
// (`tollgate policy check` accepts it), so pasting it over is a real start.
export const WHAT_IF_EXAMPLE = 'mode: ask\napproval_threshold: HIGH\nrules:\n' +
  '  - {name: no-deletes, tool: delete_file, verdict: deny}\n';

export function renderSession(main, { me }, id) {
  const base = `/v1/replay/sessions/${encodeURIComponent(id)}`;
  const head = h('div', { 'aria-live': 'polite' }, notice('Loading the timeline…'));
  const verify = h('section', { class: 'card verify', 'aria-label': 'Verification', 'aria-live': 'polite' }, notice('Verifying…'));
  const steps = h('ol', { class: 'timeline', 'aria-label': 'Requests in order' });
  const policy = h('textarea', { name: 'policy', rows: 10, spellcheck: 'false', placeholder: WHAT_IF_EXAMPLE });
  const whatIfOut = h('div', { 'aria-live': 'polite' });
  const whatIf = h('form', { class: 'card what-if', 'aria-label': 'What-if' },
    h('h2', {}, 'What if'),
    h('p', {}, 'Paste a candidate policy (YAML). Every decision of this session is made again under it; nothing is sent or run.'),
    field('Candidate policy', policy),
    h('div', { class: 'actions' }, h('button', { type: 'submit' }, 'Run what-if')),
    whatIfOut);
  main.append(h('h1', {}, 'Session ', h('code', {}, id)), head, verify, h('h2', {}, 'Timeline'), steps, whatIf);
  const items = new Map();  // request_id -> <li>

  (async () => {
    try {
      const { data } = await api(base);
      const t = data.timeline;
      head.replaceChildren(h('dl', { class: 'facts' },
        h('dt', {}, 'Agent'), h('dd', {}, t.agent_id),
        me.org_id === '*' ? [h('dt', {}, 'Org'), h('dd', {}, t.org_id)] : null,
        h('dt', {}, 'Requests'), h('dd', {}, String(t.requests.length)),
        h('dt', {}, 'Events'), h('dd', {}, String(t.events)),
        h('dt', {}, 'From'), h('dd', {}, when(t.first)),
        h('dt', {}, 'To'), h('dd', {}, when(t.last), ` (${duration(t.span_us)})`),
        h('dt', {}, 'Cost'), h('dd', {}, `$${Number(t.cost_usd || 0).toFixed(4)}`)));
      let prev = null;
      for (const r of t.requests) {
        const li = request(r, prev);
        items.set(r.request_id, li);
        steps.append(li);
        prev = r;
      }
      if (!t.requests.length) steps.append(h('li', {}, notice('This session has no requests.')));
    } catch (e) {
      head.replaceChildren(notice(e.status === 404 ? `No session "${id}" in your org.` : `Could not load the session: ${explain(e)}`, 'error'));
    }
  })();

  (async () => {
    try {
      const { data } = await api(`${base}/verify`);
      const v = data.verify || {};
      verify.replaceChildren(
        h('h2', {}, 'Verify ', data.clean ? badge('clean', 'ok') : badge('differs', 'bad')),
        h('p', {}, data.clean
          ? `The hash chain holds, and all ${v.decisions} decisions re-made from the log match what was recorded.`
          : `${(v.changes || []).length} decisions differ when re-made, or the chain is broken; details below.`),
        ...(data.clean ? [] : [jsonBlock(data, 'Verification report')]));
    } catch (e) {
      verify.replaceChildren(notice(`Could not verify: ${explain(e)}`, 'error'));
    }
  })();

  whatIf.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    whatIfOut.replaceChildren(notice('Re-deciding…'));
    for (const li of items.values()) li.classList.remove('flipped');
    try {
      const { data } = await api(`${base}/what-if`, { method: 'POST', text: policy.value });
      const w = data.what_if;
      const b = w.budget || {};
      whatIfOut.replaceChildren(
        notice(`${w.changed} of ${w.decisions} decisions change verdict under ${w.candidate_version || 'the candidate'}.`),
        w.changes.length ? h('table', { class: 'events changes' },
          h('thead', {}, h('tr', {}, ['Seq', 'Request', 'Tool', 'Recorded', 'Would be', 'Rule now', 'Ran'].map((c) => h('th', { scope: 'col' }, c)))),
          h('tbody', {}, w.changes.map((c) => h('tr', { 'data-request-id': c.request_id },
            h('td', {}, String(c.seq)), h('td', {}, h('code', {}, c.request_id)), h('td', {}, h('code', {}, c.tool)),
            h('td', {}, verdictBadge(c.recorded.verdict)), h('td', {}, verdictBadge(c.redecided.verdict)),
            h('td', {}, h('code', {}, c.redecided.rule || '—')),
            h('td', {}, c.executed ? `yes ($${Number(c.cost_usd || 0).toFixed(4)})` : 'no'))))) : null,
        h('p', { class: 'muted' }, `Budget: spend recorded $${Number(b.spend_recorded_usd || 0).toFixed(4)}, avoided $${Number(b.spend_avoided_usd || 0).toFixed(4)}; ` +
          `newly allowed reservations $${Number(b.newly_allowed_reserved_usd || 0).toFixed(4)}; budget denials ${b.budget_denials_recorded || 0} → ${b.budget_denials_redecided || 0}.`));
      for (const c of w.changes) items.get(c.request_id)?.classList.add('flipped');
    } catch (e) {
      whatIfOut.replaceChildren(notice(`What-if failed: ${explain(e)}`, 'error'));
    }
  });
  return () => {};
}

function request(r, prev) {
  const d = r.decision || {};
  const gap = prev ? (new Date(r.received_at) - new Date(prev.received_at)) * 1000 : null;
  const ex = r.execution;
  const approvals = (r.approval && r.approval.responses) || [];
  return h('li', { class: 'card step', 'data-request-id': r.request_id },
    h('div', { class: 'card-head' },
      h('code', { class: 'tool' }, r.tool), verdictBadge(d.verdict), badge(r.status || '—'),
      h('span', { class: 'muted' }, when(r.received_at), gap !== null ? ` · +${duration(gap)} after the previous` : '')),
    h('dl', { class: 'facts' },
      h('dt', {}, 'Request'), h('dd', {}, h('a', { href: `#/audit?request=${encodeURIComponent(r.request_id)}&desc=false` }, r.request_id)),
      h('dt', {}, 'Decision'), h('dd', {}, d.rule ? [h('code', {}, d.rule), ` — ${d.reason || ''}`] : '—',
        d.policy_version ? h('span', { class: 'muted' }, ` (policy ${d.policy_version})`) : null),
      historyFacts(d.history),
      approvals.length ? [h('dt', {}, 'Approvals'), h('dd', {}, h('ul', { class: 'plain' }, approvals.map((a) => h('li', {},
        `${a.type.replace('approval.', '')}${a.approver ? ` by ${a.approver}` : ''}${a.scope ? ` (${a.scope})` : ''}`,
        a.waited_us >= 0 ? ` after waiting ${duration(a.waited_us)}` : '', a.comment ? ` — “${a.comment}”` : ''))))] : null,
      ex ? [h('dt', {}, 'Execution'), h('dd', {}, ex.completed
        ? `${ex.success ? 'succeeded' : `failed (${ex.error_code || 'error'})`} in ${duration(Math.round(ex.duration_ms * 1000))}${ex.attempts > 1 ? ` after ${ex.attempts} attempts` : ''}`
        : `${ex.attempts} attempt(s), not completed`)] : null),
    h('details', {}, h('summary', {}, 'Arguments'), jsonBlock((r.request && r.request.args) ?? {}, 'Arguments')),
    r.result ? h('details', {}, h('summary', {}, 'Result'), jsonBlock(r.result, 'Result')) : null);
}
