// Clients no admin made, and resource indicators: RFC 7591 registration behind an initial access
// token and a rate limit; Client ID Metadata Documents refused when private, redirected, too big,
// too slow or naming another client_id; RFC 8707 resources outside the app's list refused. Each
// refusal issues nothing.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { fetchMetadataDocument, isBlockedAddress, MetadataDocumentError } from '../../../src/auth/provider/client-metadata-document.js';
import { startAuthHarness, type TestApp } from '../fixtures/harness.js';
import { OAuthBrowser } from '../fixtures/oauth-browser.js';

const h = await startAuthHarness({
  oauthOpenClients: { appSlug: 'app-a', registration: true, initialAccessToken: 'iat-0123456789', metadataDocuments: true, metadataTimeoutMs: 300 },
  rateLimits: { oauth_register_ip: { maxHits: 3, windowSeconds: 3600 } },
});
t.teardown(() => h.close());

// A local server answering what each test path asks for.
const documents = http.createServer((req, res) => {
  const base = `http://127.0.0.1:${(documents.address() as AddressInfo).port}`;
  if (req.url === '/redirect.json') { res.writeHead(302, { location: `${base}/good.json` }); res.end(); return; }
  if (req.url === '/big.json') { res.setHeader('content-type', 'application/json'); res.end(JSON.stringify({ client_id: `${base}/big.json`, pad: 'x'.repeat(10_000) })); return; }
  if (req.url === '/slow.json') { setTimeout(() => res.end('{}'), 2000).unref(); return; }
  if (req.url === '/other.json') { res.end(JSON.stringify({ client_id: `${base}/good.json`, redirect_uris: ['https://a.example/cb'] })); return; }
  res.setHeader('content-type', 'application/json');
  res.end(JSON.stringify({ client_id: `${base}${req.url}`, redirect_uris: ['https://a.example/cb'] }));
});
documents.listen(0, '127.0.0.1');
await new Promise((resolve) => documents.once('listening', resolve));
const base = `http://127.0.0.1:${(documents.address() as AddressInfo).port}`;
t.teardown(() => new Promise((resolve) => documents.close(resolve)));

let app: TestApp;
t.beforeEach(async () => { ({ app } = await h.startFresh()); });

async function register(body: unknown, token: string | null = 'iat-0123456789') {
  return h.post('/oauth/register', body, token === null ? {} : { authorization: `Bearer ${token}` });
}

t.test('registration needs the initial access token and answers RFC 7591 fields', async (t) => {
  const metadata = { client_name: 'Agent', redirect_uris: ['http://127.0.0.1/cb'], token_endpoint_auth_method: 'none', grant_types: ['authorization_code', 'refresh_token'], scope: 'openid admin:all', software_id: 'ignored' };
  const missing = await register(metadata, null);
  t.equal(missing.status, 401);
  t.equal(missing.body.error, 'invalid_token');
  const wrong = await register(metadata, 'iat-wrong');
  t.equal(wrong.status, 401);
  t.equal(wrong.body.error, 'invalid_token');
  const made = await register(metadata);
  t.equal(made.status, 201);
  t.match(made.body, { client_id: /^[0-9a-f-]{36}$/, client_name: 'Agent', token_endpoint_auth_method: 'none', grant_types: ['authorization_code', 'refresh_token'], scope: 'openid', response_types: ['code'] });
  t.equal(made.body.client_secret, undefined, 'a public client gets no secret');
  await h.sql`delete from rate_limit_counters`; // four registrations: past this test's limit of three
  const secret = await register({ ...metadata, token_endpoint_auth_method: 'client_secret_basic' });
  t.match(secret.body, { client_secret: /^cs_/, client_secret_expires_at: 0 });
  const discovery = await h.get('/.well-known/oauth-authorization-server');
  t.equal(discovery.body.registration_endpoint, 'http://auth.test/oauth/register');
  t.equal(discovery.body.client_id_metadata_document_supported, true);
  const [{ n }] = await h.sql`select count(*)::int as n from oauth_clients where origin = 'dynamic'`;
  t.equal(n, 2, 'the refused attempts made nothing');
});

t.test('registration refuses bad metadata with the RFC 7591 error names', async (t) => {
  const cases: [unknown, string][] = [
    [{ client_name: 'x' }, 'invalid_redirect_uri'],
    [{ redirect_uris: ['http://evil.example/cb'] }, 'invalid_redirect_uri'],
    [{ redirect_uris: ['https://a.example/cb#x'] }, 'invalid_redirect_uri'],
    [{ redirect_uris: 'https://a.example/cb' }, 'invalid_client_metadata'],
    [{ redirect_uris: ['https://a.example/cb'], token_endpoint_auth_method: 'tls_client_auth' }, 'invalid_client_metadata'],
    [{ redirect_uris: ['https://a.example/cb'], response_types: ['token'] }, 'invalid_client_metadata'],
    [{ redirect_uris: ['https://a.example/cb'], grant_types: ['password'] }, 'invalid_client_metadata'],
    [[1, 2], 'invalid_client_metadata'],
  ];
  for (const [body, error] of cases) {
    await h.sql`delete from rate_limit_counters`;
    const reply = await register(body);
    t.equal(reply.status, 400, JSON.stringify(body));
    t.equal(reply.body.error, error, JSON.stringify(body));
  }
  const [{ n }] = await h.sql`select count(*)::int as n from oauth_clients`;
  t.equal(n, 0);
});

