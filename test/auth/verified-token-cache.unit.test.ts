// VerifiedTokenCache and verifyAccessToken's use of it: a token that passed is accepted again
// without an RSA verification, yet never past its lifetime or once its key stops resolving to
// the object that verified it; refused tokens are never remembered; capacity bounds the cache.
import { generateKeyPairSync } from 'node:crypto';
import t, { type Test } from 'tap';
import { importJWK, type CryptoKey, type JWK, type JWTVerifyGetKey } from 'jose';
import { HttpError } from '../../src/http/errors.js';
import { verifyAccessToken, type AccessTokenClaims } from '../../src/auth/tokens/access-token.js';
import { VerifiedTokenCache } from '../../src/auth/tokens/verified-token-cache.js';
import { forgeRs256, otherRsaKey } from './fixtures/tokens.js';

const ISSUER = 'http://auth.test';
const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const importKey = async (): Promise<CryptoKey> => importJWK({ ...(publicKey.export({ format: 'jwk' }) as JWK), alg: 'RS256' }, 'RS256') as Promise<CryptoKey>;
const KEY = await importKey();
const NOW_MS = 1_800_000_000_000;
const IAT = NOW_MS / 1000;

function token(overrides: Record<string, unknown> = {}, signer = privateKey): string {
  return forgeRs256({ alg: 'RS256', typ: 'JWT', kid: 'k1' }, {
    sub: '6f1c2d3e-4b5a-4c6d-8e7f-9a0b1c2d3e4f', app_id: 'app-a', iss: ISSUER, aud: 'app-a',
    iat: IAT, exp: IAT + 1800, tenant_id: null, roles: ['staff'], ...overrides,
  }, signer);
}

/** Counts the RSA verifications jose makes (it verifies through WebCrypto). */
function countVerifications(t: Test): { readonly count: number } {
  const subtle = globalThis.crypto.subtle;
  const original = subtle.verify;
  const counter = { count: 0 };
  subtle.verify = function (this: SubtleCrypto, ...args: Parameters<SubtleCrypto['verify']>) {
    counter.count++;
    return original.apply(this, args);
  } as SubtleCrypto['verify'];
  t.teardown(() => { subtle.verify = original; });
  return counter;
}

async function rejection(promise: Promise<unknown>): Promise<{ status: number; code: string }> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof HttpError) return { status: error.status, code: error.code };
    throw error;
  }
  throw new Error('expected a rejection');
}

const verify = (value: string, cache: VerifiedTokenCache<AccessTokenClaims>, nowMs = NOW_MS, getKey: JWTVerifyGetKey = async () => KEY) =>
  verifyAccessToken(value, { getKey, issuer: ISSUER, appSlug: 'app-a', nowMs, cache });

t.test('a token accepted once is accepted again without a second RSA verification, with the same claims', async (t) => {
  const verifications = countVerifications(t);
  const cache = new VerifiedTokenCache<AccessTokenClaims>(10);
  const value = token();
  const first = await verify(value, cache);
  t.equal(verifications.count, 1);
  t.equal(cache.size, 1);
  const second = await verify(value, cache, NOW_MS + 60_000);
  t.equal(verifications.count, 1, 'the second acceptance made no verification');
  t.equal(second, first);
  t.same(second.roles, ['staff']);
  t.ok(Object.isFrozen(second) && Object.isFrozen(second.roles), 'the shared claims cannot be changed by a caller');
});

t.test('without a cache, or with capacity 0, every acceptance verifies the signature', async (t) => {
  const verifications = countVerifications(t);
  const value = token();
  await verifyAccessToken(value, { getKey: async () => KEY, issuer: ISSUER, nowMs: NOW_MS });
  await verifyAccessToken(value, { getKey: async () => KEY, issuer: ISSUER, nowMs: NOW_MS });
  const none = new VerifiedTokenCache<AccessTokenClaims>(0);
  await verify(value, none);
  await verify(value, none);
  t.equal(verifications.count, 4);
  t.equal(none.size, 0);
});

