// The provider as an app team meets it: openid-client (a certified relying-party library no one
// here wrote) pointed at the issuer URL does discovery, the code flow with PKCE and a nonce,
// validates the id_token, reads userinfo, refreshes and logs out.
import * as client from 'openid-client';
import { createRemoteJWKSet, jwtVerify } from 'jose';
import t from 'tap';
import { startAuthHarness, type TestApp } from '../fixtures/harness.js';
import { harnessFetch, OAuthBrowser } from '../fixtures/oauth-browser.js';
import { enrolTotp, totpCode } from '../fixtures/totp.js';

const h = await startAuthHarness();
t.teardown(() => h.close());

const REDIRECT = 'https://app.example/callback';
const AFTER_LOGOUT = 'https://app.example/signed-out';
let app: TestApp;
let registered: { client_id: string; client_secret: string };
let config: client.Configuration;

t.beforeEach(async () => {
  ({ app } = await h.startFresh());
  const reply = await h.admin('POST', `/admin/apps/${app.id}/oauth-clients`, {
    name: 'Web', redirect_uris: [REDIRECT], post_logout_redirect_uris: [AFTER_LOGOUT],
  });
  if (reply.status !== 201) throw new Error(`create client: ${reply.status} ${JSON.stringify(reply.body)}`);
  registered = reply.body;
  config = await client.discovery(new URL(h.issuer), registered.client_id, registered.client_secret, undefined, {
    execute: [client.allowInsecureRequests],
    [client.customFetch]: harnessFetch(h),
  });
  config[client.customFetch] = harnessFetch(h);
});

/** The authorization URL of a code flow with PKCE, state and nonce; and the checks openid-client needs. */
async function authorizationRequest(scope = 'openid email offline_access', extra: Record<string, string> = {}) {
  const verifier = client.randomPKCECodeVerifier();
  const state = client.randomState();
  const nonce = client.randomNonce();
  const url = client.buildAuthorizationUrl(config, {
    redirect_uri: REDIRECT, scope, state, nonce,
    code_challenge: await client.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256', ...extra,
  });
  return { url, verifier, state, nonce };
}

/** Runs the code flow in a browser as far as the redirect back to the client; returns it and the checks. */
async function signIn(browser: OAuthBrowser, scope = 'openid email offline_access', extra: Record<string, string> = {}) {
  const { url, verifier, state, nonce } = await authorizationRequest(scope, extra);
  const page = await browser.get(url);
  let back = page;
  if (page.status === 200) back = await browser.signInWithCode(page.html, 'ann@example.com');
  if (back.status !== 303 || !back.location) throw new Error(`no redirect back: ${back.status}\n${back.html}`);
  return { callback: new URL(back.location), verifier, state, nonce };
}

t.test('discovery names every endpoint and what the provider supports', async (t) => {
  const metadata = config.serverMetadata();
  t.equal(metadata.issuer, 'http://auth.test');
  t.equal(metadata.authorization_endpoint, 'http://auth.test/oauth/authorize');
  t.equal(metadata.token_endpoint, 'http://auth.test/oauth/token');
  t.equal(metadata.userinfo_endpoint, 'http://auth.test/oauth/userinfo');
  t.equal(metadata.end_session_endpoint, 'http://auth.test/oauth/logout');
  t.same(metadata.code_challenge_methods_supported, ['S256']);
  t.same(metadata.response_types_supported, ['code']);
  t.equal(metadata.authorization_response_iss_parameter_supported, true);
  const oauth = await h.get('/.well-known/oauth-authorization-server');
  const oidc = await h.get('/.well-known/openid-configuration');
  t.equal(oauth.status, 200);
  t.same(oauth.body, oidc.body, 'RFC 8414 metadata is the same document');
});

