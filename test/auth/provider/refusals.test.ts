// The provider's refusals, driven by oauth4webapi (a client library no one here wrote): each bad
// input gets the error code RFC 6749 or OpenID Connect Core names, never a 5xx, and no token is
// issued (no session starts, nothing new in the answer).
import { createHash, generateKeyPairSync, randomBytes } from 'node:crypto';
import * as oauth from 'oauth4webapi';
import { exportJWK, SignJWT } from 'jose';
import t from 'tap';
import { startAuthHarness, type TestApp } from '../fixtures/harness.js';
import { harnessFetch, OAuthBrowser } from '../fixtures/oauth-browser.js';
import { enrolTotp, totpCode } from '../fixtures/totp.js';
import { authorize, startCertifiedProvider } from '../fixtures/upstream-providers.js';

const h = await startAuthHarness();
t.teardown(() => h.close());

const REDIRECT = 'https://app.example/callback';
const NATIVE = 'http://127.0.0.1/native/callback';
let app: TestApp;
let web: { client_id: string; client_secret: string };
let as: oauth.AuthorizationServer;
const options = () => ({ [oauth.customFetch]: harnessFetch(h), [oauth.allowInsecureRequests]: true });

t.beforeEach(async () => {
  ({ app } = await h.startFresh());
  web = await createClient({ name: 'Web', redirect_uris: [REDIRECT, NATIVE], post_logout_redirect_uris: ['https://app.example/bye'] });
  as = await oauth.processDiscoveryResponse(new URL(h.issuer), await oauth.discoveryRequest(new URL(h.issuer), { ...options(), algorithm: 'oidc' }));
});

async function createClient(body: Record<string, unknown>): Promise<{ client_id: string; client_secret: string }> {
  const reply = await h.admin('POST', `/admin/apps/${app.id}/oauth-clients`, body);
  if (reply.status !== 201) throw new Error(`create client: ${reply.status} ${JSON.stringify(reply.body)}`);
  return reply.body;
}

function s256(verifier: string): string {
  return createHash('sha256').update(verifier).digest('base64url');
}

function authorizeUrl(parameters: Record<string, string>): string {
  return `${h.issuer}/oauth/authorize?${new URLSearchParams(parameters)}`;
}

/** Signs ann in through the page and returns the redirect back (with the code), its verifier and the browser. */
async function codeFor(clientId: string, redirectUri = REDIRECT, scope = 'openid offline_access') {
  const verifier = oauth.generateRandomCodeVerifier();
  const browser = new OAuthBrowser(h);
  const page = await browser.get(authorizeUrl({
    client_id: clientId, redirect_uri: redirectUri, response_type: 'code', scope, state: 'st', code_challenge: s256(verifier), code_challenge_method: 'S256',
  }));
  if (page.status !== 200) throw new Error(`authorize: ${page.status} ${page.location}`);
  const back = await browser.signInWithCode(page.html, 'ann@example.com');
  if (back.status !== 303) throw new Error(`sign-in: ${back.status}\n${back.html}`);
  return { callback: new URL(back.location!), verifier, browser };
}

/** The token endpoint's answer to a code exchange, as oauth4webapi reads it: the tokens or the error's code. */
async function exchange(clientId: string, auth: oauth.ClientAuth, callback: URL, verifier: string, redirectUri = REDIRECT): Promise<{ error: string; status: number } | oauth.TokenEndpointResponse> {
  const client: oauth.Client = { client_id: clientId };
  const parameters = oauth.validateAuthResponse(as, client, callback, 'st');
  const response = await oauth.authorizationCodeGrantRequest(as, client, auth, parameters, redirectUri, verifier, options());
  try {
    return await oauth.processAuthorizationCodeResponse(as, client, response, { requireIdToken: false });
  } catch (error) {
    if (error instanceof oauth.ResponseBodyError) return { error: error.error, status: error.status };
    // A 401 invalid_client carries WWW-Authenticate (RFC 6749 section 5.2); oauth4webapi reports the challenge and leaves the body unread.
    if (error instanceof oauth.WWWAuthenticateChallengeError) {
      if (error.cause[0]?.scheme !== 'basic') throw error;
      return { error: ((await error.response.json()) as { error: string }).error, status: error.status };
    }
    throw error;
  }
}

