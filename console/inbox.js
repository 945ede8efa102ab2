// The approvals inbox: the org's pending approvals, newest first, polled
// every second so that a decision made elsewhere (the CLI, another
// approver) removes the card from every open inbox. A card is kept while
// its request is pending, so a comment being typed survives the polls.
import { api, explain } from './api.js';
import { badge, dangerBadge, duration, field, h, historyFacts, jsonBlock, notice, viewLink, when } from './dom.js';

const POLL_MS = 1000;
// GET /v1/approvals is paged (docs/http_api.md): the newest first, up to
// MAX_PAGES pages of PAGE each poll; `total` says how many wait in all.
const PAGE = 100;
const MAX_PAGES = 10;

async function pendingApprovals() {
  const approvals = [];
  let total = 0;
  let cursor = '';
  for (let page = 0; page < MAX_PAGES; page++) {
    const q = new URLSearchParams({ desc: '1', limit: String(PAGE) });
    if (cursor) q.set('cursor', cursor);
    const { data } = await api(`/v1/approvals?${q}`);
    approvals.push(...(data.approvals || []));
    total = data.total ?? approvals.length;
    cursor = data.next_cursor || '';
    if (!cursor) break;
  }
  return { approvals, total };
}

export function renderInbox(main, { me }) {
  const status = h('p', { class: 'muted', 'aria-live': 'polite' }, 'Loading…');
  const list = h('ul', { class: 'cards', 'aria-label': 'Pending approvals' });
  const empty = notice('Nothing waits for your approval.');
  empty.hidden = true;
  const failure = h('div', { 'aria-live': 'assertive' });
  main.append(h('h1', {}, 'Pending approvals'), status, failure, empty, list);
  const cards = new Map();  // request_id -> { el, refresh(p) }
  let timer = null;
  let stopped = false;
  // One poll at a time: a card's action polls at once too, and two polls
  // in flight could answer out of order, an older list removing a card
  // just shown (and the comment being typed in it) until the next poll.
  let inflight = false;
  let again = false;

  async function poll() {
    if (inflight) {
      again = true;
      return;
    }
    inflight = true;
    clearTimeout(timer);
    try {
      const { approvals, total } = await pendingApprovals();
      failure.replaceChildren();
      const pending = approvals.slice().sort((a, b) => b.requested_seq - a.requested_seq);
      const seen = new Set();
      for (const p of pending) {
        const key = `${p.org_id}/${p.request_id}`;
        seen.add(key);
        let c = cards.get(key);
        if (!c) {
          c = card(p, me, () => poll());
          cards.set(key, c);
        }
        c.refresh(p);
      }
      for (const [key, c] of cards) {
        if (!seen.has(key)) {
          c.el.remove();
          cards.delete(key);
        }
      }
      // Keep the newest first without rebuilding the cards.
      for (const p of pending) list.append(cards.get(`${p.org_id}/${p.request_id}`).el);
      empty.hidden = pending.length > 0;
      const shown = total > pending.length ? `${total} pending, the newest ${pending.length} shown` : `${pending.length} pending`;
      status.replaceChildren(`${shown} · updated `, h('time', {}, new Date().toLocaleTimeString()));
    } catch (e) {
      failure.replaceChildren(notice(`Could not load approvals: ${explain(e)}`, 'error'));
    }
    inflight = false;
    if (stopped) return;
    if (again) {
      again = false;
      poll();
      return;
    }
    timer = setTimeout(poll, POLL_MS);
  }
  poll();
  // The time left on each card counts down between polls too.
  const tick = setInterval(() => { for (const c of cards.values()) c.tick(); }, 1000);
  return () => {
    stopped = true;
    clearTimeout(timer);
    clearInterval(tick);
  };
}

function timeLeft(deadline) {
  const ms = new Date(deadline).getTime() - Date.now();
  if (Number.isNaN(ms)) return '—';
  return ms <= 0 ? 'expiring now' : `${duration(ms * 1000)} left`;
}

// What "Approve always" adds, in the approve stage's words (docs/approvals.md,
// "Allow always"): an allow rule for this agent that matches this exact call
// (a file tool's path, else the whole invocation), and only once every
// approver whose grant counts chose "always".
function alwaysRule(p) {
  const d = p.decision || {};
  const exact = d.subject || d.invocation || p.tool;
  return `Approve, and add an allow rule for agent ${p.agent_id} matching this exact call only: ${exact}. ` +
    'The same tool with other arguments still asks. The rule is added only if every approver whose grant counts ' +
    'chooses "always"; `tollgate rules revoke` removes it.';
}

// What "Approve and declassify" does (docs/approvals.md, "Declassify").
const DECLASSIFY = 'Approve once, and mark this session clean again: its untrusted/secret labels and earlier ' +
  'sequence matches no longer count (logged with your name and reason)';

