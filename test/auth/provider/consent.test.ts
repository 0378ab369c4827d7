// Consent to third-party clients: asked once per user, client and scopes, remembered, asked
// again for new scopes or prompt=consent; denied is access_denied; prompt=none without it is
// consent_required; listed and revoked through the sessions API and the admin API, a revocation
// ending the client's sessions of that user. And the tenant picker of a user in several tenants.
import { createHash } from 'node:crypto';
import t, { type Test } from 'tap';
import { startAuthHarness, type TestApp } from '../fixtures/harness.js';
import { OAuthBrowser } from '../fixtures/oauth-browser.js';

const h = await startAuthHarness();
t.teardown(() => h.close());

const REDIRECT = 'https://third.example/cb';
let app: TestApp;
let third: { client_id: string; client_secret: string };
t.beforeEach(async () => {
  ({ app } = await h.startFresh());
  third = (await h.admin('POST', `/admin/apps/${app.id}/oauth-clients`, { name: 'Third Party Notes', redirect_uris: [REDIRECT], first_party: false })).body;
});

const verifier = 'v'.repeat(43);
const challenge = createHash('sha256').update(verifier).digest('base64url');
function authorizeUrl(clientId: string, extra: Record<string, string> = {}): string {
  return `${h.issuer}/oauth/authorize?${new URLSearchParams({
    client_id: clientId, redirect_uri: REDIRECT, response_type: 'code', scope: 'openid email offline_access', state: 'st',
    code_challenge: challenge, code_challenge_method: 'S256', ...extra,
  })}`;
}

async function exchange(clientId: string, secret: string, location: string) {
  const code = new URL(location).searchParams.get('code')!;
  return h.request('POST', '/oauth/token', {
    raw: new URLSearchParams({ grant_type: 'authorization_code', code, redirect_uri: REDIRECT, code_verifier: verifier, client_id: clientId, client_secret: secret }).toString(),
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
  });
}

/** Signs ann in and answers the consent page; returns the browser and the redirect. */
async function signInAndDecide(t: Test, decision: 'allow' | 'deny') {
  const browser = new OAuthBrowser(h);
  const page = await browser.get(authorizeUrl(third.client_id));
  const signedIn = await browser.signInWithCode(page.html, 'ann@example.com');
  t.equal(signedIn.status, 200);
  t.match(signedIn.html, /<h1>Allow Third Party Notes to use your App app-a account\?<\/h1>/);
  t.match(signedIn.html, /<li>See your e-mail address<\/li>/);
  t.match(signedIn.html, /<li>Stay signed in when you are away<\/li>/);
  return { browser, back: await browser.decide(signedIn.html, decision) };
}

t.test('a third-party client is allowed once, then gets codes without asking; new scopes ask again', async (t) => {
  const { browser, back } = await signInAndDecide(t, 'allow');
  t.equal(back.status, 303);
  t.ok(new URL(back.location!).searchParams.get('code'));
  t.equal((await exchange(third.client_id, third.client_secret, back.location!)).status, 200);
  const again = await browser.get(authorizeUrl(third.client_id));
  t.equal(again.status, 303, 'remembered: straight back with a code');
  t.ok(new URL(again.location!).searchParams.get('code'));
  const wider = await browser.get(authorizeUrl(third.client_id, { scope: 'openid email phone' }));
  t.equal(wider.status, 200, 'a new scope asks again');
  t.match(wider.html, /<li>See your phone number<\/li>/);
  const silent = await browser.get(authorizeUrl(third.client_id, { scope: 'openid phone', prompt: 'none' }));
  t.equal(new URL(silent.location!).searchParams.get('error'), 'consent_required');
  const forced = await browser.get(authorizeUrl(third.client_id, { prompt: 'consent' }));
  t.equal(forced.status, 200, 'prompt=consent asks even when remembered');
  t.match(forced.html, /action="\/oauth\/consent"/);
  const events = await h.sql`select type from audit_events where type = 'oauth.consent_granted'`;
  t.equal(events.length, 1);
});

t.test('denied: access_denied, and no code or session', async (t) => {
  const { back } = await signInAndDecide(t, 'deny');
  t.equal(back.status, 303);
  const url = new URL(back.location!);
  t.equal(url.searchParams.get('error'), 'access_denied');
  t.equal(url.searchParams.get('state'), 'st');
  t.equal(url.searchParams.get('code'), null);
  const [{ n }] = await h.sql`select count(*)::int as n from oauth_authorization_codes`;
  t.equal(n, 0);
  t.equal((await h.sql`select * from oauth_consents`).length, 0);
});

t.test('a first-party client is not asked', async (t) => {
  const own = (await h.admin('POST', `/admin/apps/${app.id}/oauth-clients`, { name: 'Own', redirect_uris: [REDIRECT] })).body;
  const browser = new OAuthBrowser(h);
  const page = await browser.get(authorizeUrl(own.client_id));
  const back = await browser.signInWithCode(page.html, 'ann@example.com');
  t.equal(back.status, 303);
  t.ok(new URL(back.location!).searchParams.get('code'));
});

