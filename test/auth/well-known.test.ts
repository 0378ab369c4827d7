// How a backend obtains the public keys: GET /.well-known/jwks.json and
// /.well-known/openid-configuration, signing-key rotation and retired-key publication.
import { createLocalJWKSet, createRemoteJWKSet, jwtVerify } from 'jose';
import t from 'tap';
import { startAuthHarness, type TestApp, type Tokens } from './fixtures/harness.js';
import { headerOf } from './fixtures/tokens.js';
import { SigningKeyRing } from '../../src/auth/tokens/signing-key-ring.js';

const h = await startAuthHarness();
t.teardown(() => h.close());

let app: TestApp;
let tokens: Tokens;
t.beforeEach(async () => { ({ app, tokens } = await h.startFresh({ session: true })); });

/**
 * What any backend of app `slug` does (a token is for one app only): verify the RS256 signature with
 * the service's public key from its JWKS, then check that aud and app_id equal its own slug.
 */
async function verifyAsBackend(token: string, slug: string, jwks: ReturnType<typeof createRemoteJWKSet>): Promise<Record<string, unknown>> {
  const { payload } = await jwtVerify(token, jwks, {
    algorithms: ['RS256'],
    issuer: h.issuer,
    audience: slug,
    currentDate: new Date(h.clock.now()),
  });
  if (payload.app_id !== slug) throw new Error('app_id does not match');
  return payload;
}

t.test('the JWKS lists the active public key, then the next one, with their kids and no private parts', async (t) => {
  const reply = await h.get('/.well-known/jwks.json');
  t.equal(reply.status, 200);
  t.equal(reply.headers.get('cache-control'), 'public, max-age=300');
  t.equal(reply.body.keys.length, 2);
  for (const key of reply.body.keys) {
    t.same(Object.keys(key).sort(), ['alg', 'e', 'kid', 'kty', 'n', 'use']);
    t.match(key, { kty: 'RSA', alg: 'RS256', use: 'sig', e: 'AQAB', kid: /^[A-Za-z0-9_-]{43}$/ });
    t.equal(Buffer.from(key.n, 'base64url').length, 256, 'a 2048-bit modulus');
  }
  const [active, next] = reply.body.keys;
  t.equal(headerOf(tokens.access_token).kid, active.kid, 'the first key signs');
  t.not(next.kid, active.kid);
  const stored = await h.sql`select kid, status from signing_keys where status <> 'retired' order by status`;
  t.same(stored.map((r) => ({ ...r })), [{ kid: active.kid, status: 'active' }, { kid: next.kid, status: 'next' }]);
});

t.test('the discovery document names the issuer, the jwks_uri and the revocation and introspection endpoints', async (t) => {
  const reply = await h.get('/.well-known/openid-configuration');
  t.equal(reply.status, 200);
  // The provider's part (authorization and token endpoints, ...) is checked by test/auth/provider.
  t.match(reply.body, {
    issuer: 'http://auth.test',
    jwks_uri: 'http://auth.test/.well-known/jwks.json',
    id_token_signing_alg_values_supported: ['RS256'],
    revocation_endpoint: 'http://auth.test/oauth/revoke',
    revocation_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post'],
    introspection_endpoint: 'http://auth.test/oauth/introspect',
    introspection_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post'],
  });
});

