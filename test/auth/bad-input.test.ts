// Hostile and malformed requests: SQL-injection strings in every field, malformed JSON, wrong
// content types, wrong JSON types, __proto__ keys, NUL bytes, oversized bodies, unknown
// routes. No answer is ever a 500, a stack trace or SQL text.
import t, { type Test } from 'tap';
import { ADMIN_KEY, startAuthHarness, type Reply, type TestApp, type Tokens } from './fixtures/harness.js';
import { registrationResponse } from './fixtures/software-authenticator.js';

const h = await startAuthHarness();
t.teardown(() => h.close());

let app: TestApp;
let tokens: Tokens;
let tenant: string;
t.beforeEach(async () => { ({ app, tokens, tenant } = await h.startFresh({ session: true, tenant: true })); });

/** Every JSON route with a valid body. */
function routes(): Array<{ path: string; body: Record<string, unknown>; headers?: Record<string, string> }> {
  const credentials = h.credentials(app);
  return [
    { path: '/auth/otp/request', body: { ...credentials, email: 'bob@example.com' } },
    { path: '/auth/otp/verify', body: { ...credentials, email: 'bob@example.com', code: '123456', tenant_id: tenant } },
    { path: '/auth/refresh', body: { ...credentials, refresh_token: tokens.refresh_token, tenant_id: tenant } },
    { path: '/auth/revoke', body: { ...credentials, refresh_token: tokens.refresh_token } },
    { path: '/auth/revoke-user', body: { ...credentials, user_id: tokens.user_id } },
    { path: '/auth/roles/assign', body: { ...credentials, user_id: tokens.user_id, tenant_id: tenant, role: 'owner' } },
    { path: '/auth/roles/revoke', body: { ...credentials, user_id: tokens.user_id, tenant_id: tenant } },
    { path: '/auth/sessions', body: { ...credentials, refresh_token: tokens.refresh_token } },
    { path: '/auth/sessions/revoke', body: { ...credentials, refresh_token: tokens.refresh_token, session_id: tenant } },
    { path: '/auth/sessions/revoke-others', body: { ...credentials, refresh_token: tokens.refresh_token } },
    { path: '/auth/passkeys', body: { ...credentials, refresh_token: tokens.refresh_token } },
    { path: '/auth/passkeys/remove', body: { ...credentials, refresh_token: tokens.refresh_token, passkey_id: tenant } },
    { path: '/auth/passkeys/register/options', body: { ...credentials, refresh_token: tokens.refresh_token } },
    { path: '/auth/passkeys/register/verify', body: { ...credentials, refresh_token: tokens.refresh_token, ceremony_id: tenant, response: { id: 'AAAA', rawId: 'AAAA', type: 'public-key', clientExtensionResults: {}, response: { clientDataJSON: 'e30', attestationObject: 'oA' } } } },
    { path: '/auth/passkeys/login/options', body: { ...credentials } },
    { path: '/auth/passkeys/login/verify', body: { ...credentials, ceremony_id: tenant, response: { id: 'AAAA', rawId: 'AAAA', type: 'public-key', clientExtensionResults: {}, response: { clientDataJSON: 'e30', authenticatorData: 'A'.repeat(50), signature: 'AAAA' } } } },
    { path: '/auth/upstream/providers', body: { ...credentials } },
    { path: '/auth/upstream/start', body: { ...credentials, provider_id: tenant, redirect_uri: 'https://example.com/callback', refresh_token: tokens.refresh_token } },
    { path: '/auth/upstream/callback', body: { ...credentials, params: { state: 'x'.repeat(43), code: 'c', iss: 'https://example.com' }, tenant_id: tenant } },
    { path: '/auth/identities', body: { ...credentials, refresh_token: tokens.refresh_token } },
    { path: '/auth/identities/remove', body: { ...credentials, refresh_token: tokens.refresh_token, identity_id: tenant } },
    { path: '/auth/sso/discover', body: { ...credentials, email: 'bob@example.com' } },
    { path: '/auth/invitations', body: { ...credentials, tenant_id: tenant, email: 'bob@example.com', role: 'staff' } },
    { path: '/auth/invitations/list', body: { ...credentials, tenant_id: tenant, state: 'pending' } },
    { path: '/auth/invitations/revoke', body: { ...credentials, tenant_id: tenant, invitation_id: tenant } },
    { path: '/auth/invitations/accept', body: { ...credentials, refresh_token: tokens.refresh_token, token: `inv_${'A'.repeat(43)}` } },
    { path: '/auth/second-factor/verify', body: { ...credentials, second_factor_token: `sfa_${'A'.repeat(43)}`, code: '123456' } },
    { path: '/auth/second-factor/totp/confirm', body: { ...credentials, refresh_token: tokens.refresh_token, code: '123456' } },
    { path: `/admin/apps/${app.id}/upstream-providers`, body: { kind: 'google', label: 'Google', client_id: 'c', client_secret: 's', redirect_uris: ['https://example.com/callback'] }, headers: { 'x-admin-key': ADMIN_KEY } },
    { path: `/admin/apps/${app.id}/tenants/${tenant}/invitations`, body: { email: 'bob@example.com', role: 'staff' }, headers: { 'x-admin-key': ADMIN_KEY } },
    { path: `/admin/apps/${app.id}/tenants/${tenant}/domains`, body: { domain: 'acme.example' }, headers: { 'x-admin-key': ADMIN_KEY } },
    { path: '/admin/apps', body: { slug: 'shop', name: 'Shop' }, headers: { 'x-admin-key': ADMIN_KEY } },
    { path: `/admin/apps/${app.id}/tenants`, body: { name: 'Globex' }, headers: { 'x-admin-key': ADMIN_KEY } },
    { path: `/admin/apps/${app.id}/webhooks`, body: { url: 'https://example.com/hooks', event_types: ['session.revoked'] }, headers: { 'x-admin-key': ADMIN_KEY } },
  ];
}

