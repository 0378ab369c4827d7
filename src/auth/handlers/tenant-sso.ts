// Enterprise SSO routes: a tenant's e-mail domains (admin) and home-realm discovery (the app's
// backend). The tenant's provider itself is an upstream provider with tenant_id (handlers/upstream.ts).
import type { HttpRequest, HttpResult } from '../../http/request.js';
import { compileBody } from '../../http/validation.js';
import { requestOrigin } from '../audit.js';
import type { AuthContext } from '../context.js';
import { TenantDomainBody, type SsoDiscoverBody } from '../schemas.js';
import { getApp } from '../service/admin.js';
import type { AuthenticatedApp } from '../service/credentials.js';
import { identifierOf } from '../service/identity.js';
import * as sso from '../service/tenant-sso.js';

type NoInput = Record<string, never>;
const domainBody = compileBody(TenantDomainBody);

/** POST /admin/apps/:app_id/tenants/:tenant_id/domains `{domain}` → 201 the claim and the TXT record to publish. */
export async function handleClaimDomain(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  const app = await getApp(ctx, req.params.app_id!);
  const body = domainBody.parse(req);
  return { status: 201, body: await sso.claimDomain(ctx, app.id, req.params.tenant_id!, body.domain) };
}

/** GET /admin/apps/:app_id/tenants/:tenant_id/domains → 200 `{domains: [...]}`. */
export async function handleListDomains(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  const app = await getApp(ctx, req.params.app_id!);
  return { body: { domains: await sso.listDomains(ctx, app.id, req.params.tenant_id!) } };
}

/** POST /admin/apps/:app_id/tenants/:tenant_id/domains/:domain_id/verify → 200 the domain, verified. */
export async function handleVerifyDomain(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  const app = await getApp(ctx, req.params.app_id!);
  return { body: await sso.verifyDomain(ctx, app.id, req.params.tenant_id!, req.params.domain_id!, requestOrigin(ctx, req)) };
}

/** DELETE /admin/apps/:app_id/tenants/:tenant_id/domains/:domain_id → 200 `{id, deleted: true}`. */
export async function handleRemoveDomain(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  const app = await getApp(ctx, req.params.app_id!);
  await sso.removeDomain(ctx, app.id, req.params.tenant_id!, req.params.domain_id!);
  return { body: { id: req.params.domain_id!.toLowerCase(), deleted: true } };
}

/** POST /auth/sso/discover `{email}` → 200 `{sso: false}` or `{sso: true, provider_id, tenant_id, label, required}`. */
export async function handleDiscover(ctx: AuthContext, { app, body }: { app: AuthenticatedApp; body: SsoDiscoverBody }): Promise<HttpResult> {
  return { body: await sso.discoverRealm(ctx, app, identifierOf({ email: body.email }).value) };
}
