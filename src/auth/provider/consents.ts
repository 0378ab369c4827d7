// Consent to third-party clients: a client that is not first-party (one that registered itself,
// a metadata document, or an admin-made client with first_party false) gets a code only for
// scopes the user agreed to on the consent page, remembered per user and client (more scopes
// later ask again, for the new ones). prompt=consent asks whatever was remembered. A consent is
// listed and revoked through the sessions API (the user's app) and the admin API; revoking it
// revokes the client's sessions of that user, so its refresh tokens stop working.
import type { RequestOrigin } from '../audit.js';
import type { AuthContext } from '../context.js';
import { authError } from '../errors.js';
import { insertAuditEvent } from '../queries/audit-events.js';
import type { OAuthClientRow } from '../queries/oauth-clients.js';
import { deleteConsent, findConsentScopes, listConsents, lockFamiliesOfClient, upsertConsent, type ConsentRow } from '../queries/oauth-consents.js';
import { revokeRefreshFamilies } from '../queries/refresh-tokens.js';
import type { TransactionSql } from '../database/client.js';
import { isUuid } from '../service/credentials.js';

/** Whether the user must be asked before the client gets a code for these scopes. */
export async function needsConsent(ctx: AuthContext, client: OAuthClientRow, userId: string, scopes: string[], prompt: string[]): Promise<boolean> {
  if (prompt.includes('consent')) return true;
  if (client.first_party) return false;
  const granted = await findConsentScopes(ctx.sql, userId, client.id);
  return granted === null || scopes.some((scope) => !granted.includes(scope));
}

export async function recordConsent(tx: TransactionSql, client: OAuthClientRow, userId: string, scopes: string[], origin: RequestOrigin, nowMs: number): Promise<void> {
  const now = new Date(nowMs);
  await upsertConsent(tx, { userId, clientId: client.id, appId: client.app_id, scopes, now });
  await insertAuditEvent(tx, {
    type: 'oauth.consent_granted', actor: 'anonymous', appId: client.app_id, userId, ip: origin.ip, userAgent: origin.userAgent,
    details: { client_id: client.metadata_url ?? client.id, scopes }, now,
  });
}

export interface ConsentJson {
  client_id: string;
  client_name: string;
  scopes: string[];
  granted_at: string;
}

export async function listUserConsents(ctx: AuthContext, userId: string, appId: string | null): Promise<ConsentJson[]> {
  return (await listConsents(ctx.sql, userId, appId)).map(consentJson);
}

/**
 * Revokes the consent (404 CONSENT_NOT_FOUND when the user gave none to this client, in this
 * app when appId is set) and the client's live sessions of the user; records oauth.consent_revoked.
 */
export async function revokeConsent(ctx: AuthContext, userId: string, clientId: string, appId: string | null, actor: 'app' | 'admin', origin: RequestOrigin): Promise<number> {
  const internalId = await internalClientId(ctx, clientId);
  if (internalId === null) throw authError('CONSENT_NOT_FOUND');
  const now = new Date(ctx.clock.now());
  return ctx.sql.begin(async (tx) => {
    const deleted = await deleteConsent(tx, userId, internalId, appId);
    if (!deleted) throw authError('CONSENT_NOT_FOUND');
    const families = await lockFamiliesOfClient(tx, userId, internalId);
    const revoked = families.length === 0 ? 0 : await revokeRefreshFamilies(tx, {
      familyIds: families.map((f) => f.id), currentTokenIds: families.map((f) => f.current_token_id), now, reason: 'logout',
    });
    await insertAuditEvent(tx, {
      type: 'oauth.consent_revoked', actor, appId: deleted.app_id, userId, ip: origin.ip, userAgent: origin.userAgent,
      details: { client_id: clientId, sessions_revoked: revoked }, now,
    });
    return revoked;
  });
}

/** A client's row id from its public client_id (a UUID, or a metadata document URL); null when unknown. */
async function internalClientId(ctx: AuthContext, clientId: string): Promise<string | null> {
  if (isUuid(clientId)) return clientId.toLowerCase();
  const [row] = await ctx.sql<{ id: string }[]>`select id from oauth_clients where metadata_url = ${clientId}`;
  return row?.id ?? null;
}

function consentJson(row: ConsentRow): ConsentJson {
  return { client_id: row.metadata_url ?? row.client_id, client_name: row.client_name, scopes: row.scopes, granted_at: row.granted_at.toISOString() };
}
