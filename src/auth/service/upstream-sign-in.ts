// Sign-in through an app's upstream identity provider, for apps that draw their own pages: the
// app's backend starts a flow (POST /auth/upstream/start), sends the browser to the returned
// URL, and relays what its redirect URI received (POST /auth/upstream/callback), which signs
// in exactly as a code login does (same family, token pair, tenant choice, `login.succeeded`).
//
// Which user an upstream identity is:
//   1. the user already linked to (issuer, subject), whatever the e-mail address says now;
//   2. else, when the provider asserts the address verified AND is trusted for its domain
//      (upstream/presets.ts), the user with that address, created with it when absent;
//   3. else a new user known by this identity only (the address is kept on the identity, for
//      display, and never compared with anyone's). An unverified address equal to an existing
//      user's therefore never reaches that user: the "nOAuth" case.
// A signed-in user links an identity explicitly by starting the flow with their refresh token.
//
// Nothing is written before the provider's answer has passed every check: a forged, replayed
// or failed callback, or an upstream that is down or slow, leaves no user, identity or session.
// The flow itself is used up by the first callback that presents its state, whatever follows.
import { randomUUID } from 'node:crypto';
import { HttpError } from '../../http/errors.js';
import type { RequestOrigin } from '../audit.js';
import type { AuthContext } from '../context.js';
import type { TransactionSql } from '../database/client.js';
import { authError } from '../errors.js';
import { UPSTREAM_FLOW_TTL_MS } from '../limits.js';
import { insertAuditEvent } from '../queries/audit-events.js';
import { listRolesOfUser } from '../queries/roles.js';
import { upsertRole } from '../queries/roles.js';
import { findUpstreamProvider, insertUpstreamFlow, listUpstreamProviders, listVerifiedDomainsOfTenant, takeUpstreamFlow, type UpstreamProviderRow } from '../queries/upstream-providers.js';
import {
  countOtherSignInMethods, deleteIdentity, insertIdentity, listIdentitiesOfUser, lockIdentity, recordIdentityUse, type UserIdentityRow,
} from '../queries/user-identities.js';
import { findOrInsertUser, insertUserWithoutAddress, lockUser, upsertMembership, type UserRow } from '../queries/users.js';
import type { UpstreamProfile } from '../upstream/client.js';
import { trustedForDomain } from '../upstream/presets.js';
import type { AuthenticatedApp } from './credentials.js';
import { acceptInvitationsOnSignIn } from './invitations.js';
import { chooseTenant, startSession, type SessionTokens } from './sessions.js';
import { clientConfigOf, getUpstreamProviderRow } from './upstream-providers.js';
import { presentedSession } from './user-sessions.js';

export interface IdentityJson {
  id: string;
  provider_id: string | null;
  issuer: string;
  subject: string;
  email: string | null;
  email_verified: boolean;
  created_at: string;
  last_used_at: string;
}

/** POST /auth/upstream/providers: what an app's sign-in page shows, one button each. */
export async function listSignInProviders(ctx: AuthContext, app: AuthenticatedApp): Promise<{ id: string; kind: string; label: string }[]> {
  // A tenant's own provider is found by home-realm discovery (tenant-sso.ts), not shown to everyone.
  return (await listUpstreamProviders(ctx.sql, app.id)).filter((p) => p.tenant_id === null).map((p) => ({ id: p.id, kind: p.kind, label: p.label }));
}

/**
 * POST /auth/upstream/start: a new flow (state, nonce, PKCE verifier) and the provider's
 * authorization URL. The redirect URI must be one of the provider's. With a refresh token the
 * flow links the identity to that session's user. 404 UPSTREAM_PROVIDER_NOT_FOUND; 400
 * VALIDATION_ERROR for another redirect URI; 401/403 for the session; 502 UPSTREAM_UNAVAILABLE
 * when the provider's discovery document cannot be had.
 */
export async function startUpstreamFlow(ctx: AuthContext, app: AuthenticatedApp, input: {
  providerId: string; redirectUri: string; refreshToken: string | undefined;
}): Promise<{ authorization_url: string; state: string; expires_in: number }> {
  return startFlow(ctx, app, input, false);
}

/**
 * The hosted sign-in page's start of a flow: its redirect URI is the issuer's own
 * /oauth/upstream/callback (HOSTED_PAGE_CALLBACK), which every provider of the app may use
 * without listing it (the provider's redirect_uris are the app backends' own callbacks); the
 * provider must know it, as it knows theirs.
 */
