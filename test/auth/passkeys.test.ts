// Passkeys in a real browser: headless Chromium with the DevTools protocol's virtual
// authenticator (WebAuthn.addVirtualAuthenticator: CTAP2, internal, resident keys, user
// verification) registers a passkey after a code login and logs in with it through a small
// app's login page (fixtures/passkey-app.ts); then the refusals: wrong origin, wrong RP ID, a
// replayed assertion, user verification missing, a deleted passkey, a cloned authenticator's
// counter, a changed backup eligibility; the audit events, webhooks and the ceremonies' rate limit.
import { createHash } from 'node:crypto';
import { decodeJwt } from 'jose';
import type { Browser, CDPSession, Page } from 'puppeteer-core';
import t from 'tap';
import { launchBrowser } from '../helpers/browser.js';
import { startAuthHarness, type TestApp, type Tokens } from './fixtures/harness.js';
import { startPasskeyApp } from './fixtures/passkey-app.js';
import { startWebhookReceiver, until } from './fixtures/webhook-receiver.js';

const h = await startAuthHarness();
t.teardown(() => h.close());
const receiver = await startWebhookReceiver();
t.teardown(() => receiver.close());
let app: TestApp;
let ann: Tokens;
const site = await startPasskeyApp(h.base, () => h.credentials(app));
t.teardown(() => site.close());
const browser: Browser = await launchBrowser();
t.teardown(() => browser.close());

let page: Page;
let cdp: CDPSession;
t.beforeEach(async () => {
  ({ app, tokens: ann } = await h.startFresh({ session: true }));
  receiver.received.length = 0;
  const settings = await h.admin('PUT', `/admin/apps/${app.id}/passkeys`, { rp_id: 'localhost', rp_name: 'App A', origins: [site.origin] });
  if (settings.status !== 200) throw new Error(`passkey settings: ${settings.status} ${JSON.stringify(settings.body)}`);
  page = await browser.newPage();
  cdp = await page.createCDPSession();
  await cdp.send('WebAuthn.enable');
  await cdp.send('WebAuthn.addVirtualAuthenticator', {
    options: { protocol: 'ctap2', transport: 'internal', hasResidentKey: true, hasUserVerification: true, isUserVerified: true, automaticPresenceSimulation: true },
  });
  await page.goto(`${site.origin}/`);
});
t.afterEach(async () => { await page.close(); });

type Reply = { status: number; body: any; assertion?: any; attestation?: any; ceremony_id?: string };
const addPasskey = (refreshToken: string, uv = 'required'): Promise<Reply> =>
  page.evaluate((token, userVerification) => (window as any).addPasskey(token, { uv: userVerification }), refreshToken, uv);
const signInWithPasskey = (uv = 'required'): Promise<Reply> => page.evaluate((userVerification) => (window as any).signInWithPasskey({ uv: userVerification }), uv);

