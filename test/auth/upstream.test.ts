// Sign-in through upstream identity providers: oidc-provider (OpenID certified) as "Google" and
// as an Entra ID stand-in, a hand-written issuer that misbehaves on demand, and a GitHub-shaped
// OAuth 2.0 server. The app's backend relays: start -> the browser at the provider (walked by
// `authorize`) -> callback. Every refusal asserts its status and code AND that nothing was made.
import { generateKeyPairSync } from 'node:crypto';
import { decodeJwt, decodeProtectedHeader, importSPKI, jwtVerify } from 'jose';
import t from 'tap';
import { startAuthHarness, type TestApp, type Tokens } from './fixtures/harness.js';
import { OAuthBrowser } from './fixtures/oauth-browser.js';
import {
  authorize, startCertifiedProvider, startGitHubShaped, startHandWrittenIssuer, type CertifiedProvider, type GitHubShaped, type HandWrittenIssuer,
} from './fixtures/upstream-providers.js';

const REDIRECT = 'http://localhost:5173/auth/callback';
const h = await startAuthHarness({ upstreamTimeoutMs: 1000 });
t.teardown(() => h.close());
const google: CertifiedProvider = await startCertifiedProvider([
  { client_id: 'app-a-google', client_secret: 'google-secret-a', redirect_uris: [REDIRECT] },
  { client_id: 'other-client', client_secret: 'other-secret', redirect_uris: [REDIRECT] },
]);
t.teardown(() => google.close());
const hand: HandWrittenIssuer = await startHandWrittenIssuer({ client_id: 'hand-client', client_secret: 'hand-secret' });
t.teardown(() => hand.close());
const github: GitHubShaped = await startGitHubShaped({ client_id: 'gh-client', client_secret: 'gh-secret' });
t.teardown(() => github.close());

let app: TestApp;
let ann: Tokens;
t.beforeEach(async () => {
  ({ app, tokens: ann } = await h.startFresh({ session: true }));
  hand.bend = null;
  hand.tokenEndpoint = 'answer';
  hand.checkClientSecret = null;
  hand.person = { sub: 'hand-1', email: 'hana@example.org', email_verified: true };
  google.signInAs = { sub: 'g-100', email: 'gina@gmail.com', email_verified: true };
});

async function addProvider(body: Record<string, unknown>, target: TestApp = app): Promise<any> {
  const reply = await h.admin('POST', `/admin/apps/${target.id}/upstream-providers`, { redirect_uris: [REDIRECT], ...body });
  if (reply.status !== 201) throw new Error(`add provider: ${reply.status} ${JSON.stringify(reply.body)}`);
  return reply.body;
}
const addGoogle = (extra: Record<string, unknown> = {}, target: TestApp = app) =>
  addProvider({ kind: 'google', label: 'Google', client_id: 'app-a-google', client_secret: 'google-secret-a', discovery_url: google.discoveryUrl, ...extra }, target);
const addHand = (extra: Record<string, unknown> = {}) =>
  addProvider({ kind: 'oidc', label: 'Hand', client_id: 'hand-client', client_secret: 'hand-secret', discovery_url: hand.discoveryUrl, trusted_email_domains: ['example.org'], ...extra });
const addGitHub = (extra: Record<string, unknown> = {}) =>
  addProvider({ kind: 'github', label: 'GitHub', client_id: 'gh-client', client_secret: 'gh-secret', github: { web_base_url: github.webBaseUrl, api_base_url: github.apiBaseUrl }, ...extra });

function start(providerId: string, extra: Record<string, unknown> = {}, target: TestApp = app) {
  return h.post('/auth/upstream/start', { ...h.credentials(target), provider_id: providerId, redirect_uri: REDIRECT, ...extra });
}
function callback(params: Record<string, string>, extra: Record<string, unknown> = {}, target: TestApp = app) {
  return h.post('/auth/upstream/callback', { ...h.credentials(target), params, ...extra });
}
/** start -> provider -> callback; returns the callback's reply. */
async function signIn(providerId: string, extra: Record<string, unknown> = {}) {
  const started = await start(providerId, extra);
  if (started.status !== 200) throw new Error(`start: ${started.status} ${JSON.stringify(started.body)}`);
  return callback(await authorize(started.body.authorization_url, REDIRECT));
}
/** Users, identities and sessions: what a refused callback must leave as it found it. */
async function madeSoFar(): Promise<{ users: number; identities: number; sessions: number }> {
  const [row] = await h.sql<{ users: number; identities: number; sessions: number }[]>`
    select (select count(*)::int from users) as users, (select count(*)::int from user_identities) as identities,
           (select count(*)::int from refresh_families) as sessions
  `;
  return row!;
}

