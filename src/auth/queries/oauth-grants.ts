// Queries on what the authorization endpoint hands out (migration 0022): browser sessions of the
// hosted page, sign-ins in progress, authorization codes.
import type { Queryable } from '../database/client.js';

export interface BrowserSessionRow {
  id: string;
  app_id: string;
  user_id: string;
  auth_time: Date;
  amr: string[];
}

/** The live browser session of this browser in this app (not ended, not expired, user not deleted). */
export async function findBrowserSession(sql: Queryable, browserHash: Buffer, appId: string, now: Date): Promise<BrowserSessionRow | undefined> {
  const [row] = await sql<BrowserSessionRow[]>`
    select s.id, s.app_id, s.user_id, s.auth_time, s.amr
    from oauth_browser_sessions s
    join users u on u.id = s.user_id
    where s.browser_hash = ${browserHash} and s.app_id = ${appId} and s.ended_at is null
      and s.expires_at > ${now} and u.deleted_at is null
  `;
  return row;
}

/** Ends the browser's previous session in the app, if any, and starts a new one. */
export async function replaceBrowserSession(sql: Queryable, session: {
  id: string; browserHash: Buffer; appId: string; userId: string; amr: string[]; now: Date; expiresAt: Date;
}): Promise<void> {
  await sql`
    update oauth_browser_sessions
    set ended_at = ${session.now}
    where browser_hash = ${session.browserHash} and app_id = ${session.appId} and ended_at is null
  `;
  await sql`
    insert into oauth_browser_sessions (id, browser_hash, app_id, user_id, auth_time, amr, created_at, expires_at)
    values (${session.id}, ${session.browserHash}, ${session.appId}, ${session.userId}, ${session.now}, ${session.amr}::text[], ${session.now}, ${session.expiresAt})
  `;
}

/** Ends the browser session; returns false when it had already ended. */
export async function endBrowserSession(sql: Queryable, id: string, now: Date): Promise<boolean> {
  const ended = await sql`
    update oauth_browser_sessions
    set ended_at = ${now}
    where id = ${id} and ended_at is null
  `;
  return ended.count > 0;
}

/** The browser sessions of this browser that a logout ends: every live one, or those of one user. */
export async function findLiveBrowserSessions(sql: Queryable, browserHash: Buffer): Promise<{ id: string; app_id: string; user_id: string }[]> {
  return sql<{ id: string; app_id: string; user_id: string }[]>`
    select id, app_id, user_id
    from oauth_browser_sessions
    where browser_hash = ${browserHash} and ended_at is null
  `;
}

/** The live families started from codes of this browser session, locked for revocation. */
export async function lockFamiliesOfBrowserSession(sql: Queryable, browserSessionId: string): Promise<{ id: string; current_token_id: string }[]> {
  return sql<{ id: string; current_token_id: string }[]>`
    select id, current_token_id
    from refresh_families
    where browser_session_id = ${browserSessionId} and revoked_at is null
    order by id
    for update
  `;
}

export interface SignInRequestRow {
  id: string;
  browser_hash: Buffer;
  csrf_hash: Buffer;
  client_id: string;
  parameters: Record<string, unknown>;
  identifier: { channel: 'email' | 'phone'; value: string } | null;
  /** The second-factor challenge the sign-in waits on (its hash), once the code was right. */
  second_factor_challenge_hash: Buffer | null;
  expires_at: Date;
}

export async function insertSignInRequest(sql: Queryable, request: {
  id: string; browserHash: Buffer; csrfHash: Buffer; clientId: string; parameters: Record<string, unknown>; now: Date; expiresAt: Date;
}): Promise<void> {
  await sql`
    delete from oauth_sign_in_requests
    where expires_at < ${request.now}
  `;
  await sql`
    insert into oauth_sign_in_requests (id, browser_hash, csrf_hash, client_id, parameters, created_at, expires_at)
    values (${request.id}, ${request.browserHash}, ${request.csrfHash}, ${request.clientId}, ${sql.json(request.parameters as never)}, ${request.now}, ${request.expiresAt})
  `;
}

export async function findSignInRequest(sql: Queryable, id: string, now: Date): Promise<SignInRequestRow | undefined> {
  const [row] = await sql<SignInRequestRow[]>`
    select id, browser_hash, csrf_hash, client_id, parameters, identifier, second_factor_challenge_hash, expires_at
    from oauth_sign_in_requests
    where id = ${id} and expires_at > ${now}
  `;
  return row;
}

export async function setSignInIdentifier(sql: Queryable, id: string, identifier: { channel: string; value: string }): Promise<void> {
  await sql`
    update oauth_sign_in_requests
    set identifier = ${sql.json(identifier)}
    where id = ${id}
  `;
}

/** The upstream flow the sign-in sent its browser to (the SHA-256 of its state). */
export async function setSignInUpstreamState(sql: Queryable, id: string, stateHash: Buffer): Promise<void> {
  await sql`
    update oauth_sign_in_requests
    set upstream_state_hash = ${stateHash}
    where id = ${id}
  `;
}