function card(p, me, changed) {
  const d = p.decision || {};
  const req = p.request || {};
  const quorum = h('span', {});
  const left = h('span', { class: 'left' });
  const result = h('div', { 'aria-live': 'polite' });
  const comment = h('textarea', { name: 'comment', rows: 2, placeholder: 'Why (recorded in the log)' });
  // The reason a declassify is logged with, asked for in the card itself.
  const reason = h('input', { type: 'text', name: 'declassify-reason', placeholder: 'Why this session is clean again (recorded in the log)' });
  // A plain wrapper: `.field` sets display, which would override hidden.
  const reasonField = h('div', { hidden: true }, field('Reason to declassify', reason));
  // Indexes: 0 once, 1 always, 2 deny (used below); 3 declassify.
  const buttons = [
    h('button', { type: 'button', class: 'approve', 'data-action': 'approve-once' }, 'Approve once'),
    h('button', { type: 'button', class: 'approve', 'data-action': 'approve-always', title: alwaysRule(p) }, 'Approve always'),
    h('button', { type: 'button', class: 'deny', 'data-action': 'deny' }, 'Deny'),
    h('button', { type: 'button', class: 'approve', 'data-action': 'approve-declassify', title: DECLASSIFY }, 'Approve and declassify'),
  ];
  const el = h('li', { class: 'card approval', 'data-request-id': p.request_id },
    h('div', { class: 'card-head' },
      h('code', { class: 'tool' }, p.tool),
      dangerBadge(d.danger_level),
      left),
    h('dl', { class: 'facts' },
      h('dt', {}, 'Agent'), h('dd', {}, p.agent_id),
      h('dt', {}, 'Session'), h('dd', {}, viewLink('session', p.session_id)),
      h('dt', {}, 'Request'), h('dd', {}, h('code', {}, p.request_id)),
      me.org_id === '*' ? [h('dt', {}, 'Org'), h('dd', {}, p.org_id)] : null,
      h('dt', {}, 'Asked by'), h('dd', {}, d.rule ? h('code', {}, d.rule) : '—'),
      h('dt', {}, 'Reason'), h('dd', {}, d.reason || '—'),
      historyFacts(d.history),
      h('dt', {}, 'Requested'), h('dd', {}, when(p.requested_at)),
      h('dt', {}, 'Approvals'), h('dd', {}, quorum)),
    // The log keeps arguments with their secrets replaced (docs/redaction.md).
    h('h3', {}, 'Arguments ', JSON.stringify(req.args ?? {}).includes('[REDACTED]') ? badge('secrets redacted', 'warn') : null),
    jsonBlock(req.args ?? {}, 'Arguments'),
    field('Comment', comment),
    reasonField,
    // The approve buttons together, Deny last.
    h('div', { class: 'actions' }, buttons[0], buttons[1], buttons[3], buttons[2]),
    result);

  async function answer(decision, scope, extra = {}) {
    for (const b of buttons) b.disabled = true;
    result.replaceChildren(notice('Sending…'));
    const body = { decision, comment: comment.value, args_hash: p.args_hash, ...extra };
    if (decision === 'approve') body.scope = scope;
    try {
      const org = me.org_id === '*' ? `?org=${encodeURIComponent(p.org_id)}` : '';
      const { status, data } = await api(`/v1/approvals/${encodeURIComponent(p.request_id)}${org}`, { method: 'POST', json: body });
      if (status === 202) {
        result.replaceChildren(notice('Sent; the approve stage has not recorded it yet.'));
      } else if (data.approval_pending) {
        result.replaceChildren(notice(`Recorded (${data.outcome}); more approvals are needed.`));
      } else {
        result.replaceChildren(notice(`Recorded: ${data.outcome}.`));
      }
    } catch (e) {
      result.replaceChildren(notice(`Not recorded: ${explain(e)}`, 'error'));
      for (const b of buttons) b.disabled = false;
    }
    changed();
  }
  buttons[0].addEventListener('click', () => answer('approve', 'once'));
  buttons[1].addEventListener('click', () => answer('approve', 'always'));
  buttons[2].addEventListener('click', () => answer('deny'));
  // The first press asks for the reason; a press with one sends it (the
  // approve stage refuses a declassify without a reason too).
  buttons[3].addEventListener('click', () => {
    const why = reason.value.trim();
    if (reasonField.hidden || !why) {
      reasonField.hidden = false;
      reason.focus();
      result.replaceChildren(notice('Say why this session is clean again, then press "Approve and declassify" again.'));
      return;
    }
    answer('approve', 'once', { declassify: true, comment: why });
  });

  let deadline = p.deadline;
  return {
    el,
    refresh(now) {
      deadline = now.deadline;
      const granted = now.granted_by || [];
      quorum.replaceChildren(`${granted.length} of ${now.approvers_needed}`,
        granted.length ? ` (${granted.join(', ')})` : '',
        now.approvers && now.approvers.length ? ` · may answer: ${now.approvers.join(', ')}` : '');
      if (!now.you_may_approve) {
        for (const b of buttons) b.disabled = true;
        buttons[0].title = 'You have approved this already, or you are not one of the approvers it names';
      }
      left.replaceChildren(timeLeft(deadline));
    },
    tick() { left.replaceChildren(timeLeft(deadline)); },
  };
}
