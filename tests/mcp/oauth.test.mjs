// `up --oauth` as an OAuth 2.1 resource server (docs/oauth.md), driven by
// the official SDK v2 client's ClientCredentialsProvider against a local
// authorization server (oauth_server.mjs): discovery through the protected
// resource metadata, RFC 8707 audiences, step-up on a scoped tool, the 401
// challenges for bad tokens, an auditor's token on /v1, and no token in the
// log. Loopback only. Run by ctest as Mcp.OAuthResourceServer.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, StreamableHTTPClientTransport, ClientCredentialsProvider } from '@modelcontextprotocol/client';
import { Up } from './harness.mjs';
import { startAuthServer } from './oauth_server.mjs';

let as, up, MCP, V1, PRM;
before(async () => {
  as = await startAuthServer({
    clients: {
      'agent-client': { secret: 'agent-secret', sub: 'oauth-agent', org: 'default' },
      'auditor-client': { secret: 'auditor-secret', sub: 'oauth-auditor', org: 'default', roles: ['auditor'] },
    },
  });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tollgate-oauth-'));
  const config = path.join(dir, 'oauth.json');
  fs.writeFileSync(config, JSON.stringify({
    issuers: [{ issuer: as.issuer, jwks_uri: `${as.issuer}/jwks`, algorithms: ['EdDSA'] }],
    scopes_supported: ['mcp:tools'],
    tool_scopes: { list_directory: 'files:read' },
  }));
  up = await new Up({ extraArgs: ['--oauth', config] }).start();
  MCP = `${up.http}/mcp`;
  V1 = `${up.http}/v1`;
  PRM = `${up.http}/.well-known/oauth-protected-resource/mcp`;
});
after(async () => {
  await up?.stop();
  await as?.close();
});

async function connect() {
  const provider = new ClientCredentialsProvider({ clientId: 'agent-client', clientSecret: 'agent-secret',
                                                   expectedIssuer: as.issuer });
  const client = new Client({ name: 'tollgate-oauth-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(MCP), { authProvider: provider }));
  return { client, provider };
}

// A raw initialize to /mcp with `token` (none when undefined).
async function postMcp(token) {
  const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
  if (token !== undefined) headers.authorization = `Bearer ${token}`;
  const res = await fetch(MCP, { method: 'POST', headers, body: JSON.stringify({
    jsonrpc: '2.0', id: 1, method: 'initialize',
    params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } }) });
  return { status: res.status, challenge: res.headers.get('www-authenticate') ?? '', body: await res.json().catch(() => null) };
}

// A token from the AS's token endpoint, as a client_credentials client gets one.
async function tokenFor(client, secret, resource, scope = '') {
  const res = await fetch(`${as.issuer}/token`, {
    method: 'POST',
    headers: { authorization: `Basic ${Buffer.from(`${client}:${secret}`).toString('base64')}`,
               'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'client_credentials', resource, scope }),
  });
  assert.equal(res.status, 200);
  return (await res.json()).access_token;
}

// The first object under `v` with method "oauth": the record of how a call was authenticated.
function findOAuthRecord(v) {
  if (v === null || typeof v !== 'object') return null;
  if (v.method === 'oauth' && 'jti' in v) return v;
  for (const x of Object.values(v)) {
    const found = findOAuthRecord(x);
    if (found) return found;
  }
  return null;
}

let echoRequestId;

test('the protected resource metadata names the resource and the authorization server', async () => {
  for (const [url, resource] of [[PRM, MCP], [`${up.http}/.well-known/oauth-protected-resource/v1`, V1],
                                 [`${up.http}/.well-known/oauth-protected-resource`, MCP]]) {
    const res = await fetch(url);  // no token
    assert.equal(res.status, 200, url);
    const m = await res.json();
    assert.equal(m.resource, resource);
    assert.deepEqual(m.authorization_servers, [as.issuer]);
    assert.deepEqual(m.bearer_methods_supported, ['header']);
    assert.deepEqual(m.scopes_supported, ['mcp:tools']);
  }
});

test('the SDK client discovers the AS, gets a token for /mcp and calls echo', async () => {
  const before = as.tokenRequests.length;
  const { client } = await connect();
  const asked = as.tokenRequests.slice(before);
  assert.equal(asked.length, 1, JSON.stringify(asked));
  assert.equal(asked[0].resource, MCP, 'the PRM resource, sent as RFC 8707 resource');
  assert.equal(asked[0].scope, 'mcp:tools', "the 401 challenge's scope");
  const { tools } = await client.listTools();
  assert.ok(tools.some((t) => t.name === 'echo'), tools.map((t) => t.name).join(','));
  const r = await client.callTool({ name: 'echo', arguments: { text: 'hello over oauth' } });
  assert.equal(r.isError, false, JSON.stringify(r));
  echoRequestId = r._meta['io.tollgate/request_id'];
  assert.ok(echoRequestId);
  await client.close();
});

test('a scoped tool triggers step-up: a second token with the larger scope, then the call runs', async () => {
  const { client, provider } = await connect();
  const before = as.tokenRequests.length;
  const r = await client.callTool({ name: 'list_directory', arguments: { path: '.' } });
  assert.ok(r._meta?.['io.tollgate/request_id'], `the call reached the gateway: ${JSON.stringify(r)}`);
  const asked = as.tokenRequests.slice(before);
  assert.equal(asked.length, 1, JSON.stringify(asked));
  assert.deepEqual(asked[0].scope.split(' ').sort(), ['files:read', 'mcp:tools']);
  assert.equal(asked[0].resource, MCP);
  assert.deepEqual(provider.tokens().scope.split(' ').sort(), ['files:read', 'mcp:tools']);
  await client.close();
});

test('the 403 step-up challenge names every scope the call needs', async () => {
  const token = await tokenFor('agent-client', 'agent-secret', MCP, 'mcp:tools');
  const init = await fetch(MCP, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json',
    accept: 'application/json, text/event-stream' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize',
    params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } }) });
  assert.equal(init.status, 200);
  const session = init.headers.get('mcp-session-id');
  const res = await fetch(MCP, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json',
    accept: 'application/json, text/event-stream', 'mcp-session-id': session, 'mcp-protocol-version': '2025-11-25' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'list_directory', arguments: { path: '.' } } }) });
  assert.equal(res.status, 403);
  assert.equal(res.headers.get('www-authenticate'),
               `Bearer error="insufficient_scope", scope="files:read", resource_metadata="${PRM}"`);
  assert.equal((await res.json()).error.code, 'E_INSUFFICIENT_SCOPE');
});

