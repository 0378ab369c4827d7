// Request bodies of the auth routes. Every object refuses unknown properties (so `__proto__`,
// typos and smuggled fields are 400), and every string refuses control characters (NUL bytes
// never reach PostgreSQL) and lone UTF-16 surrogates, and has a length cap.
import { Type, type Static, type TString } from '@sinclair/typebox';
import { MAX_TOKEN_CHARS, USAGE_BATCH_MAX_ROWS } from './limits.js';
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

export const ConsentRevokeBody = Type.Object({ ...appCredentials, refresh_token: text(MAX_TOKEN_CHARS), client_id: text(2000) }, strict);
export type ConsentRevokeBody = Static<typeof ConsentRevokeBody>;

export const SessionsBody = Type.Object({ ...appCredentials, refresh_token: text(MAX_TOKEN_CHARS) }, strict);
export type SessionsBody = Static<typeof SessionsBody>;

export const SessionEndBody = Type.Object({ ...appCredentials, refresh_token: text(MAX_TOKEN_CHARS), session_id: Uuid }, strict);
export type SessionEndBody = Static<typeof SessionEndBody>;

/** WebAuthn's longest credential id, in bytes. */
export const MAX_CREDENTIAL_ID_BYTES = 1023;
/** Unpadded base64url (what PublicKeyCredential.toJSON() writes) of at most `maxBytes` bytes. */
function base64url(maxBytes: number, minBytes = 1): TString {
  return Type.String({ minLength: Math.ceil((minBytes * 4) / 3), maxLength: Math.ceil((maxBytes * 4) / 3), pattern: '^[A-Za-z0-9_-]*$' });
}
/** The credential id: 1 to 1023 bytes (WebAuthn's bound; the stored id is indexed, so it must stay small). */
const CredentialId = base64url(MAX_CREDENTIAL_ID_BYTES);
/**
 * What a client may return for the extensions the options ask for (credProps; none else today).
 * Clients return results only for requested extensions; an unknown member is tolerated for
 * extensions asked for later, and none of this object is stored.
 */
const ClientExtensionResults = Type.Object({
  credProps: Type.Optional(Type.Object({ rk: Type.Optional(Type.Boolean()) }, { additionalProperties: true, maxProperties: 8 })),
  appid: Type.Optional(Type.Boolean()),
  hmacCreateSecret: Type.Optional(Type.Boolean()),
}, { additionalProperties: true, maxProperties: 16 });
const credentialFields = {
  id: CredentialId,
  rawId: CredentialId,
  type: Type.Literal('public-key'),
  authenticatorAttachment: Type.Optional(Type.Union([Type.Literal('platform'), Type.Literal('cross-platform'), Type.Null()])),
  clientExtensionResults: Type.Optional(ClientExtensionResults),
};

/**
 * A registration response as PublicKeyCredential.toJSON() gives it (RegistrationResponseJSON).
 * `transports` are stored: an array of at most 10 short lower-case tokens (WebAuthn names usb,
 * nfc, ble, smart-card, hybrid, internal; a future name is kept as it comes).
 */
const WebAuthnRegistrationResponse = Type.Object({
  ...credentialFields,
  response: Type.Object({
    clientDataJSON: base64url(8192),
    attestationObject: base64url(12288),
    authenticatorData: Type.Optional(base64url(12288)),
    transports: Type.Optional(Type.Array(Type.String({ pattern: '^[a-z0-9-]{1,32}$' }), { maxItems: 10 })),
    publicKeyAlgorithm: Type.Optional(Type.Integer({ minimum: -65536, maximum: 65535 })),
    publicKey: Type.Optional(base64url(4096)),
  }, strict),
}, strict);

