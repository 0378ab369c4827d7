// Passkeys (WebAuthn), verified with @simplewebauthn/server. Each app is its own relying party
// (app_passkey_settings: RP ID, name, allowed origins). A user who logged in registers passkeys
// (options -> attestation) through the app's backend, identified as in the sessions API by the
// live refresh token of their session; a login (options -> assertion) starts a session exactly
// as a code login does (same family, token pair, tenant choice, audit `login.succeeded`).
//
// Rules of the WebAuthn specification (Level 3, 7.1 and 7.2) enforced here or by the library:
// - user verification is required in both ceremonies (the UV flag must be set);
// - the challenge is single-use: a ceremony row is deleted by the one verification that takes
//   it, so a replayed attestation or assertion finds no challenge;
// - the origin of clientDataJSON must be one of the app's origins, the rpIdHash that of its RP ID;
// - signature counter: when the stored or the presented counter is non-zero, the presented one
//   must be greater (else a cloned authenticator is assumed and the login refused); the library
//   throws, the credential's row lock orders concurrent assertions of one credential;
// - backup flags: BE (backup eligible) is fixed at registration, an assertion whose BE differs
//   is refused; BS (backed up) may change and is stored on each use; BS without BE is invalid
//   (the library refuses it).
import { randomUUID } from 'node:crypto';
import type { AuthenticationResponseJSON, RegistrationResponseJSON, verifyAuthenticationResponse, verifyRegistrationResponse } from '@simplewebauthn/server';
import { HttpError } from '../../http/errors.js';
import type { RequestOrigin } from '../audit.js';
import type { AuthContext } from '../context.js';
import { isUniqueViolation, type TransactionSql } from '../database/client.js';
import { authError } from '../errors.js';
import { PASSKEY_CEREMONY_TTL_MS } from '../limits.js';
import { MAX_CREDENTIAL_ID_BYTES } from '../schemas.js';
import { insertAuditEvent } from '../queries/audit-events.js';
import {
  deletePasskey, findPasskeySettings, insertPasskey, insertPasskeyCeremony, listPasskeysOfUser, lockPasskeyByCredentialId,
  recordPasskeyUse, takePasskeyCeremony, upsertPasskeySettings, type PasskeyRow, type PasskeySettingsRow,
} from '../queries/passkeys.js';
import { listRolesOfUser } from '../queries/roles.js';
import { findUser, lockUser } from '../queries/users.js';
import type { AuthenticatedApp } from './credentials.js';
import { isUuid } from './credentials.js';
import { acceptInvitationsOnSignIn } from './invitations.js';
import { refuseIfSsoRequired } from './tenant-sso.js';
import { chooseTenant, startSession, type SessionTokens } from './sessions.js';
import { presentedSession } from './user-sessions.js';

// The library (and its ASN.1 and X.509 dependencies, some 200 modules) is loaded by the first
// ceremony, not at start-up: every worker thread and every restart would pay for it otherwise.
let webauthnLibrary: Promise<typeof import('@simplewebauthn/server')> | null = null;
const webauthn = (): Promise<typeof import('@simplewebauthn/server')> => (webauthnLibrary ??= import('@simplewebauthn/server'));

export interface PasskeyJson {
  id: string;
  name: string;
  created_at: string;
  last_used_at: string | null;
  backup_eligible: boolean;
  backed_up: boolean;
  transports: string[];
  aaguid: string;
}

/** PUT /admin/apps/:app_id/passkeys: the app's relying party. Origins: scheme, host and port only. */
export async function setPasskeySettings(ctx: AuthContext, appId: string, settings: { rpId: string; rpName: string; origins: string[] }): Promise<PasskeySettingsRow> {
  for (const origin of settings.origins) {
    let parsed: URL | null = null;
    try { parsed = new URL(origin); } catch { /* reported below */ }
    if (!parsed || parsed.origin !== origin || (parsed.protocol !== 'https:' && parsed.hostname !== 'localhost')) {
      throw authError('VALIDATION_ERROR', `Invalid field "origins": "${origin}" is not an https origin (scheme://host[:port], http only for localhost)`, { details: { field: 'origins' } });
    }
    const host = parsed.hostname;
    if (host !== settings.rpId && !host.endsWith(`.${settings.rpId}`)) {
      throw authError('VALIDATION_ERROR', `Invalid field "origins": "${origin}" is not on the RP ID "${settings.rpId}" or a subdomain of it`, { details: { field: 'origins' } });
    }
  }
  return upsertPasskeySettings(ctx.sql, { appId, ...settings, now: new Date(ctx.clock.now()) });
}