async function sessionCount(): Promise<number> {
  const [row] = await h.sql<{ n: number }[]>`select count(*)::int as n from refresh_families`;
  return row!.n;
}

/** Where /oauth/authorize sends the browser, and with which error. */
async function authorizeError(parameters: Record<string, string>): Promise<{ status: number; error: string | null; iss: string | null; state: string | null; location: string | null }> {
  const reply = await new OAuthBrowser(h).get(authorizeUrl(parameters));
  const back = reply.location ? new URL(reply.location) : null;
  return { status: reply.status, error: back?.searchParams.get('error') ?? null, iss: back?.searchParams.get('iss') ?? null, state: back?.searchParams.get('state') ?? null, location: reply.location };
}

const challenge = s256('a'.repeat(43));
const good = () => ({ client_id: web.client_id, redirect_uri: REDIRECT, response_type: 'code', scope: 'openid', state: 'st', code_challenge: challenge, code_challenge_method: 'S256' });

t.test('an unregistered or look-alike redirect URI is refused on our page, never followed', async (t) => {
  for (const redirect of [
    'https://evil.example/callback', 'https://app.example/callback/', 'https://app.example/callback?x=1', 'https://app.example/callbackx',
    'https://app.example.evil.example/callback', 'https://APP.example/callback', 'https://app.example/other/../callback', 'http://app.example/callback',
    'http://127.0.0.1/native/other', 'http://localhost:4000/native/callback',
  ]) {
    const reply = await new OAuthBrowser(h).get(authorizeUrl({ ...good(), redirect_uri: redirect }));
    t.equal(reply.status, 400, redirect);
    t.equal(reply.location, null, `${redirect}: no redirect`);
    t.match(reply.html, /has not registered; you were not sent there/);
  }
  const unknown = await new OAuthBrowser(h).get(authorizeUrl({ ...good(), client_id: '00000000-0000-0000-0000-000000000000' }));
  t.equal(unknown.status, 400);
  t.equal(unknown.location, null);
  t.match(unknown.html, /not registered/);
});

t.test('a loopback redirect URI matches on any port (RFC 8252), and the code exchange checks that same URI', async (t) => {
  const { callback, verifier } = await codeFor(web.client_id, 'http://127.0.0.1:53170/native/callback');
  t.equal(callback.origin, 'http://127.0.0.1:53170');
  const other = await exchange(web.client_id, oauth.ClientSecretBasic(web.client_secret), callback, verifier, 'http://127.0.0.1:53171/native/callback');
  t.same(other, { error: 'invalid_grant', status: 400 }, 'another port at the token endpoint');
  const tokens = await exchange(web.client_id, oauth.ClientSecretBasic(web.client_secret), callback, verifier, 'http://127.0.0.1:53170/native/callback');
  t.type((tokens as oauth.TokenEndpointResponse).access_token, 'string');
});

t.test('errors after the redirect URI is checked go back to it with state and iss', async (t) => {
  const cases: [Record<string, string>, string][] = [
    [{ code_challenge_method: 'plain' }, 'invalid_request'],
    [{ code_challenge: '' }, 'invalid_request'],
    [{ response_type: 'token' }, 'unsupported_response_type'],
    [{ response_type: 'code id_token' }, 'unsupported_response_type'],
    [{ scope: 'openid admin:everything' }, 'invalid_scope'],
    [{ prompt: 'none login' }, 'invalid_request'],
    [{ max_age: '-1' }, 'invalid_request'],
    [{ request: 'eyJ.x.y' }, 'request_not_supported'],
    [{ prompt: 'none' }, 'login_required'],
  ];
  for (const [change, expected] of cases) {
    const parameters = { ...good(), ...change };
    if (parameters.code_challenge === '') delete (parameters as Record<string, string>).code_challenge;
    const reply = await authorizeError(parameters);
    t.equal(reply.status, 303, JSON.stringify(change));
    t.equal(reply.error, expected, JSON.stringify(change));
    t.equal(reply.iss, 'http://auth.test');
    t.equal(reply.state, 'st');
    t.ok(reply.location!.startsWith(`${REDIRECT}?`));
  }
  t.equal(await sessionCount(), 0);
});