/** An authentication response as PublicKeyCredential.toJSON() gives it (AuthenticationResponseJSON); also the hosted page's passkey form. */
export const WebAuthnAuthenticationResponse = Type.Object({
  ...credentialFields,
  response: Type.Object({
    clientDataJSON: base64url(8192),
    authenticatorData: base64url(12288, 37),
    signature: base64url(2048),
    /** The user handle of a discoverable credential: at most 64 bytes. */
    userHandle: Type.Optional(Type.Union([base64url(64, 0), Type.Null()])),
  }, strict),
}, strict);

export const PasskeyRegisterOptionsBody = Type.Object({ ...appCredentials, refresh_token: text(MAX_TOKEN_CHARS) }, strict);
export type PasskeyRegisterOptionsBody = Static<typeof PasskeyRegisterOptionsBody>;

export const PasskeyRegisterVerifyBody = Type.Object({
  ...appCredentials, refresh_token: text(MAX_TOKEN_CHARS), ceremony_id: text(64), response: WebAuthnRegistrationResponse, name: Type.Optional(text(100)),
}, strict);
export type PasskeyRegisterVerifyBody = Static<typeof PasskeyRegisterVerifyBody>;

export const PasskeyRemoveBody = Type.Object({ ...appCredentials, refresh_token: text(MAX_TOKEN_CHARS), passkey_id: text(64) }, strict);
export type PasskeyRemoveBody = Static<typeof PasskeyRemoveBody>;

export const PasskeyLoginOptionsBody = Type.Object({ ...appCredentials }, strict);
export type PasskeyLoginOptionsBody = Static<typeof PasskeyLoginOptionsBody>;

export const PasskeyLoginVerifyBody = Type.Object({ ...appCredentials, ceremony_id: text(64), response: WebAuthnAuthenticationResponse, tenant_id: optionalTenant }, strict);
export type PasskeyLoginVerifyBody = Static<typeof PasskeyLoginVerifyBody>;

export const PasskeySettingsBody = Type.Object({
  /** A registrable domain of the app's pages, lower-case (e.g. example.com; localhost for development). */
  rp_id: Type.String({ pattern: '^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$' }),
  rp_name: text(100),
  origins: Type.Array(text(300), { minItems: 1, maxItems: 20 }),
}, strict);
export type PasskeySettingsBody = Static<typeof PasskeySettingsBody>;

/** An https URL (http only on this machine: development, tests); checked further by the service. */
const url = Type.String({ minLength: 8, maxLength: 2048, pattern: '^https?://[^\\s\\x00-\\x1F\\x7F]+$' });
const domainName = Type.String({ minLength: 1, maxLength: 253, pattern: '^[a-z0-9]([a-z0-9-]{0,62})(\\.[a-z0-9]([a-z0-9-]{0,62}))*$' });

/** POST and PUT /admin/apps/:app_id/upstream-providers[/:provider_id] (PUT: client_secret absent keeps the stored one). */
export const UpstreamProviderBody = Type.Object({
  kind: Type.Union([Type.Literal('oidc'), Type.Literal('google'), Type.Literal('entra'), Type.Literal('apple'), Type.Literal('github')]),
  label: text(64),
  client_id: text(256),
  client_secret: Type.Optional(text(MAX_TOKEN_CHARS)),
  discovery_url: Type.Optional(url),
  scopes: Type.Optional(Type.Array(Type.String({ pattern: '^[\\x21\\x23-\\x5B\\x5D-\\x7E]{1,64}$' }), { minItems: 1, maxItems: 20 })),
  redirect_uris: Type.Array(url, { minItems: 1, maxItems: 20 }),
  trusted_email_domains: Type.Optional(Type.Array(domainName, { maxItems: 100 })),
  apple: Type.Optional(Type.Object({
    team_id: Type.String({ pattern: '^[A-Z0-9]{10}$' }),
    key_id: Type.String({ pattern: '^[A-Z0-9]{10}$' }),
    /** The .p8 file Apple gives: a PKCS #8 PEM (newlines allowed here, nothing else). */
    private_key: Type.String({ maxLength: 4096, pattern: '^\\s*-----BEGIN PRIVATE KEY-----[A-Za-z0-9+/=\\r\\n]+-----END PRIVATE KEY-----\\s*$' }),
  }, strict)),
  entra: Type.Optional(Type.Object({ tenants: Type.Array(Type.String({ pattern: '^[0-9a-fA-F-]{36}$' }), { maxItems: 100 }) }, strict)),
  github: Type.Optional(Type.Object({ web_base_url: url, api_base_url: url }, strict)),
  /** Enterprise SSO: the tenant whose own provider this is; the role its first sign-in gives; whether the tenant's verified domains must use it. */
  tenant_id: Type.Optional(Uuid),
  default_role: Type.Optional(text(32)),
  require_sso: Type.Optional(Type.Boolean()),
}, strict);
export type UpstreamProviderBody = Static<typeof UpstreamProviderBody>;