t.test('a user who logged in by code registers a passkey, lists it, and logs in with it: the same tokens and session as a code login', async (t) => {
  const endpoint = await h.admin('POST', `/admin/apps/${app.id}/webhooks`, { url: receiver.url, event_types: ['passkey.registered', 'passkey.used', 'passkey.removed'] });
  t.equal(endpoint.status, 201);
  const registered = await addPasskey(ann.refresh_token);
  t.equal(registered.status, 201);
  t.match(registered.body, { name: 'This browser', last_used_at: null, backup_eligible: false, backed_up: false, transports: ['internal'] });
  t.same(Object.keys(registered.body).sort(), ['aaguid', 'backed_up', 'backup_eligible', 'created_at', 'id', 'last_used_at', 'name', 'transports']);
  const listed = await h.post('/auth/passkeys', { ...h.credentials(app), refresh_token: ann.refresh_token });
  t.equal(listed.status, 200);
  t.same(listed.body, { passkeys: [registered.body] });

  const login = await signInWithPasskey();
  t.equal(login.status, 200);
  t.same(Object.keys(login.body).sort(), ['access_token', 'expires_in', 'refresh_token', 'token_type', 'user_id']);
  t.equal(login.body.user_id, ann.user_id);
  t.equal(login.body.token_type, 'Bearer');
  t.equal(login.body.expires_in, 1800);
  t.same(decodeJwt(login.body.access_token).amr, ['hwk', 'mfa'], 'a passkey with user verification is both factors (RFC 8176 amr)');
  const me = await h.me(login.body.access_token);
  t.equal(me.status, 200);
  t.same(me.body, { user_id: ann.user_id, app_id: 'app-a', tenant_id: null, roles: [] });
  t.equal((await h.refresh(app, login.body.refresh_token)).status, 200, 'its refresh token rotates like any other');
  const sessions = await h.admin('GET', `/admin/users/${ann.user_id}/sessions`);
  t.equal(sessions.body.sessions.length, 2, 'a session of its own beside the code login\'s');

  const events = await h.sql<{ type: string; details: any }[]>`select type, details from audit_events where type like 'passkey.%' or (type = 'login.succeeded' and details->>'method' = 'passkey') order by id`;
  t.same(events.map((e) => e.type), ['passkey.registered', 'passkey.used', 'login.succeeded']);
  t.same(events[0]!.details, { passkey_id: registered.body.id, name: 'This browser' });
  t.same(events[2]!.details, { method: 'passkey', passkey_id: registered.body.id });
  const [stored] = await h.sql<{ sign_count: string; last_used_at: Date }[]>`select sign_count, last_used_at from passkeys`;
  t.equal(Number(stored!.sign_count), Buffer.from(login.assertion.response.authenticatorData, 'base64url').readUInt32BE(33), 'the counter of the assertion is stored');

  const removed = await h.post('/auth/passkeys/remove', { ...h.credentials(app), refresh_token: ann.refresh_token, passkey_id: registered.body.id });
  t.equal(removed.status, 200);
  t.same(removed.body, { success: true });
  t.ok(await until(() => receiver.received.length === 3), 'a webhook for the registration, the use and the removal');
  t.same(receiver.received.map((m) => m.json.type).sort(), ['passkey.registered', 'passkey.removed', 'passkey.used']);
});

t.test('a deleted passkey no longer logs in', async (t) => {
  const registered = await addPasskey(ann.refresh_token);
  t.equal((await h.post('/auth/passkeys/remove', { ...h.credentials(app), refresh_token: ann.refresh_token, passkey_id: registered.body.id })).status, 200);
  const login = await signInWithPasskey();
  t.equal(login.status, 401);
  t.same(login.body, { error: { code: 'PASSKEY_INVALID', message: 'The passkey is not registered with this app' } });
  const [failed] = await h.sql<{ details: any }[]>`select details from audit_events where type = 'login.failed'`;
  t.same(failed!.details, { method: 'passkey', reason: 'PASSKEY_INVALID', message: 'The passkey is not registered with this app' });
  const again = await h.post('/auth/passkeys/remove', { ...h.credentials(app), refresh_token: ann.refresh_token, passkey_id: registered.body.id });
  t.equal(again.status, 404);
  t.same(again.body, { error: { code: 'PASSKEY_NOT_FOUND', message: 'The user has no such passkey' } });
});

t.test('a passkey login of an address whose tenant requires its own identity provider is refused: 403 SSO_REQUIRED', async (t) => {
  t.equal((await addPasskey(ann.refresh_token)).status, 201);
  const tenant = await h.createTenant(app, 'Example Inc');
  // The domain's DNS proof is tenant-sso.test.ts's; here the verified claim is written directly.
  await h.sql`insert into tenant_domains (id, app_id, tenant_id, domain, verification_token, verified_at, created_at)
    values (gen_random_uuid(), ${app.id}, ${tenant}, 'example.com', 't', now(), now())`;
  const provider = await h.admin('POST', `/admin/apps/${app.id}/upstream-providers`, {
    kind: 'oidc', label: 'Example SSO', client_id: 'c', client_secret: 's', discovery_url: 'https://idp.example.com/.well-known/openid-configuration',
    redirect_uris: ['https://app.example.com/sso'], tenant_id: tenant, require_sso: true,
  });
  t.equal(provider.status, 201);
  const login = await signInWithPasskey();
  t.equal(login.status, 403);
  t.equal(login.body.error.code, 'SSO_REQUIRED');
  t.equal((await h.sql`select 1 from refresh_families`).length, 1, 'no session beyond the code login of the fixture');
});