t.test('a registration flood is refused past the per-IP limit', async (t) => {
  const replies = [];
  for (let i = 0; i < 5; i++) replies.push(await register({ redirect_uris: ['https://a.example/cb'], token_endpoint_auth_method: 'none' }));
  t.same(replies.map((r) => r.status), [201, 201, 201, 429, 429]);
  t.ok(replies[3]!.headers.get('retry-after'));
  const [{ n }] = await h.sql`select count(*)::int as n from oauth_clients`;
  t.equal(n, 3);
});

t.test('metadata documents: the fetcher refuses private addresses, redirects, big, slow and mismatched documents', async (t) => {
  const nowMs = Date.now();
  const strict = { allowPrivate: false, timeoutMs: 300, nowMs };
  const dev = { allowPrivate: true, timeoutMs: 300, nowMs };
  const refusal = (p: Promise<unknown>) => p.then(() => 'accepted', (e: unknown) => (e instanceof MetadataDocumentError ? e.message : `other: ${String(e)}`));
  t.match(await refusal(fetchMetadataDocument(`${base}/good.json`, strict)), /must be https/);
  t.match(await refusal(fetchMetadataDocument('https://127.0.0.1:1/good.json', strict)), /loopback, private or reserved/);
  t.match(await refusal(fetchMetadataDocument('https://localhost/good.json', strict)), /loopback, private or reserved/);
  t.match(await refusal(fetchMetadataDocument('https://[::ffff:10.0.0.1]/x.json', strict)), /loopback, private or reserved/);
  t.match(await refusal(fetchMetadataDocument(`${base}/redirect.json`, dev)), /redirects are not followed/);
  t.match(await refusal(fetchMetadataDocument(`${base}/big.json`, dev)), /larger than 5120 bytes/);
  t.match(await refusal(fetchMetadataDocument(`${base}/slow.json`, dev)), /did not arrive within 300 ms/);
  t.match(await refusal(fetchMetadataDocument(`${base}/other.json`, dev)), /names another client_id/);
  const good = await fetchMetadataDocument(`${base}/good.json`, dev);
  t.equal(good.document.client_id, `${base}/good.json`);
  for (const address of ['127.0.0.1', '10.1.2.3', '172.16.0.1', '192.168.1.1', '169.254.169.254', '100.64.0.1', '0.0.0.0', '::1', 'fe80::1', 'fd00::1', '::ffff:127.0.0.1']) {
    t.ok(isBlockedAddress(address), address);
  }
  for (const address of ['93.184.216.34', '2606:4700::1111']) t.notOk(isBlockedAddress(address), address);
});

t.test('a client_id on a private address is refused at the authorization endpoint, on our page, with nothing stored', async (t) => {
  const reply = await new OAuthBrowser(h).get(`${h.issuer}/oauth/authorize?${new URLSearchParams({
    client_id: 'https://127.0.0.1:9/client.json', redirect_uri: 'https://a.example/cb', response_type: 'code', code_challenge: 'a'.repeat(43), code_challenge_method: 'S256',
  })}`);
  t.equal(reply.status, 400);
  t.equal(reply.location, null);
  t.match(reply.html, /cannot be identified: the host 127\.0\.0\.1 is on a loopback, private or reserved address/);
  const [{ n }] = await h.sql`select count(*)::int as n from oauth_clients`;
  t.equal(n, 0);
});

t.test('resource indicators: a resource outside the app\'s list is invalid_target; a listed one is the token\'s audience', async (t) => {
  const made = await h.admin('POST', `/admin/apps/${app.id}/oauth-clients`, { name: 'Backend', grant_types: ['client_credentials'], scopes: ['jobs'] });
  const resources = await h.admin('PUT', `/admin/apps/${app.id}/oauth-resources`, { resources: ['https://inference.example/'] });
  t.same(resources.body, { app_id: app.id, resources: ['https://inference.example/'] });
  const token = (resource: string) => h.request('POST', '/oauth/token', {
    raw: new URLSearchParams({ grant_type: 'client_credentials', resource, client_id: made.body.client_id, client_secret: made.body.client_secret }).toString(),
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
  });
  const elsewhere = await token('https://evil.example/');
  t.equal(elsewhere.status, 400);
  t.same(elsewhere.body.error, 'invalid_target');
  t.equal(elsewhere.body.access_token, undefined);
  const listed = await token('https://inference.example/');
  t.equal(listed.status, 200);
  const payload = JSON.parse(Buffer.from(listed.body.access_token.split('.')[1], 'base64url').toString());
  t.equal(payload.aud, 'https://inference.example/');
  t.equal(payload.app_id, 'app-a');
  const web = await h.admin('POST', `/admin/apps/${app.id}/oauth-clients`, { name: 'Web', redirect_uris: ['https://a.example/cb'] });
  const reply = await new OAuthBrowser(h).get(`${h.issuer}/oauth/authorize?${new URLSearchParams({
    client_id: web.body.client_id, redirect_uri: 'https://a.example/cb', response_type: 'code', resource: 'https://evil.example/',
    code_challenge: 'a'.repeat(43), code_challenge_method: 'S256', state: 's',
  })}`);
  t.equal(reply.status, 303);
  t.equal(new URL(reply.location!).searchParams.get('error'), 'invalid_target');
});

t.test('registration is 404 where it is off', async (t) => {
  const off = await startAuthHarness();
  t.teardown(() => off.close());
  await off.startFresh();
  const reply = await off.post('/oauth/register', { redirect_uris: ['https://a.example/cb'] });
  t.equal(reply.status, 404);
  t.equal(reply.body.error, 'not_found');
  const discovery = await off.get('/.well-known/openid-configuration');
  t.equal(discovery.body.registration_endpoint, undefined);
  t.equal(discovery.body.client_id_metadata_document_supported, false);
});