t.test('the user lists and revokes a consent through the sessions API; the client\'s sessions end', async (t) => {
  const { browser, back } = await signInAndDecide(t, 'allow');
  const tokens = (await exchange(third.client_id, third.client_secret, back.location!)).body;
  h.clock.advance(61_000); // past the code resend interval
  const own = await h.login(app, 'ann@example.com'); // the app's own session of the same user
  const listed = await h.post('/auth/consents', { ...h.credentials(app), refresh_token: own.refresh_token });
  t.equal(listed.status, 200);
  t.match(listed.body, { consents: [{ client_id: third.client_id, client_name: 'Third Party Notes', scopes: ['openid', 'email', 'offline_access'], granted_at: /Z$/ }] });
  const revoked = await h.post('/auth/consents/revoke', { ...h.credentials(app), refresh_token: own.refresh_token, client_id: third.client_id });
  t.same(revoked.body, { sessions_revoked: 1 });
  const refresh = await h.request('POST', '/oauth/token', {
    raw: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: third.client_id, client_secret: third.client_secret }).toString(),
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
  });
  t.equal(refresh.status, 400);
  t.equal(refresh.body.error, 'invalid_grant', 'the client\'s refresh token is revoked');
  const ownRefreshed = await h.refresh(app, own.refresh_token);
  t.equal(ownRefreshed.status, 200, 'the app\'s own session goes on');
  const again = await h.post('/auth/consents/revoke', { ...h.credentials(app), refresh_token: ownRefreshed.body.refresh_token, client_id: third.client_id });
  t.equal(again.status, 404);
  t.equal(again.body.error.code, 'CONSENT_NOT_FOUND');
  const asked = await browser.get(authorizeUrl(third.client_id));
  t.equal(asked.status, 200, 'asked again after the revocation');
  t.match(asked.html, /action="\/oauth\/consent"/);
});

t.test('the admin lists and revokes a user\'s consents', async (t) => {
  await signInAndDecide(t, 'allow');
  const [user] = await h.sql<{ id: string }[]>`select id from users where email = 'ann@example.com'`;
  const listed = await h.admin('GET', `/admin/users/${user!.id}/consents`);
  t.equal(listed.status, 200);
  t.equal(listed.body.consents.length, 1);
  const deleted = await h.admin('DELETE', `/admin/users/${user!.id}/consents?client_id=${third.client_id}`);
  t.same(deleted.body, { sessions_revoked: 0 });
  t.equal((await h.admin('GET', `/admin/users/${user!.id}/consents`)).body.consents.length, 0);
  const events = await h.sql`select actor, details from audit_events where type = 'oauth.consent_revoked'`;
  t.match(events[0], { actor: 'admin', details: { client_id: third.client_id } });
});

t.test('a user with roles in several tenants picks one on the page; the token is for that tenant', async (t) => {
  const own = (await h.admin('POST', `/admin/apps/${app.id}/oauth-clients`, { name: 'Own', redirect_uris: [REDIRECT] })).body;
  const { acme, globex } = await h.userInTwoTenants(app);
  const browser = new OAuthBrowser(h);
  const page = await browser.get(authorizeUrl(own.client_id));
  const picker = await browser.signInWithCode(page.html, 'ann@example.com');
  t.equal(picker.status, 200);
  t.match(picker.html, /<h1>Which App app-a organisation\?<\/h1>/);
  t.match(picker.html, /<label for="tenant-0">Acme<\/label>/);
  t.match(picker.html, /<label for="tenant-1">Globex<\/label>/);
  const fields = OAuthBrowser.formFields(picker.html);
  const stranger = await browser.post('/oauth/tenant', { ...fields, tenant: '00000000-0000-0000-0000-000000000000' });
  t.equal(stranger.status, 200, 'a tenant that is not the user\'s: the picker again');
  t.match(stranger.html, /action="\/oauth\/tenant"/);
  const back = await browser.post('/oauth/tenant', { ...fields, tenant: globex });
  t.equal(back.status, 303);
  const tokens = (await exchange(own.client_id, own.client_secret, back.location!)).body;
  const payload = JSON.parse(Buffer.from(tokens.access_token.split('.')[1], 'base64url').toString());
  t.match(payload, { tenant_id: globex, roles: ['admin'] });
  const silent = await browser.get(authorizeUrl(own.client_id, { prompt: 'none' }));
  t.equal(new URL(silent.location!).searchParams.get('error'), 'account_selection_required');
  const named = await browser.get(authorizeUrl(own.client_id, { tenant: acme }));
  t.equal(named.status, 303, 'a tenant asked for skips the picker');
  const named_tokens = (await exchange(own.client_id, own.client_secret, named.location!)).body;
  t.match(JSON.parse(Buffer.from(named_tokens.access_token.split('.')[1], 'base64url').toString()), { tenant_id: acme, roles: ['staff'] });
});