t.test('the code flow with PKCE gives an id_token openid-client validates, with nonce, auth_time, amr and at_hash', async (t) => {
  const browser = new OAuthBrowser(h);
  const { callback, verifier, state, nonce } = await signIn(browser);
  t.equal(callback.origin + callback.pathname, REDIRECT);
  t.equal(callback.searchParams.get('iss'), 'http://auth.test', 'RFC 9207 iss in the response');
  t.equal(callback.searchParams.get('state'), state);
  const tokens = await client.authorizationCodeGrant(config, callback, { pkceCodeVerifier: verifier, expectedState: state, expectedNonce: nonce, idTokenExpected: true });
  t.equal(tokens.token_type, 'bearer');
  t.equal(tokens.scope, 'openid email offline_access');
  t.type(tokens.refresh_token, 'string');
  const claims = tokens.claims()!;
  const [user] = await h.sql<{ id: string }[]>`select id from users where email = 'ann@example.com'`;
  t.equal(claims.sub, user!.id);
  t.equal(claims.aud, registered.client_id);
  t.equal(claims.nonce, nonce);
  t.same(claims.amr, ['otp']);
  t.equal(claims.email, 'ann@example.com');
  t.equal(claims.email_verified, true);
  t.type(claims.auth_time, 'number');
  t.type(claims.at_hash, 'string');

  // The access token keeps today's claims: an existing backend verifies it unchanged.
  const jwks = createRemoteJWKSet(new URL(`${h.base}/.well-known/jwks.json`));
  const { payload } = await jwtVerify(tokens.access_token, jwks, { issuer: 'http://auth.test', audience: 'app-a', currentDate: new Date(h.clock.now()) });
  t.match(payload, { sub: user!.id, app_id: 'app-a', aud: 'app-a', tenant_id: null, roles: [], client_id: registered.client_id, scope: 'openid email offline_access' });
  t.equal((await h.me(tokens.access_token)).status, 200, '/auth/me accepts it');

  const exchanged = await h.sql`select type from audit_events where type like 'oauth.%' order by id`;
  t.same(exchanged.map((r) => r.type), ['oauth.code_issued', 'oauth.code_exchanged']);
});

t.test('under a second-factor policy the page asks for the authenticator code after the e-mail code; id_token and access token say otp and mfa', async (t) => {
  const { secret } = await enrolTotp(h, app, 'ann@example.com');
  t.equal((await h.admin('PUT', `/admin/apps/${app.id}/second-factor-policy`, { policy: 'optional' })).status, 200);
  const browser = new OAuthBrowser(h);
  const { url, verifier, state, nonce } = await authorizationRequest();
  const asked = await browser.signInWithCode((await browser.get(url)).html, 'ann@example.com');
  t.equal(asked.status, 200, 'the e-mail code leads to the second step, not to the client');
  t.equal(asked.location, null);
  t.match(asked.html, /action="\/oauth\/sign-in\/second-factor"/);
  t.match(asked.html, /<label for="totp">Authenticator code<\/label>/);
  t.match(asked.html, /<label for="recovery">Or a recovery code<\/label>/);
  const [pending] = await h.sql`select count(*)::int as n from oauth_browser_sessions`;
  t.equal(pending!.n, 0, 'the browser is not signed in before the second factor');

  const back = await browser.post('/oauth/sign-in/second-factor', { ...OAuthBrowser.formFields(asked.html), code: totpCode(h, secret) });
  t.equal(back.status, 303, back.html);
  const tokens = await client.authorizationCodeGrant(config, new URL(back.location!), { pkceCodeVerifier: verifier, expectedState: state, expectedNonce: nonce, idTokenExpected: true });
  t.same(tokens.claims()!.amr, ['otp', 'mfa'], 'RFC 8176: the e-mail code and the authenticator code');
  const access = JSON.parse(Buffer.from(tokens.access_token.split('.')[1]!, 'base64url').toString());
  t.same(access.amr, ['otp', 'mfa']);
  const events = await h.sql<{ type: string; details: Record<string, unknown> }[]>`select type, details from audit_events where type like 'login.%' order by id`;
  t.same(events.slice(-2).map((e) => e.type), ['login.second_factor_required', 'login.succeeded']);
  t.match(events.at(-1)!.details, { method: 'code', second_factor: 'totp' });
});

t.test('a browser signed in with a code alone signs in again, second step included, once a policy asks its user for a second factor; prompt=none then gets login_required', async (t) => {
  const { secret } = await enrolTotp(h, app, 'ann@example.com');
  const browser = new OAuthBrowser(h);
  await signIn(browser);
  const silently = async () => browser.get((await authorizationRequest('openid', { prompt: 'none' })).url);
  t.equal(new URL((await silently()).location!).searchParams.has('code'), true, 'no policy: the session gives a code');
  t.equal((await h.admin('PUT', `/admin/apps/${app.id}/second-factor-policy`, { policy: 'optional' })).status, 200);
  t.equal(new URL((await silently()).location!).searchParams.get('error'), 'login_required', 'the code-only session gives no code now');
  h.clock.advance(61_000);
  const { url, verifier, state, nonce } = await authorizationRequest();
  const page = await browser.get(url);
  t.equal(page.status, 200, 'the sign-in page');
  const asked = await browser.signInWithCode(page.html, 'ann@example.com');
  const back = await browser.post('/oauth/sign-in/second-factor', { ...OAuthBrowser.formFields(asked.html), code: totpCode(h, secret) });
  t.equal(back.status, 303);
  const tokens = await client.authorizationCodeGrant(config, new URL(back.location!), { pkceCodeVerifier: verifier, expectedState: state, expectedNonce: nonce });
  t.same(tokens.claims()!.amr, ['otp', 'mfa']);
  t.equal(new URL((await silently()).location!).searchParams.has('code'), true, 'the session with both factors gives codes again');
});