async function settingsOf(ctx: AuthContext, app: AuthenticatedApp): Promise<PasskeySettingsRow> {
  const settings = await findPasskeySettings(ctx.sql, app.id);
  if (!settings) throw authError('PASSKEYS_NOT_CONFIGURED');
  return settings;
}

/** POST /auth/passkeys/register/options: creation options for the user of the presented session. */
export async function startPasskeyRegistration(ctx: AuthContext, app: AuthenticatedApp, refreshToken: string): Promise<{ ceremony_id: string; options: unknown }> {
  const { userId } = await presentedSession(ctx, app, refreshToken);
  const settings = await settingsOf(ctx, app);
  const user = (await findUser(ctx.sql, userId))!;
  const existing = await listPasskeysOfUser(ctx.sql, app.id, userId);
  const options = await (await webauthn()).generateRegistrationOptions({
    rpName: settings.rp_name,
    rpID: settings.rp_id,
    userName: user.email ?? user.phone ?? user.id,
    userID: Buffer.from(user.id.replaceAll('-', ''), 'hex'),
    attestationType: 'none',
    excludeCredentials: existing.map((p) => ({ id: p.credential_id, transports: p.transports })),
    authenticatorSelection: { residentKey: 'required', userVerification: 'required' },
    timeout: PASSKEY_CEREMONY_TTL_MS,
  });
  const ceremonyId = randomUUID();
  const nowMs = ctx.clock.now();
  await insertPasskeyCeremony(ctx.sql, {
    id: ceremonyId, appId: app.id, userId, kind: 'registration', challenge: options.challenge,
    expiresAt: new Date(nowMs + PASSKEY_CEREMONY_TTL_MS), now: new Date(nowMs),
  });
  return { ceremony_id: ceremonyId, options };
}

/** POST /auth/passkeys/register/verify: verifies the attestation and stores the passkey (201). */
export async function finishPasskeyRegistration(ctx: AuthContext, app: AuthenticatedApp, input: {
  refreshToken: string; ceremonyId: string; response: unknown; name: string | undefined; origin: RequestOrigin;
}): Promise<PasskeyJson> {
  const { userId } = await presentedSession(ctx, app, input.refreshToken);
  const settings = await settingsOf(ctx, app);
  const now = new Date(ctx.clock.now());
  const ceremony = isUuid(input.ceremonyId) ? await takePasskeyCeremony(ctx.sql, { id: input.ceremonyId, appId: app.id, kind: 'registration', now }) : undefined;
  if (!ceremony || ceremony.user_id !== userId) throw authError('PASSKEY_INVALID', 'The ceremony is unknown, expired, used or of another user');
  let verified: Awaited<ReturnType<typeof verifyRegistrationResponse>>;
  try {
    verified = await (await webauthn()).verifyRegistrationResponse({
      response: input.response as RegistrationResponseJSON,
      expectedChallenge: ceremony.challenge,
      expectedOrigin: settings.origins,
      expectedRPID: settings.rp_id,
      requireUserVerification: true,
    });
  } catch (error) {
    throw authError('PASSKEY_INVALID', undefined, { cause: error });
  }
  if (!verified.verified) throw authError('PASSKEY_INVALID');
  const info = verified.registrationInfo;
  // The credential id stored is the one in the authenticator data, which the client's `id` must
  // name: a login looks the passkey up by its `id`. WebAuthn bounds it to 1023 bytes.
  if (Buffer.from(info.credential.id, 'base64url').length > MAX_CREDENTIAL_ID_BYTES) throw authError('PASSKEY_CREDENTIAL_ID_TOO_LONG');
  if (info.credential.id !== (input.response as RegistrationResponseJSON).id) throw authError('PASSKEY_CREDENTIAL_ID_MISMATCH');
  try {
    return await ctx.sql.begin(async (tx) => {
      const row = await insertPasskey(tx, {
        id: randomUUID(), appId: app.id, userId, credentialId: info.credential.id, publicKey: info.credential.publicKey,
        signCount: info.credential.counter, transports: info.credential.transports ?? [],
        backupEligible: info.credentialDeviceType === 'multiDevice', backedUp: info.credentialBackedUp, aaguid: info.aaguid,
        name: input.name ?? 'Passkey', now,
      });
      await insertAuditEvent(tx, {
        type: 'passkey.registered', actor: 'app', appId: app.id, userId, ip: input.origin.ip, userAgent: input.origin.userAgent,
        details: { passkey_id: row.id, name: row.name }, now,
      });
      return passkeyJson(row);
    });
  } catch (error) {
    if (isUniqueViolation(error)) throw authError('PASSKEY_INVALID', 'This passkey is already registered');
    throw error;
  }
}

