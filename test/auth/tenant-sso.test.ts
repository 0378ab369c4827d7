// Enterprise SSO per tenant: oidc-provider (OpenID certified) as the tenant's "Okta", the
// tenant's domains proven by DNS TXT records served by a local DNS server (dns-packet on UDP
// loopback), home-realm discovery, the first sign-in's role, require-SSO refusing code logins,
// and a domain two tenants claim.
import { decodeJwt } from 'jose';
import t from 'tap';
import { startDnsServer } from './fixtures/dns-server.js';
import { startAuthHarness, type TestApp } from './fixtures/harness.js';
import { authorize, startCertifiedProvider } from './fixtures/upstream-providers.js';

const REDIRECT = 'http://localhost:5173/sso/callback';
const dns = await startDnsServer();
t.teardown(() => dns.close());
const okta = await startCertifiedProvider([{ client_id: 'okta-acme', client_secret: 'okta-secret', redirect_uris: [REDIRECT] }]);
t.teardown(() => okta.close());
const h = await startAuthHarness({ dnsServers: [dns.address] });
t.teardown(() => h.close());

let app: TestApp;
let acme: string;
let globex: string;
t.beforeEach(async () => {
  ({ app } = await h.startFresh());
  acme = await h.createTenant(app, 'Acme');
  globex = await h.createTenant(app, 'Globex');
  dns.txt.clear();
  dns.failing = false;
  okta.signInAs = { sub: 'okta-bob', email: 'bob@acme.example', email_verified: true };
});

const domains = (tenant: string) => `/admin/apps/${app.id}/tenants/${tenant}/domains`;
/** Claims and proves a domain for the tenant; returns the claim. */
async function proveDomain(tenant: string, domain: string): Promise<any> {
  const claim = await h.admin('POST', domains(tenant), { domain });
  dns.txt.set(claim.body.verification.name, [claim.body.verification.value]);
  const verified = await h.admin('POST', `${domains(tenant)}/${claim.body.id}/verify`);
  if (verified.status !== 200) throw new Error(`verify: ${verified.status} ${JSON.stringify(verified.body)}`);
  return verified.body;
}
async function addOkta(extra: Record<string, unknown> = {}): Promise<any> {
  const reply = await h.admin('POST', `/admin/apps/${app.id}/upstream-providers`, {
    kind: 'oidc', label: 'Acme SSO', client_id: 'okta-acme', client_secret: 'okta-secret', discovery_url: okta.discoveryUrl,
    redirect_uris: [REDIRECT], tenant_id: acme, default_role: 'staff', ...extra,
  });
  if (reply.status !== 201) throw new Error(`add okta: ${reply.status} ${JSON.stringify(reply.body)}`);
  return reply.body;
}
async function ssoSignIn(providerId: string): Promise<any> {
  const started = await h.post('/auth/upstream/start', { ...h.credentials(app), provider_id: providerId, redirect_uri: REDIRECT });
  return h.post('/auth/upstream/callback', { ...h.credentials(app), params: await authorize(started.body.authorization_url, REDIRECT) });
}