/** The live sign-in request whose browser went to the upstream flow of this state hash. */
export async function findSignInRequestByUpstreamState(sql: Queryable, stateHash: Buffer, now: Date): Promise<SignInRequestRow | undefined> {
  const [row] = await sql<SignInRequestRow[]>`
    select id, browser_hash, csrf_hash, client_id, parameters, identifier, second_factor_challenge_hash, expires_at
    from oauth_sign_in_requests
    where upstream_state_hash = ${stateHash} and expires_at > ${now}
  `;
  return row;
}

/** A new CSRF token for the request's forms (the page shown after an upstream callback, which carries none). */
export async function setSignInCsrf(sql: Queryable, id: string, csrfHash: Buffer): Promise<void> {
  await sql`
    update oauth_sign_in_requests
    set csrf_hash = ${csrfHash}
    where id = ${id}
  `;
}

/** The second-factor challenge the sign-in now waits on, or null (none, or the page starts over). */
export async function setSignInChallenge(sql: Queryable, id: string, challengeHash: Buffer | null): Promise<void> {
  await sql`
    update oauth_sign_in_requests
    set second_factor_challenge_hash = ${challengeHash}
    where id = ${id}
  `;
}

/** Replaces the request's parameters (a tenant chosen on the page). */
export async function setSignInParameters(sql: Queryable, id: string, parameters: Record<string, unknown>): Promise<void> {
  await sql`
    update oauth_sign_in_requests
    set parameters = ${sql.json(parameters as never)}
    where id = ${id}
  `;
}

/** The tenants where the user has a role in the app, by name. */
export async function listTenantsOfUser(sql: Queryable, appId: string, userId: string): Promise<{ id: string; name: string }[]> {
  return sql<{ id: string; name: string }[]>`
    select t.id, t.name
    from roles r
    join tenants t on t.id = r.tenant_id
    where r.app_id = ${appId} and r.user_id = ${userId}
    order by t.name, t.id
  `;
}

export async function deleteSignInRequest(sql: Queryable, id: string): Promise<void> {
  await sql`
    delete from oauth_sign_in_requests
    where id = ${id}
  `;
}

export interface AuthorizationCodeRow {
  client_id: string;
  app_id: string;
  user_id: string;
  browser_session_id: string | null;
  redirect_uri: string;
  scope: string;
  nonce: string | null;
  code_challenge: string;
  auth_time: Date;
  amr: string[];
  tenant_id: string | null;
  resource: string | null;
  expires_at: Date;
  used_at: Date | null;
  family_id: string | null;
}

export async function insertAuthorizationCode(sql: Queryable, code: {
  hash: Buffer; clientId: string; appId: string; userId: string; browserSessionId: string | null; redirectUri: string; scope: string;
  nonce: string | null; codeChallenge: string; authTime: Date; amr: string[]; tenantId: string | null; resource: string | null; now: Date; expiresAt: Date;
}): Promise<void> {
  await sql`
    delete from oauth_authorization_codes
    where expires_at < ${new Date(code.now.getTime() - 24 * 3600 * 1000)}
  `;
  await sql`
    insert into oauth_authorization_codes (
      code_hash, client_id, app_id, user_id, browser_session_id, redirect_uri, scope, nonce, code_challenge,
      auth_time, amr, tenant_id, resource, created_at, expires_at
    )
    values (
      ${code.hash}, ${code.clientId}, ${code.appId}, ${code.userId}, ${code.browserSessionId}, ${code.redirectUri}, ${code.scope}, ${code.nonce},
      ${code.codeChallenge}, ${code.authTime}, ${code.amr}::text[], ${code.tenantId}, ${code.resource}, ${code.now}, ${code.expiresAt}
    )
  `;
}

/** The code with this hash, locked until the transaction ends: two exchanges of one code are serialised. */
export async function lockAuthorizationCode(sql: Queryable, hash: Buffer): Promise<AuthorizationCodeRow | undefined> {
  const [row] = await sql<AuthorizationCodeRow[]>`
    select client_id, app_id, user_id, browser_session_id, redirect_uri, scope, nonce, code_challenge, auth_time, amr, tenant_id, resource, expires_at, used_at, family_id
    from oauth_authorization_codes
    where code_hash = ${hash}
    for update
  `;
  return row;
}

export async function markAuthorizationCodeUsed(sql: Queryable, hash: Buffer, familyId: string, now: Date): Promise<void> {
  await sql`
    update oauth_authorization_codes
    set used_at = ${now}, family_id = ${familyId}
    where code_hash = ${hash}
  `;
}

/** Which client a session belongs to and what it was granted (null client: a session of the JSON API). */
export async function findFamilyGrant(sql: Queryable, tokenHash: Buffer): Promise<{ client_id: string | null; scope: string | null; resource: string | null; family_id: string } | undefined> {
  const [row] = await sql<{ client_id: string | null; scope: string | null; resource: string | null; family_id: string }[]>`
    select f.client_id, f.scope, f.resource, f.id as family_id
    from refresh_tokens t
    join refresh_families f on f.id = t.family_id
    where t.token_hash = ${tokenHash}
  `;
  return row;
}