/** POST /auth/passkeys: the passkeys of the user of the presented session. */
export async function listOwnPasskeys(ctx: AuthContext, app: AuthenticatedApp, refreshToken: string): Promise<PasskeyJson[]> {
  const { userId } = await presentedSession(ctx, app, refreshToken);
  return (await listPasskeysOfUser(ctx.sql, app.id, userId)).map(passkeyJson);
}

/** POST /auth/passkeys/remove: deletes one passkey of the user; 404 PASSKEY_NOT_FOUND for another user's. */
export async function removeOwnPasskey(ctx: AuthContext, app: AuthenticatedApp, refreshToken: string, passkeyId: string, origin: RequestOrigin): Promise<void> {
  const { userId } = await presentedSession(ctx, app, refreshToken);
  const now = new Date(ctx.clock.now());
  await ctx.sql.begin(async (tx) => {
    const removed = isUuid(passkeyId) ? await deletePasskey(tx, app.id, userId, passkeyId.toLowerCase()) : undefined;
    if (!removed) throw authError('PASSKEY_NOT_FOUND');
    await insertAuditEvent(tx, {
      type: 'passkey.removed', actor: 'app', appId: app.id, userId, ip: origin.ip, userAgent: origin.userAgent,
      details: { passkey_id: removed.id, name: removed.name }, now,
    });
  });
}

/** POST /auth/passkeys/login/options: request options for a discoverable credential of the app. */
export async function startPasskeyLogin(ctx: AuthContext, app: AuthenticatedApp): Promise<{ ceremony_id: string; options: unknown }> {
  const settings = await settingsOf(ctx, app);
  const options = await (await webauthn()).generateAuthenticationOptions({ rpID: settings.rp_id, userVerification: 'required', timeout: PASSKEY_CEREMONY_TTL_MS });
  const ceremonyId = randomUUID();
  const nowMs = ctx.clock.now();
  await insertPasskeyCeremony(ctx.sql, {
    id: ceremonyId, appId: app.id, userId: null, kind: 'login', challenge: options.challenge,
    expiresAt: new Date(nowMs + PASSKEY_CEREMONY_TTL_MS), now: new Date(nowMs),
  });
  return { ceremony_id: ceremonyId, options };
}

/**
 * POST /auth/passkeys/login/verify: verifies the assertion and starts a session, in one
 * transaction holding the credential's row lock (so the counter check and update of two
 * concurrent assertions are ordered). 401 PASSKEY_INVALID for anything wrong with the ceremony,
 * the assertion or the credential (unknown or deleted included); 403 USER_DELETED. Every
 * refusal is recorded as `login.failed` (method passkey).
 */
export async function finishPasskeyLogin(ctx: AuthContext, app: AuthenticatedApp, input: {
  ceremonyId: string; response: unknown; requestedTenant: string | null | undefined; origin: RequestOrigin;
}): Promise<SessionTokens> {
  return finishPasskeyLoginThen(ctx, app, input, async (tx, login) => {
    const tenant = chooseTenant(await listRolesOfUser(tx, app.id, login.userId), input.requestedTenant, null);
    const familyId = randomUUID();
    return { familyId, result: await startSession(tx, ctx, { app, userId: login.userId, familyId, tenant, nowMs: login.nowMs, amr: login.amr }) };
  });
}

/**
 * What a verified passkey leads to, in the transaction holding the credential's lock: a session
 * of the JSON API, or the hosted sign-in page's browser session. `familyId` is recorded with
 * login.succeeded.
 */