t.test('a domain is proven by a DNS TXT record looked up through the configured resolver', async (t) => {
  const claim = await h.admin('POST', domains(acme), { domain: 'Acme.Example.' });
  t.equal(claim.status, 201);
  t.match(claim.body, { tenant_id: acme, domain: 'acme.example', verified_at: null, verification: { type: 'TXT', name: '_auth-verify.acme.example', value: /^auth-verify=[A-Za-z0-9_-]{32}$/ } });
  const verify = () => h.admin('POST', `${domains(acme)}/${claim.body.id}/verify`);
  const missing = await verify();
  t.equal(missing.status, 409);
  t.equal(missing.body.error.code, 'DOMAIN_NOT_VERIFIED');
  t.same(dns.asked.at(-1), { name: '_auth-verify.acme.example', type: 'TXT' }, 'asked the local DNS server');
  dns.txt.set('_auth-verify.acme.example', ['auth-verify=someone-elses-token', 'v=spf1 -all']);
  t.equal((await verify()).body.error.code, 'DOMAIN_NOT_VERIFIED', 'another value does not prove it');
  dns.failing = true;
  const down = await verify();
  t.equal(down.status, 502, 'the resolver failing is not a missing record');
  t.equal(down.body.error.code, 'DNS_UNAVAILABLE');
  dns.failing = false;
  dns.txt.set('_auth-verify.acme.example', ['v=spf1 -all', claim.body.verification.value]);
  const verified = await verify();
  t.equal(verified.status, 200);
  t.ok(verified.body.verified_at);
  t.same((await h.admin('GET', domains(acme))).body.domains.map((d: any) => [d.domain, d.verified_at !== null]), [['acme.example', true]]);
  const events = await h.sql<{ details: any }[]>`select details from audit_events where type = 'sso.domain_verified'`;
  t.same(events.map((e) => e.details), [{ tenant_id: acme, domain: 'acme.example' }]);
  t.equal((await h.admin('POST', domains(acme), { domain: 'not a domain' })).body.error.code, 'VALIDATION_ERROR');
});

t.test('a domain claimed by two tenants: the second is refused, even when both published their records', async (t) => {
  const first = await h.admin('POST', domains(acme), { domain: 'acme.example' });
  const second = await h.admin('POST', domains(globex), { domain: 'acme.example' });
  t.equal(second.status, 201, 'claims may be pending side by side');
  dns.txt.set('_auth-verify.acme.example', [first.body.verification.value, second.body.verification.value]);
  t.equal((await h.admin('POST', `${domains(acme)}/${first.body.id}/verify`)).status, 200);
  const stolen = await h.admin('POST', `${domains(globex)}/${second.body.id}/verify`);
  t.equal(stolen.status, 409);
  t.equal(stolen.body.error.code, 'DOMAIN_CLAIMED');
  const late = await h.admin('POST', domains(globex), { domain: 'acme.example' });
  t.equal(late.body.error.code, 'DOMAIN_CLAIMED', 'a verified domain cannot be claimed again');
  const verifiedRows = await h.sql`select tenant_id from tenant_domains where verified_at is not null`;
  t.same(verifiedRows.map((r) => r.tenant_id), [acme]);
});

t.test('the tenant\'s provider: one per tenant, hidden from the app\'s buttons, found by home-realm discovery, tested by the admin', async (t) => {
  await proveDomain(acme, 'acme.example');
  const provider = await addOkta();
  t.match(provider, { tenant_id: acme, default_role: 'staff', require_sso: false, label: 'Acme SSO' });
  const again = await h.admin('POST', `/admin/apps/${app.id}/upstream-providers`, {
    kind: 'oidc', label: 'Other', client_id: 'x', client_secret: 'y', discovery_url: okta.discoveryUrl, redirect_uris: [REDIRECT], tenant_id: acme,
  });
  t.equal(again.status, 409);
  t.equal(again.body.error.code, 'TENANT_SSO_EXISTS');
  const appWide = await h.admin('POST', `/admin/apps/${app.id}/upstream-providers`, {
    kind: 'oidc', label: 'X', client_id: 'x', client_secret: 'y', discovery_url: okta.discoveryUrl, redirect_uris: [REDIRECT], default_role: 'staff',
  });
  t.equal(appWide.body.error.code, 'VALIDATION_ERROR', 'default_role only for a tenant\'s provider');
  t.same((await h.post('/auth/upstream/providers', h.credentials(app))).body, { providers: [] });
  const found = await h.post('/auth/sso/discover', { ...h.credentials(app), email: 'Bob@ACME.example' });
  t.same(found.body, { sso: true, provider_id: provider.id, tenant_id: acme, label: 'Acme SSO', required: false });
  t.same((await h.post('/auth/sso/discover', { ...h.credentials(app), email: 'bob@other.example' })).body, { sso: false });
  t.equal((await h.post('/auth/sso/discover', { ...h.credentials(app), email: 'not-an-address' })).body.error.code, 'VALIDATION_ERROR');
  const tested = await h.admin('POST', `/admin/apps/${app.id}/upstream-providers/${provider.id}/test`);
  t.same(tested.body, { ok: true, issuer: okta.issuer, authorization_endpoint: `${okta.issuer}/auth` });
});

