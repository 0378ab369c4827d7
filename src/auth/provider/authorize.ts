// GET /oauth/authorize and the hosted sign-in page's first forms: a checked authorization request
// is answered with a code at once when the browser is signed in to the client's app (and prompt
// and max_age allow it), with login_required for prompt=none otherwise, else with the sign-in
// page. The page calls the login service the JSON API calls (requestOtp, verifyOtpThen); a
// verified code starts the browser's session in the app, then the code goes to the client. When a
// second-factor policy applies to the user, the verified code leaves the sign-in waiting on the
// second-factor service's challenge instead (sign-in-second-factor.ts). The other ways in have a
// file each: sign-in-passkey.ts, sign-in-upstream.ts; what they share is sign-in-steps.ts.
import { randomBytes, randomUUID } from 'node:crypto';
import type { HttpRequest, HttpResult } from '../../http/request.js';
import { requestOrigin } from '../audit.js';
import type { AuthContext } from '../context.js';
import type { OAuthClientRow } from '../queries/oauth-clients.js';
import {
  deleteSignInRequest, findBrowserSession, insertSignInRequest, listTenantsOfUser, setSignInChallenge, setSignInIdentifier, setSignInParameters, type BrowserSessionRow,
} from '../queries/oauth-grants.js';
import type { Identifier } from '../queries/users.js';
import { identifierOf } from '../service/identity.js';
import { perAddress, requestOtp, verifyOtpThen } from '../service/login.js';
import { enforceRateLimits } from '../service/rate-limit-enforcement.js';
import { pageSecondFactorChallenge, secondFactorOwed } from '../service/second-factor.js';
import { discoverRealm } from '../service/tenant-sso.js';
import { checkAuthorizationRequest, redirectWith, type AuthorizationParameters } from './authorization-request.js';
import { browserOf, sha256, type Browser } from './browser.js';
import { recordConsent } from './consents.js';
import { parseForm } from './form.js';
import { renderErrorPage, renderSignInPage, renderTenantPicker } from './sign-in-page.js';
import { addressPage, checkedSignIn, finishSignIn, inWords, proceed, redirect, startBrowserSession, viewOf, type PendingRequest } from './sign-in-steps.js';
import { enrolmentPage } from './sign-in-second-factor.js';

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
    && (parameters.max_age === null || nowMs - session.auth_time.getTime() <= parameters.max_age * 1000)
    && !(await owesSecondFactor(ctx, client, session));
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

/**
 * A session signed in with a code alone, of a user whom a second-factor policy now asks for one
 * (set or tightened since): the browser signs in again, second step included, rather than get a
 * code on the old session. A passkey (`mfa`) or an upstream provider (`fed`) needs no step.
 */
async function owesSecondFactor(ctx: AuthContext, client: OAuthClientRow, session: BrowserSessionRow): Promise<boolean> {
  if (session.amr.includes('mfa') || session.amr.includes('fed')) return false;
  return (await secondFactorOwed(ctx.sql, client.app_id, session.user_id)) !== null;
}

async function newSignInRequest(ctx: AuthContext, browser: Browser, client: OAuthClientRow, parameters: AuthorizationParameters, nowMs: number): Promise<PendingRequest> {
  const requestId = randomUUID();
  const csrf = randomBytes(32).toString('base64url');
  await insertSignInRequest(ctx.sql, {
    id: requestId, browserHash: browser.hash, csrfHash: sha256(csrf), clientId: client.id,
    parameters: { ...parameters }, now: new Date(nowMs), expiresAt: new Date(nowMs + SIGN_IN_REQUEST_TTL_MS),
  });
  return { requestId, csrf };
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

function withCookie(result: HttpResult, browser: Browser): HttpResult {
  return browser.setCookie === null ? result : { ...result, headers: { ...result.headers, 'Set-Cookie': browser.setCookie } };
}

function secureCookies(ctx: AuthContext): boolean {
  return ctx.issuer.startsWith('https:');
}