export const UpstreamProvidersBody = Type.Object({ ...appCredentials }, strict);
export type UpstreamProvidersBody = Static<typeof UpstreamProvidersBody>;

/** refresh_token: link the identity to this session's user instead of signing in. */
export const UpstreamStartBody = Type.Object({
  ...appCredentials, provider_id: Uuid, redirect_uri: url, refresh_token: Type.Optional(text(MAX_TOKEN_CHARS)),
}, strict);
export type UpstreamStartBody = Static<typeof UpstreamStartBody>;

/** params: what the redirect URI received from the provider (its query, or Apple's form), verbatim. */
export const UpstreamCallbackBody = Type.Object({
  ...appCredentials,
  params: Type.Record(Type.String({ pattern: '^[a-zA-Z_]{1,64}$' }), text(12_000), { maxProperties: 20 }),
  tenant_id: optionalTenant,
}, strict);
export type UpstreamCallbackBody = Static<typeof UpstreamCallbackBody>;

export const IdentitiesBody = Type.Object({ ...appCredentials, refresh_token: text(MAX_TOKEN_CHARS) }, strict);
export type IdentitiesBody = Static<typeof IdentitiesBody>;

export const IdentityRemoveBody = Type.Object({ ...appCredentials, refresh_token: text(MAX_TOKEN_CHARS), identity_id: Uuid }, strict);
export type IdentityRemoveBody = Static<typeof IdentityRemoveBody>;

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

/** An app's slug: lower-case letters, digits and inner dashes, at most 63 characters. */
export const APP_SLUG_PATTERN = '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$';

