// The JavaScript half of tests/seeds/seed_suite.h: the same suite files,
// the same coverage rules and checks, for the MCP runner
// (tests/mcp/seeds.test.mjs) and scripts/seeds_doc.mjs (docs/seeds.md).
import fs from 'node:fs';

export function loadSuite(file) {
  return JSON.parse(fs.readFileSync(file, 'utf8'));
}

export function items(suite) {
  return Object.entries(suite.items).flatMap(([kind, list]) => list.map((i) => `${kind}:${i}`));
}

export function covers(suite, ex) {
  const e = ex.expect;
  const tool = ex.name_of ?? ex.tool;
  const c = new Set([`tools:${tool}`, `names:${ex.tool}`]);
  if ('danger' in e) c.add(`danger:${tool}`);
  for (const k of Object.keys(ex.args)) c.add(`params:${tool}.${k}`);
  if (typeof ex.args.action === 'string') c.add(`actions:${tool}.${ex.args.action}`);
  for (const f of e.data ?? []) c.add(`fields:${tool}.${f}`);
  if ('success' in e) c.add('contract:success');
  if ('data' in e) c.add('contract:data');
  for (const f of e.meta ?? []) c.add(`contract:meta.${f}`);
  if ('error' in e) { c.add(`errors:${e.error}`); c.add('contract:error.code'); c.add('contract:error.message'); }
  if ('recoverable' in e) c.add('contract:error.recoverable');
  for (const f of e.error_fields ?? []) c.add(`contract:error.${f}`);
  for (const i of ex.covers ?? []) c.add(i);
  const documented = new Set(items(suite));
  return [...c].filter((i) => documented.has(i));
}

const at = (j, dotted) => dotted.split('.').reduce((cur, k) => (cur && typeof cur === 'object' && k in cur ? cur[k] : null), j);
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

// Where `r` (a ToolResult) fails the example; '' when it holds.
// `got` is what the loopback server received last: {json, headers, query}.
// `danger` is the danger level the gate gives the tool.
export function check(ex, r, got, danger) {
  const gotJson = got?.json ?? null;
  const e = ex.expect;
  if ('danger' in e && danger !== e.danger) return `danger is ${danger}`;
  if ('success' in e && r.success !== e.success) return `success is not ${e.success}`;
  for (const f of e.data ?? []) if (!r.data || !(f in r.data)) return `data has no ${f}`;
  for (const f of e.meta ?? []) if (!r.meta || !(f in r.meta)) return `meta has no ${f}`;
  for (const [p, want] of Object.entries(e.equals ?? {})) if (!same(at(r, p), want)) return `${p} is ${JSON.stringify(at(r, p))}, not ${JSON.stringify(want)}`;
  if ('error' in e) {
    if (!r.error) return 'no error';
    if (r.error.code !== e.error) return `error.code is ${r.error.code}, not ${e.error}`;
    if (typeof r.error.message !== 'string') return 'error.message is missing';
  }
  if ('recoverable' in e && at(r, 'error.recoverable') !== e.recoverable) return `error.recoverable is not ${e.recoverable}`;
  for (const f of e.error_fields ?? []) if (at(r, `error.${f}`) == null) return `error has no ${f}`;
  if ('server_got_json' in e && !same(gotJson, e.server_got_json)) return `the server got ${JSON.stringify(gotJson)}`;
  for (const [name, want] of Object.entries(e.server_got_headers ?? {})) {
    if (got?.headers?.[name] !== want) return `the server got header ${name}: ${got?.headers?.[name]}`;
  }
  if ('server_got_query' in e && got?.query !== e.server_got_query) return `the server got query ${got?.query}`;
  return '';
}

export function coverage(suite, served) {
  const all = items(suite);
  const elsewhere = suite.elsewhere ?? {};
  const missing = all.filter((i) => !served.has(i) && !(i.slice(i.indexOf(':') + 1) in elsewhere));
  const n = all.filter((i) => served.has(i)).length;
  return `seed ${suite.seed} (${suite.title}): ${n} of ${all.length} documented items served here, ` +
    `${Object.keys(elsewhere).length} shown elsewhere` + (missing.length ? `; not served: ${missing.join(' ')}` : '');
}

export function substitute(v, server, closed) {
  if (typeof v === 'string') return v.replaceAll('{{server}}', server).replaceAll('{{closed}}', closed);
  if (Array.isArray(v)) return v.map((x) => substitute(x, server, closed));
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, substitute(x, server, closed)]));
  return v;
}