t.test('the admin configures a provider: the secret is sealed at rest and never answered back', async (t) => {
  const created = await addGoogle({ label: 'Sign in with Google' });
  t.match(created, {
    app_id: app.id, kind: 'google', label: 'Sign in with Google', client_id: 'app-a-google', has_client_secret: true,
    discovery_url: google.discoveryUrl, scopes: ['openid', 'email', 'profile'], redirect_uris: [REDIRECT], trusted_email_domains: [],
  });
  t.notOk('client_secret' in created);
  const [stored] = await h.sql<{ client_secret_sealed: Buffer }[]>`select client_secret_sealed from upstream_providers`;
  t.notOk(stored!.client_secret_sealed.includes(Buffer.from('google-secret-a')), 'the stored secret is not the plain text');

  t.same((await h.admin('GET', `/admin/apps/${app.id}/upstream-providers`)).body, { providers: [created] });
  t.same((await h.admin('GET', `/admin/apps/${app.id}/upstream-providers/${created.id}`)).body, created);
  const replaced = await h.admin('PUT', `/admin/apps/${app.id}/upstream-providers/${created.id}`, {
    kind: 'google', label: 'Google', client_id: 'app-a-google', discovery_url: google.discoveryUrl, redirect_uris: [REDIRECT], trusted_email_domains: ['example.com'],
  });
  t.equal(replaced.status, 200);
  t.match(replaced.body, { label: 'Google', has_client_secret: true, trusted_email_domains: ['example.com'] });
  t.equal((await signIn(created.id)).status, 200, 'the kept secret still works at the provider');
  t.same((await h.post('/auth/upstream/providers', h.credentials(app))).body, { providers: [{ id: created.id, kind: 'google', label: 'Google' }] });

  const tested = await h.admin('POST', `/admin/apps/${app.id}/upstream-providers/${created.id}/test`);
  t.same(tested.body, { ok: true, issuer: google.issuer, authorization_endpoint: `${google.issuer}/auth` });
  const deleted = await h.admin('DELETE', `/admin/apps/${app.id}/upstream-providers/${created.id}`);
  t.same(deleted.body, { id: created.id, deleted: true });
  t.equal((await h.admin('GET', `/admin/apps/${app.id}/upstream-providers/${created.id}`)).body.error.code, 'UPSTREAM_PROVIDER_NOT_FOUND');
  const events = await h.sql<{ type: string }[]>`select type from audit_events where type like 'upstream_provider.%' order by id`;
  t.same(events.map((e) => e.type), ['upstream_provider.created', 'upstream_provider.updated', 'upstream_provider.deleted']);
});

t.test('a provider configuration that cannot work is refused with the field named', async (t) => {
  const base = { kind: 'oidc', label: 'X', client_id: 'c', client_secret: 's', discovery_url: hand.discoveryUrl, redirect_uris: [REDIRECT] };
  const cases: [string, Record<string, unknown>, string][] = [
    ['an oidc provider without a discovery URL', { discovery_url: undefined }, 'discovery_url'],
    ['plain http to another host', { discovery_url: 'http://idp.example.com/.well-known/openid-configuration' }, 'discovery_url'],
    ['a redirect URI with a query', { redirect_uris: [`${REDIRECT}?x=1`] }, 'redirect_uris'],
    ['no client secret', { client_secret: undefined }, 'client_secret'],
    ['Apple settings on another kind', { apple: { team_id: 'ABCDE12345', key_id: 'KEY1234567', private_key: '-----BEGIN PRIVATE KEY-----\nAA==\n-----END PRIVATE KEY-----' } }, 'apple'],
    ['Apple without its key', { kind: 'apple', client_secret: undefined, discovery_url: undefined }, 'apple'],
    ['an unknown kind', { kind: 'facebook' }, 'kind'],
    ['a trusted domain in capitals', { trusted_email_domains: ['Example.com'] }, 'trusted_email_domains'],
  ];
  for (const [name, change, field] of cases) {
    const reply = await h.admin('POST', `/admin/apps/${app.id}/upstream-providers`, { ...base, ...change });
    t.equal(reply.status, 400, name);
    t.equal(reply.body.error.code, 'VALIDATION_ERROR', name);
    t.match(reply.body.error.message, field, `${name}: names ${field}`);
  }
  t.equal((await h.admin('POST', '/admin/apps/00000000-0000-0000-0000-000000000000/upstream-providers', base)).body.error.code, 'APP_NOT_FOUND');
  t.equal((await h.sql`select 1 from upstream_providers`).length, 0);
});

