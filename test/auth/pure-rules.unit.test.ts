// The auth service's rules that need no database, tested as functions: which tenant a token is
// for, how a login identifier is normalised, how presented credentials, refresh tokens and API
// keys are recognised before any lookup, the limits mapping of an API key, and sealed secrets.
// The same rules are exercised through HTTP on a real database by the harness's files.
import { randomBytes } from 'node:crypto';
import t from 'tap';
import { HttpError } from '../../src/http/errors.js';
import { chooseTenant } from '../../src/auth/service/sessions.js';
import { identifierOf } from '../../src/auth/service/identity.js';
import { checkAdminKey, hashAdminKey, isUuid, presentedCredentials } from '../../src/auth/service/credentials.js';
import { generateRefreshToken, hashRefreshToken } from '../../src/auth/tokens/refresh-token.js';
import { apiKeyIdentityFromJson, apiKeyIdentityJson, apiKeyLimits, generateApiKey, hasApiKeyFormat, hashApiKey } from '../../src/auth/tokens/api-key.js';
import { seal, unseal } from '../../src/auth/tokens/sealed-box.js';

/** The catalog code and status `fn` throws (fails the test when it returns). */
function refusal(fn: () => unknown): { status: number; code: string } {
  try {
    fn();
  } catch (error) {
    if (error instanceof HttpError) return { status: error.status, code: error.code };
    throw error;
  }
  throw new Error('expected a refusal, got a value');
}

const TENANT_A = '0b5a3c52-9f43-4f4e-8f55-3f1f1c2b0a01';
const TENANT_B = '0b5a3c52-9f43-4f4e-8f55-3f1f1c2b0a02';
const roles = [{ tenant_id: TENANT_A, role: 'viewer' as const }, { tenant_id: TENANT_B, role: 'admin' as const }];

t.test('a token is for the requested tenant, else the remembered one while a role remains, else the oldest assignment', async (t) => {
  t.same(chooseTenant(roles, TENANT_B.toUpperCase(), null), { tenantId: TENANT_B, roles: ['admin'], remembered: TENANT_B }, 'requested (any case): remembered');
  t.same(refusal(() => chooseTenant(roles, '0b5a3c52-9f43-4f4e-8f55-3f1f1c2b0a09', null)), { status: 404, code: 'TENANT_NOT_FOUND' }, 'a tenant without a role is refused');
  t.same(chooseTenant(roles, undefined, TENANT_B), { tenantId: TENANT_B, roles: ['admin'], remembered: TENANT_B }, 'the remembered tenant');
  t.same(chooseTenant(roles, null, '0b5a3c52-9f43-4f4e-8f55-3f1f1c2b0a09'), { tenantId: TENANT_A, roles: ['viewer'], remembered: '0b5a3c52-9f43-4f4e-8f55-3f1f1c2b0a09' }, 'a remembered tenant without a role: the oldest assignment');
  t.same(chooseTenant([], null, null), { tenantId: null, roles: [], remembered: null }, 'no role at all: no tenant');
});

t.test('login identifiers: e-mail trimmed and lower-cased, phone stripped of punctuation and E.164, exactly one of them', async (t) => {
  t.same(identifierOf({ email: '  Ann@Example.COM ' }), { channel: 'email', value: 'ann@example.com' });
  t.same(identifierOf({ phone: '+1 (415) 555-0123' }), { channel: 'phone', value: '+14155550123' });
  t.same(identifierOf({ phone: '+44.20.7946.0958' }), { channel: 'phone', value: '+442079460958' });
  for (const bad of [{}, { email: 'a@b.c', phone: '+14155550123' }, { email: 'not-an-address' }, { email: `${'a'.repeat(250)}@b.co` }, { email: 'a\u0000b@c.de' },
    { phone: '4155550123' }, { phone: '+0155550123' }, { phone: '+123456' }, { phone: '+1234567890123456' }]) {
    t.same(refusal(() => identifierOf(bad)), { status: 400, code: 'VALIDATION_ERROR' }, `refused: ${JSON.stringify(bad).slice(0, 60)}`);
  }
});