test('bad tokens get 401 with the challenge that leads back to the metadata', async () => {
  const now = Math.floor(Date.now() / 1000);
  const bad = {
    'wrong audience': as.mint(as.claims({ aud: V1 })),
    'another port': as.mint(as.claims({ aud: 'http://127.0.0.1:1/mcp' })),
    expired: as.mint(as.claims({ aud: MCP, exp: now - 600, iat: now - 900, nbf: now - 900 })),
    'wrong issuer': as.mint(as.claims({ aud: MCP, iss: 'http://127.0.0.1:1' })),
    'alg none': as.mint(as.claims({ aud: MCP }), { alg: 'none', typ: 'at+jwt' }),
    'no exp': as.mint(Object.fromEntries(Object.entries(as.claims({ aud: MCP })).filter(([k]) => k !== 'exp'))),
  };
  for (const [why, token] of Object.entries(bad)) {
    const r = await postMcp(token);
    assert.equal(r.status, 401, why);
    assert.ok(r.challenge.startsWith(`Bearer resource_metadata="${PRM}"`), `${why}: ${r.challenge}`);
    assert.match(r.challenge, /error="invalid_token"/, why);
    assert.match(r.challenge, /scope="mcp:tools"/, why);
    assert.equal(r.body.error.code, 'E_UNAUTHORIZED', why);
  }
  const none = await postMcp(undefined);
  assert.equal(none.status, 401);
  assert.equal(none.challenge, `Bearer resource_metadata="${PRM}", scope="mcp:tools"`, 'no error without a token');
  // A good token for /mcp is still good: the refusals were the tokens'.
  assert.equal((await postMcp(as.mint(as.claims({ aud: MCP })))).status, 200);
});

test("an auditor's OAuth token reads /v1/whoami, and is no token for /mcp", async () => {
  const token = await tokenFor('auditor-client', 'auditor-secret', V1);
  const res = await fetch(`${V1}/whoami`, { headers: { authorization: `Bearer ${token}` } });
  assert.equal(res.status, 200);
  const who = await res.json();
  assert.equal(who.identity, 'oauth-auditor');
  assert.equal(who.org_id, 'default');
  assert.deepEqual(who.roles, ['auditor']);
  assert.equal(who.oauth.issuer, as.issuer);
  assert.equal(who.oauth.subject, 'oauth-auditor');
  assert.equal(JSON.stringify(who).includes(token), false);
  const refused = await fetch(`${V1}/whoami`, { headers: { authorization: 'Bearer nope' } });
  assert.equal(refused.status, 401);
  assert.ok((refused.headers.get('www-authenticate') ?? '').startsWith(
    `Bearer resource_metadata="${up.http}/.well-known/oauth-protected-resource/v1"`));
  assert.equal((await postMcp(token)).status, 401, 'aud names /v1, not /mcp');
  // Static tokens still work beside OAuth.
  assert.equal((await up.api('/v1/whoami')).status, 200);
});

test('request.received records how the call was authenticated, never the token', async () => {
  assert.ok(echoRequestId, 'the echo test ran first');
  const events = await up.events({ request: echoRequestId });
  const received = events.find((e) => e.type === 'request.received');
  assert.ok(received, JSON.stringify(events));
  const text = JSON.stringify(events);
  for (const token of as.issued) {
    assert.equal(text.includes(token), false, 'an access token in the log');
    assert.equal(up.stderr.includes(token), false, 'an access token on stderr');
  }
  const auth = findOAuthRecord(received);
  assert.ok(auth, `request.received names the OAuth grant: ${JSON.stringify(received)}`);
  assert.equal(auth.issuer, as.issuer);
  assert.equal(auth.subject, 'oauth-agent');
  assert.ok(as.tokenRequests.some((t) => t.jti === auth.jti), 'the jti of a token the AS issued');
  assert.deepEqual(auth.scopes, ['mcp:tools']);
});
