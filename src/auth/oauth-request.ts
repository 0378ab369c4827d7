// Requests of the OAuth token endpoints (RFC 7009 revocation, RFC 7662 introspection): an
// `application/x-www-form-urlencoded` body and the client's credentials, as RFC 6749 section
// 2.3.1 defines them. The OAuth client is the app: client_id is the app UUID (the app_id of the
// JSON routes), client_secret its app secret. They come either in an `Authorization: Basic`
// header (client_secret_basic) or as form fields (client_secret_post), never both.
import type { HttpRequest } from '../http/request.js';
import { authError } from './errors.js';
import { MAX_TOKEN_CHARS } from './limits.js';

export interface OAuthTokenRequest {
  clientId: string;
  clientSecret: string;
  /** True when the credentials came in the Authorization header (a 401 then carries WWW-Authenticate). */
  basic: boolean;
  token: string;
  /** `access_token`, `refresh_token`, or undefined (absent or an unknown value, which RFC 7009 says to ignore). */
  tokenTypeHint: 'access_token' | 'refresh_token' | undefined;
}

const FORM_TYPE = /^application\/x-www-form-urlencoded\s*(?:;|$)/i;
const FIELDS = new Set(['token', 'token_type_hint', 'client_id', 'client_secret']);
/**
 * No control characters (the JSON bodies' rule), and no U+FFFD: URLSearchParams decodes an
 * escape that is not UTF-8 (%FF) to it, and no token or secret of ours contains one.
 */
export const PLAIN = /^[^\x00-\x1f\x7f\uFFFD]*$/;
const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * The parameters of an `application/x-www-form-urlencoded` body, decoded as strict UTF-8 (RFC 6749
 * section 3.2); 400 VALIDATION_ERROR (invalid_request) for another content type or invalid UTF-8.
 * Callers apply their own rules on names, repeats and values.
 */
export function formParameters(req: HttpRequest): URLSearchParams {
  const type = req.headers['content-type'];
  if (type === undefined || !FORM_TYPE.test(type)) throw authError('VALIDATION_ERROR', 'Send the parameters as application/x-www-form-urlencoded');
  try {
    return new URLSearchParams(UTF8.decode(req.body));
  } catch {
    throw authError('VALIDATION_ERROR', 'The form is not valid UTF-8');
  }
}

/**
 * Parses the form and the client credentials. 400 VALIDATION_ERROR (invalid_request) for a body
 * that is not a form, a repeated or unknown parameter, a missing token, or two credential
 * methods at once; 401 TOKEN_INVALID (invalid_client) when no credentials were sent.
 */
export function parseOAuthTokenRequest(req: HttpRequest): OAuthTokenRequest {
  const form = formParameters(req);
  const values = new Map<string, string>();
  for (const [name, value] of form) {
    if (!FIELDS.has(name)) throw authError('VALIDATION_ERROR', `Unknown parameter "${name}"`);
    // RFC 6749 section 3.2: request parameters MUST NOT be included more than once.
    if (values.has(name)) throw authError('VALIDATION_ERROR', `Parameter "${name}" is repeated`);
    if (value.length > MAX_TOKEN_CHARS || !PLAIN.test(value)) throw authError('VALIDATION_ERROR', `Invalid parameter "${name}"`);
    values.set(name, value);
  }
  const token = values.get('token');
  if (!token) throw authError('VALIDATION_ERROR', 'The "token" parameter is required');
  const hint = values.get('token_type_hint');
  const basic = basicCredentials(req.headers.authorization);
  const posted = values.has('client_id') || values.has('client_secret');
  if (basic && posted) throw authError('VALIDATION_ERROR', 'Authenticate the client by one method only (Basic or the form)');
  const clientId = basic?.clientId ?? values.get('client_id');
  const clientSecret = basic?.clientSecret ?? values.get('client_secret');
  if (!clientId || clientSecret === undefined) throw authError('TOKEN_INVALID', 'Client authentication is required');
  return {
    clientId,
    clientSecret,
    basic: basic !== null,
    token,
    tokenTypeHint: hint === 'access_token' || hint === 'refresh_token' ? hint : undefined,
  };
}

/**
 * The credentials of an `Authorization: Basic` header: base64 of `client_id:client_secret`, each
 * form-urlencoded first (RFC 6749 section 2.3.1). Null without such a header; 401 when it is
 * malformed.
 */
export function basicCredentials(authorization: string | undefined): { clientId: string; clientSecret: string } | null {
  if (authorization === undefined) return null;
  const match = /^Basic +([A-Za-z0-9+/]+={0,2}) *$/i.exec(authorization);
  if (!match) throw authError('TOKEN_INVALID', 'Malformed Authorization header: expected Basic credentials');
  const decoded = Buffer.from(match[1]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) throw authError('TOKEN_INVALID', 'Malformed Basic credentials');
  try {
    return { clientId: formDecode(decoded.slice(0, colon)), clientSecret: formDecode(decoded.slice(colon + 1)) };
  } catch {
    throw authError('TOKEN_INVALID', 'Malformed Basic credentials');
  }
}

function formDecode(text: string): string {
  return decodeURIComponent(text.replace(/\+/g, ' '));
}
