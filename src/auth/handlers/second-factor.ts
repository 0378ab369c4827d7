// Second-factor routes: TOTP enrolment and removal by the user (through the app's backend), the
// login's second step, the admin's policies and reset.
import type { HttpRequest, HttpResult } from '../../http/request.js';
import { compileBody } from '../../http/validation.js';
import { requestOrigin } from '../audit.js';
import type { AuthContext } from '../context.js';
import { authError } from '../errors.js';
import {
  AppSecondFactorPolicyBody, TenantSecondFactorPolicyBody, type SecondFactorVerifyBody, type TotpConfirmBody, type TotpEnrollBody, type TotpRemoveBody,
} from '../schemas.js';
import type { AuthenticatedApp } from '../service/credentials.js';
import * as secondFactor from '../service/second-factor.js';

type AppInput<B> = { app: AuthenticatedApp; body: B };
type NoInput = Record<string, never>;
const appPolicyBody = compileBody(AppSecondFactorPolicyBody);
const tenantPolicyBody = compileBody(TenantSecondFactorPolicyBody);

/** POST /auth/second-factor/totp/enroll → 200 `{secret, otpauth_uri}` (show the URI as a QR code). */
export async function handleTotpEnroll(ctx: AuthContext, { app, body }: AppInput<TotpEnrollBody>): Promise<HttpResult> {
  return { body: await secondFactor.startTotpEnrollment(ctx, app, holderOf(body)) };
}

/** POST /auth/second-factor/totp/confirm → 200 `{recovery_codes}`, with the login's tokens when confirmed with a second_factor_token. */
export async function handleTotpConfirm(ctx: AuthContext, { app, body }: AppInput<TotpConfirmBody>, req: HttpRequest): Promise<HttpResult> {
  return { body: await secondFactor.confirmTotpEnrollment(ctx, app, holderOf(body), body.code, requestOrigin(ctx, req)) };
}

/** POST /auth/second-factor/totp/remove → 200 `{success: true}`. */
export async function handleTotpRemove(ctx: AuthContext, { app, body }: AppInput<TotpRemoveBody>, req: HttpRequest): Promise<HttpResult> {
  await secondFactor.removeTotp(ctx, app, body.refresh_token, proofOf(body), requestOrigin(ctx, req));
  return { body: { success: true } };
}

/** POST /auth/second-factor/verify → 200 the body of a code login. */
export async function handleSecondFactorVerify(ctx: AuthContext, { app, body }: AppInput<SecondFactorVerifyBody>, req: HttpRequest): Promise<HttpResult> {
  return { body: await secondFactor.completeSecondFactor(ctx, app, { challengeToken: body.second_factor_token, ...proofOf(body), origin: requestOrigin(ctx, req) }) };
}

/** GET /admin/apps/:app_id/second-factor-policy → 200 `{policy, tenants: [{tenant_id, policy}]}`. */
export async function handleGetSecondFactorPolicy(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  return { body: await secondFactor.getSecondFactorPolicies(ctx, req.params.app_id!) };
}

/** PUT /admin/apps/:app_id/second-factor-policy `{policy}` → 200 the policies. */
export async function handlePutAppSecondFactorPolicy(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  const body = appPolicyBody.parse(req);
  await secondFactor.putSecondFactorPolicy(ctx, req.params.app_id!, null, body.policy);
  return { body: await secondFactor.getSecondFactorPolicies(ctx, req.params.app_id!) };
}

/** PUT /admin/apps/:app_id/tenants/:tenant_id/second-factor-policy `{policy | null}` → 200 the policies. */
export async function handlePutTenantSecondFactorPolicy(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  const body = tenantPolicyBody.parse(req);
  await secondFactor.putSecondFactorPolicy(ctx, req.params.app_id!, req.params.tenant_id!, body.policy);
  return { body: await secondFactor.getSecondFactorPolicies(ctx, req.params.app_id!) };
}

/** DELETE /admin/users/:user_id/second-factor → 200 `{reset: true | false}` (false: the user had none). */
export async function handleResetSecondFactor(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  return { body: await secondFactor.resetSecondFactor(ctx, req.params.user_id!, requestOrigin(ctx, req)) };
}

function holderOf(body: { refresh_token?: string; second_factor_token?: string }): secondFactor.FactorHolder {
  if ((body.refresh_token === undefined) === (body.second_factor_token === undefined)) {
    throw authError('VALIDATION_ERROR', 'Give exactly one of "refresh_token" or "second_factor_token"');
  }
  return body.refresh_token !== undefined ? { refreshToken: body.refresh_token } : { challengeToken: body.second_factor_token! };
}

function proofOf(body: { code?: string; recovery_code?: string }): { code?: string; recoveryCode?: string } {
  if ((body.code === undefined) === (body.recovery_code === undefined)) throw authError('VALIDATION_ERROR', 'Give exactly one of "code" or "recovery_code"');
  return body.code !== undefined ? { code: body.code } : { recoveryCode: body.recovery_code! };
}
