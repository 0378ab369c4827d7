// Upstream identity provider routes: the admin's configuration of an app's providers, the
// sign-in flow an app's backend relays (start, callback), and the user's linked identities.
import type { HttpRequest, HttpResult } from '../../http/request.js';
import { compileBody } from '../../http/validation.js';
import { requestOrigin } from '../audit.js';
import type { AuthContext } from '../context.js';
import {
  UpstreamProviderBody, type IdentitiesBody, type IdentityRemoveBody, type UpstreamCallbackBody, type UpstreamProvidersBody, type UpstreamStartBody,
} from '../schemas.js';
import { getApp, getUser } from '../service/admin.js';
import type { AuthenticatedApp } from '../service/credentials.js';
import {
  createUpstreamProvider, deleteUpstreamProviderOfApp, getUpstreamProviderRow, listUpstreamProvidersOfApp, replaceUpstreamProvider,
  testUpstreamProvider, upstreamProviderJson,
} from '../service/upstream-providers.js';
import {
  finishUpstreamFlow, listIdentitiesOfUserForAdmin, listOwnIdentities, listSignInProviders, removeOwnIdentity, startUpstreamFlow,
} from '../service/upstream-sign-in.js';

type AppInput<B> = { app: AuthenticatedApp; body: B };
type NoInput = Record<string, never>;
const upstreamProviderBody = compileBody(UpstreamProviderBody);

/** POST /admin/apps/:app_id/upstream-providers → 201 the provider (no secret: `has_client_secret`). */
export async function handleCreateUpstreamProvider(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  const app = await getApp(ctx, req.params.app_id!);
  const body = upstreamProviderBody.parse(req);
  return { status: 201, body: await createUpstreamProvider(ctx, app.id, body, requestOrigin(ctx, req)) };
}

/** GET /admin/apps/:app_id/upstream-providers → 200 `{providers: [...]}`. */
export async function handleListUpstreamProviders(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  const app = await getApp(ctx, req.params.app_id!);
  return { body: { providers: (await listUpstreamProvidersOfApp(ctx, app.id)).map(upstreamProviderJson) } };
}

/** GET /admin/apps/:app_id/upstream-providers/:provider_id → 200 the provider. */
export async function handleGetUpstreamProvider(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  const app = await getApp(ctx, req.params.app_id!);
  return { body: upstreamProviderJson(await getUpstreamProviderRow(ctx, app.id, req.params.provider_id!)) };
}

/** PUT /admin/apps/:app_id/upstream-providers/:provider_id → 200 the provider. */
export async function handlePutUpstreamProvider(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  const app = await getApp(ctx, req.params.app_id!);
  const body = upstreamProviderBody.parse(req);
  return { body: await replaceUpstreamProvider(ctx, app.id, req.params.provider_id!, body, requestOrigin(ctx, req)) };
}

/** DELETE /admin/apps/:app_id/upstream-providers/:provider_id → 200 `{id, deleted: true}` (its linked identities stay, their provider_id null). */
export async function handleDeleteUpstreamProvider(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  const app = await getApp(ctx, req.params.app_id!);
  await deleteUpstreamProviderOfApp(ctx, app.id, req.params.provider_id!, requestOrigin(ctx, req));
  return { body: { id: req.params.provider_id!.toLowerCase(), deleted: true } };
}

/** POST /admin/apps/:app_id/upstream-providers/:provider_id/test → 200 `{ok: true, issuer, authorization_endpoint}` or 502. */
export async function handleTestUpstreamProvider(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  const app = await getApp(ctx, req.params.app_id!);
  return { body: await testUpstreamProvider(ctx, app.id, req.params.provider_id!) };
}

/** GET /admin/users/:user_id/identities → 200 `{identities: [...]}`. */
export async function handleListUserIdentities(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  const user = await getUser(ctx, req.params.user_id!);
  return { body: { identities: await listIdentitiesOfUserForAdmin(ctx, user.id) } };
}

/** POST /auth/upstream/providers → 200 `{providers: [{id, kind, label}]}`. */
export async function handleListSignInProviders(ctx: AuthContext, { app }: AppInput<UpstreamProvidersBody>): Promise<HttpResult> {
  return { body: { providers: await listSignInProviders(ctx, app) } };
}

/** POST /auth/upstream/start → 200 `{authorization_url, state, expires_in}`. */
export async function handleUpstreamStart(ctx: AuthContext, { app, body }: AppInput<UpstreamStartBody>): Promise<HttpResult> {
  return { body: await startUpstreamFlow(ctx, app, { providerId: body.provider_id, redirectUri: body.redirect_uri, refreshToken: body.refresh_token }) };
}

/** POST /auth/upstream/callback → 200 the body of a code login, or `{identity}` for a flow started with a session. */
export async function handleUpstreamCallback(ctx: AuthContext, { app, body }: AppInput<UpstreamCallbackBody>, req: HttpRequest): Promise<HttpResult> {
  const result = await finishUpstreamFlow(ctx, app, { params: body.params, requestedTenant: body.tenant_id, origin: requestOrigin(ctx, req) });
  return { body: result.kind === 'signed_in' ? result.tokens : { identity: result.identity } };
}

/** POST /auth/identities → 200 `{identities: [...]}`. */
export async function handleListIdentities(ctx: AuthContext, { app, body }: AppInput<IdentitiesBody>): Promise<HttpResult> {
  return { body: { identities: await listOwnIdentities(ctx, app, body.refresh_token) } };
}

/** POST /auth/identities/remove → 200 `{success: true}`. */
export async function handleRemoveIdentity(ctx: AuthContext, { app, body }: AppInput<IdentityRemoveBody>, req: HttpRequest): Promise<HttpResult> {
  await removeOwnIdentity(ctx, app, body.refresh_token, body.identity_id, requestOrigin(ctx, req));
  return { body: { success: true } };
}
