// What the hosted sign-in page's ways in share: the check of a posted form (its sign-in request,
// this browser's, with its CSRF token), the browser's session in the app, the steps that follow
// a sign-in (tenant picker, consent, the client's code), the address page, and a refusal of a
// service said in words.
import { randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { HttpError } from '../../http/errors.js';
import type { HttpRequest, HttpResult } from '../../http/request.js';
import { requestOrigin, type RequestOrigin } from '../audit.js';
import type { AuthContext } from '../context.js';
import type { TransactionSql } from '../database/client.js';
import { SESSION_LIFETIME_MS } from '../limits.js';
import { insertAuditEvent } from '../queries/audit-events.js';
import type { OAuthClientRow } from '../queries/oauth-clients.js';
import {
  deleteSignInRequest, findSignInRequest, insertAuthorizationCode, listTenantsOfUser, replaceBrowserSession, type BrowserSessionRow, type SignInRequestRow,
} from '../queries/oauth-grants.js';
import { findPasskeySettings } from '../queries/passkeys.js';
import { listRolesOfUser } from '../queries/roles.js';
import { chooseTenant } from '../service/sessions.js';
import { listSignInProviders } from '../service/upstream-sign-in.js';
import { redirectWith, type AuthorizationParameters } from './authorization-request.js';
import { presentedBrowser, sha256 } from './browser.js';
import { findClient } from './clients.js';
import { needsConsent } from './consents.js';
import { renderConsentPage, renderErrorPage, renderSignInPage, renderTenantPicker, type SignInView } from './sign-in-page.js';

/** An authorization code lives 60 seconds (OAuth 2.1 recommends a short life). */
export const AUTHORIZATION_CODE_TTL_MS = 60 * 1000;

/**
 * The sign-in a form belongs to, checked: it exists and has not expired, was shown to this
 * browser, and the form carries its CSRF token. Otherwise the answer (a page saying so).
 */
export async function checkedSignIn(ctx: AuthContext, req: HttpRequest, form: Map<string, string>): Promise<{ refused: HttpResult } | { request: SignInRequestRow; client: OAuthClientRow; csrf: string; browserHash: Buffer }> {
  const expired = { refused: renderErrorPage(403, 'This sign-in form has expired', 'Go back to the application and start signing in again.') };
  const id = form.get('request') ?? '';
  const csrf = form.get('csrf') ?? '';
  const browserHash = presentedBrowser(req);
  if (!/^[0-9a-f-]{36}$/.test(id) || browserHash === null) return expired;
  const request = await findSignInRequest(ctx.sql, id, new Date(ctx.clock.now()));
  if (!request || !timingSafeEqual(request.browser_hash, browserHash) || !timingSafeEqual(request.csrf_hash, sha256(csrf))) return expired;
  const client = await findClient(ctx, request.client_id);
  if (!client) return expired;
  return { request, client, csrf, browserHash };
}

/** A sign-in request of the page: its id and CSRF token. */
export interface PendingRequest { requestId: string; csrf: string }

/**
 * What follows a signed-in browser's request, in order: the tenant picker when the user has
 * roles in several tenants and none was asked for; the consent page when the client needs one
 * (not again once given on this request); then the code. A page needs the request (made by
 * `pending` when there is none yet); prompt=none gets account_selection_required or
 * consent_required instead of a page.
 */
export async function proceed(
  ctx: AuthContext, req: HttpRequest, client: OAuthClientRow, parameters: AuthorizationParameters, session: BrowserSessionRow,
  pending: () => Promise<PendingRequest>, progress: { consented: boolean },
): Promise<HttpResult> {
  const silentError = (error: string, description: string) => redirect(redirectWith(parameters.redirect_uri, {
    error, error_description: description, state: parameters.state, iss: ctx.issuer,
  }));
  if (parameters.tenant === null) {
    const tenants = await listTenantsOfUser(ctx.sql, client.app_id, session.user_id);
    if (tenants.length > 1) {
      if (parameters.prompt.includes('none')) return silentError('account_selection_required', 'The user must choose a tenant');
      const { requestId, csrf } = await pending();
      return renderTenantPicker({ appName: client.app_name, color: client.app_color, tenants, requestId, csrf });
    }
  }
  const scopes = parameters.scope === '' ? [] : parameters.scope.split(' ');
  if (!progress.consented && await needsConsent(ctx, client, session.user_id, scopes, parameters.prompt)) {
    if (parameters.prompt.includes('none')) return silentError('consent_required', 'The user has not allowed this application');
    const { requestId, csrf } = await pending();
    return renderConsentPage({ appName: client.app_name, color: client.app_color, clientName: client.name, scopes, requestId, csrf });
  }
  return redirect(await issueCode(ctx, client, parameters, session, requestOrigin(ctx, req)));
}

/**
 * Issues a code for the signed-in user (tenant chosen as for a login: the one asked for, which
 * must be one of the user's, else the default) and returns where to send the browser.
 */
export async function issueCode(ctx: AuthContext, client: OAuthClientRow, parameters: AuthorizationParameters, session: BrowserSessionRow, origin: RequestOrigin): Promise<string> {
  const nowMs = ctx.clock.now();
  const roles = await listRolesOfUser(ctx.sql, client.app_id, session.user_id);
  let tenantId: string | null;
  try {
    tenantId = chooseTenant(roles, parameters.tenant, null).tenantId;
  } catch {
    return redirectWith(parameters.redirect_uri, {
      error: 'access_denied', error_description: 'The user has no role in the tenant asked for', state: parameters.state, iss: ctx.issuer,
    });
  }
  const code = randomBytes(32).toString('base64url');
  await ctx.sql.begin(async (tx) => {
    await insertAuthorizationCode(tx, {
      hash: sha256(code), clientId: client.id, appId: client.app_id, userId: session.user_id, browserSessionId: session.id,
      redirectUri: parameters.redirect_uri, scope: parameters.scope, nonce: parameters.nonce, codeChallenge: parameters.code_challenge,
      authTime: session.auth_time, amr: session.amr, tenantId, resource: parameters.resource ?? null, now: new Date(nowMs), expiresAt: new Date(nowMs + AUTHORIZATION_CODE_TTL_MS),
    });
    await insertAuditEvent(tx, {
      type: 'oauth.code_issued', actor: 'app', appId: client.app_id, userId: session.user_id, ip: origin.ip, userAgent: origin.userAgent,
      details: { client_id: client.id, scope: parameters.scope }, now: new Date(nowMs),
    });
  });
  return redirectWith(parameters.redirect_uri, { code, state: parameters.state, iss: ctx.issuer });
}

/** A signed-in browser's next step on its request: the tenant picker, the consent page or the code (the request then done). */
export async function finishSignIn(ctx: AuthContext, req: HttpRequest, client: OAuthClientRow, request: SignInRequestRow, csrf: string, session: BrowserSessionRow): Promise<HttpResult> {
  const parameters = request.parameters as unknown as AuthorizationParameters;
  // prompt=login was answered by this sign-in; a tenant choice and a consent are asked next, on the same request.
  const result = await proceed(ctx, req, client, parameters, session, async () => ({ requestId: request.id, csrf }), { consented: false });
  if (result.status === 303) await deleteSignInRequest(ctx.sql, request.id);
  return result;
}

/** The browser's session in the app (replacing the one it had), in the sign-in's transaction. */
export async function startBrowserSession(tx: TransactionSql, browserHash: Buffer, appId: string, userId: string, amr: string[], nowMs: number): Promise<BrowserSessionRow> {
  const id = randomUUID();
  await replaceBrowserSession(tx, { id, browserHash, appId, userId, amr, now: new Date(nowMs), expiresAt: new Date(nowMs + SESSION_LIFETIME_MS) });
  return { id, app_id: appId, user_id: userId, auth_time: new Date(nowMs), amr };
}

/** The address step: the e-mail and SMS code forms, and a passkey when the app has a relying party for passkeys. */
export async function addressPage(ctx: AuthContext, client: OAuthClientRow, requestId: string, csrf: string, email: string, error: string | null, status = 200): Promise<HttpResult> {
  const passkeys = (await findPasskeySettings(ctx.sql, client.app_id)) !== undefined;
  const providers = await listSignInProviders(ctx, { id: client.app_id, slug: client.app_slug });
  return renderSignInPage({ ...viewOf(client, requestId, csrf, 'address', email, error), passkeys, providers }, status);
}

export function viewOf(client: OAuthClientRow, requestId: string, csrf: string, step: SignInView['step'], email: string, error: string | null): SignInView {
  return { appName: client.app_name, color: client.app_color, clientName: client.name, requestId, csrf, step, email, error };
}

/**
 * What the page says for a refusal of the login service. A mistake the user corrects on the
 * same form (a malformed address, a wrong code) is the form again with 200 and the error in
 * words: browsers log any other status of a page as an error.
 */
export function inWords(error: unknown, channel: 'email' | 'phone' = 'email', factor: 'totp' | 'recovery_code' = 'totp'): { status: number; message: string } {
  if (!(error instanceof HttpError) || error.status >= 500) {
    if (error instanceof HttpError && error.code === 'OTP_DELIVERY_FAILED') return { status: 502, message: 'We could not send the code. Try again in a minute.' };
    if (error instanceof HttpError && error.code === 'UPSTREAM_UNAVAILABLE') return { status: 502, message: 'We could not reach the identity provider. Try again in a minute, or sign in another way.' };
    throw error;
  }
  switch (error.code) {
    case 'VALIDATION_ERROR': return { status: 200, message: channel === 'phone'
      ? 'That does not look like a phone number. Write it with its country code, such as +44 7700 900123.'
      : 'That does not look like an e-mail address. Check it and try again.' };
    case 'OTP_INVALID': return { status: 200, message: 'That code is wrong or has expired. Check the message we sent, or ask for a new code.' };
    case 'SECOND_FACTOR_INVALID': return { status: 200, message: factor === 'totp'
      ? 'That authenticator code is wrong or was already used. Enter the code your app shows now.'
      : 'That recovery code is wrong or was already used. Check it and try again.' };
    case 'UPSTREAM_CALLBACK_INVALID': return { status: 200, message: 'The sign-in with the identity provider did not complete: it was cancelled, refused or took too long. Try again, or sign in another way.' };
    case 'UPSTREAM_PROVIDER_NOT_FOUND': return { status: 200, message: 'That way to sign in is no longer offered. Choose another.' };
    case 'SSO_REQUIRED': return { status: 200, message: 'Your organisation requires signing in with its own identity provider: we do not send sign-in codes or accept passkeys for its addresses.' };
    case 'PASSKEY_INVALID': return { status: 200, message: 'That passkey was not accepted. Try again with a passkey of this account, or sign in with a code.' };
    case 'USER_DELETED': return { status: 403, message: 'This account has been deleted.' };
    case 'RATE_LIMITED': return { status: 429, message: 'Too many attempts. Wait a few minutes, then try again.' };
    default: return { status: error.status, message: error.message };
  }
}

export function redirect(location: string): HttpResult {
  return { status: 303, headers: { Location: location }, text: '' };
}