t.test('"Google": start has PKCE, state and nonce; the callback signs in with the usual tokens; the second sign-in is the same user', async (t) => {
  const provider = await addGoogle();
  const started = await start(provider.id);
  t.equal(started.status, 200);
  t.same(Object.keys(started.body).sort(), ['authorization_url', 'expires_in', 'state']);
  t.equal(started.body.expires_in, 600);
  const url = new URL(started.body.authorization_url);
  t.equal(url.origin + url.pathname, `${google.issuer}/auth`);
  t.match(Object.fromEntries(url.searchParams), {
    client_id: 'app-a-google', redirect_uri: REDIRECT, response_type: 'code', scope: 'openid email profile',
    state: started.body.state, code_challenge_method: 'S256', code_challenge: /^[A-Za-z0-9_-]{43}$/, nonce: /^[A-Za-z0-9_-]{43}$/,
  });

  const params = await authorize(started.body.authorization_url, REDIRECT);
  t.equal(params.iss, google.issuer, 'oidc-provider sends iss with the response (RFC 9207)');
  const signedIn = await callback(params);
  t.equal(signedIn.status, 200);
  t.same(Object.keys(signedIn.body).sort(), ['access_token', 'expires_in', 'refresh_token', 'token_type', 'user_id']);
  const me = await h.me(signedIn.body.access_token);
  t.same(me.body, { user_id: signedIn.body.user_id, app_id: 'app-a', tenant_id: null, roles: [] });
  t.same(decodeJwt(signedIn.body.access_token).amr, ['fed'], 'amr: signed in at another provider');
  t.equal((await h.refresh(app, signedIn.body.refresh_token)).status, 200);
  const [user] = await h.sql<{ email: string | null }[]>`select email from users where id = ${signedIn.body.user_id}`;
  t.equal(user!.email, 'gina@gmail.com', 'Google is the authority for gmail.com: the new user has the address');
  const identities = await h.admin('GET', `/admin/users/${signedIn.body.user_id}/identities`);
  t.match(identities.body.identities, [{ provider_id: provider.id, issuer: google.issuer, subject: 'g-100', email: 'gina@gmail.com', email_verified: true }]);

  google.signInAs = { sub: 'g-100', email: 'gina.new@gmail.com', email_verified: true };
  const again = await signIn(provider.id);
  t.equal(again.body.user_id, signedIn.body.user_id, 'found by (issuer, subject), whatever the address is now');
  t.equal((await h.sql`select 1 from user_identities`).length, 1);
  const events = await h.sql<{ type: string; details: any }[]>`select type, details from audit_events where type in ('identity.linked', 'login.succeeded') and user_id = ${signedIn.body.user_id} order by id`;
  t.same(events.map((e) => e.type), ['identity.linked', 'login.succeeded', 'login.succeeded']);
  t.match(events[1]!.details, { method: 'upstream', provider_id: provider.id });
  t.equal(events[0]!.details.by, 'verified_email');
});

t.test('an upstream sign-in as an invited address accepts the invitation; an unproven address does not', async (t) => {
  const tenant = await h.createTenant(app, 'Acme');
  const provider = await addGoogle();
  t.equal((await h.admin('POST', `/admin/apps/${app.id}/tenants/${tenant}/invitations`, { email: 'gina@gmail.com', role: 'staff' })).status, 201);
  t.equal((await h.admin('POST', `/admin/apps/${app.id}/tenants/${tenant}/invitations`, { email: 'ann@example.com', role: 'admin' })).status, 201);
  const gina = await signIn(provider.id);
  t.same((await h.me(gina.body.access_token)).body, { user_id: gina.body.user_id, app_id: 'app-a', tenant_id: tenant, roles: ['staff'] });
  google.signInAs = { sub: 'g-mallory', email: 'ann@example.com', email_verified: false };
  const mallory = await signIn(provider.id);
  t.same((await h.me(mallory.body.access_token)).body.roles, [], 'an unverified address takes no invitation');
  const pending = await h.admin('GET', `/admin/apps/${app.id}/tenants/${tenant}/invitations?state=pending`);
  t.same(pending.body.invitations.map((i: any) => i.email), ['ann@example.com']);
});