t.test('client changes, consents, codes and their exchanges are webhook events', async (t) => {
  const events = ['oauth_client.created', 'oauth_client.deleted', 'oauth.code_issued', 'oauth.code_exchanged', 'oauth.consent_granted', 'oauth.consent_revoked'];
  const hook = await h.admin('POST', `/admin/apps/${app.id}/webhooks`, { url: 'https://hooks.example/auth', event_types: events });
  t.equal(hook.status, 201);
  const made = (await h.admin('POST', `/admin/apps/${app.id}/oauth-clients`, { name: 'Later', redirect_uris: [REDIRECT], first_party: false })).body;
  const browser = new OAuthBrowser(h);
  const page = await browser.get(authorizeUrl(made.client_id));
  const consentPage = await browser.signInWithCode(page.html, 'ann@example.com');
  const back = await browser.decide(consentPage.html, 'allow');
  t.equal((await exchange(made.client_id, made.client_secret, back.location!)).status, 200);
  const [user] = await h.sql<{ id: string }[]>`select id from users where email = 'ann@example.com'`;
  await h.admin('DELETE', `/admin/users/${user!.id}/consents?client_id=${made.client_id}`);
  await h.admin('DELETE', `/admin/apps/${app.id}/oauth-clients/${made.client_id}`);
  const deliveries = await h.admin('GET', `/admin/apps/${app.id}/webhook-deliveries?limit=100`);
  // One delivery per event (the test clock does not move, so the list's order is not the events').
  const types = deliveries.body.deliveries.map((d: { event_type: string }) => d.event_type).sort();
  t.same(types, [...events].sort());
  const created = deliveries.body.deliveries.find((d: { event_type: string }) => d.event_type === 'oauth_client.created');
  t.match(created.payload, { data: { details: { client_id: made.client_id, name: 'Later' } } });
});

t.test('the app\'s colour is on the page\'s buttons, with text that contrasts', async (t) => {
  const own = (await h.admin('POST', `/admin/apps/${app.id}/oauth-clients`, { name: 'Own', redirect_uris: [REDIRECT] })).body;
  const set = await h.admin('PUT', `/admin/apps/${app.id}/branding`, { color: '#0B6E4F' });
  t.same(set.body, { app_id: app.id, color: '#0b6e4f' });
  const dark = await new OAuthBrowser(h).get(authorizeUrl(own.client_id));
  t.match(dark.html, 'button:not(.secondary){background:#0b6e4f;color:#ffffff}');
  await h.admin('PUT', `/admin/apps/${app.id}/branding`, { color: '#f5d000' });
  const light = await new OAuthBrowser(h).get(authorizeUrl(own.client_id));
  t.match(light.html, 'button:not(.secondary){background:#f5d000;color:#111111}', 'dark text on a light colour');
  const bad = await h.admin('PUT', `/admin/apps/${app.id}/branding`, { color: 'red;}body{display:none' });
  t.equal(bad.status, 400);
  t.equal(bad.body.error.code, 'VALIDATION_ERROR');
  await h.admin('PUT', `/admin/apps/${app.id}/branding`, { color: null });
  t.notMatch((await new OAuthBrowser(h).get(authorizeUrl(own.client_id))).html, 'button:not(.secondary){background');
});

t.test('the page also signs in with a code by SMS', async (t) => {
  const own = (await h.admin('POST', `/admin/apps/${app.id}/oauth-clients`, { name: 'Own', redirect_uris: [REDIRECT] })).body;
  const browser = new OAuthBrowser(h);
  const page = await browser.get(authorizeUrl(own.client_id));
  t.match(page.html, /<label for="phone">Or a mobile number<\/label>/);
  const fields = OAuthBrowser.formFields(page.html);
  const malformed = await browser.post('/oauth/sign-in/email', { ...fields, phone: '12' });
  t.equal(malformed.status, 200);
  t.match(malformed.html, /That does not look like a phone number/);
  const asked = await browser.post('/oauth/sign-in/email', { ...fields, phone: '+44 7700 900123' });
  t.equal(asked.status, 200);
  t.match(asked.html, /We sent a code to <strong>\+447700900123<\/strong>/);
  t.match(asked.html, /<input type="hidden" name="phone" value="\+447700900123">/, 'a new code goes to the same number');
  t.equal(h.outbox.messages.at(-1)!.channel, 'phone');
  const back = await browser.post('/oauth/sign-in/code', { ...fields, code: h.outbox.codeFor('+447700900123') });
  t.equal(back.status, 303, back.html.slice(back.html.indexOf('<main>'), back.html.indexOf('</main>')));
  const tokens = (await exchange(own.client_id, own.client_secret, back.location!)).body;
  const [user] = await h.sql<{ id: string }[]>`select id from users where phone = '+447700900123'`;
  const claims = JSON.parse(Buffer.from(tokens.access_token.split('.')[1], 'base64url').toString());
  t.equal(claims.sub, user!.id);
  t.same(claims.amr, ['sms'], 'RFC 8176: a code by SMS');
});
