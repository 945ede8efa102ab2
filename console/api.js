// The console's only way to the server: the /v1 API with the token from
// session storage in the Authorization header (no cookie: nothing a forged
// cross-site request could carry). A 401 forgets the token and says why.

const KEY = 'tollgate.token';

export function token() {
  return sessionStorage.getItem(KEY);
}

export function setToken(t) {
  sessionStorage.setItem(KEY, t);
}

export function forget() {
  sessionStorage.removeItem(KEY);
}

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function send(path, { method = 'GET', json, text } = {}) {
  const headers = { Authorization: `Bearer ${token() || ''}` };
  let body;
  if (json !== undefined) {
    headers['Content-Type'] = 'application/json';
    body = JSON.stringify(json);
  } else if (text !== undefined) {
    headers['Content-Type'] = 'text/plain; charset=utf-8';
    body = text;
  }
  let res;
  try {
    res = await fetch(path, { method, headers, body, cache: 'no-store', credentials: 'omit', redirect: 'error' });
  } catch (e) {
    throw new ApiError(0, 'E_NETWORK', `tollgate did not answer (${e.message}). Is it running?`);
  }
  if (res.status === 401) {
    forget();
    window.dispatchEvent(new CustomEvent('tollgate:unauthorized'));
    throw new ApiError(401, 'E_UNAUTHORIZED', 'Your token is unknown, expired or revoked. Log in again.');
  }
  return res;
}

// The JSON body of a call; an HTTP error becomes an ApiError with the
// server's code and message.
export async function api(path, opts) {
  const res = await send(path, opts);
  const data = await res.json().catch(() => null);
  if (!res.ok) {
    const err = data && data.error ? data.error : {};
    throw new ApiError(res.status, err.code || 'E_HTTP', err.message || `HTTP ${res.status}`);
  }
  return { status: res.status, data };
}

// A file download (the audit export) as a Blob.
export async function download(path) {
  const res = await send(path);
  if (!res.ok) {
    const data = await res.json().catch(() => null);
    const err = data && data.error ? data.error : {};
    throw new ApiError(res.status, err.code || 'E_HTTP', err.message || `HTTP ${res.status}`);
  }
  return res.blob();
}

// What an error means for the person looking at the page.
export function explain(e) {
  if (e instanceof ApiError && e.status === 403) return `Not allowed: ${e.message}`;
  if (e instanceof ApiError) return `${e.message} (${e.code})`;
  return String(e && e.message ? e.message : e);
}