t.test('a verified address of a trusted domain joins the existing user with that address', async (t) => {
  const provider = await addGoogle({ trusted_email_domains: ['example.com'] });
  google.signInAs = { sub: 'g-ann', email: 'Ann@Example.com', email_verified: true };
  const signedIn = await signIn(provider.id);
  t.equal(signedIn.status, 200);
  t.equal(signedIn.body.user_id, ann.user_id);
  google.signInAs = { sub: 'g-hd', email: 'bob@corp.example', email_verified: true, hd: 'corp.example' };
  const bob = await h.login(app, 'bob@corp.example');
  t.equal((await signIn(provider.id)).body.user_id, bob.user_id, 'Google is trusted for the Workspace domain its hd claim names');
});

t.test('nOAuth: an address the provider does not prove, or proves for a domain it is not trusted for, never reaches the user who has it', async (t) => {
  const before = await madeSoFar();
  // An Entra ID tenant's admin can write anyone's address in `email`; Entra's e-mail is never taken as verified.
  const entra = await addProvider({ kind: 'entra', label: 'Microsoft', client_id: 'app-a-google', client_secret: 'google-secret-a', discovery_url: google.discoveryUrl, trusted_email_domains: ['example.com'] });
  google.signInAs = { sub: 'entra-mallory', email: 'ann@example.com', email_verified: true, tid: '9188040d-6c67-4c5b-b112-36a304b66dad' };
  const viaEntra = await signIn(entra.id);
  t.equal(viaEntra.status, 200);
  t.not(viaEntra.body.user_id, ann.user_id, 'Entra\'s email claim did not join ann');

  const unverified = await addGoogle({ trusted_email_domains: ['example.com'] });
  google.signInAs = { sub: 'g-mallory', email: 'ann@example.com', email_verified: false };
  const viaUnverified = await signIn(unverified.id);
  t.not(viaUnverified.body.user_id, ann.user_id, 'an unverified address did not join ann');

  const untrusted = await addHand({ trusted_email_domains: [] });
  hand.person = { sub: 'hand-mallory', email: 'ann@example.com', email_verified: true };
  const viaUntrusted = await signIn(untrusted.id);
  t.not(viaUntrusted.body.user_id, ann.user_id, 'a verified address of a domain the provider is not trusted for did not join ann');

  const after = await madeSoFar();
  t.equal(after.users, before.users + 3, 'three new users');
  const strangers = await h.sql<{ email: string | null; phone: string | null }[]>`select email, phone from users where id <> ${ann.user_id}`;
  t.same(strangers, [{ email: null, phone: null }, { email: null, phone: null }, { email: null, phone: null }], 'none of them has the address');
  const identities = await h.sql<{ email: string; email_verified: boolean; user_id: string }[]>`select email, email_verified, user_id from user_identities order by created_at`;
  t.same(identities.map((i) => [i.email, i.email_verified]), [['ann@example.com', false], ['ann@example.com', false], ['ann@example.com', true]]);
  t.notOk(identities.some((i) => i.user_id === ann.user_id));
  const ownIdentities = await h.post('/auth/identities', { ...h.credentials(app), refresh_token: ann.refresh_token });
  t.same(ownIdentities.body, { identities: [] }, 'ann has no identity linked');
});