export const CreateAppBody = Type.Object({
  /** Becomes `aud` and `app_id` of tokens. */
  slug: Type.String({ pattern: APP_SLUG_PATTERN }),
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

/** PUT /admin/apps/:app_id/invitation-templates: null or absent is the default text. */
export const InvitationTemplateBody = Type.Object({
  email_from: nullable(text(320)),
  email_subject: nullable(text(200)),
  email_text: nullable(Type.String({ minLength: 1, maxLength: 4000, pattern: MULTILINE })),
  sms_text: nullable(text(320)),
  /** Where the message's link points: an https URL holding {{token}}, e.g. https://app.example.com/join?invitation={{token}}. */
  accept_url: nullable(text(2048)),
}, strict);
export type InvitationTemplateBody = Static<typeof InvitationTemplateBody>;

/** `role` is checked by the service against the four names. */
export const InvitationCreateAdminBody = Type.Object({ ...destination, role: text(32) }, strict);
export type InvitationCreateAdminBody = Static<typeof InvitationCreateAdminBody>;

export const InvitationCreateBody = Type.Object({ ...appCredentials, tenant_id: Uuid, ...destination, role: text(32) }, strict);
export type InvitationCreateBody = Static<typeof InvitationCreateBody>;

const invitationState = Type.Union([Type.Literal('pending'), Type.Literal('accepted'), Type.Literal('revoked'), Type.Literal('expired')]);
export const InvitationListBody = Type.Object({ ...appCredentials, tenant_id: Uuid, state: Type.Optional(invitationState) }, strict);
export type InvitationListBody = Static<typeof InvitationListBody>;

export const InvitationActionBody = Type.Object({ ...appCredentials, tenant_id: Uuid, invitation_id: Uuid }, strict);
export type InvitationActionBody = Static<typeof InvitationActionBody>;

export const InvitationAcceptBody = Type.Object({ ...appCredentials, refresh_token: text(MAX_TOKEN_CHARS), token: Type.String({ pattern: '^inv_[A-Za-z0-9_-]{43}$' }) }, strict);
export type InvitationAcceptBody = Static<typeof InvitationAcceptBody>;

const secondFactorToken = Type.String({ pattern: '^sfa_[A-Za-z0-9_-]{43}$' });
const totpCode = Type.String({ pattern: '^[0-9]{6}$' });
const recoveryCode = Type.String({ pattern: '^[A-Za-z2-7]{5}-?[A-Za-z2-7]{5}$' });
/** Exactly one of refresh_token (a signed-in user) and second_factor_token (a login waiting to enroll); checked by the handler. */
const factorHolder = { refresh_token: Type.Optional(text(MAX_TOKEN_CHARS)), second_factor_token: Type.Optional(secondFactorToken) };

export const TotpEnrollBody = Type.Object({ ...appCredentials, ...factorHolder }, strict);
export type TotpEnrollBody = Static<typeof TotpEnrollBody>;

export const TotpConfirmBody = Type.Object({ ...appCredentials, ...factorHolder, code: totpCode }, strict);
export type TotpConfirmBody = Static<typeof TotpConfirmBody>;

/** Exactly one of code and recovery_code (checked by the handler). */
export const TotpRemoveBody = Type.Object({ ...appCredentials, refresh_token: text(MAX_TOKEN_CHARS), code: Type.Optional(totpCode), recovery_code: Type.Optional(recoveryCode) }, strict);
export type TotpRemoveBody = Static<typeof TotpRemoveBody>;

export const SecondFactorVerifyBody = Type.Object({
  ...appCredentials, second_factor_token: secondFactorToken, code: Type.Optional(totpCode), recovery_code: Type.Optional(recoveryCode),
}, strict);
export type SecondFactorVerifyBody = Static<typeof SecondFactorVerifyBody>;

const secondFactorPolicy = Type.Union([Type.Literal('off'), Type.Literal('optional'), Type.Literal('required')]);
export const AppSecondFactorPolicyBody = Type.Object({ policy: secondFactorPolicy }, strict);
export type AppSecondFactorPolicyBody = Static<typeof AppSecondFactorPolicyBody>;
/** null: the tenant follows the app. */
export const TenantSecondFactorPolicyBody = Type.Object({ policy: Type.Union([secondFactorPolicy, Type.Null()]) }, strict);
export type TenantSecondFactorPolicyBody = Static<typeof TenantSecondFactorPolicyBody>;

export const TenantDomainBody = Type.Object({ domain: text(253) }, strict);
export type TenantDomainBody = Static<typeof TenantDomainBody>;

export const SsoDiscoverBody = Type.Object({ ...appCredentials, email: text(320) }, strict);
export type SsoDiscoverBody = Static<typeof SsoDiscoverBody>;

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

/** POST /admin/apps/:app_id/oauth-clients: an OAuth client of the app (provider/clients.ts checks how the fields fit together). */
/** A client's fields the admin sets on creation and may edit later (UpdateOAuthClientBody): its name and logo, ... */
const oauthClientNaming = {
  name: text(200),
  logo_uri: Type.Optional(text(2000)),
};
/** ... and how it is used. */
const oauthClientUse = {
  redirect_uris: Type.Optional(Type.Array(text(2000), { maxItems: 20 })),
  post_logout_redirect_uris: Type.Optional(Type.Array(text(2000), { maxItems: 20 })),
  grant_types: Type.Optional(Type.Array(text(64), { maxItems: 5 })),
  scopes: Type.Optional(Type.Array(text(100), { maxItems: 50 })),
  first_party: Type.Optional(Type.Boolean()),
};
export const CreateOAuthClientBody = Type.Object({
  ...oauthClientNaming,
  client_type: Type.Optional(Type.Union([Type.Literal('confidential'), Type.Literal('public')])),
  token_endpoint_auth_method: Type.Optional(Type.Union([
    Type.Literal('client_secret_basic'), Type.Literal('client_secret_post'), Type.Literal('private_key_jwt'), Type.Literal('none'),
  ])),
  jwks: Type.Optional(Type.Object({ keys: Type.Array(Type.Record(Type.String(), Type.Unknown()), { maxItems: 10 }) }, strict)),
  ...oauthClientUse,
}, strict);
export type CreateOAuthClientBody = Static<typeof CreateOAuthClientBody>;
/** The admin's edit of a client: every editable field (an omitted one takes its default, as on creation); type, method and keys stay. */
export const UpdateOAuthClientBody = Type.Object({ ...oauthClientNaming, ...oauthClientUse }, strict);
export type UpdateOAuthClientBody = Static<typeof UpdateOAuthClientBody>;

/** A second's count: [UTC second, n]. */
const SecondCount = Type.Tuple([Type.Integer({ minimum: 0, maximum: 1e12 }), Type.Integer({ minimum: 0, maximum: 1e12 })]);
/** A tenant's name as an inference server counts it (a tenant id, "key:<id>", a subject). */
const fleetTenant = text(320);

/** POST /fleet/exchange: an inference-server replica's counts of tenants' limits (src/inference/tenants/fleet-limits.ts). */
export const FleetExchangeBody = Type.Object({
  ...appCredentials,
  replica: text(200),
  now_ms: Type.Integer({ minimum: 0, maximum: 1e15 }),
  window_start_second: Type.Integer({ minimum: 0, maximum: 1e12 }),
  reports: Type.Array(Type.Object({
    tenant: fleetTenant,
    requests: Type.Array(SecondCount, { maxItems: 120 }),
    tokens: Type.Array(SecondCount, { maxItems: 120 }),
    in_flight: Type.Integer({ minimum: 0, maximum: 1e9 }),
  }, strict), { maxItems: 500 }),
  tenants: Type.Array(fleetTenant, { maxItems: 500 }),
}, strict);
export type FleetExchangeBody = Static<typeof FleetExchangeBody>;

/** A usage row's label (tenant, key, model): as the usage table takes it, '' allowed (no tenant). */
const usageLabel = Type.String({ maxLength: 200, pattern: NO_CONTROL_CHARACTERS });
const usageCounter = Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER });

