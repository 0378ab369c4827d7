// Request bodies of the auth routes. Every object refuses unknown properties (so `__proto__`,
// typos and smuggled fields are 400), and every string refuses control characters (NUL bytes
// never reach PostgreSQL) and lone UTF-16 surrogates, and has a length cap.
import { Type, type Static, type TString } from '@sinclair/typebox';
import { MAX_TOKEN_CHARS } from './limits.js';
import { TENANT_WEIGHT_MAX } from '../inference/tenants/tenant.js';

/**
 * No C0 control character or DEL, and well-formed UTF-16: a JSON escape such as "\ud800" gives a
 * string with a lone surrogate, which UTF-8 encoding (PostgreSQL, hashes, webhooks) silently
 * turns into U+FFFD, so two different inputs would name one stored value. (TypeBox compiles
 * patterns without the `u` flag, so the classes below match UTF-16 code units.)
 */
const NO_CONTROL_CHARACTERS = '^(?:[^\\x00-\\x1F\\x7F\\uD800-\\uDFFF]|[\\uD800-\\uDBFF][\\uDC00-\\uDFFF])*$';
const UUID_PATTERN = '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$';

function text(maxLength: number): TString {
  return Type.String({ minLength: 1, maxLength, pattern: NO_CONTROL_CHARACTERS });
}
const Uuid = Type.String({ pattern: UUID_PATTERN });
const strict = { additionalProperties: false } as const;

/** Present on every app-authenticated body. */
const appCredentials = {
  app_id: text(64),
  app_secret: text(256),
};
const destination = {
  email: Type.Optional(text(320)),
  phone: Type.Optional(text(32)),
};
/** A tenant choice; null is the same as leaving it out. */
const optionalTenant = Type.Optional(Type.Union([Uuid, Type.Null()]));

export const OtpRequestBody = Type.Object({ ...appCredentials, ...destination }, strict);
export type OtpRequestBody = Static<typeof OtpRequestBody>;

export const OtpVerifyBody = Type.Object({
  ...appCredentials,
  ...destination,
  /** Six digits as a JSON string: a number would lose leading zeros, so it is refused. */
  code: Type.String({ pattern: '^[0-9]{6}$' }),
  tenant_id: optionalTenant,
}, strict);
export type OtpVerifyBody = Static<typeof OtpVerifyBody>;

export const RefreshBody = Type.Object({ ...appCredentials, refresh_token: text(MAX_TOKEN_CHARS), tenant_id: optionalTenant }, strict);
export type RefreshBody = Static<typeof RefreshBody>;

export const RevokeBody = Type.Object({ ...appCredentials, refresh_token: text(MAX_TOKEN_CHARS) }, strict);
export type RevokeBody = Static<typeof RevokeBody>;

export const SessionsBody = Type.Object({ ...appCredentials, refresh_token: text(MAX_TOKEN_CHARS) }, strict);
export type SessionsBody = Static<typeof SessionsBody>;

export const SessionEndBody = Type.Object({ ...appCredentials, refresh_token: text(MAX_TOKEN_CHARS), session_id: Uuid }, strict);
export type SessionEndBody = Static<typeof SessionEndBody>;

/** A WebAuthn response as the browser's PublicKeyCredential.toJSON() gives it; the library checks its fields. */
const WebAuthnResponse = Type.Object({ id: text(1024), rawId: text(1024), type: text(32), response: Type.Object({}, { additionalProperties: true }) }, { additionalProperties: true });

export const PasskeyRegisterOptionsBody = Type.Object({ ...appCredentials, refresh_token: text(MAX_TOKEN_CHARS) }, strict);
export type PasskeyRegisterOptionsBody = Static<typeof PasskeyRegisterOptionsBody>;

export const PasskeyRegisterVerifyBody = Type.Object({
  ...appCredentials, refresh_token: text(MAX_TOKEN_CHARS), ceremony_id: text(64), response: WebAuthnResponse, name: Type.Optional(text(100)),
}, strict);
export type PasskeyRegisterVerifyBody = Static<typeof PasskeyRegisterVerifyBody>;

export const PasskeyRemoveBody = Type.Object({ ...appCredentials, refresh_token: text(MAX_TOKEN_CHARS), passkey_id: text(64) }, strict);
export type PasskeyRemoveBody = Static<typeof PasskeyRemoveBody>;

export const PasskeyLoginOptionsBody = Type.Object({ ...appCredentials }, strict);
export type PasskeyLoginOptionsBody = Static<typeof PasskeyLoginOptionsBody>;

export const PasskeyLoginVerifyBody = Type.Object({ ...appCredentials, ceremony_id: text(64), response: WebAuthnResponse, tenant_id: optionalTenant }, strict);
export type PasskeyLoginVerifyBody = Static<typeof PasskeyLoginVerifyBody>;

export const PasskeySettingsBody = Type.Object({
  /** A registrable domain of the app's pages, lower-case (e.g. example.com; localhost for development). */
  rp_id: Type.String({ pattern: '^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$' }),
  rp_name: text(100),
  origins: Type.Array(text(300), { minItems: 1, maxItems: 20 }),
}, strict);
export type PasskeySettingsBody = Static<typeof PasskeySettingsBody>;

