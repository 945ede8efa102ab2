// The console's router: "#/<view>/<id>?<query>" picks a view; each view
// renders into <main> and returns a function that stops what it started
// (polling, timers) when the person leaves it.
import { api, forget, token } from './api.js';
import { h, notice } from './dom.js';
import { renderLogin } from './login.js';
import { renderInbox } from './inbox.js';
import { renderAudit } from './audit.js';
import { renderReport } from './report.js';
import { renderSessions, renderSession } from './session.js';

let stop = null;
let me = null;  // /v1/whoami of the token in use

function parseHash() {
  const raw = location.hash.replace(/^#\/?/, '');
  const q = raw.indexOf('?');
  const path = (q < 0 ? raw : raw.slice(0, q)).split('/').filter(Boolean).map(decodeURIComponent);
  return { path, params: new URLSearchParams(q < 0 ? '' : raw.slice(q + 1)) };
}

function chrome(view) {
  const nav = document.getElementById('nav');
  nav.hidden = !me;
  for (const a of nav.querySelectorAll('a')) {
    if (a.dataset.view === view) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  const who = document.getElementById('who');
  who.replaceChildren(me ? `${me.identity} · org ${me.org_id === '*' ? 'every org' : me.org_id} · ${me.roles.join(', ')}` : '');
  document.getElementById('logout').hidden = !me;
}

export async function route() {
  if (stop) stop();
  stop = null;
  const main = document.getElementById('view');
  main.replaceChildren();
  window.scrollTo(0, 0);
  const { path, params } = parseHash();
  // "#/login" is also how to log out: it forgets the token.
  if (path[0] === 'login') forget();
  if (!token()) me = null;
  if (token() && !me) {
    try {
      me = (await api('/v1/whoami')).data;
    } catch (e) {
      me = null;
    }
  }
  if (!me) {
    chrome('login');
    stop = renderLogin(main, { expired: params.get('expired') === '1', onLogin: (who) => {
      me = who;
      const next = who.roles.includes('approver') ? '#/inbox' : '#/audit';
      if (location.hash === next) route(); else location.hash = next;
    } });
    return;
  }
  const view = path[0] || (me.roles.includes('approver') ? 'inbox' : 'audit');
  chrome(view === 'session' ? 'sessions' : view);
  const ctx = { me, params, go: (hash) => { location.hash = hash; } };
  switch (view) {
    case 'inbox': stop = renderInbox(main, ctx); break;
    case 'audit': stop = renderAudit(main, ctx); break;
    case 'report': stop = renderReport(main, ctx); break;
    case 'sessions': stop = renderSessions(main, ctx); break;
    case 'session': stop = renderSession(main, ctx, path[1] || ''); break;
    default: main.append(h('h1', {}, 'Not found'), notice(`There is no view "${view}".`, 'error'));
  }
}

window.addEventListener('hashchange', route);
window.addEventListener('tollgate:unauthorized', () => {
  me = null;
  if (!location.hash.startsWith('#/login')) location.hash = '#/login?expired=1';
});
document.getElementById('logout').addEventListener('click', () => {
  forget();
  me = null;
  location.hash = '#/login';
  route();
});
route();