t.test('a signed-in user links an identity explicitly, lists it, and removes it; never the last way in', async (t) => {
  const provider = await addGoogle();
  google.signInAs = { sub: 'g-ann', email: 'ann.private@gmail.com', email_verified: true };
  const linked = await signIn(provider.id, { refresh_token: ann.refresh_token });
  t.equal(linked.status, 200);
  t.match(linked.body, { identity: { provider_id: provider.id, issuer: google.issuer, subject: 'g-ann', email: 'ann.private@gmail.com', email_verified: true } });
  t.equal((await signIn(provider.id)).body.user_id, ann.user_id, 'the linked identity now signs ann in');
  const listed = await h.post('/auth/identities', { ...h.credentials(app), refresh_token: ann.refresh_token });
  t.equal(listed.body.identities.length, 1);
  t.equal(listed.body.identities[0].id, linked.body.identity.id);

  // Someone else's identity cannot be linked to ann.
  google.signInAs = { sub: 'g-zed', email: 'zed@gmail.com', email_verified: true };
  const zed = await signIn(provider.id);
  google.signInAs = { sub: 'g-zed', email: 'zed@gmail.com', email_verified: true };
  const stolen = await signIn(provider.id, { refresh_token: ann.refresh_token });
  t.equal(stolen.status, 409);
  t.equal(stolen.body.error.code, 'IDENTITY_LINKED_TO_ANOTHER_USER');
  t.equal((await h.sql`select 1 from user_identities where user_id = ${zed.body.user_id}`).length, 1, 'zed keeps it');

  const removed = await h.post('/auth/identities/remove', { ...h.credentials(app), refresh_token: ann.refresh_token, identity_id: linked.body.identity.id });
  t.same(removed.body, { success: true }, 'ann still has her address to sign in with');
  const again = await h.post('/auth/identities/remove', { ...h.credentials(app), refresh_token: ann.refresh_token, identity_id: linked.body.identity.id });
  t.equal(again.body.error.code, 'IDENTITY_NOT_FOUND');

  // A user known by one identity only cannot remove it (nor remove another user's).
  const untrusted = await addHand({ trusted_email_domains: [] });
  const only = await signIn(untrusted.id);
  const [identity] = await h.sql<{ id: string }[]>`select id from user_identities where user_id = ${only.body.user_id}`;
  const last = await h.post('/auth/identities/remove', { ...h.credentials(app), refresh_token: only.body.refresh_token, identity_id: identity!.id });
  t.equal(last.status, 409);
  t.equal(last.body.error.code, 'LAST_SIGN_IN_METHOD');
  const foreign = await h.post('/auth/identities/remove', { ...h.credentials(app), refresh_token: only.body.refresh_token, identity_id: (await h.sql<{ id: string }[]>`select id from user_identities where user_id = ${zed.body.user_id}`)[0]!.id });
  t.equal(foreign.body.error.code, 'IDENTITY_NOT_FOUND');
  t.equal((await h.sql`select 1 from user_identities`).length, 2);
  const events = await h.sql<{ type: string }[]>`select type from audit_events where type like 'identity.%' and user_id = ${ann.user_id} order by id`;
  t.same(events.map((e) => e.type), ['identity.linked', 'identity.unlinked']);
});

t.test('forged and replayed callbacks are refused and make nothing', async (t) => {
  const provider = await addGoogle();
  const other = await h.createApp('app-b');
  const otherProvider = await addProvider({ kind: 'google', label: 'Google', client_id: 'other-client', client_secret: 'other-secret', discovery_url: google.discoveryUrl }, other);
  const before = await madeSoFar();
  const refuse = async (name: string, reply: Awaited<ReturnType<typeof callback>>) => {
    t.equal(reply.status, 401, name);
    t.equal(reply.body.error?.code, 'UPSTREAM_CALLBACK_INVALID', name);
    t.same(await madeSoFar(), before, `${name}: nothing made`);
  };

  const first = await start(provider.id);
  const firstParams = await authorize(first.body.authorization_url, REDIRECT);
  await refuse('an unknown state', await callback({ ...firstParams, state: 'forged-state' }));
  await refuse('no state', await callback({ code: firstParams.code!, iss: firstParams.iss! }));
  const second = await start(provider.id);
  await refuse('the code of one flow with the state of another (PKCE and nonce differ)', await callback({ ...firstParams, state: second.body.state }));
  const viaOtherApp = await h.post('/auth/upstream/callback', { ...h.credentials(other), params: firstParams });
  t.equal(viaOtherApp.body.error.code, 'UPSTREAM_CALLBACK_INVALID', 'a flow is found only by its own app');

  // A code issued to another client (app-b's registration at the same provider), with a valid state of app-a.
  const started = await h.post('/auth/upstream/start', { ...h.credentials(other), provider_id: otherProvider.id, redirect_uri: REDIRECT });
  const foreign = await authorize(started.body.authorization_url, REDIRECT);
  const third = await start(provider.id);
  await refuse('a code for another client', await callback({ ...foreign, state: third.body.state }));
  await refuse('the provider\'s error answer', await callback({ error: 'access_denied', state: (await start(provider.id)).body.state, iss: google.issuer }));
  const fourth = await start(provider.id);
  const fourthParams = await authorize(fourth.body.authorization_url, REDIRECT);
  await refuse('a response whose iss is not the provider\'s', await callback({ ...fourthParams, iss: 'http://evil.example' }));

  const good = await start(provider.id);
  const goodParams = await authorize(good.body.authorization_url, REDIRECT);
  t.equal((await callback(goodParams)).status, 200, 'a genuine callback still works');
  const replay = await callback(goodParams);
  t.equal(replay.status, 401, 'a replayed callback');
  t.equal(replay.body.error.code, 'UPSTREAM_CALLBACK_INVALID');
  h.clock.advance(10 * 60 * 1000 + 1);
  const late = await start(provider.id);
  const lateParams = await authorize(late.body.authorization_url, REDIRECT);
  h.clock.advance(10 * 60 * 1000 + 1);
  const expired = await callback(lateParams);
  t.equal(expired.body.error.code, 'UPSTREAM_CALLBACK_INVALID', 'a flow older than ten minutes');
  const failures = await h.sql<{ details: any }[]>`select details from audit_events where type = 'login.failed' and details->>'method' = 'upstream'`;
  t.ok(failures.length >= 8, 'each refusal is recorded as login.failed');
});