export async function startUpstreamFlowForPage(ctx: AuthContext, app: AuthenticatedApp, providerId: string): Promise<{ authorization_url: string; state: string; provider: UpstreamProviderRow }> {
  const provider = await getUpstreamProviderRow(ctx, app.id, providerId);
  const started = await startFlow(ctx, app, { providerId: provider.id, redirectUri: `${ctx.issuer}${HOSTED_PAGE_CALLBACK}`, refreshToken: undefined }, true);
  return { ...started, provider };
}

/** The path of the hosted page's upstream callback, on the issuer. */
export const HOSTED_PAGE_CALLBACK = '/oauth/upstream/callback';

async function startFlow(ctx: AuthContext, app: AuthenticatedApp, input: {
  providerId: string; redirectUri: string; refreshToken: string | undefined;
}, hostedPage: boolean): Promise<{ authorization_url: string; state: string; expires_in: number }> {
  const provider = await getUpstreamProviderRow(ctx, app.id, input.providerId);
  if (!hostedPage && !provider.redirect_uris.includes(input.redirectUri)) {
    throw authError('VALIDATION_ERROR', 'Invalid field "redirect_uri": not one of the provider\'s redirect_uris', { details: { field: 'redirect_uri' } });
  }
  const linkUserId = input.refreshToken === undefined ? null : (await presentedSession(ctx, app, input.refreshToken)).userId;
  const { url, secrets } = await ctx.upstream.clients.authorizationUrl(clientConfigOf(ctx, provider), input.redirectUri);
  const nowMs = ctx.clock.now();
  await insertUpstreamFlow(ctx.sql, {
    state: secrets.state, appId: app.id, providerId: provider.id, nonce: secrets.nonce, codeVerifier: secrets.codeVerifier,
    redirectUri: input.redirectUri, linkUserId, now: new Date(nowMs), expiresAt: new Date(nowMs + UPSTREAM_FLOW_TTL_MS),
  });
  return { authorization_url: url, state: secrets.state, expires_in: UPSTREAM_FLOW_TTL_MS / 1000 };
}

export type UpstreamCallbackResult = { kind: 'signed_in'; tokens: SessionTokens } | { kind: 'linked'; identity: IdentityJson };

/**
 * POST /auth/upstream/callback: takes the flow of `params.state`, has the provider check the
 * code, then signs in (or links, for a flow started with a session). 401
 * UPSTREAM_CALLBACK_INVALID for an unknown, expired or used state and for anything the
 * provider refuses or that fails a check; 502 UPSTREAM_UNAVAILABLE; 403 USER_DELETED; 409
 * IDENTITY_LINKED_TO_ANOTHER_USER when linking an identity someone else has. Each refusal is
 * recorded as `login.failed` (method upstream).
 */
export async function finishUpstreamFlow(ctx: AuthContext, app: AuthenticatedApp, input: {
  params: Record<string, string>; requestedTenant: string | null | undefined; origin: RequestOrigin;
}): Promise<UpstreamCallbackResult> {
  const result = await finishUpstreamFlowThen(ctx, app, input, async (tx, login) => {
    const tenant = chooseTenant(login.roles, input.requestedTenant ?? login.ssoTenant, null);
    const familyId = randomUUID();
    return { familyId, result: await startSession(tx, ctx, { app, userId: login.userId, familyId, tenant, nowMs: login.nowMs, amr: login.amr }) };
  });
  return result.kind === 'linked' ? result : { kind: 'signed_in', tokens: result.result };
}

/**
 * What an upstream sign-in leads to, in its transaction: a session of the JSON API, or the hosted
 * page's browser session. `ssoTenant`: the tenant of the provider when the user has a role in it
 * (a sign-in through a tenant's provider is for that tenant unless another was asked for).
 */
export type AfterUpstreamSignIn<T> = (tx: TransactionSql, login: {
  userId: string; roles: Awaited<ReturnType<typeof listRolesOfUser>>; ssoTenant: string | null; amr: string[]; nowMs: number;
}) => Promise<{ familyId: string | null; result: T }>;

