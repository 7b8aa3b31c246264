// A real OAuth 2 authorization server for the OAuth pass-through tests: npm `oauth2-mock-server`
// (installed by `make` into .tools/oauth-as). It runs the authorization code grant with PKCE
// (S256, verified), signs RS256 JWT access tokens and publishes its keys at /jwks and its metadata
// at /.well-known/openid-configuration. Two hooks give it what an MCP deployment needs:
// RFC 8707 audience binding (`aud` = the `resource` the client asked for, at /authorize or
// /token) and the scope granted at /authorize. Users need no login: /authorize redirects at once,
// and the `sub` of a token is its client id, so two clients are two users. Revocation (RFC 7009)
// is remembered: a token POSTed to /revoke is `active: false` at /introspect (RFC 7662) from then
// on (both take a JSON body `{"token": ...}`: the mock parses only JSON there).
//
//   node tests/peers/oauth_as.mjs --port N [--prefix .tools/oauth-as]   (from the repository root)
import { createRequire } from 'node:module';
import { resolve } from 'node:path';

const option = (name, fallback) => {
  const index = process.argv.indexOf(name);
  return index > 0 ? process.argv[index + 1] : fallback;
};
const port = Number(option('--port', '0'));
const require = createRequire(resolve(option('--prefix', '.tools/oauth-as'), 'package.json'));
const { OAuth2Server } = require('oauth2-mock-server');
const server = new OAuth2Server();
await server.issuer.keys.generate('RS256');
const grants = new Map(); // authorization code -> { scope, resource }
const revoked = new Set(); // access tokens revoked at /revoke

server.service.on('beforeRevoke', (_response, req) => {
  if (typeof req.body?.token === 'string') revoked.add(req.body.token);
});

server.service.on('beforeIntrospect', (response, req) => {
  const token = req.body?.token;
  response.body = { active: typeof token === 'string' && !revoked.has(token) };
});

server.service.on('beforeAuthorizeRedirect', (redirect, req) => {
  const code = redirect.url.searchParams.get('code');
  if (code) grants.set(code, { scope: req.query.scope ?? '', resource: req.query.resource });
});

server.service.on('beforeTokenSigning', (token, req) => {
  const body = req.body ?? {};
  if (body.grant_type !== 'authorization_code') return;
  const grant = grants.get(body.code) ?? {};
  token.payload.aud = body.resource ?? grant.resource;
  token.payload.scope = grant.scope ?? '';
  token.payload.sub = body.client_id;
  token.payload.client_id = body.client_id;
});

server.service.on('beforeResponse', (response, req) => {
  const body = req.body ?? {};
  if (body.grant_type === 'authorization_code') {
    response.body.scope = (grants.get(body.code) ?? {}).scope ?? '';
    grants.delete(body.code);
  }
});

// The address the tests use (not `localhost`), with the trailing slash pydantic's AnyHttpUrl gives
// a root URL: mcp 1.x names its authorization server that way, and clients compare issuers exactly.
server.issuer.url = `http://127.0.0.1:${port}/`;
await server.start(port, '127.0.0.1');
console.log(`oauth2-mock-server issuer ${server.issuer.url}`);
for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, async () => { await server.stop(); process.exit(0); });
}