t.test('id_tokens that fail a check are refused and make nothing: another issuer, another audience, another nonce, expired', async (t) => {
  const provider = await addHand();
  const before = await madeSoFar();
  const now = () => Math.floor(Date.now() / 1000);
  const bends: [string, (c: Record<string, unknown>) => Record<string, unknown>][] = [
    ['another issuer', (c) => ({ ...c, iss: 'https://accounts.google.com' })],
    ['another audience', (c) => ({ ...c, aud: 'someone-elses-client' })],
    ['another nonce', (c) => ({ ...c, nonce: 'replayed-nonce' })],
    ['no nonce', ({ nonce: _, ...c }) => c],
    ['expired', (c) => ({ ...c, iat: now() - 7200, exp: now() - 3600 })],
  ];
  for (const [name, bend] of bends) {
    hand.bend = bend;
    const reply = await signIn(provider.id);
    t.equal(reply.status, 401, name);
    t.equal(reply.body.error?.code, 'UPSTREAM_CALLBACK_INVALID', name);
    t.same(await madeSoFar(), before, `${name}: nothing made`);
  }
  hand.bend = null;
  t.equal((await signIn(provider.id)).status, 200, 'the same issuer, unbent, signs in');
});

t.test('an upstream that is down or slow is a clear 502 and makes nothing', async (t) => {
  const provider = await addHand();
  const before = await madeSoFar();
  for (const mode of ['fail', 'hang'] as const) {
    const started = await start(provider.id);
    const params = await authorize(started.body.authorization_url, REDIRECT);
    hand.tokenEndpoint = mode;
    const reply = await callback(params);
    hand.tokenEndpoint = 'answer';
    t.equal(reply.status, 502, mode);
    t.equal(reply.body.error.code, 'UPSTREAM_UNAVAILABLE', mode);
    t.same(await madeSoFar(), before, `${mode}: nothing made`);
  }
  const down = await addProvider({ kind: 'oidc', label: 'Down', client_id: 'c', client_secret: 's', discovery_url: 'http://127.0.0.1:9/.well-known/openid-configuration' });
  const notStarted = await start(down.id);
  t.equal(notStarted.status, 502);
  t.equal(notStarted.body.error.code, 'UPSTREAM_UNAVAILABLE');
  t.equal((await h.sql`select 1 from upstream_flows where provider_id = ${down.id}`).length, 0, 'no flow stored');
  const tested = await h.admin('POST', `/admin/apps/${app.id}/upstream-providers/${down.id}/test`);
  t.equal(tested.status, 502);
  t.equal(tested.body.error.code, 'UPSTREAM_UNAVAILABLE');
});

