// Access tokens: GET /auth/me and createAccessTokenGuard accept only RS256 tokens signed by a
// published key of this service, with the right iss, aud and app_id, within their lifetime.
import t, { type Test } from 'tap';
import { createAccessTokenGuard } from '../../src/auth/mount.js';
import { HttpError } from '../../src/http/errors.js';
import { startAuthHarness, type TestApp, type Tokens } from './fixtures/harness.js';
import { base64url, forgeHs256, forgeRs256, headerOf, otherRsaKey, serviceSigningKey, validClaims } from './fixtures/tokens.js';

const h = await startAuthHarness();
t.teardown(() => h.close());

let app: TestApp;
let tokens: Tokens;
t.beforeEach(async () => { ({ app, tokens } = await h.startFresh({ session: true })); });

const INVALID = { error: { code: 'TOKEN_INVALID', message: 'Invalid access token' } };

async function expectRejected(t: Test, token: string, body: unknown = INVALID): Promise<void> {
  const reply = await h.me(token);
  t.equal(reply.status, 401);
  t.same(reply.body, body);
}

async function forgeWithServiceKey(header: Record<string, unknown>, claims: Record<string, unknown>): Promise<string> {
  const key = await serviceSigningKey(h);
  return forgeRs256({ alg: 'RS256', typ: 'JWT', kid: key.kid, ...header }, claims, key.privateKey);
}

t.test('GET /auth/me answers the token\'s user_id, app_id, tenant_id and roles only', async (t) => {
  const reply = await h.me(tokens.access_token);
  t.equal(reply.status, 200);
  t.same(reply.body, { user_id: tokens.user_id, app_id: 'app-a', tenant_id: null, roles: [] });
  t.equal(reply.headers.get('cache-control'), 'no-store');
});

t.test('a token forged with the service key and valid claims is accepted (the control case)', async (t) => {
  const token = await forgeWithServiceKey({}, validClaims(h, { sub: tokens.user_id }));
  t.equal((await h.me(token)).status, 200);
});

t.test('alg none is 401 TOKEN_INVALID', async (t) => {
  const claims = validClaims(h);
  await expectRejected(t, `${base64url({ alg: 'none', typ: 'JWT' })}.${base64url(claims)}.`);
  await expectRejected(t, `${base64url({ alg: 'none', typ: 'JWT' })}.${base64url(claims)}.${base64url('x')}`);
  await expectRejected(t, `${base64url({ alg: 'None', kid: headerOf(tokens.access_token).kid })}.${base64url(claims)}.${base64url('x')}`);
});

t.test('HS256 signed with the public key as HMAC secret is 401 TOKEN_INVALID', async (t) => {
  const key = await serviceSigningKey(h);
  const jwks = (await h.get('/.well-known/jwks.json')).body;
  const publicJwk = JSON.stringify(jwks.keys[0]);
  const { createPublicKey } = await import('node:crypto');
  const pem = createPublicKey({ key: jwks.keys[0], format: 'jwk' }).export({ format: 'pem', type: 'spki' });
  for (const secret of [publicJwk, pem]) {
    await expectRejected(t, forgeHs256({ alg: 'HS256', typ: 'JWT', kid: key.kid }, validClaims(h), secret));
  }
});

t.test('a token signed by another RSA key, even with the service\'s kid, is 401 TOKEN_INVALID', async (t) => {
  const key = await serviceSigningKey(h);
  const { privateKey } = otherRsaKey();
  await expectRejected(t, forgeRs256({ alg: 'RS256', typ: 'JWT', kid: key.kid }, validClaims(h), privateKey));
});

t.test('another algorithm (RS512, PS256, ES256) is 401 TOKEN_INVALID', async (t) => {
  const key = await serviceSigningKey(h);
  const { sign, generateKeyPairSync, constants } = await import('node:crypto');
  const claims = validClaims(h);
  const rs512Input = `${base64url({ alg: 'RS512', kid: key.kid })}.${base64url(claims)}`;
  await expectRejected(t, `${rs512Input}.${sign('sha512', Buffer.from(rs512Input), key.privateKey).toString('base64url')}`);
  const ps256Input = `${base64url({ alg: 'PS256', kid: key.kid })}.${base64url(claims)}`;
  const pss = sign('sha256', Buffer.from(ps256Input), { key: key.privateKey, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: 32 });
  await expectRejected(t, `${ps256Input}.${pss.toString('base64url')}`);
  const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const es256Input = `${base64url({ alg: 'ES256', kid: key.kid })}.${base64url(claims)}`;
  await expectRejected(t, `${es256Input}.${sign('sha256', Buffer.from(es256Input), { key: ec.privateKey, dsaEncoding: 'ieee-p1363' }).toString('base64url')}`);
});