t.test('a code replayed fails and revokes the session its first exchange started', async (t) => {
  const { callback, verifier } = await codeFor(web.client_id);
  const first = await exchange(web.client_id, oauth.ClientSecretBasic(web.client_secret), callback, verifier) as oauth.TokenEndpointResponse;
  t.type(first.refresh_token, 'string');
  const replay = await exchange(web.client_id, oauth.ClientSecretBasic(web.client_secret), callback, verifier);
  t.same(replay, { error: 'invalid_grant', status: 400 });
  const refreshed = await oauth.refreshTokenGrantRequest(as, { client_id: web.client_id }, oauth.ClientSecretBasic(web.client_secret), first.refresh_token!, options());
  const error = await oauth.processRefreshTokenResponse(as, { client_id: web.client_id }, refreshed).catch((e: unknown) => e);
  t.equal((error as oauth.ResponseBodyError).error, 'invalid_grant', 'the refresh token of the first exchange is revoked');
  const [family] = await h.sql`select revoked_reason from refresh_families`;
  t.equal(family!.revoked_reason, 'reuse');
  t.equal(await sessionCount(), 1, 'the replay started nothing');
  const events = await h.sql`select type from audit_events where type = 'oauth.code_replayed'`;
  t.equal(events.length, 1);
});

t.test('a wrong PKCE verifier, a code of another client, a wrong secret and an expired code issue nothing', async (t) => {
  const other = await createClient({ name: 'Other', redirect_uris: [REDIRECT] });
  const { callback, verifier } = await codeFor(web.client_id);
  t.same(await exchange(web.client_id, oauth.ClientSecretBasic(web.client_secret), callback, oauth.generateRandomCodeVerifier()), { error: 'invalid_grant', status: 400 }, 'verifier does not match');
  t.same(await exchange(other.client_id, oauth.ClientSecretBasic(other.client_secret), callback, verifier), { error: 'invalid_grant', status: 400 }, 'code of another client');
  t.same(await exchange(web.client_id, oauth.ClientSecretBasic('cs_wrong'), callback, verifier), { error: 'invalid_client', status: 401 }, 'wrong secret');
  t.same(await exchange(web.client_id, oauth.None(), callback, verifier), { error: 'invalid_client', status: 401 }, 'a confidential client without credentials');
  t.equal(await sessionCount(), 0);
  h.clock.advance(61_000);
  t.same(await exchange(web.client_id, oauth.ClientSecretBasic(web.client_secret), callback, verifier), { error: 'invalid_grant', status: 400 }, 'expired after 60 s');
  t.equal(await sessionCount(), 0, 'no token was issued');
});