t.test('app credentials: a non-UUID app id becomes the nil app (no lookup can match), the secret is compared by hash', async (t) => {
  const uuid = 'F47AC10B-58CC-4372-A567-0E02B2C3D479';
  t.equal(presentedCredentials(uuid, 's').appId, uuid.toLowerCase());
  t.equal(presentedCredentials("x' or 1=1 --", 's').appId, '00000000-0000-0000-0000-000000000000');
  t.same(presentedCredentials(uuid, 'secret').secretHash, presentedCredentials(uuid, 'secret').secretHash);
  t.notSame(presentedCredentials(uuid, 'secret').secretHash, presentedCredentials(uuid, 'Secret').secretHash);
  t.ok(isUuid(uuid));
  t.notOk(isUuid(`${uuid}0`));
});

t.test('the admin key is checked by hash: a missing or wrong header is 401 ADMIN_KEY_INVALID', async (t) => {
  const expected = hashAdminKey('admin-key-0123456789abcdef');
  t.doesNotThrow(() => checkAdminKey(expected, 'admin-key-0123456789abcdef'));
  t.same(refusal(() => checkAdminKey(expected, undefined)), { status: 401, code: 'ADMIN_KEY_INVALID' });
  t.same(refusal(() => checkAdminKey(expected, '')), { status: 401, code: 'ADMIN_KEY_INVALID' });
  t.same(refusal(() => checkAdminKey(expected, 'admin-key-0123456789abcdeF')), { status: 401, code: 'ADMIN_KEY_INVALID' });
});

t.test('refresh tokens: rt_ and 32 random bytes; anything else has no hash and is never looked up', async (t) => {
  const { token, hash } = generateRefreshToken();
  t.match(token, /^rt_[A-Za-z0-9_-]{43}$/);
  t.same(hashRefreshToken(token), hash);
  t.notSame(generateRefreshToken().token, token, 'each token is new');
  for (const bad of ['', token.slice(0, -1), `${token}A`, token.replace('rt_', 'xt_'), `${token.slice(0, -1)}+`]) t.equal(hashRefreshToken(bad), undefined, `no hash: ${bad.slice(0, 12)}...`);
});

t.test('API keys: the format is checked before any lookup, only the SHA-256 is kept, and the identity JSON round-trips', async (t) => {
  const { key, hash, displayPrefix } = generateApiKey();
  t.ok(hasApiKeyFormat(key));
  t.same(hashApiKey(key), hash);
  t.ok(key.startsWith(displayPrefix) && displayPrefix.length < key.length, 'the display prefix is a strict prefix');
  for (const bad of ['', key.slice(0, -1), `${key}x`, key.replace(/^lak_/, 'sk_')]) t.notOk(hasApiKeyFormat(bad), `not a key: ${bad.slice(0, 10)}...`);
  t.same(apiKeyLimits({ concurrent_requests: 2, requests_per_minute: null, tokens_per_minute: 1000 }), { concurrentRequests: 2, tokensPerMinute: 1000 }, 'null: no limit');
  t.same(apiKeyLimits({}), {});
  const identity = {
    keyId: 'k1', appId: 'a1', appSlug: 'app-a', name: 'batch', tenantId: TENANT_A, role: 'member' as const,
    limits: { requestsPerMinute: 60 }, weight: 2.5, priorityClass: 'batch' as const, expiresAt: null,
  };
  t.same(apiKeyIdentityFromJson(apiKeyIdentityJson(identity)), identity);
  t.throws(() => apiKeyIdentityFromJson({ key_id: 1 }), 'an answer of another shape is refused');
});

t.test('sealed secrets open only with the key and the label that sealed them', async (t) => {
  const key = randomBytes(32);
  const sealed = seal(key, Buffer.from('signing key'), 'kid-1');
  t.equal(unseal(key, sealed, 'kid-1').toString(), 'signing key');
  t.notOk(sealed.includes(Buffer.from('signing key')), 'the plaintext is not in the sealed bytes');
  t.throws(() => unseal(key, sealed, 'kid-2'), 'another label');
  t.throws(() => unseal(randomBytes(32), sealed, 'kid-1'), 'another key');
  const tampered = Buffer.from(sealed);
  tampered[tampered.length - 1]! ^= 1;
  t.throws(() => unseal(key, tampered, 'kid-1'), 'a changed byte');
  t.throws(() => unseal(key, Buffer.concat([Buffer.from([9]), sealed.subarray(1)]), 'kid-1'), /unknown sealed format 9/);
});