t.test('an unknown, missing or malformed kid is 401 TOKEN_INVALID', async (t) => {
  const key = await serviceSigningKey(h);
  const claims = validClaims(h);
  for (const kid of ['unknown-kid', '', 'x'.repeat(5000), 42, null, ['a'], { $ne: 1 }, "' or 1=1 --"]) {
    await expectRejected(t, forgeRs256({ alg: 'RS256', typ: 'JWT', kid }, claims, key.privateKey));
  }
  await expectRejected(t, forgeRs256({ alg: 'RS256', typ: 'JWT' }, claims, key.privateKey));
});

t.test('a tampered payload is 401 TOKEN_INVALID', async (t) => {
  const [header, payload, signature] = tokens.access_token.split('.');
  const claims = JSON.parse(Buffer.from(payload!, 'base64url').toString());
  for (const change of [{ roles: ['owner'] }, { sub: '00000000-0000-4000-8000-000000000000' }, { exp: claims.exp + 3600 }]) {
    await expectRejected(t, `${header}.${base64url({ ...claims, ...change })}.${signature}`);
  }
  await expectRejected(t, `${header}.${payload}.${signature!.slice(0, -4)}AAAA`);
});

t.test('an expired token is 401 TOKEN_EXPIRED', async (t) => {
  h.clock.advance(30 * 60_000 + 6000); // past exp and the 5 s clock tolerance
  await expectRejected(t, tokens.access_token, { error: { code: 'TOKEN_EXPIRED', message: 'The access token has expired' } });
});

t.test('a token accepted before (remembered by the worker) is refused once it expires, as on first sight', async (t) => {
  t.equal((await h.me(tokens.access_token)).status, 200);
  h.clock.advance(29 * 60_000);
  t.equal((await h.me(tokens.access_token)).status, 200);
  h.clock.advance(60_000 + 6000);
  await expectRejected(t, tokens.access_token, { error: { code: 'TOKEN_EXPIRED', message: 'The access token has expired' } });
});

t.test('a token is accepted until it expires', async (t) => {
  h.clock.advance(29 * 60_000);
  t.equal((await h.me(tokens.access_token)).status, 200);
});

t.test('a token that is not yet valid (nbf or iat in the future) is 401 TOKEN_INVALID', async (t) => {
  const now = Math.floor(h.clock.now() / 1000);
  await expectRejected(t, await forgeWithServiceKey({}, validClaims(h, { nbf: now + 600 })));
  await expectRejected(t, await forgeWithServiceKey({}, validClaims(h, { iat: now + 600, exp: now + 2400 })));
});

t.test('a wrong iss is 401 TOKEN_INVALID', async (t) => {
  for (const iss of ['http://evil.test', 'http://auth.test/', undefined]) {
    await expectRejected(t, await forgeWithServiceKey({}, validClaims(h, { iss })));
  }
});

t.test('aud different from app_id, or claims of the wrong type, are 401 TOKEN_INVALID', async (t) => {
  const cases = [
    { aud: 'app-b' },
    { aud: ['app-a'] },
    { app_id: 'app-b' },
    { sub: 'not-a-uuid' },
    { roles: ['superuser'] },
    { roles: 'owner' },
    { tenant_id: 'not-a-uuid' },
    { exp: undefined },
  ];
  for (const change of cases) {
    await expectRejected(t, await forgeWithServiceKey({}, validClaims(h, change)));
  }
});

t.test('jwk and jku headers are ignored: a self-signed token naming its own key is 401 TOKEN_INVALID', async (t) => {
  const { privateKey, publicKey } = otherRsaKey();
  const jwk = { ...publicKey.export({ format: 'jwk' }), kid: 'attacker', alg: 'RS256' };
  await expectRejected(t, forgeRs256({ alg: 'RS256', typ: 'JWT', kid: 'attacker', jwk }, validClaims(h), privateKey));
  await expectRejected(t, forgeRs256({ alg: 'RS256', typ: 'JWT', kid: 'attacker', jku: 'http://127.0.0.1:1/jwks.json' }, validClaims(h), privateKey));
  await expectRejected(t, forgeRs256({ alg: 'RS256', typ: 'JWT', jwk }, validClaims(h), privateKey));
});

t.test('an unknown critical header is 401 TOKEN_INVALID', async (t) => {
  await expectRejected(t, await forgeWithServiceKey({ crit: ['exp-2'], 'exp-2': 1 }, validClaims(h)));
});

t.test('malformed Authorization headers are 401 TOKEN_INVALID', async (t) => {
  const token = tokens.access_token;
  const headers = [
    undefined, '', 'Bearer', 'Bearer ', `Basic ${token}`, `Token ${token}`, `Bearer${token}`, `Bearer ${token} extra`,
    `Bearer ${token.split('.').slice(0, 2).join('.')}`, `Bearer ${token}.x`, 'Bearer a.b.c', 'Bearer ...', `Bearer "${token}"`,
    `Bearer ${token.replace('.', '%2E')}`, `Bearer ${token}, Bearer ${token}`,
  ];
  for (const authorization of headers) {
    const reply = await h.get('/auth/me', authorization === undefined ? {} : { authorization });
    t.equal(reply.status, 401, JSON.stringify(authorization));
    t.equal(reply.body.error.code, 'TOKEN_INVALID');
  }
});