export type AfterPasskeyVerified<T> = (tx: TransactionSql, login: { userId: string; amr: string[]; nowMs: number }) => Promise<{ familyId: string | null; result: T }>;

/** finishPasskeyLogin's checks, refusals and audit trail, followed by `then` (the hosted page's browser session). */
export async function finishPasskeyLoginThen<T>(ctx: AuthContext, app: AuthenticatedApp, input: {
  ceremonyId: string; response: unknown; origin: RequestOrigin;
}, then: AfterPasskeyVerified<T>): Promise<T> {
  const nowMs = ctx.clock.now();
  const now = new Date(nowMs);
  const audit = { actor: 'app' as const, appId: app.id, ip: input.origin.ip, userAgent: input.origin.userAgent, now };
  try {
    const settings = await settingsOf(ctx, app);
    const ceremony = isUuid(input.ceremonyId) ? await takePasskeyCeremony(ctx.sql, { id: input.ceremonyId, appId: app.id, kind: 'login', now }) : undefined;
    if (!ceremony) throw authError('PASSKEY_INVALID', 'The ceremony is unknown, expired or used');
    const response = input.response as AuthenticationResponseJSON;
    const { verifyAuthenticationResponse } = await webauthn();
    return await ctx.sql.begin(async (tx): Promise<T> => {
      const passkey = typeof response?.id === 'string' ? await lockPasskeyByCredentialId(tx, app.id, response.id) : undefined;
      if (!passkey) throw authError('PASSKEY_INVALID', 'The passkey is not registered with this app');
      let verified: Awaited<ReturnType<typeof verifyAuthenticationResponse>>;
      try {
        verified = await verifyAuthenticationResponse({
          response,
          expectedChallenge: ceremony.challenge,
          expectedOrigin: settings.origins,
          expectedRPID: settings.rp_id,
          credential: { id: passkey.credential_id, publicKey: new Uint8Array(passkey.public_key), counter: Number(passkey.sign_count), transports: passkey.transports as never },
          requireUserVerification: true,
        });
      } catch (error) {
        throw authError('PASSKEY_INVALID', undefined, { cause: error });
      }
      const info = verified.authenticationInfo;
      if (!verified.verified) throw authError('PASSKEY_INVALID');
      if ((info.credentialDeviceType === 'multiDevice') !== passkey.backup_eligible) {
        throw authError('PASSKEY_INVALID', 'The backup eligibility of the passkey changed since its registration');
      }
      const user = await lockUser(tx, passkey.user_id);
      if (!user || user.deleted_at) throw authError('USER_DELETED');
      await refuseIfSsoRequired(tx, app.id, user.email);
      await recordPasskeyUse(tx, { id: passkey.id, signCount: info.newCounter, backedUp: info.credentialBackedUp, now });
      await insertAuditEvent(tx, { ...audit, type: 'passkey.used', userId: user.id, details: { passkey_id: passkey.id, name: passkey.name } });
      await acceptInvitationsOnSignIn(tx, app.id, user, input.origin, now);
      // A hardware-bound key with user verification: two factors in one (RFC 8176 `hwk`, `mfa`).
      const { familyId, result } = await then(tx, { userId: user.id, amr: ['hwk', 'mfa'], nowMs });
      await insertAuditEvent(tx, { ...audit, type: 'login.succeeded', userId: user.id, familyId, details: { method: 'passkey', passkey_id: passkey.id } });
      return result;
    }) as T;
  } catch (error) {
    // The transaction rolled back: the failure is recorded on its own.
    if (error instanceof HttpError && error.status < 500) {
      await insertAuditEvent(ctx.sql, { ...audit, type: 'login.failed', details: { method: 'passkey', reason: error.code, message: error.message } });
    }
    throw error;
  }
}

function passkeyJson(row: PasskeyRow): PasskeyJson {
  return {
    id: row.id,
    name: row.name,
    created_at: row.created_at.toISOString(),
    last_used_at: row.last_used_at?.toISOString() ?? null,
    backup_eligible: row.backup_eligible,
    backed_up: row.backed_up,
    transports: row.transports,
    aaguid: row.aaguid,
  };
}