t.test('an assertion from an origin the app does not allow is refused', async (t) => {
  t.equal((await addPasskey(ann.refresh_token)).status, 201);
  t.equal((await h.admin('PUT', `/admin/apps/${app.id}/passkeys`, { rp_id: 'localhost', rp_name: 'App A', origins: ['http://localhost:1'] })).status, 200);
  const login = await signInWithPasskey();
  t.equal(login.status, 401);
  t.same(login.body, { error: { code: 'PASSKEY_INVALID', message: 'The passkey response could not be verified' } });
});

t.test('an assertion for another RP ID is refused', async (t) => {
  t.equal((await addPasskey(ann.refresh_token)).status, 201);
  // The browser makes the assertion for "localhost" (the options were made before the change).
  const started = await h.post('/auth/passkeys/login/options', h.credentials(app));
  const assertion = await page.evaluate(async (options) => {
    const credential = await navigator.credentials.get({ publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(options) });
    return (credential as any).toJSON();
  }, started.body.options);
  await h.sql`update app_passkey_settings set rp_id = 'example.com', origins = ${[site.origin]}`;
  const login = await h.post('/auth/passkeys/login/verify', { ...h.credentials(app), ceremony_id: started.body.ceremony_id, response: assertion });
  t.equal(login.status, 401);
  t.equal(login.body.error.code, 'PASSKEY_INVALID');
});

t.test('a replayed assertion is refused, with its own ceremony or a new one', async (t) => {
  t.equal((await addPasskey(ann.refresh_token)).status, 201);
  const login = await signInWithPasskey();
  t.equal(login.status, 200);
  const replay = await h.post('/auth/passkeys/login/verify', { ...h.credentials(app), ceremony_id: login.ceremony_id, response: login.assertion });
  t.equal(replay.status, 401);
  t.same(replay.body, { error: { code: 'PASSKEY_INVALID', message: 'The ceremony is unknown, expired or used' } });
  const fresh = await h.post('/auth/passkeys/login/options', h.credentials(app));
  const onNew = await h.post('/auth/passkeys/login/verify', { ...h.credentials(app), ceremony_id: fresh.body.ceremony_id, response: login.assertion });
  t.equal(onNew.status, 401);
  t.same(onNew.body, { error: { code: 'PASSKEY_INVALID', message: 'The passkey response could not be verified' } }, 'its challenge is not the new one');
});

t.test('user verification is required: a registration or an assertion without it is refused', async (t) => {
  // Chromium's authenticator verifies its user for any discoverable credential it creates, so
  // the attestation is made and then its UV flag cleared, as an authenticator without user
  // verification would send it (attestation "none" signs nothing the server could check instead).
  const started = await h.post('/auth/passkeys/register/options', { ...h.credentials(app), refresh_token: ann.refresh_token });
  const attestation = await page.evaluate(async (options) => {
    const credential = await navigator.credentials.create({ publicKey: PublicKeyCredential.parseCreationOptionsFromJSON(options) });
    return (credential as any).toJSON();
  }, started.body.options);
  const rpIdHash = createHash('sha256').update('localhost').digest();
  const attestationObject = Buffer.from(attestation.response.attestationObject, 'base64url');
  const flagsAt = attestationObject.indexOf(rpIdHash) + 32;
  t.equal(attestationObject[flagsAt]! & 0x04, 0x04, 'the authenticator set UV');
  attestationObject[flagsAt]! &= ~0x04;
  attestation.response.attestationObject = attestationObject.toString('base64url');
  const registration = await h.post('/auth/passkeys/register/verify', { ...h.credentials(app), refresh_token: ann.refresh_token, ceremony_id: started.body.ceremony_id, response: attestation });
  t.equal(registration.status, 401);
  t.same(registration.body, { error: { code: 'PASSKEY_INVALID', message: 'The passkey response could not be verified' } });
  t.equal((await h.sql`select 1 from passkeys`).length, 0, 'nothing stored');

  t.equal((await addPasskey(ann.refresh_token)).status, 201);
  const login = await signInWithPasskey('discouraged');
  t.equal(login.status, 401);
  t.same(login.body, { error: { code: 'PASSKEY_INVALID', message: 'The passkey response could not be verified' } });
  const flags = Buffer.from(login.assertion.response.authenticatorData, 'base64url')[32]!;
  t.equal(flags & 0x04, 0, 'the assertion refused had no UV flag');
});