/**
 * POST /fleet/usage: a batch of hourly usage rows metered by an inference-server replica
 * (src/inference/tenants/usage-meter.ts), with the id the replica made once for it (the same
 * when it sends the batch again).
 */
export const FleetUsageBody = Type.Object({
  ...appCredentials,
  batch_id: Uuid,
  rows: Type.Array(Type.Object({
    /** The app of the key; null for a key of no app. Either way the row is stored under the app of the credentials. */
    app_slug: Type.Union([Type.String({ pattern: APP_SLUG_PATTERN }), Type.Null()]),
    tenant: usageLabel,
    key: usageLabel,
    model: usageLabel,
    /** Any instant of the UTC hour (ISO 8601 with its offset). */
    hour: Type.String({ minLength: 20, maxLength: 40, pattern: '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(\\.\\d{1,9})?(Z|[+-]\\d{2}:\\d{2})$' }),
    requests: usageCounter,
    prompt_tokens: usageCounter,
    cached_prompt_tokens: usageCounter,
    completion_tokens: usageCounter,
    queue_ms: usageCounter,
    compute_ms: usageCounter,
  }, strict), { maxItems: USAGE_BATCH_MAX_ROWS }),
}, strict);
export type FleetUsageBody = Static<typeof FleetUsageBody>;