/** finishUpstreamFlow's checks, refusals and audit trail, with `then` ending a sign-in (a link ends as before). */
export async function finishUpstreamFlowThen<T>(ctx: AuthContext, app: AuthenticatedApp, input: {
  params: Record<string, string>; origin: RequestOrigin;
}, then: AfterUpstreamSignIn<T>): Promise<{ kind: 'linked'; identity: IdentityJson } | { kind: 'signed_in'; result: T }> {
  const audit = { actor: 'app' as const, appId: app.id, ip: input.origin.ip, userAgent: input.origin.userAgent };
  let providerId: string | null = null;
  try {
    const state = input.params.state;
    const flow = state ? await takeUpstreamFlow(ctx.sql, app.id, state, new Date(ctx.clock.now())) : undefined;
    if (!flow) throw authError('UPSTREAM_CALLBACK_INVALID', 'The state is unknown, expired or already used; start the sign-in again');
    providerId = flow.provider_id;
    const provider = (await findUpstreamProvider(ctx.sql, app.id, flow.provider_id))!;
    // A tenant's provider is trusted for the domains the tenant proved, besides those listed.
    const trustedDomains = provider.tenant_id
      ? [...provider.trusted_email_domains, ...(await listVerifiedDomainsOfTenant(ctx.sql, provider.tenant_id))]
      : provider.trusted_email_domains;
    const profile = await ctx.upstream.clients.exchange(clientConfigOf(ctx, provider), flow.redirect_uri, input.params, {
      state: flow.state, nonce: flow.nonce, codeVerifier: flow.code_verifier,
    });
    const nowMs = ctx.clock.now();
    const now = new Date(nowMs);
    if (flow.link_user_id) {
      const identity = await ctx.sql.begin((tx) => linkToUser(tx, provider, profile, flow.link_user_id!, { ...audit, now }));
      return { kind: 'linked', identity: identityJson(identity) };
    }
    const signedIn = await ctx.sql.begin(async (tx): Promise<T> => {
      const { user, identity } = await userOfIdentity(tx, { ...provider, trusted_email_domains: trustedDomains }, profile, { ...audit, now });
      if (user.deleted_at) throw authError('USER_DELETED');
      await upsertMembership(tx, app.id, user.id, now);
      // Only an address the provider proved and is trusted for is on the user (see the header).
      await acceptInvitationsOnSignIn(tx, app.id, user, input.origin, now);
      if (provider.tenant_id && provider.default_role) await provisionIntoTenant(tx, provider, user.id, { ...audit, now });
      // Through a tenant's provider the token is for that tenant, unless the login asked for another.
      const roles = await listRolesOfUser(tx, app.id, user.id);
      const ssoTenant = roles.some((r) => r.tenant_id === provider.tenant_id) ? provider.tenant_id : null;
      // `fed`: signed in at another provider (this service's value; RFC 8176 names none for federation).
      const { familyId, result } = await then(tx, { userId: user.id, roles, ssoTenant, amr: ['fed'], nowMs });
      await insertAuditEvent(tx, {
        ...audit, now, type: 'login.succeeded', userId: user.id, familyId,
        details: { method: 'upstream', provider_id: provider.id, identity_id: identity.id },
      });
      return result;
    }) as T;
    return { kind: 'signed_in', result: signedIn };
  } catch (error) {
    // The transaction rolled back: the failure is recorded on its own.
    if (error instanceof HttpError) {
      await insertAuditEvent(ctx.sql, {
        ...audit, now: new Date(ctx.clock.now()), type: 'login.failed',
        details: { method: 'upstream', provider_id: providerId, reason: error.code, message: error.message },
      });
    }
    throw error;
  }
}

/** Rules 1 to 3 of the header; links the identity when it is new. */
async function userOfIdentity(tx: TransactionSql, provider: UpstreamProviderRow, profile: UpstreamProfile, audit: AuditBase): Promise<{ user: UserRow; identity: UserIdentityRow }> {
  const existing = await lockIdentity(tx, profile.issuer, profile.subject);
  if (existing) {
    const user = await lockUser(tx, existing.user_id);
    await recordIdentityUse(tx, existing.id, { email: profile.email.address, emailVerified: profile.email.verified, now: audit.now });
    return { user: user!, identity: existing };
  }
  const { address, verified } = profile.email;
  const joinsByEmail = address !== null && verified && trustedForDomain(provider.kind, provider.trusted_email_domains, address, profile.claims);
  const user = joinsByEmail
    ? await findOrInsertUser(tx, { channel: 'email', value: address }, audit.now)
    : await insertUserWithoutAddress(tx, audit.now);
  const identity = await insertNewIdentity(tx, provider, profile, user.id, audit.now);
  await insertAuditEvent(tx, {
    ...audit, type: 'identity.linked', userId: user.id,
    details: { identity_id: identity.id, provider_id: provider.id, issuer: profile.issuer, subject: profile.subject, by: joinsByEmail ? 'verified_email' : 'new_identity' },
  });
  return { user, identity };
}

