// The browser of the hosted sign-in page: one random cookie (`auth_browser`), of which the
// database keeps only the SHA-256. It names the browser's sessions (one per app) and the
// sign-ins in progress; each form of the page also carries the sign-in's CSRF token, so a form
// posted from another site, or to another browser's sign-in, is refused.
import { createHash, randomBytes } from 'node:crypto';
import type { HttpRequest } from '../../http/request.js';

export const BROWSER_COOKIE = 'auth_browser';
/** The cookie outlives any session it names; the sessions expire on their own. */
const COOKIE_MAX_AGE_SECONDS = 400 * 24 * 3600;

export interface Browser {
  /** The SHA-256 of the cookie's value. */
  hash: Buffer;
  /** A Set-Cookie value when the browser had no (valid) cookie yet; send it with the answer. */
  setCookie: string | null;
}

/** The browser of a request, given a new cookie when it has none. `secure`: the issuer is https. */
export function browserOf(req: HttpRequest, secure: boolean): Browser {
  const value = cookieValue(req, BROWSER_COOKIE);
  if (value !== null && /^[A-Za-z0-9_-]{43}$/.test(value)) return { hash: sha256(value), setCookie: null };
  const fresh = randomBytes(32).toString('base64url');
  return { hash: sha256(fresh), setCookie: cookieHeader(fresh, COOKIE_MAX_AGE_SECONDS, secure) };
}

/** The hash of the request's browser cookie, or null without one. */
export function presentedBrowser(req: HttpRequest): Buffer | null {
  const value = cookieValue(req, BROWSER_COOKIE);
  return value !== null && /^[A-Za-z0-9_-]{43}$/.test(value) ? sha256(value) : null;
}

/** SameSite=Lax: sent on the top-level navigation from the client to /oauth/authorize, not on cross-site posts. */
function cookieHeader(value: string, maxAge: number, secure: boolean): string {
  return `${BROWSER_COOKIE}=${value}; Path=/oauth; Max-Age=${maxAge}; HttpOnly; SameSite=Lax${secure ? '; Secure' : ''}`;
}

function cookieValue(req: HttpRequest, name: string): string | null {
  const header = req.headers.cookie;
  if (!header) return null;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return null;
}

export function sha256(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}
