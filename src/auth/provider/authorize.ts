// GET /oauth/authorize and the hosted sign-in page's forms: a checked authorization request is
// answered with a code at once when the browser is signed in to the client's app (and prompt and
// max_age allow it), with login_required for prompt=none otherwise, else with the sign-in page.
// The page calls the login service the JSON API calls (requestOtp, verifyOtpThen); a verified
// code starts the browser's session in the app, then the code goes to the client. When a
// second-factor policy applies to the user, the verified code leaves the sign-in waiting on the
// second-factor service's challenge (the JSON API's second step: bounded attempts, a time step
// never accepted twice) and the page asks for the authenticator's code or a recovery code, or,
// under a policy that requires a factor the user lacks, enrols one first.
import { randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { HttpError } from '../../http/errors.js';
import type { HttpRequest, HttpResult } from '../../http/request.js';
import { requestOrigin, type RequestOrigin } from '../audit.js';
import type { AuthContext } from '../context.js';
import { authError } from '../errors.js';
import { insertAuditEvent } from '../queries/audit-events.js';
import type { OAuthClientRow } from '../queries/oauth-clients.js';
import {
  deleteSignInRequest, findBrowserSession, findSignInRequest, insertAuthorizationCode, insertSignInRequest, listTenantsOfUser, replaceBrowserSession,
  findSignInRequestByUpstreamState, setSignInChallenge, setSignInCsrf, setSignInIdentifier, setSignInParameters, setSignInUpstreamState,
  type BrowserSessionRow, type SignInRequestRow,
} from '../queries/oauth-grants.js';
import { listRolesOfUser } from '../queries/roles.js';
import type { Identifier } from '../queries/users.js';
import { identifierOf } from '../service/identity.js';
import { perAddress, requestOtp, verifyOtpThen } from '../service/login.js';
import {
  challengeUsable, completeSecondFactorThen, confirmTotpEnrollmentThen, pageSecondFactorChallenge, pendingOrNewTotpKey, type AfterSecondFactor,
} from '../service/second-factor.js';
import type { TransactionSql } from '../database/client.js';
import { enforceRateLimits } from '../service/rate-limit-enforcement.js';
import { chooseTenant } from '../service/sessions.js';
import { SESSION_LIFETIME_MS } from '../limits.js';
import { checkAuthorizationRequest, redirectWith, type AuthorizationParameters } from './authorization-request.js';
import { browserOf, presentedBrowser, sha256, type Browser } from './browser.js';
import { findClient } from './clients.js';
import { parseForm } from './form.js';
import { formParameters, PLAIN } from '../oauth-request.js';
import { compileBody } from '../../http/validation.js';
import { WebAuthnAuthenticationResponse } from '../schemas.js';
import { findPasskeySettings } from '../queries/passkeys.js';
import { finishPasskeyLoginThen, startPasskeyLogin } from '../service/passkeys.js';
import { discoverRealm } from '../service/tenant-sso.js';
import { finishUpstreamFlowThen, listSignInProviders, startUpstreamFlowForPage } from '../service/upstream-sign-in.js';
import { needsConsent, recordConsent } from './consents.js';
import {
  renderConsentPage, renderErrorPage, renderRecoveryCodes, renderSignInPage, renderTenantPicker, renderUpstreamContinue, type SignInView,
} from './sign-in-page.js';

/** The passkey form's assertion, checked field by field by the JSON API's schema before the service sees it. */
const assertionForm = compileBody(WebAuthnAuthenticationResponse);

/** An authorization code lives 60 seconds (OAuth 2.1 recommends a short life). */
export const AUTHORIZATION_CODE_TTL_MS = 60 * 1000;
/** A sign-in on the page must finish within 15 minutes (a code e-mail may take a while). */
const SIGN_IN_REQUEST_TTL_MS = 15 * 60 * 1000;

/** GET /oauth/authorize. */
export async function authorize(ctx: AuthContext, req: HttpRequest): Promise<HttpResult> {
  const outcome = await checkAuthorizationRequest(ctx, req.query);
  if (outcome.kind === 'page-error') return renderErrorPage(400, 'This sign-in request cannot be completed', outcome.message);
  if (outcome.kind === 'redirect-error') {
    return redirect(redirectWith(outcome.redirectUri, { error: outcome.error, error_description: outcome.message, state: outcome.state, iss: ctx.issuer }));
  }
  const { client, parameters } = outcome;
  const browser = browserOf(req, secureCookies(ctx));
  const nowMs = ctx.clock.now();
  const session = browser.setCookie === null ? await findBrowserSession(ctx.sql, browser.hash, client.app_id, new Date(nowMs)) : undefined;
  const fresh = session !== undefined && !parameters.prompt.includes('login')
    && (parameters.max_age === null || nowMs - session.auth_time.getTime() <= parameters.max_age * 1000);
  if (fresh) {
    const pending = async (): Promise<PendingRequest> => newSignInRequest(ctx, browser, client, parameters, nowMs);
    return withCookie(await proceed(ctx, req, client, parameters, session, pending, { consented: false }), browser);
  }
  if (parameters.prompt.includes('none')) {
    return redirect(redirectWith(parameters.redirect_uri, {
      error: 'login_required', error_description: 'The user is not signed in', state: parameters.state, iss: ctx.issuer,
    }));
  }
  const { requestId, csrf } = await newSignInRequest(ctx, browser, client, parameters, nowMs);
  return withCookie(await addressPage(ctx, client, requestId, csrf, parameters.login_hint ?? '', null), browser);
}

/** A sign-in request of the page: its id and CSRF token. */
interface PendingRequest { requestId: string; csrf: string }

async function newSignInRequest(ctx: AuthContext, browser: Browser, client: OAuthClientRow, parameters: AuthorizationParameters, nowMs: number): Promise<PendingRequest> {
  const requestId = randomUUID();
  const csrf = randomBytes(32).toString('base64url');
  await insertSignInRequest(ctx.sql, {
    id: requestId, browserHash: browser.hash, csrfHash: sha256(csrf), clientId: client.id,
    parameters: { ...parameters }, now: new Date(nowMs), expiresAt: new Date(nowMs + SIGN_IN_REQUEST_TTL_MS),
  });
  return { requestId, csrf };
}

/**
 * What follows a signed-in browser's request, in order: the tenant picker when the user has
 * roles in several tenants and none was asked for; the consent page when the client needs one
 * (not again once given on this request); then the code. A page needs the request (made by
 * `pending` when there is none yet); prompt=none gets account_selection_required or
 * consent_required instead of a page.
 */
async function proceed(
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

/** POST /oauth/tenant `request, csrf, tenant`: the tenant picked, one of the user's; then consent or the code. */
export async function pickTenant(ctx: AuthContext, req: HttpRequest): Promise<HttpResult> {
  const form = parseForm(req, ['request', 'csrf', 'tenant']);
  const signIn = await checkedSignIn(ctx, req, form);
  if ('refused' in signIn) return signIn.refused;
  const { request, client, browserHash, csrf } = signIn;
  const session = await findBrowserSession(ctx.sql, browserHash, client.app_id, new Date(ctx.clock.now()));
  if (!session) return renderErrorPage(403, 'You are signed out', 'Go back to the application and sign in again.');
  const tenants = await listTenantsOfUser(ctx.sql, client.app_id, session.user_id);
  const chosen = tenants.find((tenant) => tenant.id === form.get('tenant'));
  if (!chosen) return renderTenantPicker({ appName: client.app_name, color: client.app_color, tenants, requestId: request.id, csrf });
  const parameters = { ...(request.parameters as unknown as AuthorizationParameters), tenant: chosen.id };
  await setSignInParameters(ctx.sql, request.id, { ...parameters });
  const result = await proceed(ctx, req, client, parameters, session, async () => ({ requestId: request.id, csrf }), { consented: false });
  if (result.status === 303) await deleteSignInRequest(ctx.sql, request.id);
  return result;
}

/** POST /oauth/sign-in/email `request, csrf, email` (or `phone`, a code by SMS): sends a code and asks for it. */
export async function signInEmail(ctx: AuthContext, req: HttpRequest): Promise<HttpResult> {
  const form = parseForm(req, ['request', 'csrf', 'email', 'phone', 'code_anyway']);
  const signIn = await checkedSignIn(ctx, req, form);
  if ('refused' in signIn) return signIn.refused;
  const { request, client, csrf } = signIn;
  const body = form.has('phone') && !form.has('email') ? { phone: form.get('phone')! } : { email: form.get('email') ?? '' };
  const origin = requestOrigin(ctx, req);
  const app = { id: client.app_id, slug: client.app_slug };
  try {
    const identifier = identifierOf(body);
    // Home-realm discovery: an address in a domain a tenant proved is offered the tenant's
    // provider first; when the tenant requires it, no code is sent (the service would refuse).
    if (identifier.channel === 'email') {
      const realm = await discoverRealm(ctx, app, identifier.value);
      if (realm.sso && (realm.required || form.get('code_anyway') !== '1')) {
        return renderSignInPage({ ...viewOf(client, request.id, csrf, 'sso', identifier.value, null), sso: { providerId: realm.provider_id, label: realm.label, required: realm.required } });
      }
    }
    await enforceRateLimits(ctx, [
      { rule: 'otp_request_address', subject: perAddress('otp_request_address').subject({ app, body }, origin) },
      { rule: 'otp_request_ip', subject: origin.ip },
    ]);
    await requestOtp(ctx, app, identifier, origin);
    await setSignInIdentifier(ctx.sql, request.id, identifier);
    return renderSignInPage({ ...viewOf(client, request.id, csrf, 'code', identifier.value, null), channel: identifier.channel });
  } catch (error) {
    const words = inWords(error, 'phone' in body ? 'phone' : 'email');
    return addressPage(ctx, client, request.id, csrf, 'email' in body ? body.email ?? '' : '', words.message, words.status);
  }
}

/** POST /oauth/sign-in/code `request, csrf, code`: signs the browser in and sends the code to the client. */
export async function signInCode(ctx: AuthContext, req: HttpRequest): Promise<HttpResult> {
  const form = parseForm(req, ['request', 'csrf', 'code']);
  const signIn = await checkedSignIn(ctx, req, form);
  if ('refused' in signIn) return signIn.refused;
  const { request, client, csrf, browserHash } = signIn;
  const identifier = request.identifier as Identifier | null;
  if (!identifier) return addressPage(ctx, client, request.id, csrf, '', 'Enter your e-mail address first.', 400);
  const origin = requestOrigin(ctx, req);
  const app = { id: client.app_id, slug: client.app_slug };
  type Outcome = { session: BrowserSessionRow } | { challengeHash: Buffer; enrolled: boolean };
  let outcome: Outcome;
  try {
    await enforceRateLimits(ctx, [
      { rule: 'otp_verify_address', subject: perAddress('otp_verify_address').subject({ app, body: { [identifier.channel]: identifier.value } }, origin) },
      { rule: 'otp_verify_ip', subject: origin.ip },
    ]);
    outcome = await verifyOtpThen<Outcome>(ctx, app, identifier, (form.get('code') ?? '').trim(), origin, async (tx, userId, nowMs) => {
      // RFC 8176, as the JSON API says it: `otp` for a code by e-mail, `sms` for one by SMS.
      const amr = [identifier.channel === 'email' ? 'otp' : 'sms'];
      const challenge = await pageSecondFactorChallenge(tx, { appId: app.id, userId, amr, nowMs });
      if (challenge) {
        await setSignInChallenge(tx, request.id, challenge.challengeHash);
        return { familyId: null, result: challenge, secondFactorPending: true };
      }
      return { familyId: null, result: { session: await startBrowserSession(tx, browserHash, app.id, userId, amr, nowMs) } };
    });
  } catch (error) {
    const words = inWords(error);
    return renderSignInPage({ ...viewOf(client, request.id, csrf, 'code', identifier.value, words.message), channel: identifier.channel }, words.status);
  }
  if ('challengeHash' in outcome) {
    if (outcome.enrolled) return renderSignInPage(viewOf(client, request.id, csrf, 'second-factor', identifier.value, null));
    return enrolmentPage(ctx, client, request.id, csrf, identifier.value, outcome.challengeHash, null);
  }
  return finishSignIn(ctx, req, client, request, csrf, outcome.session);
}

/**
 * POST /oauth/sign-in/second-factor `request, csrf, code` (or `recovery_code`): the second step
 * of a code sign-in waiting on its challenge; signs the browser in as the code step would.
 */
export async function signInSecondFactor(ctx: AuthContext, req: HttpRequest): Promise<HttpResult> {
  const form = parseForm(req, ['request', 'csrf', 'code', 'recovery_code']);
  const signIn = await checkedSignIn(ctx, req, form);
  if ('refused' in signIn) return signIn.refused;
  const { request, client, csrf, browserHash } = signIn;
  const challengeHash = request.second_factor_challenge_hash;
  const email = (request.identifier as Identifier | null)?.value ?? '';
  if (!challengeHash) return addressPage(ctx, client, request.id, csrf, email, 'Enter your e-mail address first.', 400);
  const app = { id: client.app_id, slug: client.app_slug };
  const recovery = form.has('recovery_code') && !form.has('code');
  const proof = recovery ? { recoveryCode: form.get('recovery_code')!.trim() } : { code: (form.get('code') ?? '').trim() };
  let session: BrowserSessionRow;
  try {
    session = await completeSecondFactorThen(ctx, app, challengeHash, proof, requestOrigin(ctx, req), browserSessionAfter(browserHash, app.id));
  } catch (error) {
    const restart = await restartIfChallengeGone(ctx, client, request, csrf, email, challengeHash, error);
    if (restart) return restart;
    const words = inWords(error, 'email', recovery ? 'recovery_code' : 'totp');
    return renderSignInPage(viewOf(client, request.id, csrf, 'second-factor', email, words.message), words.status);
  }
  return finishSignIn(ctx, req, client, request, csrf, session);
}

/**
 * POST /oauth/sign-in/second-factor/enroll `request, csrf, code`: the first code of the key the
 * enrol step showed confirms it and signs the browser in; the recovery codes are shown next.
 */
export async function signInEnrolTotp(ctx: AuthContext, req: HttpRequest): Promise<HttpResult> {
  const form = parseForm(req, ['request', 'csrf', 'code']);
  const signIn = await checkedSignIn(ctx, req, form);
  if ('refused' in signIn) return signIn.refused;
  const { request, client, csrf, browserHash } = signIn;
  const challengeHash = request.second_factor_challenge_hash;
  const email = (request.identifier as Identifier | null)?.value ?? '';
  if (!challengeHash) return addressPage(ctx, client, request.id, csrf, email, 'Enter your e-mail address first.', 400);
  const app = { id: client.app_id, slug: client.app_slug };
  let recoveryCodes: string[];
  try {
    ({ recoveryCodes } = await confirmTotpEnrollmentThen(ctx, app, { challengeHash }, (form.get('code') ?? '').trim(), requestOrigin(ctx, req), browserSessionAfter(browserHash, app.id)));
  } catch (error) {
    const restart = await restartIfChallengeGone(ctx, client, request, csrf, email, challengeHash, error);
    if (restart) return restart;
    const words = inWords(error, 'email', 'totp');
    return enrolmentPage(ctx, client, request.id, csrf, email, challengeHash, words.message, words.status);
  }
  await setSignInChallenge(ctx.sql, request.id, null);
  return renderRecoveryCodes({ appName: client.app_name, color: client.app_color, recoveryCodes, requestId: request.id, csrf });
}

/** POST /oauth/sign-in/continue `request, csrf`: after the recovery codes, on with the signed-in browser's request (tenant, consent, code). */
export async function signInContinue(ctx: AuthContext, req: HttpRequest): Promise<HttpResult> {
  const form = parseForm(req, ['request', 'csrf']);
  const signIn = await checkedSignIn(ctx, req, form);
  if ('refused' in signIn) return signIn.refused;
  const { request, client, browserHash, csrf } = signIn;
  const session = await findBrowserSession(ctx.sql, browserHash, client.app_id, new Date(ctx.clock.now()));
  if (!session) return renderErrorPage(403, 'You are signed out', 'Go back to the application and sign in again.');
  return finishSignIn(ctx, req, client, request, csrf, session);
}

/** A signed-in browser's next step on its request: the tenant picker, the consent page or the code (the request then done). */
async function finishSignIn(ctx: AuthContext, req: HttpRequest, client: OAuthClientRow, request: SignInRequestRow, csrf: string, session: BrowserSessionRow): Promise<HttpResult> {
  const parameters = request.parameters as unknown as AuthorizationParameters;
  // prompt=login was answered by this sign-in; a tenant choice and a consent are asked next, on the same request.
  const result = await proceed(ctx, req, client, parameters, session, async () => ({ requestId: request.id, csrf }), { consented: false });
  if (result.status === 303) await deleteSignInRequest(ctx.sql, request.id);
  return result;
}

/** The browser's session in the app (replacing the one it had), in the sign-in's transaction. */
async function startBrowserSession(tx: TransactionSql, browserHash: Buffer, appId: string, userId: string, amr: string[], nowMs: number): Promise<BrowserSessionRow> {
  const id = randomUUID();
  await replaceBrowserSession(tx, { id, browserHash, appId, userId, amr, now: new Date(nowMs), expiresAt: new Date(nowMs + SESSION_LIFETIME_MS) });
  return { id, app_id: appId, user_id: userId, auth_time: new Date(nowMs), amr };
}

function browserSessionAfter(browserHash: Buffer, appId: string): AfterSecondFactor<BrowserSessionRow> {
  return async (tx, login) => ({ familyId: null, result: await startBrowserSession(tx, browserHash, appId, login.userId, login.amr, login.nowMs) });
}

/**
 * POST /oauth/sign-in/upstream `request, csrf, provider`: sends the browser to one of the app's
 * identity providers (a button of the address step, or a tenant's found by home-realm
 * discovery), through the upstream service's flow (state, nonce, PKCE), whose state the sign-in
 * request keeps (its hash) for the callback.
 */
export async function signInUpstream(ctx: AuthContext, req: HttpRequest): Promise<HttpResult> {
  const form = parseForm(req, ['request', 'csrf', 'provider']);
  const signIn = await checkedSignIn(ctx, req, form);
  if ('refused' in signIn) return signIn.refused;
  const { request, client, csrf } = signIn;
  const email = (request.identifier as Identifier | null)?.value ?? '';
  try {
    const started = await startUpstreamFlowForPage(ctx, { id: client.app_id, slug: client.app_slug }, form.get('provider') ?? '');
    await setSignInUpstreamState(ctx.sql, request.id, sha256(started.state));
    return redirect(started.authorization_url);
  } catch (error) {
    const words = inWords(error);
    return addressPage(ctx, client, request.id, csrf, email, words.message, words.status);
  }
}

/**
 * GET /oauth/upstream/callback: where a provider sends the browser back. The state names the
 * sign-in request, which must be this browser's (a callback URL given to another browser signs
 * nobody in); the upstream service checks the rest (state once, nonce, PKCE, the id_token) and
 * signs the browser in (amr `fed`); then the request goes on as after a code: tenant (a
 * tenant's provider signs in to that tenant), consent, the client's code. The forms that
 * follow get a new CSRF token (the callback carries none).
 */
export async function upstreamCallback(ctx: AuthContext, req: HttpRequest): Promise<HttpResult> {
  return finishUpstreamOnPage(ctx, req, req.query);
}

/**
 * POST /oauth/upstream/callback: a provider's `form_post` answer (Apple). The browser posts it
 * across sites, so its SameSite=Lax cookie stays home and the browser cannot be checked: the page
 * hands the parameters back to the browser in a form of this site, whose post
 * (/oauth/upstream/callback/continue) carries the cookie. Nothing is checked or used up here.
 */
export function upstreamFormPost(req: HttpRequest): HttpResult {
  const fields = [...callbackParameters(formParameters(req))];
  return renderUpstreamContinue(fields);
}

/** POST /oauth/upstream/callback/continue: the form_post answer again, from this site, with the cookie; then as the GET callback. */
export async function upstreamFormPostContinue(ctx: AuthContext, req: HttpRequest): Promise<HttpResult> {
  return finishUpstreamOnPage(ctx, req, formParameters(req));
}

/** A callback's parameters: each name once (the first), at most 20, each value within the form limit. */
function callbackParameters(source: URLSearchParams): Map<string, string> {
  const params = new Map<string, string>();
  for (const [name, value] of source) {
    if (params.has(name)) continue;
    if (params.size === 20 || name.length > 64 || value.length > 8192 || !PLAIN.test(name) || !PLAIN.test(value)) {
      throw authError('VALIDATION_ERROR', 'The identity provider\'s answer has too many or too long parameters');
    }
    params.set(name, value);
  }
  return params;
}

async function finishUpstreamOnPage(ctx: AuthContext, req: HttpRequest, source: URLSearchParams): Promise<HttpResult> {
  const expired = renderErrorPage(403, 'This sign-in has expired', 'Go back to the application and start signing in again.');
  const params = Object.fromEntries(callbackParameters(source));
  const state = params.state;
  const browserHash = presentedBrowser(req);
  if (!state || state.length > 512 || browserHash === null) return expired;
  const request = await findSignInRequestByUpstreamState(ctx.sql, sha256(state), new Date(ctx.clock.now()));
  if (!request || !timingSafeEqual(request.browser_hash, browserHash)) return expired;
  const client = await findClient(ctx, request.client_id);
  if (!client) return expired;
  const csrf = randomBytes(32).toString('base64url');
  await setSignInCsrf(ctx.sql, request.id, sha256(csrf));
  const app = { id: client.app_id, slug: client.app_slug };
  let signedIn: { session: BrowserSessionRow; ssoTenant: string | null };
  try {
    const outcome = await finishUpstreamFlowThen(ctx, app, { params, origin: requestOrigin(ctx, req) }, async (tx, login) => ({
      familyId: null, result: { session: await startBrowserSession(tx, browserHash, app.id, login.userId, login.amr, login.nowMs), ssoTenant: login.ssoTenant },
    }));
    if (outcome.kind !== 'signed_in') return expired;
    signedIn = outcome.result;
  } catch (error) {
    const words = inWords(error);
    return addressPage(ctx, client, request.id, csrf, (request.identifier as Identifier | null)?.value ?? '', words.message, words.status);
  }
  let parameters = request.parameters as unknown as AuthorizationParameters;
  if (parameters.tenant === null && signedIn.ssoTenant !== null) {
    parameters = { ...parameters, tenant: signedIn.ssoTenant };
    await setSignInParameters(ctx.sql, request.id, { ...parameters });
  }
  return finishSignIn(ctx, req, client, { ...request, parameters: { ...parameters } }, csrf, signedIn.session);
}

/** The address step: the e-mail and SMS code forms, and a passkey when the app has a relying party for passkeys. */
async function addressPage(ctx: AuthContext, client: OAuthClientRow, requestId: string, csrf: string, email: string, error: string | null, status = 200): Promise<HttpResult> {
  const passkeys = (await findPasskeySettings(ctx.sql, client.app_id)) !== undefined;
  const providers = await listSignInProviders(ctx, { id: client.app_id, slug: client.app_slug });
  return renderSignInPage({ ...viewOf(client, requestId, csrf, 'address', email, error), passkeys, providers }, status);
}

/**
 * POST /oauth/sign-in/passkey/options `request, csrf` (the page's script): 200 `{ceremony_id,
 * options}` for navigator.credentials.get, from the passkey service the JSON API's
 * /auth/passkeys/login/options calls; refusals are `{message}` in words.
 */
export async function passkeyOptions(ctx: AuthContext, req: HttpRequest): Promise<HttpResult> {
  const form = parseForm(req, ['request', 'csrf']);
  const signIn = await checkedSignIn(ctx, req, form);
  if ('refused' in signIn) return { status: 403, body: { message: 'This sign-in form has expired. Go back to the application and start signing in again.' } };
  try {
    return { body: await startPasskeyLogin(ctx, { id: signIn.client.app_id, slug: signIn.client.app_slug }) };
  } catch (error) {
    if (error instanceof HttpError && error.code === 'PASSKEYS_NOT_CONFIGURED') return { status: 409, body: { message: 'This application does not offer passkeys. Sign in with a code.' } };
    throw error;
  }
}

/**
 * POST /oauth/sign-in/passkey `request, csrf, ceremony, response` (the assertion as JSON, put
 * there by the page's script): verified by the passkey service as on the JSON API; a passkey
 * with user verification is both factors (amr hwk, mfa), so the browser is signed in at once.
 */
export async function signInPasskey(ctx: AuthContext, req: HttpRequest): Promise<HttpResult> {
  const form = parseForm(req, ['request', 'csrf', 'ceremony', 'response']);
  const signIn = await checkedSignIn(ctx, req, form);
  if ('refused' in signIn) return signIn.refused;
  const { request, client, csrf, browserHash } = signIn;
  const app = { id: client.app_id, slug: client.app_slug };
  let session: BrowserSessionRow;
  try {
    let response: unknown;
    try {
      response = assertionForm.check(JSON.parse(form.get('response') ?? ''));
    } catch {
      throw authError('PASSKEY_INVALID', 'The passkey response is not an assertion');
    }
    session = await finishPasskeyLoginThen(ctx, app, { ceremonyId: form.get('ceremony') ?? '', response, origin: requestOrigin(ctx, req) },
      async (tx, login) => ({ familyId: null, result: await startBrowserSession(tx, browserHash, app.id, login.userId, login.amr, login.nowMs) }));
  } catch (error) {
    const words = inWords(error);
    return addressPage(ctx, client, request.id, csrf, '', words.message, words.status);
  }
  return finishSignIn(ctx, req, client, request, csrf, session);
}

/** The enrol step: the key waiting for its first code (the same one when shown again). */
async function enrolmentPage(ctx: AuthContext, client: OAuthClientRow, requestId: string, csrf: string, email: string, challengeHash: Buffer, error: string | null, status = 200): Promise<HttpResult> {
  const key = await pendingOrNewTotpKey(ctx, { id: client.app_id, slug: client.app_slug }, challengeHash);
  return renderSignInPage({ ...viewOf(client, requestId, csrf, 'enroll', email, error), totp: { secret: key.secret, uri: key.otpauth_uri } }, status);
}

/**
 * After a refused second-factor code: when the challenge is used up (its attempts spent) or has
 * expired, the sign-in starts over at the address step (a new e-mail code, a new challenge), in
 * words; null while the challenge can still be answered.
 */
async function restartIfChallengeGone(ctx: AuthContext, client: OAuthClientRow, request: SignInRequestRow, csrf: string, email: string, challengeHash: Buffer, error: unknown): Promise<HttpResult | null> {
  if (!(error instanceof HttpError) || error.code !== 'SECOND_FACTOR_INVALID') return null;
  if (await challengeUsable(ctx, client.app_id, challengeHash)) return null;
  await setSignInChallenge(ctx.sql, request.id, null);
  return addressPage(ctx, client, request.id, csrf, email, 'Too many wrong codes, or this step took too long. Start again: ask for a new code.');
}

/**
 * POST /oauth/consent `request, csrf, decision` (allow or deny), from the consent page of a
 * signed-in browser: allow records the consent and sends the code; deny sends access_denied.
 */
export async function consent(ctx: AuthContext, req: HttpRequest): Promise<HttpResult> {
  const form = parseForm(req, ['request', 'csrf', 'decision']);
  const signIn = await checkedSignIn(ctx, req, form);
  if ('refused' in signIn) return signIn.refused;
  const { request, client, browserHash, csrf } = signIn;
  const parameters = request.parameters as unknown as AuthorizationParameters;
  const nowMs = ctx.clock.now();
  const session = await findBrowserSession(ctx.sql, browserHash, client.app_id, new Date(nowMs));
  if (!session) return renderErrorPage(403, 'You are signed out', 'Go back to the application and sign in again.');
  const decision = form.get('decision');
  if (decision !== 'allow' && decision !== 'deny') return renderErrorPage(400, 'Choose Allow or Deny', 'Go back and choose Allow or Deny.');
  await deleteSignInRequest(ctx.sql, request.id);
  if (decision === 'deny') {
    return redirect(redirectWith(parameters.redirect_uri, {
      error: 'access_denied', error_description: 'The user denied the request', state: parameters.state, iss: ctx.issuer,
    }));
  }
  const origin = requestOrigin(ctx, req);
  const scopes = parameters.scope === '' ? [] : parameters.scope.split(' ');
  await ctx.sql.begin((tx) => recordConsent(tx, client, session.user_id, scopes, origin, nowMs));
  return proceed(ctx, req, client, parameters, session, async () => ({ requestId: request.id, csrf }), { consented: true });
}

/**
 * The sign-in a form belongs to, checked: it exists and has not expired, was shown to this
 * browser, and the form carries its CSRF token. Otherwise the answer (a page saying so).
 */
async function checkedSignIn(ctx: AuthContext, req: HttpRequest, form: Map<string, string>): Promise<{ refused: HttpResult } | { request: SignInRequestRow; client: OAuthClientRow; csrf: string; browserHash: Buffer }> {
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

/**
 * Issues a code for the signed-in user (tenant chosen as for a login: the one asked for, which
 * must be one of the user's, else the default) and returns where to send the browser.
 */
async function issueCode(ctx: AuthContext, client: OAuthClientRow, parameters: AuthorizationParameters, session: BrowserSessionRow, origin: RequestOrigin): Promise<string> {
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

function viewOf(client: OAuthClientRow, requestId: string, csrf: string, step: SignInView['step'], email: string, error: string | null): SignInView {
  return { appName: client.app_name, color: client.app_color, clientName: client.name, requestId, csrf, step, email, error };
}

/**
 * What the page says for a refusal of the login service. A mistake the user corrects on the
 * same form (a malformed address, a wrong code) is the form again with 200 and the error in
 * words: browsers log any other status of a page as an error.
 */
function inWords(error: unknown, channel: 'email' | 'phone' = 'email', factor: 'totp' | 'recovery_code' = 'totp'): { status: number; message: string } {
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

function redirect(location: string): HttpResult {
  return { status: 303, headers: { Location: location }, text: '' };
}

function withCookie(result: HttpResult, browser: Browser): HttpResult {
  return browser.setCookie === null ? result : { ...result, headers: { ...result.headers, 'Set-Cookie': browser.setCookie } };
}

function secureCookies(ctx: AuthContext): boolean {
  return ctx.issuer.startsWith('https:');
}
