// POST /oauth/revoke (RFC 7009) and POST /oauth/introspect (RFC 7662): client authentication
// (RFC 6749 section 2.3.1), the RFCs' examples, and the answers for active, expired, revoked,
// rotated and foreign tokens.
import t from 'tap';
import { startAuthHarness, type TestApp, type Tokens } from './fixtures/harness.js';
import { claimsOf, forgeRs256, otherRsaKey, serviceSigningKey, validClaims } from './fixtures/tokens.js';

const h = await startAuthHarness();
t.teardown(() => h.close());

let app: TestApp;
let tokens: Tokens;
t.beforeEach(async () => { ({ app, tokens } = await h.startFresh({ session: true })); });

const FORM = 'application/x-www-form-urlencoded';

function basic(id: string, secret: string): string {
  return `Basic ${Buffer.from(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`).toString('base64')}`;
}

/** A form POST authenticated with Basic credentials of `client` (default: app-a). */
function oauth(path: string, form: Record<string, string>, client: TestApp = app) {
  return h.request('POST', path, { raw: new URLSearchParams(form).toString(), headers: { 'content-type': FORM, authorization: basic(client.id, client.secret) } });
}
const introspect = (token: string, client?: TestApp) => oauth('/oauth/introspect', { token }, client);
const revoke = (token: string, client?: TestApp) => oauth('/oauth/revoke', { token }, client);

t.test('RFC 7662 section 2.1 example: an active access token is introspected with Basic credentials', async (t) => {
  const reply = await oauth('/oauth/introspect', { token: tokens.access_token, token_type_hint: 'access_token' });
  t.equal(reply.status, 200);
  t.match(reply.headers.get('content-type'), /^application\/json/);
  t.equal(reply.headers.get('cache-control'), 'no-store');
  const claims = claimsOf(tokens.access_token);
  t.same(reply.body, {
    active: true, token_type: 'Bearer', client_id: app.id, sub: tokens.user_id, aud: 'app-a', iss: 'http://auth.test',
    iat: claims.iat, exp: claims.exp, app_id: 'app-a', tenant_id: null, roles: [],
  });
});

t.test('an active refresh token is introspected with client_id and client_secret in the form', async (t) => {
  const reply = await h.request('POST', '/oauth/introspect', {
    raw: new URLSearchParams({ token: tokens.refresh_token, client_id: app.id, client_secret: app.secret }).toString(),
    headers: { 'content-type': FORM },
  });
  t.equal(reply.status, 200);
  const now = Math.floor(h.clock.now() / 1000);
  t.same(reply.body, { active: true, token_type: 'refresh_token', client_id: app.id, sub: tokens.user_id, iss: 'http://auth.test', iat: now, exp: now + 30 * 24 * 3600 });
});

t.test('RFC 7662 section 2.2: an expired access token is {"active": false} and nothing else', async (t) => {
  h.clock.advance(31 * 60_000);
  const reply = await introspect(tokens.access_token);
  t.equal(reply.status, 200);
  t.same(reply.body, { active: false });
});

t.test('expired, rotated, revoked refresh tokens and a deleted user\'s are inactive', async (t) => {
  const rotated = tokens.refresh_token;
  const next = (await h.refresh(app, rotated)).body.refresh_token as string;
  t.same((await introspect(rotated)).body, { active: false }, 'rotated');
  t.same((await introspect(next)).body.active, true, 'its child is active');
  await h.post('/auth/revoke', { ...h.credentials(app), refresh_token: next });
  t.same((await introspect(next)).body, { active: false }, 'revoked');
  const other = await h.login(app, 'bob@example.com');
  h.clock.advance(31 * 24 * 3600 * 1000);
  t.same((await introspect(other.refresh_token)).body, { active: false }, 'expired after 30 days');
  const third = await h.login(app, 'cid@example.com');
  await h.admin('DELETE', `/admin/users/${third.user_id}`);
  t.same((await introspect(third.refresh_token)).body, { active: false }, 'user deleted');
});

t.test('a foreign token (another app\'s, unknown, forged, malformed) is {"active": false}', async (t) => {
  const appB = await h.createApp('app-b');
  const theirs = await h.login(appB, 'ann@example.com');
  t.same((await introspect(theirs.access_token)).body, { active: false }, 'another app\'s access token');
  t.same((await introspect(theirs.refresh_token)).body, { active: false }, 'another app\'s refresh token');
  t.same((await introspect(`rt_${'A'.repeat(43)}`)).body, { active: false }, 'unknown refresh token');
  const forged = forgeRs256({ alg: 'RS256', typ: 'JWT', kid: (await serviceSigningKey(h)).kid }, validClaims(h), otherRsaKey().privateKey);
  t.same((await introspect(forged)).body, { active: false }, 'a JWT with a bad signature');
  t.same((await introspect('mF_9.B5f-4.1JqM')).body, { active: false }, 'RFC 7662\'s example token string');
  t.same((await introspect(theirs.refresh_token, appB)).body.active, true, 'the same token is active for its own app');
});

t.test('RFC 7009 section 2.1 example: revoking a refresh token revokes its session; the answer is 200 with an empty body', async (t) => {
  const reply = await oauth('/oauth/revoke', { token: tokens.refresh_token, token_type_hint: 'refresh_token' });
  t.equal(reply.status, 200);
  t.equal(reply.body, undefined);
  const refresh = await h.refresh(app, tokens.refresh_token);
  t.equal(refresh.status, 401);
  t.equal(refresh.body.error.code, 'TOKEN_REVOKED');
  const [family] = await h.sql`select revoked_reason from refresh_families`;
  t.equal(family!.revoked_reason, 'logout');
});

t.test('RFC 7009 section 2.2: revoking an already revoked, rotated, expired or unknown token is 200', async (t) => {
  t.equal((await revoke(tokens.refresh_token)).status, 200);
  t.equal((await revoke(tokens.refresh_token)).status, 200, 'again');
  t.equal((await revoke(`rt_${'B'.repeat(43)}`)).status, 200, 'unknown');
  t.equal((await revoke('not-a-token')).status, 200, 'malformed');
  h.clock.advance(31 * 60_000);
  t.equal((await revoke(tokens.access_token)).status, 200, 'an expired access token');
});

t.test('a wrong token type hint is ignored (RFC 7009 section 2.1)', async (t) => {
  const reply = await oauth('/oauth/revoke', { token: tokens.refresh_token, token_type_hint: 'access_token' });
  t.equal(reply.status, 200);
  t.equal((await h.refresh(app, tokens.refresh_token)).body.error.code, 'TOKEN_REVOKED');
  t.equal((await oauth('/oauth/introspect', { token: tokens.access_token, token_type_hint: 'made_up' })).body.active, true);
});

t.test('revoking a live access token of this app is 400 unsupported_token_type (RFC 7009 section 2.2.1)', async (t) => {
  const reply = await revoke(tokens.access_token);
  t.equal(reply.status, 400);
  t.same(reply.body, { error: 'unsupported_token_type', error_description: 'Access tokens are not revocable; revoke the refresh token of the session' });
  t.equal((await h.refresh(app, tokens.refresh_token)).status, 200, 'the session is untouched');
});

t.test('revoking another app\'s live token is 400 unauthorized_client and leaves it valid', async (t) => {
  const appB = await h.createApp('app-b');
  const theirs = await h.login(appB, 'ann@example.com');
  for (const token of [theirs.refresh_token, theirs.access_token]) {
    const reply = await revoke(token);
    t.equal(reply.status, 400);
    t.same(reply.body, { error: 'unauthorized_client', error_description: 'The token was issued to another client' });
  }
  t.equal((await h.refresh(appB, theirs.refresh_token)).status, 200);
});

t.test('wrong or missing client credentials are 401 invalid_client with WWW-Authenticate', async (t) => {
  for (const [path, headers, form] of [
    ['/oauth/revoke', { authorization: basic(app.id, 'as_wrong') }, { token: tokens.refresh_token }],
    ['/oauth/introspect', { authorization: basic('not-a-uuid', app.secret) }, { token: tokens.refresh_token }],
    ['/oauth/introspect', {}, { token: tokens.refresh_token }],
    ['/oauth/introspect', {}, { token: tokens.refresh_token, client_id: app.id, client_secret: 'as_wrong' }],
    ['/oauth/introspect', { authorization: 'Basic %%%' }, { token: tokens.refresh_token }],
    ['/oauth/introspect', { authorization: `Basic ${Buffer.from('no-colon').toString('base64')}` }, { token: tokens.refresh_token }],
  ] as const) {
    const reply = await h.request('POST', path, { raw: new URLSearchParams(form).toString(), headers: { 'content-type': FORM, ...headers } });
    t.equal(reply.status, 401, `${path} ${JSON.stringify(headers)}`);
    t.equal(reply.body.error, 'invalid_client');
    t.equal(reply.headers.get('www-authenticate'), 'Basic realm="auth-server", charset="UTF-8"');
  }
  t.equal((await h.refresh(app, tokens.refresh_token)).status, 200, 'nothing was revoked');
});

t.test('a malformed request is 400 invalid_request', async (t) => {
  const cases: Array<[string, { raw: string; headers: Record<string, string> }]> = [
    ['JSON instead of a form', { raw: JSON.stringify({ token: tokens.refresh_token }), headers: { 'content-type': 'application/json', authorization: basic(app.id, app.secret) } }],
    ['no token', { raw: 'token_type_hint=refresh_token', headers: { 'content-type': FORM, authorization: basic(app.id, app.secret) } }],
    ['a repeated parameter', { raw: `token=${tokens.refresh_token}&token=x`, headers: { 'content-type': FORM, authorization: basic(app.id, app.secret) } }],
    ['an unknown parameter', { raw: `token=${tokens.refresh_token}&scope=all`, headers: { 'content-type': FORM, authorization: basic(app.id, app.secret) } }],
    ['a control character', { raw: 'token=a%00b', headers: { 'content-type': FORM, authorization: basic(app.id, app.secret) } }],
    ['an escape that is not UTF-8', { raw: 'token=rt_%FF', headers: { 'content-type': FORM, authorization: basic(app.id, app.secret) } }],
    ['two client authentication methods', { raw: `token=${tokens.refresh_token}&client_id=${app.id}&client_secret=${app.secret}`, headers: { 'content-type': FORM, authorization: basic(app.id, app.secret) } }],
  ];
  for (const [name, request] of cases) {
    const reply = await h.request('POST', '/oauth/revoke', request);
    t.equal(reply.status, 400, name);
    t.equal(reply.body.error, 'invalid_request', name);
    t.type(reply.body.error_description, 'string');
  }
  t.equal((await h.refresh(app, tokens.refresh_token)).status, 200, 'nothing was revoked');
});

t.test('the RFCs\' literal requests: their example client is unknown here; their example tokens are inactive', async (t) => {
  // RFC 7009 section 2.1 and RFC 7662 section 2.1 authenticate client s6BhdRkqt3 with this header.
  const example = 'Basic czZCaGRSa3F0MzpnWDFmQmF0M2JW';
  for (const [path, body] of [['/oauth/revoke', 'token=45ghiukldjahdnhzdauz&token_type_hint=refresh_token'], ['/oauth/introspect', 'token=mF_9.B5f-4.1JqM&token_type_hint=access_token']]) {
    const reply = await h.request('POST', path!, { raw: body!, headers: { 'content-type': FORM, authorization: example } });
    t.equal(reply.status, 401, path);
    t.same(reply.body, { error: 'invalid_client', error_description: 'Invalid app credentials' });
  }
  const revoked = await h.request('POST', '/oauth/revoke', { raw: 'token=45ghiukldjahdnhzdauz&token_type_hint=refresh_token', headers: { 'content-type': FORM, authorization: basic(app.id, app.secret) } });
  t.same([revoked.status, revoked.body], [200, undefined], 'RFC 7009\'s token, from a real client: 200, nothing to revoke');
  const introspected = await h.request('POST', '/oauth/introspect', { raw: 'token=mF_9.B5f-4.1JqM&token_type_hint=access_token', headers: { 'content-type': FORM, authorization: basic(app.id, app.secret) } });
  t.same([introspected.status, introspected.body], [200, { active: false }], 'RFC 7662\'s token: inactive');
});