t.test('the Bearer scheme name is case-insensitive', async (t) => {
  t.equal((await h.get('/auth/me', { authorization: `bearer ${tokens.access_token}` })).status, 200);
});

t.test('a refresh token used as a Bearer token is 401 TOKEN_INVALID', async (t) => {
  const reply = await h.me(tokens.refresh_token);
  t.equal(reply.status, 401);
  t.equal(reply.body.error.code, 'TOKEN_INVALID');
});

t.test('the guard accepts a token of its app and returns its claims', async (t) => {
  const guard = createAccessTokenGuard({ appSlug: 'app-a', issuer: h.issuer, keys: h.service.accessTokenKeys, clock: h.clock });
  const claims = await guard(`Bearer ${tokens.access_token}`);
  t.match(claims, { sub: tokens.user_id, app_id: 'app-a', aud: 'app-a', tenant_id: null, roles: [] });
});

t.test('the guard rejects a token of app A at app B with 401 TOKEN_INVALID', async (t) => {
  const guard = createAccessTokenGuard({ appSlug: 'app-b', issuer: h.issuer, keys: h.service.accessTokenKeys, clock: h.clock });
  await t.rejects(guard(`Bearer ${tokens.access_token}`), new HttpError(401, 'TOKEN_INVALID', 'Invalid access token'));
});

t.test('the guard rejects a missing header, a refresh token and an expired token', async (t) => {
  const guard = createAccessTokenGuard({ appSlug: 'app-a', issuer: h.issuer, keys: h.service.accessTokenKeys, clock: h.clock });
  await t.rejects(guard(undefined), { status: 401, code: 'TOKEN_INVALID' });
  await t.rejects(guard(`Bearer ${tokens.refresh_token}`), { status: 401, code: 'TOKEN_INVALID' });
  h.clock.advance(31 * 60_000);
  await t.rejects(guard(`Bearer ${tokens.access_token}`), { status: 401, code: 'TOKEN_EXPIRED' });
});

t.test('the guard with a role admits that role and higher ones, and refuses lower ones with 403 INSUFFICIENT_ROLE', async (t) => {
  const tenant = await h.createTenant(app, 'Acme');
  const guard = createAccessTokenGuard({ appSlug: 'app-a', role: 'staff', issuer: h.issuer, keys: h.service.accessTokenKeys, clock: h.clock });
  await t.rejects(guard(`Bearer ${tokens.access_token}`), { status: 403, code: 'INSUFFICIENT_ROLE' }, 'no role');
  let refresh = tokens.refresh_token;
  for (const [role, admitted] of [['viewer', false], ['staff', true], ['admin', true], ['owner', true]] as const) {
    await h.assignRole(app, tokens.user_id, tenant, role);
    const next = await h.refresh(app, refresh);
    refresh = next.body.refresh_token;
    const verdict = guard(`Bearer ${next.body.access_token}`);
    if (admitted) t.match(await verdict, { roles: [role] }, role);
    else await t.rejects(verdict, { status: 403, code: 'INSUFFICIENT_ROLE', message: 'This route requires the role "staff" or higher' }, role);
  }
});

t.test('the guard refuses an unknown role name at creation', async (t) => {
  t.throws(() => createAccessTokenGuard({ appSlug: 'app-a', role: 'root' as never, issuer: h.issuer, keys: h.service.accessTokenKeys }), /unknown role "root"/);
});

t.test('the guard with a wrong issuer rejects the service\'s tokens', async (t) => {
  const guard = createAccessTokenGuard({ appSlug: 'app-a', issuer: 'http://other.test', keys: h.service.accessTokenKeys, clock: h.clock });
  await t.rejects(guard(`Bearer ${tokens.access_token}`), { status: 401, code: 'TOKEN_INVALID' });
});

t.test('the guard verifies with a JWKS fetched over HTTP', async (t) => {
  const guard = createAccessTokenGuard({ appSlug: 'app-a', issuer: h.issuer, keys: { jwksUrl: `${h.base}/.well-known/jwks.json` }, clock: h.clock });
  t.match(await guard(`Bearer ${tokens.access_token}`), { sub: tokens.user_id });
  const { privateKey } = otherRsaKey();
  await t.rejects(guard(`Bearer ${forgeRs256({ alg: 'RS256', kid: headerOf(tokens.access_token).kid }, validClaims(h), privateKey)}`), { status: 401, code: 'TOKEN_INVALID' });
});

t.test('the guard verifies with a fixed JWKS', async (t) => {
  const jwks = (await h.get('/.well-known/jwks.json')).body;
  const guard = createAccessTokenGuard({ appSlug: 'app-a', issuer: h.issuer, keys: { jwks }, clock: h.clock });
  t.match(await guard(`Bearer ${tokens.access_token}`), { sub: tokens.user_id });
});