/** Anything that would reveal internals: stack frames, file paths, SQL or driver text. */
const INTERNALS = /\bat [\w.<>$]+ \(|\.ts:\d+|node:internal|node_modules|PostgresError|syntax error|relation "|\bselect\b.*\bfrom\b|\binsert into\b|\bupdate\b.*\bset\b|pg_sleep|duplicate key/i;

/** Not a 500 and no internals in the body (an echo of the request's own `sent` text aside). */
function assertClean(t: Test, reply: Reply, label: string, sent?: string): void {
  t.not(reply.status, 500, label);
  const text = JSON.stringify(reply.body);
  t.notMatch(sent === undefined ? text : text.replaceAll(JSON.stringify(sent).slice(1, -1), ''), INTERNALS, `${label}: no internals in the body`);
  t.match(reply.headers.get('content-type') ?? '', /application\/json/, `${label}: JSON`);
}

const INJECTIONS = [
  "' OR '1'='1",
  "'; DROP TABLE users; --",
  "1' UNION SELECT secret_hash FROM apps --",
  "$$; select pg_sleep(10); $$",
  "\\'; select 1; --",
  "x'or'1'='1@example.com",
  '00000000-0000-4000-8000-000000000000\' OR 1=1 --',
];

t.test('SQL-injection strings in every field are inert', async (t) => {
  for (const route of routes()) {
    for (const field of Object.keys(route.body)) {
      for (const payload of INJECTIONS) {
        const reply = await h.request('POST', route.path, { json: { ...route.body, [field]: payload }, headers: route.headers });
        assertClean(t, reply, `${route.path} ${field}=${payload}`, payload);
        t.ok([200, 201, 400, 401, 404, 409, 429].includes(reply.status), `${route.path} ${field}: ${reply.status}`);
      }
    }
  }
  const [counts] = await h.sql`
    select (select count(*)::int from users) as users, (select count(*)::int from tenants) as tenants,
      (select count(*)::int from refresh_families) as families
  `;
  t.same({ ...counts }, { users: 1, tenants: 1 + INJECTIONS.length, families: 1 }, 'the tables are intact (one tenant per injected name)');
  const names = await h.sql`select name from tenants where name <> 'Acme' order by name`;
  t.same(names.map((r) => r.name), [...INJECTIONS].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)), 'tenant names are stored verbatim');
  const [stored] = await h.sql`select destination from otp_codes where destination like 'x''or%'`;
  t.equal(stored?.destination, "x'or'1'='1@example.com", 'an e-mail-shaped payload is stored as plain text');
});