t.test('a signature counter that does not increase (a cloned authenticator) is refused', async (t) => {
  t.equal((await addPasskey(ann.refresh_token)).status, 201);
  await h.sql`update passkeys set sign_count = 1000`;
  const login = await signInWithPasskey();
  t.equal(login.status, 401);
  t.equal(login.body.error.code, 'PASSKEY_INVALID');
  const [stored] = await h.sql<{ sign_count: string }[]>`select sign_count from passkeys`;
  t.equal(stored!.sign_count, '1000', 'the stored counter is unchanged');
});

t.test('a passkey whose backup eligibility changed since its registration is refused', async (t) => {
  t.equal((await addPasskey(ann.refresh_token)).status, 201);
  await h.sql`update passkeys set backup_eligible = true`;
  const login = await signInWithPasskey();
  t.equal(login.status, 401);
  t.same(login.body, { error: { code: 'PASSKEY_INVALID', message: 'The backup eligibility of the passkey changed since its registration' } });
});

t.test('registration needs the live refresh token of a session; an app without a relying party has no ceremonies', async (t) => {
  const rotated = await h.refresh(app, ann.refresh_token);
  const stale = await h.post('/auth/passkeys/register/options', { ...h.credentials(app), refresh_token: ann.refresh_token });
  t.equal(stale.status, 401);
  t.equal(stale.body.error.code, 'TOKEN_INVALID');
  const other = await h.createApp('app-b');
  const unset = await h.post('/auth/passkeys/login/options', h.credentials(other));
  t.equal(unset.status, 409);
  t.same(unset.body, { error: { code: 'PASSKEYS_NOT_CONFIGURED', message: 'The app has no relying party set for passkeys' } });
  const badOrigin = await h.admin('PUT', `/admin/apps/${app.id}/passkeys`, { rp_id: 'example.com', rp_name: 'A', origins: ['https://evil.test'] });
  t.equal(badOrigin.status, 400);
  t.equal(badOrigin.body.error.code, 'VALIDATION_ERROR');
  t.ok(rotated.status === 200);
});

t.test('the ceremony routes are rate limited per client IP: 429 RATE_LIMITED with Retry-After', async (t) => {
  for (let i = 0; i < 100; i++) {
    const reply = await h.post('/auth/passkeys/login/options', h.credentials(app));
    if (reply.status !== 200) throw new Error(`request ${i + 1}: ${reply.status}`);
  }
  const refused = await h.post('/auth/passkeys/login/options', h.credentials(app));
  t.equal(refused.status, 429);
  t.same(refused.body, { error: { code: 'RATE_LIMITED', message: 'Too many requests; retry later' } });
  t.equal(refused.headers.get('retry-after'), '600');
  const verify = await h.post('/auth/passkeys/login/verify', { ...h.credentials(app), ceremony_id: 'x', response: { id: 'AAAA', rawId: 'AAAA', type: 'public-key', response: { clientDataJSON: 'e30', authenticatorData: 'A'.repeat(50), signature: 'AAAA' } } });
  t.equal(verify.status, 429, 'the same rule counts every ceremony route');
});