/** Every field optional: absent (or null) turns that defence off. */
export const SmsDefencesBody = Type.Object({
  allowed_calling_codes: Type.Optional(Type.Union([Type.Array(Type.String({ pattern: '^[1-9][0-9]{0,2}$' }), { maxItems: 300 }), Type.Null()])),
  daily_cap: Type.Optional(Type.Union([Type.Integer({ minimum: 1, maximum: 1e9 }), Type.Null()])),
  prefix_hourly: Type.Optional(Type.Union([Type.Integer({ minimum: 1, maximum: 1e9 }), Type.Null()])),
  country_hourly: Type.Optional(Type.Union([Type.Integer({ minimum: 1, maximum: 1e9 }), Type.Null()])),
  ratio_min_sent: Type.Optional(Type.Integer({ minimum: 1, maximum: 1e9 })),
  ratio_min_verified: Type.Optional(Type.Union([Type.Number({ minimum: 0, maximum: 1 }), Type.Null()])),
}, strict);
export type SmsDefencesBody = Static<typeof SmsDefencesBody>;

export const RevokeUserBody = Type.Object({ ...appCredentials, user_id: Uuid }, strict);
export type RevokeUserBody = Static<typeof RevokeUserBody>;

/** `role` is checked by the handler against the four names, for a message that lists them. */
export const RoleAssignBody = Type.Object({ ...appCredentials, user_id: Uuid, tenant_id: Uuid, role: text(32) }, strict);
export type RoleAssignBody = Static<typeof RoleAssignBody>;

export const RoleRevokeBody = Type.Object({ ...appCredentials, user_id: Uuid, tenant_id: Uuid }, strict);
export type RoleRevokeBody = Static<typeof RoleRevokeBody>;

export const CreateAppBody = Type.Object({
  /** Lower-case letters, digits and inner dashes; becomes `aud` and `app_id` of tokens. */
  slug: Type.String({ pattern: '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$' }),
  name: text(200),
}, strict);
export type CreateAppBody = Static<typeof CreateAppBody>;

export const CreateWebhookBody = Type.Object({
  url: Type.String({ minLength: 8, maxLength: 2000, pattern: NO_CONTROL_CHARACTERS }),
  /** Audit event types (service/webhooks.ts WEBHOOK_EVENT_TYPES). */
  event_types: Type.Array(text(64), { minItems: 1, maxItems: 50 }),
}, strict);
export type CreateWebhookBody = Static<typeof CreateWebhookBody>;

/** Multi-line text: tabs and line breaks allowed, no other control character. */
const MULTILINE = '^(?:[^\\x00-\\x08\\x0B\\x0C\\x0E-\\x1F\\x7F\\uD800-\\uDFFF]|[\\uD800-\\uDBFF][\\uDC00-\\uDFFF])*$';
const nullable = <T extends TString>(schema: T) => Type.Optional(Type.Union([schema, Type.Null()]));

/** An app's sender and texts for code messages; a missing or null field is the default. */
export const MessageTemplatesBody = Type.Object({
  /** `login@example.com` or `Example <login@example.com>` (checked by the service). */
  email_from: nullable(text(320)),
  email_subject: nullable(text(200)),
  email_text: nullable(Type.String({ minLength: 1, maxLength: 4000, pattern: MULTILINE })),
  sms_text: nullable(text(320)),
}, strict);
export type MessageTemplatesBody = Static<typeof MessageTemplatesBody>;

export const CreateTenantBody = Type.Object({ name: text(200) }, strict);
export type CreateTenantBody = Static<typeof CreateTenantBody>;

const positiveLimit = Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000_000 }));
/** An ISO 8601 instant with a zone, e.g. 2027-01-01T00:00:00Z (the service checks it is in the future). */
const IsoInstant = Type.String({ pattern: '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}(:\\d{2}(\\.\\d{1,9})?)?(Z|[+-]\\d{2}:\\d{2})$' });

export const CreateApiKeyBody = Type.Object({
  name: text(200),
  tenant_id: optionalTenant,
  role: Type.Optional(Type.Union([Type.Literal('viewer'), Type.Literal('staff'), Type.Literal('admin'), Type.Literal('owner')])),
  limits: Type.Optional(Type.Object({
    concurrent_requests: positiveLimit,
    requests_per_minute: positiveLimit,
    tokens_per_minute: positiveLimit,
  }, strict)),
  // A tenant's weight, in the bounds every tenant's settings keep (checkTenantSettings).
  weight: Type.Optional(Type.Number({ exclusiveMinimum: 0, maximum: TENANT_WEIGHT_MAX })),
  priority_class: Type.Optional(Type.Union([Type.Literal('interactive'), Type.Literal('batch')])),
  expires_at: Type.Optional(Type.Union([IsoInstant, Type.Null()])),
}, strict);
export type CreateApiKeyBody = Static<typeof CreateApiKeyBody>;
