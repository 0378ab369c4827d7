// POST /auth/otp/request and POST /auth/otp/verify.
import type { HttpRequest, HttpResult } from '../../http/request.js';
import { requestOrigin } from '../audit.js';
import type { AuthContext } from '../context.js';
import { OTP_TTL_MS } from '../limits.js';
import type { OtpRequestBody, OtpVerifyBody } from '../schemas.js';
import type { AuthenticatedApp } from '../service/credentials.js';
import { identifierOf } from '../service/identity.js';
import { requestOtp, verifyOtp } from '../service/login.js';

type AppInput<B> = { app: AuthenticatedApp; body: B };

/** 200 `{success: true, expires_in: 600}` whether or not a user with this address exists. */
export async function handleOtpRequest(ctx: AuthContext, { app, body }: AppInput<OtpRequestBody>, req: HttpRequest): Promise<HttpResult> {
  await requestOtp(ctx, app, identifierOf(body), requestOrigin(ctx, req));
  return { body: { success: true, expires_in: OTP_TTL_MS / 1000 } };
}

/** 200 `{access_token, refresh_token, user_id, expires_in, token_type}`. */
export async function handleOtpVerify(ctx: AuthContext, { app, body }: AppInput<OtpVerifyBody>, req: HttpRequest): Promise<HttpResult> {
  return { body: await verifyOtp(ctx, app, identifierOf(body), body.code, body.tenant_id, requestOrigin(ctx, req)) };
}
