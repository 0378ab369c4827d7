// The hosted sign-in page's second step: after a right e-mail or SMS code, a user whom a
// second-factor policy applies to answers the second-factor service's challenge (the JSON API's
// second step: bounded attempts, a TOTP time step never accepted twice, recovery codes once),
// which the sign-in request holds by its hash; under a policy that requires a factor the user
// lacks, the page enrols one first (as the JSON API's enrolment during a login) and shows the
// recovery codes once.
import { HttpError } from '../../http/errors.js';
import type { HttpRequest, HttpResult } from '../../http/request.js';
import { requestOrigin } from '../audit.js';
import type { AuthContext } from '../context.js';
import type { OAuthClientRow } from '../queries/oauth-clients.js';
import { findBrowserSession, setSignInChallenge, type BrowserSessionRow, type SignInRequestRow } from '../queries/oauth-grants.js';
import type { Identifier } from '../queries/users.js';
import { challengeUsable, completeSecondFactorThen, confirmTotpEnrollmentThen, pendingOrNewTotpKey, type AfterSecondFactor } from '../service/second-factor.js';
import { parseForm } from './form.js';
import { renderErrorPage, renderRecoveryCodes, renderSignInPage } from './sign-in-page.js';
import { addressPage, checkedSignIn, finishSignIn, inWords, startBrowserSession, viewOf } from './sign-in-steps.js';

/**
 * POST /oauth/sign-in/second-factor `request, csrf, code` (or `recovery_code`): the second step
 * of a code sign-in waiting on its challenge; signs the browser in as the code step would.
 */
export async function signInSecondFactor(ctx: AuthContext, req: HttpRequest): Promise<HttpResult> {
  const form = parseForm(req, ['request', 'csrf', 'code', 'recovery_code']);
  const step = await challengedSignIn(ctx, req, form);
  if ('refused' in step) return step.refused;
  const { request, client, csrf, browserHash, challengeHash, email, app } = step;
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
  const step = await challengedSignIn(ctx, req, form);
  if ('refused' in step) return step.refused;
  const { request, client, csrf, browserHash, challengeHash, email, app } = step;
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

type CheckedSignIn = Exclude<Awaited<ReturnType<typeof checkedSignIn>>, { refused: HttpResult }>;

/**
 * A form of the second step checked as every step's is (the request, its CSRF token, the browser),
 * with the challenge the request holds, its address and its app; without a challenge (no code
 * step passed yet), the address page instead.
 */
async function challengedSignIn(ctx: AuthContext, req: HttpRequest, form: Map<string, string>): Promise<{ refused: HttpResult } | CheckedSignIn & { challengeHash: Buffer; email: string; app: { id: string; slug: string } }> {
  const signIn = await checkedSignIn(ctx, req, form);
  if ('refused' in signIn) return signIn;
  const { request, client, csrf } = signIn;
  const email = (request.identifier as Identifier | null)?.value ?? '';
  const challengeHash = request.second_factor_challenge_hash;
  if (!challengeHash) return { refused: await addressPage(ctx, client, request.id, csrf, email, 'Enter your e-mail address first.', 400) };
  return { ...signIn, challengeHash, email, app: { id: client.app_id, slug: client.app_slug } };
}

function browserSessionAfter(browserHash: Buffer, appId: string): AfterSecondFactor<BrowserSessionRow> {
  return async (tx, login) => ({ familyId: null, result: await startBrowserSession(tx, browserHash, appId, login.userId, login.amr, login.nowMs) });
}

/** The enrol step: the key waiting for its first code (the same one when shown again). */
export async function enrolmentPage(ctx: AuthContext, client: OAuthClientRow, requestId: string, csrf: string, email: string, challengeHash: Buffer, error: string | null, status = 200): Promise<HttpResult> {
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
