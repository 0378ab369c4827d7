// Passkey sign-in on the hosted page: the page's script (sign-in-script.ts) asks for a ceremony
// and posts the assertion; both go through the passkey service the JSON API's
// /auth/passkeys/login/* call. A passkey with user verification is both factors: no second step.
import { HttpError } from '../../http/errors.js';
import type { HttpRequest, HttpResult } from '../../http/request.js';
import { compileBody } from '../../http/validation.js';
import { requestOrigin } from '../audit.js';
import type { AuthContext } from '../context.js';
import { authError } from '../errors.js';
import type { BrowserSessionRow } from '../queries/oauth-grants.js';
import { WebAuthnAuthenticationResponse } from '../schemas.js';
import { finishPasskeyLoginThen, startPasskeyLogin } from '../service/passkeys.js';
import { parseForm } from './form.js';
import { addressPage, checkedSignIn, finishSignIn, inWords, startBrowserSession } from './sign-in-steps.js';

/** The passkey form's assertion, checked field by field by the JSON API's schema before the service sees it. */
const assertionForm = compileBody(WebAuthnAuthenticationResponse);

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
