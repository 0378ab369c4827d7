// Which redirect URIs a client may register and which presented URI matches a registered one.
// Matching is exact string comparison (OAuth 2.1), with one exception from RFC 8252 section 7.3:
// a native app's loopback redirect (`http://127.0.0.1/...` or `http://[::1]/...`) matches on any
// port, since the app listens on whatever port the system gives it.
import { authError } from '../errors.js';

const LOOPBACK_HOSTS = new Set(['127.0.0.1', '[::1]']);
const MAX_URI_CHARS = 2000;

/**
 * 400 INVALID_REDIRECT_URI unless `uri` is an absolute URI without a fragment, https, or http on
 * a loopback address (127.0.0.1, [::1], localhost), or a private-use scheme of a native app
 * (`com.example.app:/callback`, RFC 8252 section 7.1: a reverse domain name with a dot).
 */
export function checkRedirectUri(uri: string, field: string): void {
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    throw authError('INVALID_REDIRECT_URI', `Invalid field "${field}": "${uri}" is not an absolute URI`, { details: { field } });
  }
  if (uri.length > MAX_URI_CHARS) throw authError('INVALID_REDIRECT_URI', `Invalid field "${field}": longer than ${MAX_URI_CHARS} characters`, { details: { field } });
  if (url.hash !== '' || uri.includes('#')) throw authError('INVALID_REDIRECT_URI', `Invalid field "${field}": "${uri}" has a fragment`, { details: { field } });
  if (url.username !== '' || url.password !== '') throw authError('INVALID_REDIRECT_URI', `Invalid field "${field}": "${uri}" has credentials`, { details: { field } });
  if (url.protocol === 'https:') return;
  if (url.protocol === 'http:' && (LOOPBACK_HOSTS.has(url.hostname) || url.hostname === 'localhost')) return;
  if (/^[a-z][a-z0-9+-]*(\.[a-z0-9+-]+)+:$/.test(url.protocol)) return;
  throw authError('INVALID_REDIRECT_URI', `Invalid field "${field}": "${uri}" must be https, http on a loopback address, or a private-use scheme such as com.example.app:/callback`, { details: { field } });
}

/** Whether `presented` is one of `registered`, exactly, or a loopback one on another port. */
export function matchesRedirectUri(registered: readonly string[], presented: string): boolean {
  if (registered.includes(presented)) return true;
  const url = parseLoopback(presented);
  if (!url) return false;
  return registered.some((candidate) => {
    const other = parseLoopback(candidate);
    return other !== null && other.hostname === url.hostname && other.pathname === url.pathname && other.search === url.search;
  });
}

/** An http URL on a loopback IP literal with no fragment or credentials, else null. */
function parseLoopback(uri: string): URL | null {
  if (!uri.startsWith('http://127.0.0.1') && !uri.startsWith('http://[::1]')) return null;
  try {
    const url = new URL(uri);
    if (url.protocol !== 'http:' || !LOOPBACK_HOSTS.has(url.hostname) || url.hash !== '' || uri.includes('#') || url.username !== '' || url.password !== '') return null;
    // The URL must be written as its parse gives it back (no dot segments or odd escapes), so that
    // comparing its parts compares what the browser will be sent to.
    if (url.href !== uri && `${url.href}` !== `${uri}/`) return null;
    return url;
  } catch {
    return null;
  }
}
