// The login view: a bearer token (made by an admin with `tollgate tokens
// add` or POST /v1/credentials) kept in this tab's session storage only.
import { api, explain, forget, setToken } from './api.js';
import { field, h, notice } from './dom.js';

export function renderLogin(main, { expired, onLogin }) {
  const input = h('input', { type: 'password', name: 'token', autocomplete: 'off', spellcheck: 'false', required: true });
  const status = h('div', { 'aria-live': 'polite' });
  if (expired) status.append(notice('Your token was refused (unknown, expired or revoked). Log in again.', 'error'));
  const form = h('form', { class: 'card login', 'aria-label': 'Log in' },
    h('h1', {}, 'Log in'),
    h('p', {}, 'Paste a tollgate token. It stays in this browser tab only and is sent in a header, never in a URL or cookie.'),
    field('Token', input, 'An approver token opens the approvals inbox; an auditor token the audit log and sessions.'),
    h('button', { type: 'submit' }, 'Log in'),
    status);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    status.replaceChildren();
    setToken(input.value.trim());
    try {
      const who = (await api('/v1/whoami')).data;
      onLogin(who);
    } catch (e) {
      forget();
      status.replaceChildren(notice(`Not logged in: ${explain(e)}`, 'error'));
    }
  });
  main.append(form);
  input.focus();
  return () => {};
}
