// The authorization request of OAuth 2.1 and OpenID Connect Core section 3.1.2.1, checked in the
// order that decides where an error may go: until the client and its redirect URI are known to
// match, an error is shown on our own page (never sent to an unchecked URI: that would be an open
// redirect); after that, errors go back to the client's redirect URI with `state` and `iss`.
import type { AuthContext } from '../context.js';
import type { OAuthClientRow } from '../queries/oauth-clients.js';
import { PLAIN } from '../oauth-request.js';
import { MetadataDocumentError } from './client-metadata-document.js';
import { allowsGrant, findClient } from './clients.js';
import { matchesRedirectUri } from './redirect-uris.js';
import { parseScope } from './scopes.js';

/** A checked request: what the sign-in and the code keep of it. */
export interface AuthorizationParameters {
  client_id: string;
  redirect_uri: string;
  scope: string;
  state: string | null;
  nonce: string | null;
  code_challenge: string;
  prompt: string[];
  max_age: number | null;
  login_hint: string | null;
  /** The tenant asked for (`tenant`, or `organization` as some libraries name it). */
  tenant: string | null;
  /** The resource (RFC 8707) the tokens are for, one of the app's; null: the app itself. */
  resource: string | null;
}

export type AuthorizationOutcome =
  /** Shown on our page: the client or its redirect URI is unknown or wrong. */
  | { kind: 'page-error'; error: string; message: string }
  /** Sent to the (checked) redirect URI. */
  | { kind: 'redirect-error'; redirectUri: string; state: string | null; error: string; message: string }
  | { kind: 'valid'; client: OAuthClientRow; parameters: AuthorizationParameters };

const KNOWN = new Set([
  'response_type', 'client_id', 'redirect_uri', 'scope', 'state', 'nonce', 'code_challenge', 'code_challenge_method',
  'prompt', 'max_age', 'login_hint', 'tenant', 'organization', 'response_mode', 'ui_locales', 'display', 'id_token_hint',
  'acr_values', 'claims', 'request', 'request_uri', 'resource',
]);
const PROMPTS = new Set(['none', 'login', 'consent', 'select_account']);
/** RFC 7636: BASE64URL(SHA256(verifier)) is 43 characters. */
const S256_CHALLENGE = /^[A-Za-z0-9_-]{43}$/;
const MAX_PARAMETER_CHARS = 2000;

export async function checkAuthorizationRequest(ctx: AuthContext, query: URLSearchParams): Promise<AuthorizationOutcome> {
  const values = new Map<string, string>();
  let repeated: string | null = null;
  let malformed: string | null = null;
  for (const [name, value] of query) {
    if (!KNOWN.has(name)) continue; // OpenID Connect Core 3.1.2.1: unknown parameters are ignored.
    if (values.has(name)) repeated ??= name;
    if (value.length > MAX_PARAMETER_CHARS || !PLAIN.test(value)) malformed ??= name;
    values.set(name, value);
  }
  const clientId = values.get('client_id');
  if (!clientId || repeated === 'client_id' || malformed === 'client_id') return pageError('invalid_request', 'The request does not name a client (client_id).');
  let client: OAuthClientRow | undefined;
  try {
    client = await findClient(ctx, clientId);
  } catch (error) {
    if (!(error instanceof MetadataDocumentError)) throw error;
    return pageError('invalid_client', `The application that sent you here cannot be identified: ${error.message}.`);
  }
  if (!client) return pageError('invalid_client', 'The application that sent you here is not registered.');
  const registered = client.redirect_uris;
  let redirectUri = values.get('redirect_uri');
  if (repeated === 'redirect_uri' || malformed === 'redirect_uri') return pageError('invalid_request', 'The redirect URI of the request is malformed.');
  if (redirectUri === undefined) {
    if (registered.length !== 1) return pageError('invalid_request', 'The request does not say where to return (redirect_uri).');
    redirectUri = registered[0]!;
  }
  if (!matchesRedirectUri(registered, redirectUri)) return pageError('invalid_request', 'The application asked to return to an address it has not registered; you were not sent there.');

  const state = repeated === 'state' ? null : values.get('state') ?? null;
  const fail = (error: string, message: string): AuthorizationOutcome => ({ kind: 'redirect-error', redirectUri: redirectUri!, state, error, message });
  if (repeated) return fail('invalid_request', `Parameter "${repeated}" is repeated`);
  if (malformed) return fail('invalid_request', `Invalid parameter "${malformed}"`);
  if (values.has('request')) return fail('request_not_supported', 'Request objects are not supported');
  if (values.has('request_uri')) return fail('request_uri_not_supported', 'request_uri is not supported');
  const responseType = values.get('response_type');
  if (responseType === undefined) return fail('invalid_request', 'response_type is required');
  if (responseType !== 'code') return fail('unsupported_response_type', 'Only response_type=code is supported');
  const responseMode = values.get('response_mode');
  if (responseMode !== undefined && responseMode !== 'query') return fail('invalid_request', 'Only response_mode=query is supported');
  if (!allowsGrant(client, 'authorization_code')) return fail('unauthorized_client', 'This client may not use the authorization code flow');
  const method = values.get('code_challenge_method');
  const challenge = values.get('code_challenge');
  if (challenge === undefined) return fail('invalid_request', 'PKCE is required: send code_challenge with code_challenge_method=S256');
  if (method !== 'S256') return fail('invalid_request', 'code_challenge_method must be S256');
  if (!S256_CHALLENGE.test(challenge)) return fail('invalid_request', 'code_challenge must be 43 base64url characters');
  const scopes = parseScope(values.get('scope') ?? '');
  if (scopes === null) return fail('invalid_scope', 'The scope is malformed');
  const refused = scopes.find((scope) => !client.scopes.includes(scope));
  if (refused !== undefined) return fail('invalid_scope', `Scope "${refused}" is not allowed for this client`);
  const prompt = (values.get('prompt') ?? '').split(' ').filter((p) => p !== '');
  if (prompt.some((p) => !PROMPTS.has(p))) return fail('invalid_request', 'Unknown prompt value');
  if (prompt.includes('none') && prompt.length > 1) return fail('invalid_request', 'prompt=none cannot be combined with other values');
  const resource = values.get('resource') ?? null;
  if (resource !== null && !client.app_resources.includes(resource)) return fail('invalid_target', 'The resource is not one this application\'s tokens may be for');
  const maxAgeText = values.get('max_age');
  if (maxAgeText !== undefined && !/^[0-9]{1,9}$/.test(maxAgeText)) return fail('invalid_request', 'max_age must be a number of seconds');
  return {
    kind: 'valid',
    client,
    parameters: {
      client_id: client.id,
      redirect_uri: redirectUri,
      scope: scopes.join(' '),
      state,
      nonce: values.get('nonce') ?? null,
      code_challenge: challenge,
      prompt,
      max_age: maxAgeText === undefined ? null : Number(maxAgeText),
      login_hint: values.get('login_hint') ?? null,
      tenant: values.get('tenant') ?? values.get('organization') ?? null,
      resource,
    },
  };
}

function pageError(error: string, message: string): AuthorizationOutcome {
  return { kind: 'page-error', error, message };
}

/** The redirect URI with the response parameters added to its query (RFC 6749 section 4.1.2, RFC 9207's iss). */
export function redirectWith(redirectUri: string, parameters: Record<string, string | null>): string {
  const url = new URL(redirectUri);
  for (const [name, value] of Object.entries(parameters)) if (value !== null) url.searchParams.append(name, value);
  return url.href;
}
