// A local OAuth 2.1 authorization server for the OAuth tests (loopback
// only): RFC 8414 metadata, a client_credentials token endpoint
// (client_secret_basic) and its JWKS. It issues EdDSA (Ed25519) at+jwt
// access tokens signed with node:crypto, aud = the RFC 8707 resource the
// client sent, and records every token request so a test can see what the
// client asked for. `mint` signs any claims/header, for tokens a real AS
// would never issue (expired, wrong audience, alg none...).
import http from 'node:http';
import crypto from 'node:crypto';

const b64url = (buf) => Buffer.from(buf).toString('base64url');
const readBody = (req) => new Promise((r) => { let b = ''; req.on('data', (c) => { b += c; }); req.on('end', () => r(b)); });

// clients: { id: { secret, sub, org, roles } }
export async function startAuthServer({ clients }) {
  const { publicKey, privateKey } = crypto.generateKeyPairSync('ed25519');
  const jwk = { ...publicKey.export({ format: 'jwk' }), kid: 'k1', alg: 'EdDSA', use: 'sig' };
  const tokenRequests = [];
  const as = {
    issuer: '',
    tokenRequests,
    issued: [],  // every access token handed out, to look for in logs
    jwksFetches: 0,
    mint(claims, header = { alg: 'EdDSA', typ: 'at+jwt', kid: 'k1' }) {
      const input = `${b64url(JSON.stringify(header))}.${b64url(JSON.stringify(claims))}`;
      const sig = header.alg === 'none' ? '' : b64url(crypto.sign(null, Buffer.from(input), privateKey));
      return `${input}.${sig}`;
    },
    claims(overrides = {}) {
      const now = Math.floor(Date.now() / 1000);
      return { iss: as.issuer, sub: 'oauth-agent', org: 'default', iat: now, nbf: now, exp: now + 300,
               jti: crypto.randomUUID(), ...overrides };
    },
  };
  const server = http.createServer(async (req, res) => {
    const body = await readBody(req);
    const json = (code, o, headers = {}) => {
      res.writeHead(code, { 'content-type': 'application/json', ...headers });
      res.end(JSON.stringify(o));
    };
    if (req.method === 'GET' && req.url === '/.well-known/oauth-authorization-server') {
      return json(200, {
        issuer: as.issuer, authorization_endpoint: `${as.issuer}/authorize`, token_endpoint: `${as.issuer}/token`,
        jwks_uri: `${as.issuer}/jwks`, response_types_supported: ['code'], grant_types_supported: ['client_credentials'],
        token_endpoint_auth_methods_supported: ['client_secret_basic'], code_challenge_methods_supported: ['S256'],
      });
    }
    if (req.method === 'GET' && req.url === '/jwks') {
      as.jwksFetches++;
      return json(200, { keys: [jwk] }, { 'cache-control': 'max-age=300' });
    }
    if (req.method === 'POST' && req.url === '/token') {
      const p = new URLSearchParams(body);
      const [id, secret] = Buffer.from((req.headers.authorization ?? '').replace(/^Basic /, ''), 'base64')
        .toString().split(':');
      const client = clients[id];
      if (!client || client.secret !== secret) return json(401, { error: 'invalid_client' });
      if (p.get('grant_type') !== 'client_credentials') return json(400, { error: 'unsupported_grant_type' });
      const scope = p.get('scope') ?? '';
      const resource = p.get('resource');
      tokenRequests.push({ client: id, scope, resource });
      if (!resource) return json(400, { error: 'invalid_target', error_description: 'resource required' });
      const claims = as.claims({ sub: client.sub, org: client.org, roles: client.roles, aud: resource, scope,
                                 client_id: id });
      const access_token = as.mint(claims);
      as.issued.push(access_token);
      tokenRequests.at(-1).jti = claims.jti;
      return json(200, { access_token, token_type: 'Bearer', expires_in: 300, scope });
    }
    json(404, { error: 'not_found' });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  as.issuer = `http://127.0.0.1:${server.address().port}`;
  as.close = () => new Promise((r) => server.close(r));
  return as;
}