t.test('GitHub: the identity is the numeric id; only the verified primary address counts', async (t) => {
  const provider = await addGitHub({ trusted_email_domains: ['example.com'] });
  t.match(provider, { kind: 'github', discovery_url: null, scopes: ['read:user', 'user:email'], github: { web_base_url: github.webBaseUrl, api_base_url: github.apiBaseUrl } });
  const started = await start(provider.id);
  const url = new URL(started.body.authorization_url);
  t.equal(url.origin + url.pathname, `${github.webBaseUrl}/login/oauth/authorize`);
  t.match(Object.fromEntries(url.searchParams), { code_challenge_method: 'S256', state: started.body.state, scope: 'read:user user:email' });
  t.notOk(url.searchParams.has('nonce'), 'OAuth 2.0 only: no nonce');

  github.user = { id: 501, login: 'ann-gh', emails: [{ email: 'ann@other.example', primary: false, verified: true }, { email: 'ann@example.com', primary: true, verified: true }] };
  const joined = await callback(await authorize(started.body.authorization_url, REDIRECT));
  t.equal(joined.status, 200);
  t.equal(joined.body.user_id, ann.user_id, 'the verified primary address of a trusted domain joins ann');
  t.match((await h.admin('GET', `/admin/users/${ann.user_id}/identities`)).body.identities, [{ issuer: github.webBaseUrl, subject: '501', email: 'ann@example.com', email_verified: true }]);

  const bob = await h.login(app, 'bob@example.com');
  github.user = { id: 502, login: 'mallory', emails: [{ email: 'bob@example.com', primary: true, verified: false }] };
  const unverifiedPrimary = await signIn(provider.id);
  t.not(unverifiedPrimary.body.user_id, bob.user_id, 'an unverified primary address does not join');
  github.user = { id: 503, login: 'mallory2', emails: [{ email: 'mallory@evil.example', primary: true, verified: true }, { email: 'bob@example.com', primary: false, verified: true }] };
  const secondary = await signIn(provider.id);
  t.not(secondary.body.user_id, bob.user_id, 'a verified address that is not the primary does not join');

  const before = await madeSoFar();
  const forged = await start(provider.id);
  const params = await authorize(forged.body.authorization_url, REDIRECT);
  const wrongCode = await callback({ ...params, code: 'not-a-code' });
  t.equal(wrongCode.status, 401, 'GitHub\'s 200 {error: bad_verification_code}');
  t.equal(wrongCode.body.error.code, 'UPSTREAM_CALLBACK_INVALID');
  t.same(await madeSoFar(), before);
});

t.test('Apple: form_post, and a client secret that is an ES256 JWT the provider can verify', async (t) => {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const verifyKey = await importSPKI(publicKey.export({ type: 'spki', format: 'pem' }).toString(), 'ES256');
  const provider = await addProvider({
    kind: 'apple', label: 'Apple', client_id: 'hand-client', discovery_url: hand.discoveryUrl,
    apple: { team_id: 'TEAM123456', key_id: 'KEY1234567', private_key: pem },
  });
  t.match(provider, { kind: 'apple', has_client_secret: false, apple: { team_id: 'TEAM123456', key_id: 'KEY1234567' }, scopes: ['openid', 'email', 'name'] });
  t.notOk(JSON.stringify(provider).includes('PRIVATE KEY'));
  const [stored] = await h.sql<{ settings: any }[]>`select settings from upstream_providers where id = ${provider.id}`;
  t.notOk(JSON.stringify(stored!.settings).includes('PRIVATE KEY'), 'the private key is sealed at rest');

  hand.checkClientSecret = async (secret) => {
    try {
      await jwtVerify(secret, verifyKey, { issuer: 'TEAM123456', subject: 'hand-client', audience: hand.issuer, algorithms: ['ES256'] });
      return decodeProtectedHeader(secret).kid === 'KEY1234567';
    } catch { return false; }
  };
  const started = await start(provider.id);
  t.equal(new URL(started.body.authorization_url).searchParams.get('response_mode'), 'form_post');
  hand.person = { sub: 'apple-1', email: 'x7@privaterelay.appleid.com', email_verified: 'true' as unknown as boolean };
  const signedIn = await callback(await authorize(started.body.authorization_url, REDIRECT));
  t.equal(signedIn.status, 200);
  const secret = hand.lastTokenRequest!.get('client_secret')!;
  const claims = decodeJwt(secret);
  t.equal(claims.exp! - claims.iat!, 3600);
  const [user] = await h.sql<{ email: string }[]>`select email from users where id = ${signedIn.body.user_id}`;
  t.equal(user!.email, 'x7@privaterelay.appleid.com', 'Apple\'s "true" as a string counts, and Apple is the authority for its relay addresses');
});