t.test('the first sign-in through the tenant\'s provider gives its default role, and the token is for the tenant', async (t) => {
  await proveDomain(acme, 'acme.example');
  const provider = await addOkta();
  const bob = await ssoSignIn(provider.id);
  t.equal(bob.status, 200);
  const claims = decodeJwt(bob.body.access_token);
  t.same([claims.tenant_id, claims.roles, claims.amr], [acme, ['staff'], ['fed']]);
  const [user] = await h.sql<{ email: string }[]>`select email from users where id = ${bob.body.user_id}`;
  t.equal(user!.email, 'bob@acme.example', 'the tenant\'s verified domain is one its provider is trusted for');
  await h.assignRole(app, bob.body.user_id, acme, 'admin');
  const again = await ssoSignIn(provider.id);
  t.same(decodeJwt(again.body.access_token).roles, ['admin'], 'an existing role is kept');
  const assigned = await h.sql<{ details: any }[]>`select details from audit_events where type = 'role.assigned' and details ? 'provider_id'`;
  t.same(assigned.map((e) => e.details), [{ tenant_id: acme, role: 'staff', provider_id: provider.id }]);

  const carol = await h.login(app, 'carol@acme.example');
  okta.signInAs = { sub: 'okta-carol', email: 'carol@acme.example', email_verified: true };
  t.equal((await ssoSignIn(provider.id)).body.user_id, carol.user_id, 'a verified address in the tenant\'s domain joins the existing user');
  okta.signInAs = { sub: 'okta-mallory', email: 'carol@acme.example', email_verified: false };
  t.not((await ssoSignIn(provider.id)).body.user_id, carol.user_id, 'an unverified one does not');
});

t.test('require SSO: code logins of the tenant\'s domains are refused; other domains are not', async (t) => {
  await proveDomain(acme, 'acme.example');
  await h.post('/auth/otp/request', { ...h.credentials(app), email: 'dan@acme.example' });
  const earlyCode = h.outbox.codeFor('dan@acme.example');
  const provider = await addOkta();
  const required = await h.admin('PUT', `/admin/apps/${app.id}/upstream-providers/${provider.id}`, {
    kind: 'oidc', label: 'Acme SSO', client_id: 'okta-acme', discovery_url: okta.discoveryUrl, redirect_uris: [REDIRECT],
    tenant_id: acme, default_role: 'staff', require_sso: true,
  });
  t.equal(required.status, 200);
  t.equal(required.body.require_sso, true);
  const sent = h.outbox.messages.length;
  const refused = await h.post('/auth/otp/request', { ...h.credentials(app), email: 'Eve@acme.example' });
  t.equal(refused.status, 403);
  t.equal(refused.body.error.code, 'SSO_REQUIRED');
  t.equal(h.outbox.messages.length, sent, 'no code was sent');
  const late = await h.post('/auth/otp/verify', { ...h.credentials(app), email: 'dan@acme.example', code: earlyCode });
  t.equal(late.status, 403, 'a code sent before the requirement does not get around it');
  t.equal(late.body.error.code, 'SSO_REQUIRED');
  t.equal((await h.sql`select 1 from users where email = 'dan@acme.example'`).length, 0, 'no user made');
  t.equal((await h.login(app, 'someone@other.example')).token_type, 'Bearer', 'other domains sign in with codes as before');
  t.same((await h.post('/auth/sso/discover', { ...h.credentials(app), email: 'eve@acme.example' })).body.required, true);
  okta.signInAs = { sub: 'okta-eve', email: 'eve@acme.example', email_verified: true };
  t.equal((await ssoSignIn(provider.id)).status, 200, 'through the provider they sign in');
});