t.test('a backend verifies access tokens with createRemoteJWKSet and checks aud and app_id against its slug', async (t) => {
  const jwks = createRemoteJWKSet(new URL(`${h.base}/.well-known/jwks.json`));
  const payload = await verifyAsBackend(tokens.access_token, 'app-a', jwks);
  t.match(payload, { sub: tokens.user_id, app_id: 'app-a', aud: 'app-a', iss: 'http://auth.test', tenant_id: null, roles: [] });
  const other = await h.createApp('app-b');
  const foreign = await h.login(other, 'bob@example.com');
  await t.rejects(verifyAsBackend(foreign.access_token, 'app-a', jwks), { code: 'ERR_JWT_CLAIM_VALIDATION_FAILED' }, 'app B\'s token is not for app A');
  const tampered = tokens.access_token.replace(/\.[^.]+\./, `.${Buffer.from(JSON.stringify({ sub: tokens.user_id, app_id: 'app-a', aud: 'app-a', iss: h.issuer, exp: 9999999999, roles: ['owner'] })).toString('base64url')}.`);
  await t.rejects(verifyAsBackend(tampered, 'app-a', jwks), { code: 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED' });
});

t.test('rotating the signing key: new tokens use the new kid, tokens of the retired key still verify', async (t) => {
  const before = (await h.get('/.well-known/jwks.json')).body.keys[0].kid;
  const rotated = await h.admin('POST', '/admin/signing-keys/rotate');
  t.equal(rotated.status, 200);
  t.equal(rotated.body.retired_kid, before);
  t.not(rotated.body.kid, before);
  const jwksBody = (await h.get('/.well-known/jwks.json')).body;
  const kids = jwksBody.keys.map((k: { kid: string }) => k.kid);
  t.equal(kids.length, 3, 'the new active key, the new next key and the retired key');
  t.equal(kids[0], rotated.body.kid);
  t.equal(kids[2], before);
  const fresh = await h.refresh(app, tokens.refresh_token);
  t.equal(headerOf(fresh.body.access_token).kid, rotated.body.kid);
  const jwks = createRemoteJWKSet(new URL(`${h.base}/.well-known/jwks.json`));
  t.match(await verifyAsBackend(tokens.access_token, 'app-a', jwks), { sub: tokens.user_id }, 'old token');
  t.match(await verifyAsBackend(fresh.body.access_token, 'app-a', jwks), { sub: tokens.user_id }, 'new token');
  t.equal((await h.me(tokens.access_token)).status, 200);
  t.equal((await h.me(fresh.body.access_token)).status, 200);
});

t.test('a retired key stays published until every token it signed has expired, then leaves the JWKS', async (t) => {
  const oldKid = headerOf(tokens.access_token).kid;
  const rotated = await h.admin('POST', '/admin/signing-keys/rotate');
  h.clock.advance(30 * 60_000);
  let kids = (await h.get('/.well-known/jwks.json')).body.keys.map((k: { kid: string }) => k.kid);
  t.ok(kids.includes(oldKid), 'still published when its last token has just expired');
  h.clock.advance(2 * 60_000);
  kids = (await h.get('/.well-known/jwks.json')).body.keys.map((k: { kid: string }) => k.kid);
  t.equal(kids.length, 2);
  t.equal(kids[0], rotated.body.kid, 'only the active and the next key are left');
  t.notOk(kids.includes(oldKid));
  const late = await h.me(tokens.access_token);
  t.equal(late.status, 401, 'its tokens are no longer accepted either');
});

t.test('the key a rotation activates was published before the rotation: a JWKS cached earlier verifies its tokens', async (t) => {
  const cached = (await h.get('/.well-known/jwks.json')).body;
  const rotated = await h.admin('POST', '/admin/signing-keys/rotate');
  t.equal(rotated.status, 200);
  t.equal(rotated.body.kid, cached.keys[1].kid, 'the next key became active');
  t.equal(rotated.body.retired_kid, cached.keys[0].kid);
  const fresh = await h.refresh(app, tokens.refresh_token);
  t.equal(fresh.status, 200);
  t.equal(headerOf(fresh.body.access_token).kid, rotated.body.kid);
  t.match(await verifyAsBackend(fresh.body.access_token, 'app-a', createLocalJWKSet(cached)), { sub: tokens.user_id }, 'a backend that fetched the JWKS before the rotation accepts the new token');
  const after = (await h.get('/.well-known/jwks.json')).body.keys.map((k: { kid: string }) => k.kid);
  t.same(after.slice(0, 1).concat(after.slice(2)), [rotated.body.kid, rotated.body.retired_kid]);
  t.notOk(cached.keys.some((k: { kid: string }) => k.kid === after[1]), 'a new next key is published for the following rotation');
  const rows = await h.sql`select status, count(*)::int as n from signing_keys where status <> 'retired' group by status order by status`;
  t.same(rows.map((r) => ({ ...r })), [{ status: 'active', n: 1 }, { status: 'next', n: 1 }]);
});

t.test('a database without a next key (from before standby keys) gets one at start and rotates normally', async (t) => {
  await h.sql`delete from signing_keys where status = 'next'`;
  const ring = new SigningKeyRing(h.sql, h.clock, (await h.masterKey()).derive('signing-key-encryption'), { log: () => {} });
  await ring.start();
  ring.stop();
  const [next] = await h.sql`select kid from signing_keys where status = 'next'`;
  t.ok(next, 'a next key was created');
  const rotated = await h.admin('POST', '/admin/signing-keys/rotate');
  t.equal(rotated.body.kid, next!.kid);
});

t.test('signing-key rotation needs the admin key', async (t) => {
  const reply = await h.request('POST', '/admin/signing-keys/rotate');
  t.equal(reply.status, 401);
  t.equal(reply.body.error.code, 'ADMIN_KEY_INVALID');
});

t.test('the JWKS and discovery answer only GET', async (t) => {
  const reply = await h.post('/.well-known/jwks.json', {});
  t.equal(reply.status, 405);
  t.same(reply.body, { error: { code: 'METHOD_NOT_ALLOWED', message: 'Method POST is not allowed on /.well-known/jwks.json' } });
});