t.test('Apple on the hosted sign-in page: its cross-site form_post is handed back to the browser as a form of the page\'s site, whose post carries the cookie; the client gets its code', async (t) => {
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const provider = await addProvider({
    kind: 'apple', label: 'Sign in with Apple', client_id: 'hand-client', discovery_url: hand.discoveryUrl,
    apple: { team_id: 'TEAM123456', key_id: 'KEY1234567', private_key: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString() },
  });
  hand.checkClientSecret = async () => true;
  hand.person = { sub: 'apple-2', email: 'y8@privaterelay.appleid.com', email_verified: true };
  const client = (await h.admin('POST', `/admin/apps/${app.id}/oauth-clients`, { name: 'Web', redirect_uris: ['https://app.example/callback'] })).body;
  const browser = new OAuthBrowser(h);
  const page = await browser.get(`${h.issuer}/oauth/authorize?${new URLSearchParams({
    client_id: client.client_id, redirect_uri: 'https://app.example/callback', response_type: 'code', scope: 'openid', state: 'st',
    code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGcSTeRgcM', code_challenge_method: 'S256',
  })}`);
  t.match(page.html, /<button type="submit" class="provider">Sign in with Apple<\/button>/);
  const started = await browser.post('/oauth/sign-in/upstream', { ...OAuthBrowser.formFields(page.html), provider: provider.id });
  t.equal(started.status, 303);
  t.equal(new URL(started.location!).searchParams.get('response_mode'), 'form_post');
  const answer = await authorize(started.location!, 'http://auth.test/oauth/upstream/callback');

  // Apple's page posts the answer from its own site: the browser's SameSite=Lax cookie is not sent.
  const posted = await new OAuthBrowser(h).post('/oauth/upstream/callback', answer);
  t.equal(posted.status, 200);
  t.match(posted.html, /<form method="post" action="\/oauth\/upstream\/callback\/continue">/);
  const fields = Object.fromEntries([...posted.html.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)].map((m) => [m[1]!, m[2]!.replace(/&amp;/g, '&')]));
  t.same(fields, answer, 'the answer, unchanged, in a form of this site');
  const elsewhere = await new OAuthBrowser(h).post('/oauth/upstream/callback/continue', fields);
  t.equal(elsewhere.status, 403, 'posted without the browser\'s cookie, it signs nobody in');
  const back = await browser.post('/oauth/upstream/callback/continue', fields);
  t.equal(back.status, 303, back.html);
  t.equal(new URL(back.location!).origin, 'https://app.example');
  t.match(new URL(back.location!).searchParams.get('code'), /^[A-Za-z0-9_-]{43}$/);
  const [user] = await h.sql<{ email: string }[]>`select u.email from users u join oauth_browser_sessions b on b.user_id = u.id`;
  t.equal(user!.email, 'y8@privaterelay.appleid.com');
});
t.test('bad input to the flow routes is a 4xx with a stable code', async (t) => {
  const provider = await addGoogle();
  const other = await h.createApp('app-b');
  const otherProvider = await addGoogle({}, other);
  const cases: [string, () => ReturnType<typeof h.post>, number, string][] = [
    ['a provider id that is not a UUID', () => start('google'), 400, 'VALIDATION_ERROR'],
    ['another app\'s provider', () => start(otherProvider.id), 404, 'UPSTREAM_PROVIDER_NOT_FOUND'],
    ['a redirect URI the provider does not have', () => start(provider.id, { redirect_uri: 'http://localhost:5173/elsewhere' }), 400, 'VALIDATION_ERROR'],
    ['a dead session for linking', () => start(provider.id, { refresh_token: 'rt_nonsense' }), 401, 'TOKEN_INVALID'],
    ['params that are not an object', () => h.post('/auth/upstream/callback', { ...h.credentials(app), params: 'code=1' }), 400, 'VALIDATION_ERROR'],
    ['a param with a NUL byte', () => h.post('/auth/upstream/callback', { ...h.credentials(app), params: { state: 'a\u0000b' } }), 400, 'VALIDATION_ERROR'],
    ['an unknown field', () => h.post('/auth/upstream/callback', { ...h.credentials(app), params: {}, extra: 1 }), 400, 'VALIDATION_ERROR'],
    ['wrong app credentials', () => h.post('/auth/upstream/callback', { app_id: app.id, app_secret: 'wrong', params: {} }), 401, 'TOKEN_INVALID'],
    ['an identity id that is not a UUID', () => h.post('/auth/identities/remove', { ...h.credentials(app), refresh_token: ann.refresh_token, identity_id: 'x' }), 400, 'VALIDATION_ERROR'],
  ];
  for (const [name, send, status, code] of cases) {
    const reply = await send();
    t.equal(reply.status, status, name);
    t.equal(reply.body.error?.code, code, name);
  }
});