t.test('a policy that requires a second factor the user lacks: the page shows a new key, its first code turns it on, the recovery codes are shown once, then the client gets its code', async (t) => {
  t.equal((await h.admin('PUT', `/admin/apps/${app.id}/second-factor-policy`, { policy: 'required' })).status, 200);
  const browser = new OAuthBrowser(h);
  const { url, verifier, state, nonce } = await authorizationRequest();
  const asked = await browser.signInWithCode((await browser.get(url)).html, 'bob@example.com');
  t.equal(asked.status, 200);
  t.match(asked.html, /<h2>Set up a second factor<\/h2>/);
  t.match(asked.html, /asks for a code from an authenticator app each time you sign in, and your account has none yet/);
  const key = /<code id="totp-key">([A-Z2-7 ]+)<\/code>/.exec(asked.html)![1]!.replace(/ /g, '');
  t.match(key, /^[A-Z2-7]{32}$/);
  const link = /<a href="(otpauth:[^"]+)"/.exec(asked.html)![1]!.replace(/&amp;/g, '&');
  t.equal(new URL(link).searchParams.get('secret'), key);

  const fields = OAuthBrowser.formFields(asked.html);
  const wrong = await browser.post('/oauth/sign-in/second-factor/enroll', { ...fields, code: totpCode(h, key, 5) });
  t.equal(wrong.status, 200);
  t.match(wrong.html, /That authenticator code is wrong or was already used/);
  t.match(wrong.html, new RegExp(`<code id="totp-key">${key.replace(/(.{4})/g, '$1 ').trim()}</code>`), 'the same key is shown again');
  const saved = await browser.post('/oauth/sign-in/second-factor/enroll', { ...fields, code: totpCode(h, key) });
  t.equal(saved.status, 200);
  t.match(saved.html, /<h1>Save your recovery codes<\/h1>/);
  const codes = [...saved.html.matchAll(/<li><code>([a-z2-7]{5}-[a-z2-7]{5})<\/code><\/li>/g)].map((m) => m[1]);
  t.equal(codes.length, 10);
  const back = await browser.post('/oauth/sign-in/continue', OAuthBrowser.formFields(saved.html));
  t.equal(back.status, 303, back.html);
  const tokens = await client.authorizationCodeGrant(config, new URL(back.location!), { pkceCodeVerifier: verifier, expectedState: state, expectedNonce: nonce, idTokenExpected: true });
  t.same(tokens.claims()!.amr, ['otp', 'mfa']);
  const [factor] = await h.sql`select confirmed_at from totp_factors f join users u on u.id = f.user_id where u.email = 'bob@example.com'`;
  t.ok(factor!.confirmed_at, 'the key is confirmed');
  const again = await browser.post('/oauth/sign-in/continue', OAuthBrowser.formFields(saved.html));
  t.equal(again.status, 403, 'the request is done once the client has its code');
});

t.test('userinfo answers the claims the scope released', async (t) => {
  const browser = new OAuthBrowser(h);
  const { callback, verifier, state, nonce } = await signIn(browser);
  const tokens = await client.authorizationCodeGrant(config, callback, { pkceCodeVerifier: verifier, expectedState: state, expectedNonce: nonce });
  const info = await client.fetchUserInfo(config, tokens.access_token, tokens.claims()!.sub);
  t.same(info, { sub: tokens.claims()!.sub, email: 'ann@example.com', email_verified: true });
});