t.test('hostile OAuth forms and admin query strings are inert: 400, 401 or an inactive token, never a 500', async (t) => {
  const form = (fields: Record<string, string>) => new URLSearchParams(fields).toString();
  for (const payload of INJECTIONS) {
    for (const fields of [
      { token: payload, client_id: app.id, client_secret: app.secret },
      { token: tokens.refresh_token, client_id: payload, client_secret: app.secret },
      { token: tokens.refresh_token, client_id: app.id, client_secret: payload },
      { token: tokens.refresh_token, token_type_hint: payload, client_id: app.id, client_secret: app.secret },
    ]) {
      // A valid token with valid credentials would be revoked, rightly: only introspected here.
      const valid = fields.token === tokens.refresh_token && fields.client_id === app.id && fields.client_secret === app.secret;
      for (const path of valid ? ['/oauth/introspect'] : ['/oauth/introspect', '/oauth/revoke']) {
        const reply = await h.request('POST', path, { raw: form(fields), headers: { 'content-type': 'application/x-www-form-urlencoded' } });
        t.ok([200, 400, 401].includes(reply.status), `${path} ${JSON.stringify(fields)}: ${reply.status}`);
        if (reply.status !== 200) t.type(reply.body.error, 'string');
        if (reply.status === 200 && path === '/oauth/introspect' && fields.token === payload) t.same(reply.body, { active: false });
      }
    }
    for (const name of ['app_id', 'user_id', 'type', 'since', 'until', 'cursor', 'limit']) {
      const reply = await h.admin('GET', `/admin/audit-events?${name}=${encodeURIComponent(payload)}`);
      assertClean(t, reply, `audit ${name}=${payload}`, payload);
      t.same([reply.status, reply.body.error.code], [400, 'VALIDATION_ERROR'], `audit ${name}`);
    }
  }
  const bytes = await fetch(`${h.base}/oauth/introspect`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: Buffer.from([0x74, 0x6f, 0x6b, 0x65, 0x6e, 0x3d, 0xff, 0xfe, 0x00]) });
  t.equal(bytes.status, 400, 'a form that is not UTF-8 is refused before anything else');
  t.same(await bytes.json(), { error: 'invalid_request', error_description: 'The form is not valid UTF-8' });
  t.equal((await h.refresh(app, tokens.refresh_token)).status, 200, 'the session survived all of it');
});

t.test('SQL-injection strings in path parameters are inert', async (t) => {
  for (const payload of INJECTIONS) {
    const encoded = encodeURIComponent(payload);
    for (const [method, route] of [['GET', `/admin/apps/${encoded}`], ['GET', `/admin/apps/${app.id}/tenants/${encoded}`], ['DELETE', `/admin/users/${encoded}`]]) {
      const reply = await h.request(method!, route!, { headers: { 'x-admin-key': ADMIN_KEY } });
      assertClean(t, reply, `${method} ${route}`);
      t.equal(reply.status, 404);
    }
  }
});

t.test('NUL bytes, control characters and over-long values in path parameters are 4xx on every admin route, never a 500', async (t) => {
  const app_ = app.id;
  const routes: Array<[string, (value: string) => string]> = [
    ['GET', (v) => `/admin/apps/${v}`],
    ['POST', (v) => `/admin/apps/${v}/secret`],
    ['GET', (v) => `/admin/apps/${v}/tenants`],
    ['GET', (v) => `/admin/apps/${app_}/tenants/${v}`],
    ['GET', (v) => `/admin/apps/${v}/message-templates`],
    ['GET', (v) => `/admin/apps/${v}/sms-defences`],
    ['GET', (v) => `/admin/apps/${v}/webhooks`],
    ['DELETE', (v) => `/admin/apps/${app_}/webhooks/${v}`],
    ['GET', (v) => `/admin/apps/${v}/webhook-deliveries`],
    ['POST', (v) => `/admin/apps/${app_}/webhook-deliveries/${v}/redeliver`],
    ['GET', (v) => `/admin/apps/${v}/api-keys`],
    ['POST', (v) => `/admin/apps/${app_}/api-keys/${v}/rotate`],
    ['DELETE', (v) => `/admin/apps/${app_}/api-keys/${v}`],
    ['GET', (v) => `/admin/users/${v}`],
    ['DELETE', (v) => `/admin/users/${v}`],
    ['POST', (v) => `/admin/users/${v}/restore`],
    ['POST', (v) => `/admin/users/${v}/revoke-sessions`],
    ['GET', (v) => `/admin/users/${v}/sessions`],
    ['DELETE', (v) => `/admin/users/${tokens.user_id}/sessions/${v}`],
    ['DELETE', (v) => `/admin/rate-limits/blocks/otp_request_ip/${v}`],
    ['DELETE', (v) => `/admin/rate-limits/blocks/${v}/127.0.0.1`],
  ];
  for (const [method, path] of routes) {
    for (const value of ['%00', 'a%00b', '%1B%5B31m', 'x'.repeat(5000)]) {
      const reply = await h.request(method, path(value), { headers: { 'x-admin-key': ADMIN_KEY } });
      assertClean(t, reply, `${method} ${path(value.slice(0, 20))}`);
      t.ok([400, 404].includes(reply.status), `${method} ${path(value.slice(0, 20))}: ${reply.status} ${reply.body?.error?.code}`);
    }
  }
});