/** Enterprise SSO: a user without a role in the provider's tenant gets its default role (an existing role is kept). */
async function provisionIntoTenant(tx: TransactionSql, provider: UpstreamProviderRow, userId: string, audit: AuditBase): Promise<void> {
  const roles = await listRolesOfUser(tx, provider.app_id, userId);
  if (roles.some((r) => r.tenant_id === provider.tenant_id)) return;
  await upsertRole(tx, { appId: provider.app_id, userId, tenantId: provider.tenant_id!, role: provider.default_role!, now: audit.now });
  await insertAuditEvent(tx, {
    ...audit, type: 'role.assigned', userId, details: { tenant_id: provider.tenant_id, role: provider.default_role, provider_id: provider.id },
  });
}

/** An explicit link from a signed-in session; linking an identity the user already has is a no-op. */
async function linkToUser(tx: TransactionSql, provider: UpstreamProviderRow, profile: UpstreamProfile, userId: string, audit: AuditBase): Promise<UserIdentityRow> {
  const user = await lockUser(tx, userId);
  if (!user || user.deleted_at) throw authError('USER_DELETED');
  const existing = await lockIdentity(tx, profile.issuer, profile.subject);
  if (existing) {
    if (existing.user_id !== userId) throw authError('IDENTITY_LINKED_TO_ANOTHER_USER');
    return existing;
  }
  const identity = await insertNewIdentity(tx, provider, profile, userId, audit.now);
  await insertAuditEvent(tx, {
    ...audit, type: 'identity.linked', userId,
    details: { identity_id: identity.id, provider_id: provider.id, issuer: profile.issuer, subject: profile.subject, by: 'session' },
  });
  return identity;
}

async function insertNewIdentity(tx: TransactionSql, provider: UpstreamProviderRow, profile: UpstreamProfile, userId: string, now: Date): Promise<UserIdentityRow> {
  const identity = await insertIdentity(tx, {
    id: randomUUID(), userId, providerId: provider.id, issuer: profile.issuer, subject: profile.subject,
    email: profile.email.address, emailVerified: profile.email.verified, now,
  });
  // A concurrent first sign-in of the same identity won; this one rolls back and may simply retry.
  if (!identity) throw authError('UPSTREAM_CALLBACK_INVALID', 'The identity was linked by a sign-in at the same moment; start again');
  return identity;
}

/** POST /auth/identities: the identities linked to the user of the presented session. */
export async function listOwnIdentities(ctx: AuthContext, app: AuthenticatedApp, refreshToken: string): Promise<IdentityJson[]> {
  const { userId } = await presentedSession(ctx, app, refreshToken);
  return (await listIdentitiesOfUser(ctx.sql, userId)).map(identityJson);
}

/** GET /admin/users/:user_id/identities. */
export async function listIdentitiesOfUserForAdmin(ctx: AuthContext, userId: string): Promise<IdentityJson[]> {
  return (await listIdentitiesOfUser(ctx.sql, userId)).map(identityJson);
}

/**
 * POST /auth/identities/remove: unlinks one identity of the user. 404 IDENTITY_NOT_FOUND (also
 * for another user's); 409 LAST_SIGN_IN_METHOD when the user would have no way left to sign in
 * (no address for a code, no passkey, no other identity). The user's row lock orders two
 * removals at once, so they cannot each leave the other as the last one.
 */
export async function removeOwnIdentity(ctx: AuthContext, app: AuthenticatedApp, refreshToken: string, identityId: string, origin: RequestOrigin): Promise<void> {
  const { userId } = await presentedSession(ctx, app, refreshToken);
  const now = new Date(ctx.clock.now());
  await ctx.sql.begin(async (tx) => {
    await lockUser(tx, userId);
    if ((await countOtherSignInMethods(tx, userId, identityId.toLowerCase())) === 0) {
      const own = (await listIdentitiesOfUser(tx, userId)).some((i) => i.id === identityId.toLowerCase());
      throw own ? authError('LAST_SIGN_IN_METHOD') : authError('IDENTITY_NOT_FOUND');
    }
    const removed = await deleteIdentity(tx, userId, identityId.toLowerCase());
    if (!removed) throw authError('IDENTITY_NOT_FOUND');
    await insertAuditEvent(tx, {
      type: 'identity.unlinked', actor: 'app', appId: app.id, userId, ip: origin.ip, userAgent: origin.userAgent, now,
      details: { identity_id: removed.id, provider_id: removed.provider_id, issuer: removed.issuer, subject: removed.subject },
    });
  });
}

type AuditBase = { actor: 'app'; appId: string; ip: string; userAgent: string | null; now: Date };

function identityJson(row: UserIdentityRow): IdentityJson {
  return {
    id: row.id,
    provider_id: row.provider_id,
    issuer: row.issuer,
    subject: row.subject,
    email: row.email,
    email_verified: row.email_verified,
    created_at: row.created_at.toISOString(),
    last_used_at: row.last_used_at.toISOString(),
  };
}