t.test('a signed-in browser gets a code without the page, and prompt=login or max_age=0 shows the page again', async (t) => {
  const browser = new OAuthBrowser(h);
  await signIn(browser);
  const sentBefore = h.outbox.messages.length;
  const again = await signIn(browser);
  t.equal(h.outbox.messages.length, sentBefore, 'no code sent the second time');
  t.ok(again.callback.searchParams.get('code'));
  for (const extra of [{ prompt: 'login' }, { max_age: '0' }]) {
    h.clock.advance(2000);
    const url = client.buildAuthorizationUrl(config, {
      redirect_uri: REDIRECT, scope: 'openid', code_challenge: await client.calculatePKCECodeChallenge(client.randomPKCECodeVerifier()),
      code_challenge_method: 'S256', ...extra,
    });
    const page = await browser.get(url);
    t.equal(page.status, 200, `${JSON.stringify(extra)} shows the sign-in page`);
    t.match(page.html, /<h1>Sign in to App app-a<\/h1>/);
  }
});

t.test('refresh rotates through the session family, and the rotated token replayed revokes it', async (t) => {
  const browser = new OAuthBrowser(h);
  const { callback, verifier, state, nonce } = await signIn(browser);
  const first = await client.authorizationCodeGrant(config, callback, { pkceCodeVerifier: verifier, expectedState: state, expectedNonce: nonce });
  const second = await client.refreshTokenGrant(config, first.refresh_token!);
  t.not(second.refresh_token, first.refresh_token);
  t.equal(second.scope, 'openid email offline_access');
  const [family] = await h.sql`select client_id, scope from refresh_families`;
  t.same({ ...family }, { client_id: registered.client_id, scope: 'openid email offline_access' });
  const replay = await client.refreshTokenGrant(config, first.refresh_token!).catch((error: unknown) => error);
  t.ok(replay instanceof client.ResponseBodyError);
  t.equal((replay as client.ResponseBodyError).error, 'invalid_grant');
  const after = await client.refreshTokenGrant(config, second.refresh_token!).catch((error: unknown) => error);
  t.equal((after as client.ResponseBodyError).error, 'invalid_grant', 'the family is revoked');
});

t.test('RP-initiated logout ends the browser session and the family, and returns to the registered URI with state', async (t) => {
  const browser = new OAuthBrowser(h);
  const { callback, verifier, state, nonce } = await signIn(browser);
  const tokens = await client.authorizationCodeGrant(config, callback, { pkceCodeVerifier: verifier, expectedState: state, expectedNonce: nonce });
  const logout = client.buildEndSessionUrl(config, { id_token_hint: tokens.id_token!, post_logout_redirect_uri: AFTER_LOGOUT, state: 'bye' });
  const reply = await browser.get(logout);
  t.equal(reply.status, 303);
  t.equal(reply.location, `${AFTER_LOGOUT}?state=bye`);
  const refreshed = await client.refreshTokenGrant(config, tokens.refresh_token!).catch((error: unknown) => error);
  t.equal((refreshed as client.ResponseBodyError).error, 'invalid_grant');
  const url = client.buildAuthorizationUrl(config, {
    redirect_uri: REDIRECT, scope: 'openid', prompt: 'none', state: 's1',
    code_challenge: await client.calculatePKCECodeChallenge(client.randomPKCECodeVerifier()), code_challenge_method: 'S256',
  });
  const silent = await browser.get(url);
  t.equal(silent.status, 303);
  const back = new URL(silent.location!);
  t.equal(back.searchParams.get('error'), 'login_required', 'the browser is signed out');
  t.equal(back.searchParams.get('state'), 's1');
});

t.test('client_credentials gives an app backend a token of its own, with the client as subject', async (t) => {
  const reply = await h.admin('POST', `/admin/apps/${app.id}/oauth-clients`, { name: 'Backend', grant_types: ['client_credentials'], scopes: ['reports:read'] });
  t.equal(reply.status, 201);
  const backend = await client.discovery(new URL(h.issuer), reply.body.client_id, reply.body.client_secret, client.ClientSecretPost(reply.body.client_secret), {
    execute: [client.allowInsecureRequests], [client.customFetch]: harnessFetch(h),
  });
  backend[client.customFetch] = harnessFetch(h);
  const tokens = await client.clientCredentialsGrant(backend, { scope: 'reports:read' });
  t.equal(tokens.scope, 'reports:read');
  t.equal(tokens.refresh_token, undefined);
  const payload = JSON.parse(Buffer.from(tokens.access_token.split('.')[1]!, 'base64url').toString());
  t.match(payload, { sub: reply.body.client_id, app_id: 'app-a', aud: 'app-a', tenant_id: null, roles: [], client_id: reply.body.client_id });
});