t.test('malformed JSON is 400 MALFORMED_JSON', async (t) => {
  for (const route of routes()) {
    for (const raw of ['{"app_id":', "{'app_id': 'x'}", '{"a":1}}', 'NaN', '{"a":1,}', '\u0000']) {
      const reply = await h.request('POST', route.path, { raw, headers: { 'content-type': 'application/json', ...route.headers } });
      t.equal(reply.status, 400, `${route.path} ${JSON.stringify(raw)}`);
      t.equal(reply.body.error.code, 'MALFORMED_JSON');
      assertClean(t, reply, route.path);
    }
  }
});

t.test('an empty body is 400 MALFORMED_JSON', async (t) => {
  const reply = await h.request('POST', '/auth/refresh', { raw: '', headers: { 'content-type': 'application/json' } });
  t.equal(reply.status, 400);
  t.same(reply.body, { error: { code: 'MALFORMED_JSON', message: 'Request body is empty: a JSON object is required' } });
});

t.test('a body that is not a JSON object is 400 VALIDATION_ERROR', async (t) => {
  for (const route of routes()) {
    for (const raw of ['[]', 'null', '"text"', '42', 'true', `[${JSON.stringify(route.body)}]`]) {
      const reply = await h.request('POST', route.path, { raw, headers: { 'content-type': 'application/json', ...route.headers } });
      t.equal(reply.status, 400, `${route.path} ${raw.slice(0, 20)}`);
      t.equal(reply.body.error.code, 'VALIDATION_ERROR');
    }
  }
});