t.test('a remembered token is refused once expired (401 TOKEN_EXPIRED) and forgotten', async (t) => {
  const cache = new VerifiedTokenCache<AccessTokenClaims>(10);
  const value = token();
  await verify(value, cache);
  // exp = iat + 1800 s; jose's rule with the 5 s tolerance: exp <= now - 5 is expired.
  await verify(value, cache, NOW_MS + (1800 + 4) * 1000);
  t.same(await rejection(verify(value, cache, NOW_MS + (1800 + 5) * 1000)), { status: 401, code: 'TOKEN_EXPIRED' });
  t.equal(cache.size, 0);
});

t.test('a remembered token is refused when the clock is before its iat or nbf (401 TOKEN_INVALID)', async (t) => {
  const cache = new VerifiedTokenCache<AccessTokenClaims>(10);
  const plain = token();
  const withNbf = token({ nbf: IAT + 60 });
  await verify(plain, cache);
  await verify(withNbf, cache, NOW_MS + 60_000);
  t.same(await rejection(verify(plain, cache, NOW_MS - 6000)), { status: 401, code: 'TOKEN_INVALID' });
  t.same(await rejection(verify(withNbf, cache, NOW_MS + 54_000)), { status: 401, code: 'TOKEN_INVALID' });
  t.equal(cache.size, 0);
  await verify(withNbf, cache, NOW_MS + 55_000);
  t.equal(cache.size, 1, 'accepted again once valid, after a full verification');
});

t.test('a remembered token is refused once its kid no longer resolves, and verified in full when it resolves to another object', async (t) => {
  const verifications = countVerifications(t);
  const cache = new VerifiedTokenCache<AccessTokenClaims>(10);
  const value = token();
  let resolve: JWTVerifyGetKey = async () => KEY;
  const getKey: JWTVerifyGetKey = (header, input) => resolve(header, input);
  await verify(value, cache, NOW_MS, getKey);
  resolve = async () => { throw new Error('unknown signing key'); };
  t.same(await rejection(verify(value, cache, NOW_MS, getKey)), { status: 401, code: 'TOKEN_INVALID' });
  t.equal(cache.size, 0);
  const reimported = await importKey();
  resolve = async () => reimported;
  await verify(value, cache, NOW_MS, getKey);
  t.equal(verifications.count, 2, 'verified with the first key, then with the re-imported one (the refused kid never reached a verification)');
  const other = await importJWK({ ...(otherRsaKey().publicKey.export({ format: 'jwk' }) as JWK), alg: 'RS256' }, 'RS256');
  resolve = async () => other;
  t.same(await rejection(verify(value, cache, NOW_MS, getKey)), { status: 401, code: 'TOKEN_INVALID' }, 'a kid now naming another key refuses the token');
});

t.test('refused tokens are never remembered, and an altered copy of a remembered token is refused', async (t) => {
  const cache = new VerifiedTokenCache<AccessTokenClaims>(10);
  const forged = token({}, otherRsaKey().privateKey);
  t.same(await rejection(verify(forged, cache)), { status: 401, code: 'TOKEN_INVALID' });
  t.same(await rejection(verify(token({ aud: 'app-b' }), cache)), { status: 401, code: 'TOKEN_INVALID' });
  t.same(await rejection(verify(token({ exp: IAT - 10 }), cache)), { status: 401, code: 'TOKEN_EXPIRED' });
  t.equal(cache.size, 0);
  const value = token();
  await verify(value, cache);
  const [header, payload, signature] = value.split('.');
  const altered = `${header}.${Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(payload!, 'base64url').toString()), roles: ['owner'] })).toString('base64url')}.${signature}`;
  t.same(await rejection(verify(altered, cache)), { status: 401, code: 'TOKEN_INVALID' });
  t.equal(cache.size, 1);
});

t.test('the cache keeps at most its capacity, dropping the least recently used entry', async (t) => {
  const cache = new VerifiedTokenCache<string>(2);
  const entry = (claims: string) => ({ header: { alg: 'RS256' }, key: null, claims });
  cache.set('a', entry('A'));
  cache.set('b', entry('B'));
  t.equal(cache.get('a')?.claims, 'A');
  cache.set('c', entry('C'));
  t.equal(cache.size, 2);
  t.equal(cache.get('b'), undefined, 'b was the least recently used');
  t.equal(cache.get('a')?.claims, 'A');
  t.equal(cache.get('c')?.claims, 'C');
  for (const capacity of [-1, 1.5, Number.NaN]) t.throws(() => new VerifiedTokenCache(capacity), RangeError);
});