t.test('an unknown or unallowed grant type is refused with its RFC name', async (t) => {
  // oauth4webapi sends no password or implicit grant, so these go as the raw form a client would post.
  for (const [grant, expected] of [['password', 'unsupported_grant_type'], ['implicit', 'unsupported_grant_type'], ['client_credentials', 'unauthorized_client']]) {
    const form = new URLSearchParams({ grant_type: grant!, username: 'ann@example.com', password: 'x', client_id: web.client_id, client_secret: web.client_secret });
    const reply = await h.request('POST', '/oauth/token', { raw: form.toString(), headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    t.equal(reply.status, 400, grant);
    t.equal(reply.body.error, expected, grant);
    t.equal(reply.body.access_token, undefined);
  }
  const client: oauth.Client = { client_id: web.client_id };
  const response = await oauth.clientCredentialsGrantRequest(as, client, oauth.ClientSecretPost(web.client_secret), {}, options());
  const error = await oauth.processClientCredentialsResponse(as, client, response).catch((e: unknown) => e);
  t.equal((error as oauth.ResponseBodyError).error, 'unauthorized_client', 'oauth4webapi reads the same refusal');
});

t.test('a refresh token of another client is invalid_grant and stays usable by its own', async (t) => {
  const other = await createClient({ name: 'Other', redirect_uris: [REDIRECT] });
  const { callback, verifier } = await codeFor(web.client_id);
  const tokens = await exchange(web.client_id, oauth.ClientSecretBasic(web.client_secret), callback, verifier) as oauth.TokenEndpointResponse;
  const stolen = await oauth.refreshTokenGrantRequest(as, { client_id: other.client_id }, oauth.ClientSecretBasic(other.client_secret), tokens.refresh_token!, options());
  const error = await oauth.processRefreshTokenResponse(as, { client_id: other.client_id }, stolen).catch((e: unknown) => e);
  t.equal((error as oauth.ResponseBodyError).error, 'invalid_grant');
  const own = await oauth.refreshTokenGrantRequest(as, { client_id: web.client_id }, oauth.ClientSecretBasic(web.client_secret), tokens.refresh_token!, options());
  t.type((await oauth.processRefreshTokenResponse(as, { client_id: web.client_id }, own)).access_token, 'string');
});

t.test('a mixed-up issuer: the response carries iss, so a client expecting another issuer refuses it', async (t) => {
  const { callback } = await codeFor(web.client_id);
  t.equal(callback.searchParams.get('iss'), 'http://auth.test');
  const elsewhere = { ...as, issuer: 'https://other-issuer.example' };
  t.throws(() => oauth.validateAuthResponse(elsewhere, { client_id: web.client_id }, callback, 'st'), /iss/);
});

t.test('a public client uses none with PKCE; private_key_jwt works once per assertion', async (t) => {
  const spa = await createClient({ name: 'SPA', client_type: 'public', redirect_uris: [REDIRECT] });
  t.equal(spa.client_secret, undefined);
  const { callback, verifier } = await codeFor(spa.client_id);
  t.type((await exchange(spa.client_id, oauth.None(), callback, verifier) as oauth.TokenEndpointResponse).access_token, 'string');

  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'ES256' };
  const backend = await createClient({ name: 'Backend', token_endpoint_auth_method: 'private_key_jwt', jwks: { keys: [jwk] }, grant_types: ['client_credentials'], scopes: ['reports:read'] });
  const assertion = await new SignJWT({ jti: randomBytes(16).toString('hex') })
    .setProtectedHeader({ alg: 'ES256', kid: 'k1' }).setIssuer(backend.client_id).setSubject(backend.client_id)
    .setAudience(h.issuer).setIssuedAt(Math.floor(h.clock.now() / 1000)).setExpirationTime(Math.floor(h.clock.now() / 1000) + 60).sign(privateKey);
  const form = { grant_type: 'client_credentials', client_id: backend.client_id, client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer', client_assertion: assertion };
  const first = await h.request('POST', '/oauth/token', { raw: new URLSearchParams(form).toString(), headers: { 'content-type': 'application/x-www-form-urlencoded' } });
  t.equal(first.status, 200);
  t.equal(first.body.scope, 'reports:read');
  const again = await h.request('POST', '/oauth/token', { raw: new URLSearchParams(form).toString(), headers: { 'content-type': 'application/x-www-form-urlencoded' } });
  t.equal(again.status, 401);
  t.same(again.body, { error: 'invalid_client', error_description: 'The client assertion was already used' });
});

t.test('the sign-in forms refuse a post without the browser cookie or with another CSRF token, and send no code', async (t) => {
  const browser = new OAuthBrowser(h);
  const page = await browser.get(authorizeUrl(good()));
  const fields = OAuthBrowser.formFields(page.html);
  const stranger = new OAuthBrowser(h);
  const noCookie = await stranger.post('/oauth/sign-in/email', { ...fields, email: 'ann@example.com' });
  t.equal(noCookie.status, 403);
  t.match(noCookie.html, /This sign-in form has expired/);
  const wrongToken = await browser.post('/oauth/sign-in/email', { ...fields, csrf: 'x'.repeat(43), email: 'ann@example.com' });
  t.equal(wrongToken.status, 403);
  t.equal(h.outbox.messages.length, 0, 'no code was sent');
  const wrongCode = await browser.post('/oauth/sign-in/email', { ...fields, email: 'ann@example.com' });
  t.equal(wrongCode.status, 200);
  const refused = await browser.post('/oauth/sign-in/code', { ...fields, code: '000000' === h.outbox.codeFor('ann@example.com') ? '111111' : '000000' });
  t.equal(refused.status, 200, 'the code form again, with the error');
  t.match(refused.html, /That code is wrong or has expired/);
  t.match(refused.html, /role="alert"/);
  t.equal(await sessionCount(), 0);
});

t.test('RP-initiated logout refuses a tampered id_token_hint and an unregistered post_logout_redirect_uri, ending nothing', async (t) => {
  const { callback, verifier, browser } = await codeFor(web.client_id);
  const tokens = await exchange(web.client_id, oauth.ClientSecretBasic(web.client_secret), callback, verifier) as oauth.TokenEndpointResponse;
  const [header, payload, signature] = tokens.id_token!.split('.');
  const forged = JSON.parse(Buffer.from(payload!, 'base64url').toString());
  forged.sub = '00000000-0000-0000-0000-000000000000';
  const tampered = `${header}.${Buffer.from(JSON.stringify(forged)).toString('base64url')}.${signature}`;
  const reply = await browser.get(`${h.issuer}/oauth/logout?${new URLSearchParams({ id_token_hint: tampered, post_logout_redirect_uri: 'https://app.example/bye' })}`);
  t.equal(reply.status, 400);
  t.equal(reply.location, null);
  const unregistered = await browser.get(`${h.issuer}/oauth/logout?${new URLSearchParams({ id_token_hint: tokens.id_token!, post_logout_redirect_uri: 'https://evil.example/' })}`);
  t.equal(unregistered.status, 400);
  t.equal(unregistered.location, null);
  const [family] = await h.sql`select revoked_at from refresh_families`;
  t.equal(family!.revoked_at, null, 'the session is still live');
  const silent = await browser.get(authorizeUrl({ ...good(), prompt: 'none' }));
  t.ok(new URL(silent.location!).searchParams.get('code'), 'the browser is still signed in');
});

t.test('client registration refuses metadata that does not hold together', async (t) => {
  const cases: [Record<string, unknown>, string, string][] = [
    [{ name: 'x', client_type: 'public', token_endpoint_auth_method: 'client_secret_basic', redirect_uris: [REDIRECT] }, 'INVALID_CLIENT_METADATA', 'token_endpoint_auth_method'],
    [{ name: 'x', client_type: 'public', grant_types: ['client_credentials'] }, 'INVALID_CLIENT_METADATA', 'grant_types'],
    [{ name: 'x', grant_types: ['password'] }, 'INVALID_CLIENT_METADATA', 'grant_types'],
    [{ name: 'x' , redirect_uris: [] }, 'INVALID_CLIENT_METADATA', 'redirect_uris'],
    [{ name: 'x', redirect_uris: ['http://app.example/cb'] }, 'INVALID_REDIRECT_URI', 'redirect_uris'],
    [{ name: 'x', redirect_uris: ['https://app.example/cb#frag'] }, 'INVALID_REDIRECT_URI', 'redirect_uris'],
    [{ name: 'x', redirect_uris: ['javascript:alert(1)'] }, 'INVALID_REDIRECT_URI', 'redirect_uris'],
    [{ name: 'x', token_endpoint_auth_method: 'private_key_jwt', redirect_uris: [REDIRECT] }, 'INVALID_CLIENT_METADATA', 'jwks'],
  ];
  for (const [body, code, field] of cases) {
    const reply = await h.admin('POST', `/admin/apps/${app.id}/oauth-clients`, body);
    t.equal(reply.status, 400, JSON.stringify(body));
    t.equal(reply.body.error.code, code, JSON.stringify(body));
    t.match(reply.body.error.message, field);
  }
  const [{ n }] = await h.sql`select count(*)::int as n from oauth_clients`;
  t.equal(n, 1, 'only the beforeEach client exists');
});

t.test('the page\'s second step refuses a wrong code in words, a time step used once, a recovery code used once, and more than five tries; nothing is issued', async (t) => {
  const { secret, recoveryCodes } = await enrolTotp(h, app, 'ann@example.com');
  t.equal((await h.admin('PUT', `/admin/apps/${app.id}/second-factor-policy`, { policy: 'required' })).status, 200);
  /** A browser at the second step: the page, ann's e-mail code, the authenticator form. */
  const atSecondStep = async () => {
    const browser = new OAuthBrowser(h);
    const page = await browser.get(authorizeUrl({
      client_id: web.client_id, redirect_uri: REDIRECT, response_type: 'code', scope: 'openid', state: 'st', code_challenge: s256(oauth.generateRandomCodeVerifier()), code_challenge_method: 'S256',
    }));
    const asked = await browser.signInWithCode(page.html, 'ann@example.com');
    if (!asked.html.includes('action="/oauth/sign-in/second-factor"')) throw new Error(`no second step: ${asked.status}\n${asked.html}`);
    const fields = OAuthBrowser.formFields(asked.html);
    return { answer: (answer: Record<string, string>) => browser.post('/oauth/sign-in/second-factor', { ...fields, ...answer }) };
  };
  const codesIssued = async () => (await h.sql<{ n: number }[]>`select count(*)::int as n from oauth_authorization_codes`)[0]!.n;

  // Two sign-ins wait at the second step at once; the e-mail code of the second needs the resend interval.
  const first = await atSecondStep();
  h.clock.advance(61_000);
  const second = await atSecondStep();
  const wrong = await first.answer({ code: totpCode(h, secret, 5) });
  t.equal(wrong.status, 200, 'the form again, with the error');
  t.equal(wrong.location, null);
  t.match(wrong.html, /<div id="error" role="alert" aria-live="assertive"><p class="error">That authenticator code is wrong or was already used/);
  const code = totpCode(h, secret);
  const accepted = await first.answer({ code });
  t.equal(accepted.status, 303);
  t.match(new URL(accepted.location!).searchParams.get('code'), /^[A-Za-z0-9_-]{43}$/);
  t.equal(await codesIssued(), 1);

  const reused = await second.answer({ code });
  t.equal(reused.status, 200, 'the same code (its time step used) is refused on another sign-in');
  t.equal(reused.location, null);
  t.match(reused.html, /That authenticator code is wrong or was already used/);
  for (let i = 0; i < 3; i += 1) t.match((await second.answer({ code: totpCode(h, secret, 5) })).html, /That authenticator code is wrong/);
  const fifth = await second.answer({ code: totpCode(h, secret, 6) });
  t.equal(fifth.status, 200);
  t.match(fifth.html, /Too many wrong codes, or this step took too long\. Start again: ask for a new code\./);
  t.match(fifth.html, /action="\/oauth\/sign-in\/email"/, 'the page starts over at the address');
  const late = await second.answer({ code: totpCode(h, secret, 1) });
  t.equal(late.status, 400, 'a right code after five tries is not compared');
  t.equal(late.location, null);
  t.equal(await codesIssued(), 1);

  h.clock.advance(61_000);
  const third = await atSecondStep();
  const withRecovery = await third.answer({ recovery_code: recoveryCodes[0]!.toUpperCase() });
  t.equal(withRecovery.status, 303, 'a recovery code signs in (case and dash do not matter)');
  h.clock.advance(61_000);
  const fourth = await atSecondStep();
  const recoveryAgain = await fourth.answer({ recovery_code: recoveryCodes[0]! });
  t.equal(recoveryAgain.status, 200);
  t.equal(recoveryAgain.location, null);
  t.match(recoveryAgain.html, /That recovery code is wrong or was already used/);
  t.equal(await codesIssued(), 2);
  const failures = await h.sql<{ n: number }[]>`select count(*)::int as n from audit_events where type = 'login.failed' and details->>'method' = 'second_factor'`;
  t.equal(failures[0]!.n, 7, 'each refused answer is recorded');
});

t.test('the page\'s passkey forms refuse what is not an assertion, an app without passkeys, and another browser, in words; nothing is issued', async (t) => {
  const browser = new OAuthBrowser(h);
  const page = await browser.get(authorizeUrl({
    client_id: web.client_id, redirect_uri: REDIRECT, response_type: 'code', scope: 'openid', state: 'st', code_challenge: s256(oauth.generateRandomCodeVerifier()), code_challenge_method: 'S256',
  }));
  t.notMatch(page.html, /passkey-form/, 'no passkey button for an app without a relying party');
  const fields = OAuthBrowser.formFields(page.html);
  const unconfigured = await browser.post('/oauth/sign-in/passkey/options', fields);
  t.equal(unconfigured.status, 409);
  t.same(JSON.parse(unconfigured.html), { message: 'This application does not offer passkeys. Sign in with a code.' });

  t.equal((await h.admin('PUT', `/admin/apps/${app.id}/passkeys`, { rp_id: 'localhost', rp_name: 'App A', origins: ['http://localhost:3000'] })).status, 200);
  const stranger = await new OAuthBrowser(h).post('/oauth/sign-in/passkey/options', fields);
  t.equal(stranger.status, 403, 'another browser (no cookie) gets no ceremony');
  t.match(JSON.parse(stranger.html).message, /This sign-in form has expired/);
  const options = await browser.post('/oauth/sign-in/passkey/options', fields);
  t.equal(options.status, 200);
  const { ceremony_id: ceremony, options: request } = JSON.parse(options.html);
  t.match(request, { rpId: 'localhost', userVerification: 'required' });
  for (const response of ['not json', JSON.stringify({ id: 'x' }), JSON.stringify({ id: 'AAAA', rawId: 'AAAA', type: 'public-key', clientExtensionResults: {}, response: { clientDataJSON: 'e30', authenticatorData: 'A'.repeat(50), signature: 'AAAA' } })]) {
    const refused = await browser.post('/oauth/sign-in/passkey', { ...fields, ceremony, response });
    t.equal(refused.status, 200, response);
    t.equal(refused.location, null);
    t.match(refused.html, /That passkey was not accepted\. Try again with a passkey of this account, or sign in with a code\./);
    t.match(refused.html, /id="passkey-form"/, 'the address page again, passkey included');
  }
  const browserSessions = await h.sql<{ n: number }[]>`select count(*)::int as n from oauth_browser_sessions`;
  t.equal(browserSessions[0]!.n, 0, 'the browser is not signed in');
  const script = await browser.get('/oauth/sign-in.js');
  t.equal(script.status, 200);
  t.equal(script.headers.get('content-type'), 'text/javascript; charset=utf-8');
  t.match(page.headers.get('content-security-policy'), /script-src 'self'; connect-src 'self'/);
  t.notMatch(page.html, /<script>/, 'no inline script');
});

t.test('the page\'s upstream sign-in: a callback taken to another browser, replayed, refused by the provider, or a provider down, signs nobody in, in words; a tenant that requires SSO gets no code', async (t) => {
  const PAGE_CALLBACK = 'http://auth.test/oauth/upstream/callback';
  const google = await startCertifiedProvider([{ client_id: 'web-google', client_secret: 'google-secret', redirect_uris: [PAGE_CALLBACK] }]);
  t.teardown(() => google.close());
  google.signInAs = { sub: 'g-1', email: 'gina@gmail.com', email_verified: true };
  const provider = async (body: Record<string, unknown>) => (await h.admin('POST', `/admin/apps/${app.id}/upstream-providers`, {
    kind: 'oidc', client_id: 'web-google', client_secret: 'google-secret', redirect_uris: ['http://localhost:5173/cb'], ...body,
  })).body;
  const up = await provider({ label: 'Sign in with Google', discovery_url: google.discoveryUrl });
  const down = await provider({ label: 'Sign in with Nowhere', discovery_url: 'http://127.0.0.1:9/.well-known/openid-configuration' });
  const made = async () => (await h.sql<{ n: number }[]>`select (select count(*) from users) + (select count(*) from oauth_browser_sessions) + (select count(*) from oauth_authorization_codes) as n`)[0]!.n;
  const startAt = async (providerId: string) => {
    const browser = new OAuthBrowser(h);
    const page = await browser.get(authorizeUrl({
      client_id: web.client_id, redirect_uri: REDIRECT, response_type: 'code', scope: 'openid', state: 'st', code_challenge: s256(oauth.generateRandomCodeVerifier()), code_challenge_method: 'S256',
    }));
    const fields = OAuthBrowser.formFields(page.html);
    return { browser, page, fields, started: await browser.post('/oauth/sign-in/upstream', { ...fields, provider: providerId }) };
  };

  const a = await startAt(up.id);
  t.match(a.page.html, /<button type="submit" class="provider">Sign in with Google<\/button>/);
  t.equal(a.started.status, 303);
  t.ok(a.started.location!.startsWith(`${google.issuer}/`), 'to the provider');
  const callback = `/oauth/upstream/callback?${new URLSearchParams(await authorize(a.started.location!, PAGE_CALLBACK))}`;
  const before = await made();
  const noCookie = await new OAuthBrowser(h).get(callback);
  t.equal(noCookie.status, 403, 'a callback URL opened in another browser signs nobody in');
  t.match(noCookie.html, /This sign-in has expired/);
  const other = await startAt(up.id);
  t.equal((await other.browser.get(callback)).status, 403, 'nor in another browser that is signing in too');
  t.equal(await made(), before, 'nothing was made');
  const back = await a.browser.get(callback);
  t.equal(back.status, 303);
  t.match(new URL(back.location!).searchParams.get('code'), /^[A-Za-z0-9_-]{43}$/);
  t.equal((await a.browser.get(callback)).status, 403, 'the callback replayed is refused');

  const c = await startAt(up.id);
  const cancelled = await c.browser.get(`/oauth/upstream/callback?${new URLSearchParams({ state: new URL(c.started.location!).searchParams.get('state')!, error: 'access_denied' })}`);
  t.equal(cancelled.status, 200);
  t.equal(cancelled.location, null);
  t.match(cancelled.html, /The sign-in with the identity provider did not complete: it was cancelled, refused or took too long/);
  t.match(cancelled.html, /action="\/oauth\/sign-in\/email"/, 'the address page again, with a new CSRF token that works');
  const again = await c.browser.post('/oauth/sign-in/upstream', { ...OAuthBrowser.formFields(cancelled.html), provider: up.id });
  t.equal(again.status, 303);

  const d = await startAt(down.id);
  t.equal(d.started.status, 502);
  t.match(d.started.html, /We could not reach the identity provider\. Try again in a minute, or sign in another way\./);
  const unknown = await d.browser.post('/oauth/sign-in/upstream', { ...d.fields, provider: '00000000-0000-4000-8000-000000000000' });
  t.equal(unknown.status, 200);
  t.match(unknown.html, /That way to sign in is no longer offered/);

  // Home-realm discovery: a tenant's proven domain offers its provider; required, no code is sent even when asked.
  const acme = await h.createTenant(app, 'Acme');
  const claimed = await h.admin('POST', `/admin/apps/${app.id}/tenants/${acme}/domains`, { domain: 'acme.example' });
  await h.sql`update tenant_domains set verified_at = now() where id = ${claimed.body.id}`;
  const sso = await provider({ label: 'Acme SSO', discovery_url: google.discoveryUrl, tenant_id: acme });
  const e = await startAt(up.id);
  t.notMatch(e.page.html, /Acme SSO/, 'a tenant\'s provider is not offered to everyone');
  const offered = await e.browser.post('/oauth/sign-in/email', { ...e.fields, email: 'bob@acme.example' });
  t.equal(offered.status, 200);
  t.match(offered.html, new RegExp(`name="provider" value="${sso.id}"`));
  t.match(offered.html, /Send me a code instead/, 'optional: a code may still be asked for');
  const coded = await e.browser.post('/oauth/sign-in/email', { ...e.fields, email: 'bob@acme.example', code_anyway: '1' });
  t.match(coded.html, /We sent a code to <strong>bob@acme\.example<\/strong>/);
  t.match(coded.html, /<input type="hidden" name="email" value="bob@acme\.example">\n  <input type="hidden" name="code_anyway" value="1">/, 'a new code is asked for as the first was');
  const sent = h.outbox.messages.length;
  t.equal((await h.admin('PUT', `/admin/apps/${app.id}/upstream-providers/${sso.id}`, {
    kind: 'oidc', label: 'Acme SSO', client_id: 'web-google', client_secret: 'google-secret', redirect_uris: ['http://localhost:5173/cb'], discovery_url: google.discoveryUrl, tenant_id: acme, require_sso: true,
  })).status, 200);
  const refusedCode = await e.browser.post('/oauth/sign-in/code', { ...e.fields, code: h.outbox.codeFor('bob@acme.example') });
  t.equal(refusedCode.status, 200);
  t.match(refusedCode.html, /Your organisation requires signing in with its own identity provider: we do not send sign-in codes or accept passkeys for its addresses\./);
  const required = await e.browser.post('/oauth/sign-in/email', { ...e.fields, email: 'bob@acme.example', code_anyway: '1' });
  t.match(required.html, /Your organisation requires it: we do not send sign-in codes to its addresses\./);
  t.notMatch(required.html, /Send me a code instead/);
  t.equal(h.outbox.messages.length, sent, 'no code was sent');
});