t.test('a content type other than JSON is 415 UNSUPPORTED_MEDIA_TYPE', async (t) => {
  for (const route of routes()) {
    for (const type of ['application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'text/html', 'application/xml']) {
      const reply = await h.request('POST', route.path, { raw: JSON.stringify(route.body), headers: { 'content-type': type, ...route.headers } });
      t.equal(reply.status, 415, `${route.path} ${type}`);
      t.same(reply.body, { error: { code: 'UNSUPPORTED_MEDIA_TYPE', message: `Unsupported content type "${type}": send application/json` } });
    }
  }
});

t.test('arrays, objects, numbers, booleans and null where strings belong are 400 VALIDATION_ERROR', async (t) => {
  for (const route of routes()) {
    for (const field of Object.keys(route.body)) {
      const value = route.body[field];
      // An object-valued field (a WebAuthn response) gets every other type; an object missing its
      // members is a wrong member, named as such ("response.id"), not a wrong type.
      const isObject = typeof value === 'object' && value !== null && !Array.isArray(value);
      const wrongs: unknown[] = isObject ? [[value], 42, true, [], 'text'] : [[value], { value }, 42, true, {}, []];
      if (field !== 'tenant_id' || !['/auth/otp/verify', '/auth/refresh', '/auth/upstream/callback'].includes(route.path)) wrongs.push(null);
      for (const wrong of wrongs) {
        const reply = await h.request('POST', route.path, { json: { ...route.body, [field]: wrong }, headers: route.headers });
        t.equal(reply.status, 400, `${route.path} ${field}=${JSON.stringify(wrong)}`);
        t.equal(reply.body.error.code, 'VALIDATION_ERROR');
        // A wrong item of an array is named with its index: "event_types[0]".
        t.match(reply.body.error.message, new RegExp(`"${field}(\\[\\d+\\])?"`), 'the message names the field');
      }
    }
  }
});

t.test('unknown fields are 400 VALIDATION_ERROR', async (t) => {
  for (const route of routes()) {
    const reply = await h.request('POST', route.path, { json: { ...route.body, is_admin: true }, headers: route.headers });
    t.equal(reply.status, 400, route.path);
    t.same(reply.body, { error: { code: 'VALIDATION_ERROR', message: 'Invalid field "is_admin": Unexpected property' } });
  }
});

t.test('__proto__ and constructor keys are 400 VALIDATION_ERROR and pollute nothing', async (t) => {
  for (const route of routes()) {
    for (const key of ['__proto__', 'constructor', 'prototype']) {
      const raw = `{"${key}": {"polluted": true, "isAdmin": true}, ${JSON.stringify(route.body).slice(1)}`;
      const reply = await h.request('POST', route.path, { raw, headers: { 'content-type': 'application/json', ...route.headers } });
      t.equal(reply.status, 400, `${route.path} ${key}`);
      t.equal(reply.body.error.code, 'VALIDATION_ERROR');
    }
  }
  t.equal(({} as Record<string, unknown>).polluted, undefined);
  t.equal(({} as Record<string, unknown>).isAdmin, undefined);
});

t.test('NUL bytes and other control characters in strings are 400 VALIDATION_ERROR', async (t) => {
  for (const route of routes()) {
    for (const field of Object.keys(route.body)) {
      for (const bad of ['\u0000', 'a\u0000b', '\u001b[31m', '\u007f']) {
        const value = typeof route.body[field] === 'string' ? `${route.body[field]}${bad}` : bad;
        const reply = await h.request('POST', route.path, { json: { ...route.body, [field]: value }, headers: route.headers });
        t.equal(reply.status, 400, `${route.path} ${field} ${JSON.stringify(bad)}`);
        t.equal(reply.body.error.code, 'VALIDATION_ERROR');
      }
    }
  }
});

t.test('lone UTF-16 surrogates in strings are 400 VALIDATION_ERROR naming the field', async (t) => {
  for (const route of routes()) {
    for (const field of Object.keys(route.body)) {
      for (const bad of ['\\ud800', 'a\\udc00b', '\\udbff\\ud800']) {
        // JSON.stringify would escape the surrogate itself; the raw text carries it as \uXXXX.
        const raw = JSON.stringify({ ...route.body, [field]: 'PLACEHOLDER' }).replace('PLACEHOLDER', bad);
        const reply = await h.request('POST', route.path, { raw, headers: { 'content-type': 'application/json', ...route.headers } });
        t.equal(reply.status, 400, `${route.path} ${field} ${bad}`);
        t.equal(reply.body.error.code, 'VALIDATION_ERROR');
        t.match(reply.body.error.message, new RegExp(`"${field}"`));
      }
    }
  }
  const [counts] = await h.sql`select (select count(*)::int from users) as users, (select count(*)::int from tenants) as tenants`;
  t.same({ ...counts }, { users: 1, tenants: 1 }, 'nothing was stored');
});

t.test('well-formed non-ASCII text, astral characters included, is accepted and stored verbatim', async (t) => {
  const name = 'Ünïcødé 株式会社 😀🏳️‍🌈 𝔘';
  const reply = await h.admin('POST', `/admin/apps/${app.id}/tenants`, { name });
  t.equal(reply.status, 201);
  t.equal(reply.body.name, name);
  const [row] = await h.sql`select name from tenants where id = ${reply.body.id}`;
  t.equal(row!.name, name);
});

t.test('a body over 16 KiB is 413 BODY_TOO_LARGE, with or without Content-Length', async (t) => {
  const big = JSON.stringify({ ...h.credentials(app), refresh_token: 'x'.repeat(17 * 1024) });
  const declared = await h.request('POST', '/auth/refresh', { raw: big, headers: { 'content-type': 'application/json' } });
  t.equal(declared.status, 413);
  t.same(declared.body, { error: { code: 'BODY_TOO_LARGE', message: 'Request body exceeds 16384 bytes' } });
  const stream = new ReadableStream({ start(c) { c.enqueue(new TextEncoder().encode(big)); c.close(); } });
  const chunked = await fetch(`${h.base}/auth/refresh`, { method: 'POST', body: stream, duplex: 'half', headers: { 'content-type': 'application/json' } } as RequestInit);
  t.equal(chunked.status, 413);
  t.equal((await chunked.json()).error.code, 'BODY_TOO_LARGE');
});

t.test('strings over their length cap are 400 VALIDATION_ERROR', async (t) => {
  const cases: Array<[string, Record<string, unknown>]> = [
    ['/auth/otp/request', { ...h.credentials(app), email: `${'a'.repeat(320)}@example.com` }],
    ['/auth/otp/request', { ...h.credentials(app), phone: `+1${'5'.repeat(40)}` }],
    ['/auth/refresh', { ...h.credentials(app), refresh_token: 'r'.repeat(4097) }],
    ['/auth/refresh', { app_id: 'a'.repeat(65), app_secret: app.secret, refresh_token: tokens.refresh_token }],
    ['/auth/refresh', { app_id: app.id, app_secret: 's'.repeat(257), refresh_token: tokens.refresh_token }],
  ];
  for (const [path, body] of cases) {
    const reply = await h.post(path, body);
    t.equal(reply.status, 400, path);
    t.equal(reply.body.error.code, 'VALIDATION_ERROR');
  }
});

t.test('a wrong app_secret and an unknown app_id answer the same 401 TOKEN_INVALID on every app route', async (t) => {
  for (const route of routes().filter((r) => r.path.startsWith('/auth/'))) {
    const variants = [
      { app_id: app.id, app_secret: 'as_wrong' },
      { app_id: '00000000-0000-4000-8000-000000000000', app_secret: app.secret },
      { app_id: 'not-a-uuid', app_secret: app.secret },
      { app_id: app.id.toUpperCase(), app_secret: `${app.secret.slice(0, -1)}x` },
    ];
    for (const credentials of variants) {
      const reply = await h.post(route.path, { ...route.body, ...credentials });
      t.equal(reply.status, 401, `${route.path} ${JSON.stringify(credentials)}`);
      t.same(reply.body, { error: { code: 'TOKEN_INVALID', message: 'Invalid app credentials' } });
    }
  }
});

t.test('app_id in upper case is the same app', async (t) => {
  const reply = await h.post('/auth/revoke-user', { app_id: app.id.toUpperCase(), app_secret: app.secret, user_id: tokens.user_id.toUpperCase() });
  t.equal(reply.status, 200);
  t.same(reply.body, { sessions_revoked: 1 });
});

t.test('an unknown route is 404 NOT_FOUND and a wrong method 405 METHOD_NOT_ALLOWED, in the auth error format', async (t) => {
  const missing = await h.get('/auth/nothing');
  t.equal(missing.status, 404);
  t.same(missing.body, { error: { code: 'NOT_FOUND', message: 'No route for GET /auth/nothing' } });
  const wrong = await h.get('/auth/refresh');
  t.equal(wrong.status, 405);
  t.equal(wrong.headers.get('allow'), 'POST');
  t.same(wrong.body, { error: { code: 'METHOD_NOT_ALLOWED', message: 'Method GET is not allowed on /auth/refresh' } });
});

t.test('an internal failure is 500 INTERNAL with no details; the cause is only logged', async (t) => {
  await h.sql`alter table refresh_tokens rename to refresh_tokens_away`;
  try {
    const reply = await h.refresh(app, tokens.refresh_token);
    t.equal(reply.status, 500);
    t.same(reply.body, { error: { code: 'INTERNAL', message: 'Internal server error' } });
    t.equal(reply.headers.get('cache-control'), 'no-store');
    t.match((await h.loggedLines()).at(-1), /POST \/auth\/refresh failed: INTERNAL: .*refresh_tokens/);
  } finally {
    await h.sql`alter table refresh_tokens_away rename to refresh_tokens`;
  }
});

// Passkey registrations that a browser would not send but a client can: each is otherwise valid
// (the right challenge, origin, RP ID, flags and a "none" attestation), so only the field named
// refuses it. Before the response was checked by schema, each was a 500 from PostgreSQL.
const PASSKEY_ORIGIN = 'http://localhost:8443';

/** Sets the app's relying party and starts a registration: the ceremony id and the response to send. */
async function startRegistration(credentialId?: Buffer): Promise<{ ceremonyId: string; response: ReturnType<typeof registrationResponse> }> {
  const settings = await h.admin('PUT', `/admin/apps/${app.id}/passkeys`, { rp_id: 'localhost', rp_name: 'App A', origins: [PASSKEY_ORIGIN] });
  if (settings.status !== 200) throw new Error(`passkey settings: ${settings.status} ${JSON.stringify(settings.body)}`);
  const started = await h.post('/auth/passkeys/register/options', { ...h.credentials(app), refresh_token: tokens.refresh_token });
  if (started.status !== 200) throw new Error(`register/options: ${started.status} ${JSON.stringify(started.body)}`);
  return { ceremonyId: started.body.ceremony_id, response: registrationResponse({ challenge: started.body.options.challenge, rpId: 'localhost', origin: PASSKEY_ORIGIN, credentialId }) };
}

const registerVerify = (ceremonyId: string, response: unknown): Promise<Reply> =>
  h.post('/auth/passkeys/register/verify', { ...h.credentials(app), refresh_token: tokens.refresh_token, ceremony_id: ceremonyId, response, name: 'Software' });

const storedPasskeys = async (): Promise<string[]> => (await h.sql<{ credential_id: string }[]>`select credential_id from passkeys`).map((row) => row.credential_id);

t.test('a software registration with every field right is 201, stored under its id (the control for the refusals below)', async (t) => {
  const { ceremonyId, response } = await startRegistration();
  const reply = await registerVerify(ceremonyId, response);
  t.equal(reply.status, 201, JSON.stringify(reply.body));
  t.same(reply.body.transports, ['internal']);
  t.same(await storedPasskeys(), [response.id]);
});

t.test('a passkey registration whose transports is a string is 400 VALIDATION_ERROR naming the field; nothing is stored', async (t) => {
  const { ceremonyId, response } = await startRegistration();
  const reply = await registerVerify(ceremonyId, { ...response, response: { ...response.response, transports: 'internal' } });
  t.equal(reply.status, 400);
  t.equal(reply.body.error.code, 'VALIDATION_ERROR');
  t.match(reply.body.error.message, /^Invalid field "response\.response\.transports": /);
  t.same(await storedPasskeys(), []);
});

t.test('a passkey registration with U+0000 in a transport is 400 VALIDATION_ERROR naming the item; nothing is stored', async (t) => {
  const { ceremonyId, response } = await startRegistration();
  const reply = await registerVerify(ceremonyId, { ...response, response: { ...response.response, transports: ['internal', 'us\u0000b'] } });
  t.equal(reply.status, 400);
  t.equal(reply.body.error.code, 'VALIDATION_ERROR');
  t.match(reply.body.error.message, /^Invalid field "response\.response\.transports\[1\]": /);
  t.same(await storedPasskeys(), []);
});

t.test('a credential id over 1023 bytes in the authenticator data is 400 PASSKEY_CREDENTIAL_ID_TOO_LONG; nothing is stored', async (t) => {
  for (const bytes of [3000, 1024]) {
    const { ceremonyId, response } = await startRegistration(Buffer.alloc(bytes, 7));
    // The response's own id is short and well-formed: only the authenticator data carries the long id.
    const short = Buffer.alloc(16, 7).toString('base64url');
    const reply = await registerVerify(ceremonyId, { ...response, id: short, rawId: short });
    t.equal(reply.status, 400, `${bytes} bytes`);
    t.same(reply.body, { error: { code: 'PASSKEY_CREDENTIAL_ID_TOO_LONG', message: 'The credential id in the authenticator data is longer than 1023 bytes' } }, `${bytes} bytes`);
  }
  const { ceremonyId, response } = await startRegistration(Buffer.alloc(1024, 7));
  const sameId = await registerVerify(ceremonyId, response);
  t.equal(sameId.status, 400, 'named by the response\'s id too, the id is refused by the schema');
  t.match(sameId.body, { error: { code: 'VALIDATION_ERROR', message: /^Invalid field "response\.id": / } });
  t.same(await storedPasskeys(), []);
});

t.test('a credential id in the authenticator data that differs from the response\'s id is 400 PASSKEY_CREDENTIAL_ID_MISMATCH; nothing is stored', async (t) => {
  const { ceremonyId, response } = await startRegistration(Buffer.alloc(32, 1));
  const other = Buffer.alloc(32, 2).toString('base64url');
  const reply = await registerVerify(ceremonyId, { ...response, id: other, rawId: other });
  t.equal(reply.status, 400);
  t.same(reply.body, { error: { code: 'PASSKEY_CREDENTIAL_ID_MISMATCH', message: 'The credential id in the authenticator data differs from the response\'s id' } });
  t.same(await storedPasskeys(), []);
});

t.test('a credential id of exactly 1023 bytes is stored under the response\'s id', async (t) => {
  const { ceremonyId, response } = await startRegistration(Buffer.alloc(1023, 9));
  const reply = await registerVerify(ceremonyId, response);
  t.equal(reply.status, 201, JSON.stringify(reply.body));
  t.same(await storedPasskeys(), [Buffer.alloc(1023, 9).toString('base64url')]);
});
