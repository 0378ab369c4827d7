// Passkey routes: the ceremonies (the app's backend relays the browser's options and responses)
// and the user's list; the admin sets each app's relying party.
import type { HttpRequest, HttpResult } from '../../http/request.js';
import { compileBody } from '../../http/validation.js';
import { requestOrigin } from '../audit.js';
import type { AuthContext } from '../context.js';
import {
  PasskeySettingsBody, type PasskeyLoginOptionsBody, type PasskeyLoginVerifyBody, type PasskeyRegisterOptionsBody,
  type PasskeyRegisterVerifyBody, type PasskeyRemoveBody,
} from '../schemas.js';
import { getApp } from '../service/admin.js';
import type { AuthenticatedApp } from '../service/credentials.js';
import {
  finishPasskeyLogin, finishPasskeyRegistration, listOwnPasskeys, removeOwnPasskey, setPasskeySettings, startPasskeyLogin, startPasskeyRegistration,
} from '../service/passkeys.js';

type AppInput<B> = { app: AuthenticatedApp; body: B };
const passkeySettingsBody = compileBody(PasskeySettingsBody);

/** 200 `{ceremony_id, options}`: pass `options` to navigator.credentials.create (PublicKeyCredential.parseCreationOptionsFromJSON). */
export async function handlePasskeyRegisterOptions(ctx: AuthContext, { app, body }: AppInput<PasskeyRegisterOptionsBody>): Promise<HttpResult> {
  return { body: await startPasskeyRegistration(ctx, app, body.refresh_token) };
}

/** 201 the passkey `{id, name, created_at, last_used_at, backup_eligible, backed_up, transports, aaguid}`. */
export async function handlePasskeyRegisterVerify(ctx: AuthContext, { app, body }: AppInput<PasskeyRegisterVerifyBody>, req: HttpRequest): Promise<HttpResult> {
  const passkey = await finishPasskeyRegistration(ctx, app, {
    refreshToken: body.refresh_token, ceremonyId: body.ceremony_id, response: body.response, name: body.name, origin: requestOrigin(ctx, req),
  });
  return { status: 201, body: passkey };
}

/** 200 `{passkeys: [...]}`. */
export async function handleListPasskeys(ctx: AuthContext, { app, body }: AppInput<PasskeyRegisterOptionsBody>): Promise<HttpResult> {
  return { body: { passkeys: await listOwnPasskeys(ctx, app, body.refresh_token) } };
}

/** 200 `{success: true}`. */
export async function handleRemovePasskey(ctx: AuthContext, { app, body }: AppInput<PasskeyRemoveBody>, req: HttpRequest): Promise<HttpResult> {
  await removeOwnPasskey(ctx, app, body.refresh_token, body.passkey_id, requestOrigin(ctx, req));
  return { body: { success: true } };
}

/** 200 `{ceremony_id, options}`: pass `options` to navigator.credentials.get. */
export async function handlePasskeyLoginOptions(ctx: AuthContext, { app }: AppInput<PasskeyLoginOptionsBody>): Promise<HttpResult> {
  return { body: await startPasskeyLogin(ctx, app) };
}

/** 200 the body of a code login: `{access_token, refresh_token, user_id, expires_in, token_type}`. */
export async function handlePasskeyLoginVerify(ctx: AuthContext, { app, body }: AppInput<PasskeyLoginVerifyBody>, req: HttpRequest): Promise<HttpResult> {
  return { body: await finishPasskeyLogin(ctx, app, { ceremonyId: body.ceremony_id, response: body.response, requestedTenant: body.tenant_id, origin: requestOrigin(ctx, req) }) };
}

/** PUT /admin/apps/:app_id/passkeys → 200 `{app_id, rp_id, rp_name, origins, updated_at}`. */
export async function handlePutPasskeySettings(ctx: AuthContext, _: Record<string, never>, req: HttpRequest): Promise<HttpResult> {
  const app = await getApp(ctx, req.params.app_id!);
  const body = passkeySettingsBody.parse(req);
  const row = await setPasskeySettings(ctx, app.id, { rpId: body.rp_id, rpName: body.rp_name, origins: body.origins });
  return { body: { app_id: row.app_id, rp_id: row.rp_id, rp_name: row.rp_name, origins: row.origins, updated_at: row.updated_at.toISOString() } };
}
