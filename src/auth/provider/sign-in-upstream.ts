// The app's upstream identity providers on the hosted page (a button each, and a tenant's found
// by home-realm discovery): the upstream service's flow, started here with the issuer's own
// callback, whose state the sign-in request keeps by its hash, so the callback continues the same
// /oauth/authorize request in the same browser.
import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { HttpRequest, HttpResult } from '../../http/request.js';
import { requestOrigin } from '../audit.js';
import type { AuthContext } from '../context.js';
import { authError } from '../errors.js';
import { formParameters, PLAIN } from '../oauth-request.js';
import { findSignInRequestByUpstreamState, setSignInCsrf, setSignInParameters, setSignInUpstreamState, type BrowserSessionRow } from '../queries/oauth-grants.js';
import type { Identifier } from '../queries/users.js';
import { finishUpstreamFlowThen, startUpstreamFlowForPage } from '../service/upstream-sign-in.js';
import type { AuthorizationParameters } from './authorization-request.js';
import { presentedBrowser, sha256 } from './browser.js';
import { findClient } from './clients.js';
import { parseForm } from './form.js';
import { renderErrorPage, renderUpstreamContinue } from './sign-in-page.js';
import { addressPage, checkedSignIn, finishSignIn, inWords, redirect, startBrowserSession } from './sign-in-steps.js';

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
