// The one way the console makes DOM: h() sets text with text nodes and
// attributes from a fixed list, never HTML, so what agents control (tool
// names, arguments, results, reasons) can only ever be shown as text.
// Links go to the console's own views ("#/..."), never to an agent's URL.

const ATTRS = new Set([
  'class', 'id', 'type', 'name', 'value', 'placeholder', 'for', 'title', 'role', 'datetime', 'tabindex',
  'disabled', 'checked', 'selected', 'autocomplete', 'spellcheck', 'rows', 'required', 'hidden', 'open',
  'aria-label', 'aria-live', 'aria-busy', 'aria-current', 'aria-describedby', 'aria-invalid', 'aria-expanded',
  'scope', 'min', 'max', 'list',
]);

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) {
      el.addEventListener(k.slice(2), v);
    } else if (k === 'href') {
      el.setAttribute('href', viewHref(v));
    } else if (ATTRS.has(k) || k.startsWith('data-')) {
      el.setAttribute(k, v === true ? '' : String(v));
    } else {
      throw new Error(`the console does not set the attribute ${k}`);
    }
  }
  add(el, children);
  return el;
}

function add(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : String(c));  // a string becomes a text node
  }
}

// A link only to one of our views; anything else is not a link at all.
export function viewHref(v) {
  const s = String(v);
  return /^#\/[A-Za-z0-9/_.~%?&=+-]*$/.test(s) ? s : '#/';
}

// "#/session/" + id, with the id encoded (it is the agent's string).
export function viewLink(view, id, label) {
  return h('a', { href: `#/${view}/${encodeURIComponent(id)}` }, label ?? id);
}

// A time in the viewer's zone, UTC on hover.
export function when(iso) {
  if (!iso) return h('span', { class: 'muted' }, '—');
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return h('span', {}, iso);
  return h('time', { datetime: iso, title: `${iso} (UTC)` }, d.toLocaleString());
}

export function duration(us) {
  if (us === undefined || us === null || us < 0) return '—';
  if (us < 1000) return `${us} µs`;
  if (us < 1e6) return `${(us / 1000).toFixed(1)} ms`;
  if (us < 60e6) return `${(us / 1e6).toFixed(1)} s`;
  const m = Math.floor(us / 60e6);
  return m < 60 ? `${m} min ${Math.round((us % 60e6) / 1e6)} s` : `${Math.floor(m / 60)} h ${m % 60} min`;
}

// A JSON value as indented text.
export function jsonBlock(v, label) {
  return h('pre', { class: 'json', tabindex: 0, 'aria-label': label || 'JSON' }, JSON.stringify(v, null, 2));
}

export function badge(text, kind) {
  return h('span', { class: `badge ${kind || ''}`.trim() }, text);
}

export function verdictBadge(v) {
  return badge(v || '—', { allow: 'ok', deny: 'bad', ask: 'warn' }[v] || '');
}

export function dangerBadge(level) {
  return badge(level || 'unknown', { SAFE: 'ok', LOW: 'ok', MEDIUM: 'warn', HIGH: 'bad', CRITICAL: 'bad' }[level] || '');
}

// An error or empty state, said plainly.
// A decision's session history (docs/policy.md, "History") as a facts row:
// the labels it saw, and the rule and the seqs of the earlier events it
// used. Nothing when the decision records none.
export function historyFacts(hist) {
  if (!hist) return null;
  const seqs = (hist.matched || []).map((q) => `seq ${Number(q)}`).join(', ');
  return [h('dt', {}, 'History'), h('dd', {},
    `${hist.integrity}, ${hist.confidentiality}, ${Number(hist.calls)} completed calls (up to seq ${Number(hist.upto)})`,
    hist.rule ? [' · rule ', h('code', {}, hist.rule), ` on ${seqs}`] : null)];
}

export function notice(text, kind = 'info') {
  return h('p', { class: `notice ${kind}`, role: kind === 'error' ? 'alert' : 'status' }, text);
}

export function field(label, input, hint) {
  const id = input.id || `f-${Math.random().toString(36).slice(2, 9)}`;
  input.id = id;
  return h('div', { class: 'field' }, h('label', { for: id }, label), input, hint ? h('small', {}, hint) : null);
}

// A datetime-local value (the viewer's zone) as RFC 3339 UTC, and back.
export function toUtc(local) {
  const d = new Date(local);
  return Number.isNaN(d.getTime()) ? '' : d.toISOString();
}
export function toLocal(iso) {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '';
  const pad = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}
