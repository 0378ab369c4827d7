// The route table of the auth service: one line per route, its guard visible on the line.
//   public     no credentials
//   appSecret         app_id + app_secret in the JSON body (validated with the route's schema first)
//   appSecretInQuery  the same credentials, verified by the handler's single statement (refresh)
//   bearer     Authorization: Bearer <access token>
//   adminKey   X-Admin-Key header
//   oauthClient       the app as an OAuth client: Basic credentials or client_id + client_secret in a form body (RFC 6749 2.3.1)
//   limited(guard, ...)  the guard, then the rate-limit rules counted for the request (rate-limit-rules.ts), 429 over any
import type { Method, Route } from '../http/router.js';
import type { AuthContext } from './context.js';
import * as admin from './handlers/admin.js';
import * as apiKeys from './handlers/api-keys.js';
import * as fleet from './handlers/fleet.js';
import { handleOtpRequest, handleOtpVerify } from './handlers/login.js';
import { handleMe } from './handlers/me.js';
import { handleTokenIntrospection, handleTokenRevocation } from './handlers/oauth.js';
import { handleRoleAssign, handleRoleRevoke } from './handlers/roles.js';
import { handleRefresh, handleRevoke, handleRevokeUser } from './handlers/sessions.js';
import * as passkeys from './handlers/passkeys.js';
import * as smsDefences from './handlers/sms-defences.js';
import * as userSessions from './handlers/user-sessions.js';
import { handleGetUsage } from './handlers/usage.js';
import * as invitations from './handlers/invitations.js';
import * as secondFactor from './handlers/second-factor.js';
import * as tenantSso from './handlers/tenant-sso.js';
import * as upstream from './handlers/upstream.js';
import * as webhooks from './handlers/webhooks.js';
import { handleAuthorizationServerMetadata, handleDiscovery, handleJwks } from './handlers/well-known.js';
import * as provider from './provider/handlers.js';
import * as clientChanges from './provider/client-changes.js';
import { tokenClient } from './provider/token.js';
import { adminKey, appSecret, appSecretInQuery, authRoute, bearer, limited, oauthClient, perClientIp, publicAccess, type AuthHandler, type Guard } from './respond.js';
import { perAddress } from './service/login.js';
import {
  FleetExchangeBody, FleetUsageBody, SsoDiscoverBody, SecondFactorVerifyBody, TotpConfirmBody, TotpEnrollBody, TotpRemoveBody,
  IdentitiesBody, IdentityRemoveBody, InvitationAcceptBody, InvitationActionBody, InvitationCreateBody, InvitationListBody, UpstreamCallbackBody, UpstreamProvidersBody, UpstreamStartBody,
  OtpRequestBody, OtpVerifyBody, PasskeyLoginOptionsBody, PasskeyLoginVerifyBody, PasskeyRegisterOptionsBody, PasskeyRegisterVerifyBody, PasskeyRemoveBody,
  ConsentRevokeBody, RefreshBody, RevokeBody, RevokeUserBody, RoleAssignBody, RoleRevokeBody, SessionEndBody, SessionsBody,
} from './schemas.js';

// The route table is a flat field mapping: one line per route, nothing to read top to bottom.
export function authRoutes(ctx: AuthContext): Route[] {
  const route = <I>(method: Method, path: string, guard: Guard<I>, handler: AuthHandler<I>): Route => authRoute(ctx, method, path, guard, handler);
  return [
    route('POST',   '/auth/otp/request',                         limited(appSecret(OtpRequestBody), perAddress('otp_request_address'), perClientIp('otp_request_ip')), handleOtpRequest),
    route('POST',   '/auth/otp/verify',                          limited(appSecret(OtpVerifyBody), perAddress('otp_verify_address'), perClientIp('otp_verify_ip')),    handleOtpVerify),
    // refresh_app and refresh_family are counted by the rotation's own statements (sessions.ts, rotate_refresh_token).
    route('POST',   '/auth/refresh',                             appSecretInQuery(RefreshBody),   handleRefresh),
    route('POST',   '/auth/revoke',                              appSecret(RevokeBody),           handleRevoke),
    route('POST',   '/auth/revoke-user',                         appSecret(RevokeUserBody),       handleRevokeUser),
    route('POST',   '/auth/sessions',                            appSecret(SessionsBody),         userSessions.handleListOwnSessions),
    route('POST',   '/auth/sessions/revoke',                     appSecret(SessionEndBody),       userSessions.handleEndOwnSession),
    route('POST',   '/auth/consents',                            appSecret(SessionsBody),         provider.handleListOwnConsents),
    route('POST',   '/auth/consents/revoke',                     appSecret(ConsentRevokeBody),    provider.handleRevokeOwnConsent),
    route('POST',   '/auth/sessions/revoke-others',              appSecret(SessionsBody),         userSessions.handleEndOtherSessions),
    route('POST',   '/auth/passkeys/register/options',           limited(appSecret(PasskeyRegisterOptionsBody), perClientIp('passkey_ceremony_ip')), passkeys.handlePasskeyRegisterOptions),
    route('POST',   '/auth/passkeys/register/verify',            limited(appSecret(PasskeyRegisterVerifyBody), perClientIp('passkey_ceremony_ip')),  passkeys.handlePasskeyRegisterVerify),
    route('POST',   '/auth/passkeys/login/options',              limited(appSecret(PasskeyLoginOptionsBody), perClientIp('passkey_ceremony_ip')),    passkeys.handlePasskeyLoginOptions),
    route('POST',   '/auth/passkeys/login/verify',               limited(appSecret(PasskeyLoginVerifyBody), perClientIp('passkey_ceremony_ip')),     passkeys.handlePasskeyLoginVerify),
    route('POST',   '/auth/passkeys',                            appSecret(PasskeyRegisterOptionsBody), passkeys.handleListPasskeys),
    route('POST',   '/auth/passkeys/remove',                     appSecret(PasskeyRemoveBody),    passkeys.handleRemovePasskey),
    route('POST',   '/auth/sso/discover',                        appSecret(SsoDiscoverBody),      tenantSso.handleDiscover),
    route('POST',   '/auth/upstream/providers',                  appSecret(UpstreamProvidersBody), upstream.handleListSignInProviders),
    route('POST',   '/auth/upstream/start',                      appSecret(UpstreamStartBody),    upstream.handleUpstreamStart),
    route('POST',   '/auth/upstream/callback',                   appSecret(UpstreamCallbackBody), upstream.handleUpstreamCallback),
    route('POST',   '/auth/identities',                          appSecret(IdentitiesBody),       upstream.handleListIdentities),
    route('POST',   '/auth/identities/remove',                   appSecret(IdentityRemoveBody),   upstream.handleRemoveIdentity),
    route('POST',   '/auth/second-factor/verify',                appSecret(SecondFactorVerifyBody), secondFactor.handleSecondFactorVerify),
    route('POST',   '/auth/second-factor/totp/enroll',           appSecret(TotpEnrollBody),       secondFactor.handleTotpEnroll),
    route('POST',   '/auth/second-factor/totp/confirm',          appSecret(TotpConfirmBody),      secondFactor.handleTotpConfirm),
    route('POST',   '/auth/second-factor/totp/remove',           appSecret(TotpRemoveBody),       secondFactor.handleTotpRemove),
    route('POST',   '/auth/invitations',                         appSecret(InvitationCreateBody), invitations.handleCreateInvitation),
    route('POST',   '/auth/invitations/list',                    appSecret(InvitationListBody),   invitations.handleListInvitations),
    route('POST',   '/auth/invitations/resend',                  appSecret(InvitationActionBody), invitations.handleResendInvitation),
    route('POST',   '/auth/invitations/revoke',                  appSecret(InvitationActionBody), invitations.handleRevokeInvitation),
    route('POST',   '/auth/invitations/accept',                  appSecret(InvitationAcceptBody), invitations.handleAcceptInvitation),
    route('POST',   '/auth/roles/assign',                        appSecret(RoleAssignBody),       handleRoleAssign),
    route('POST',   '/auth/roles/revoke',                        appSecret(RoleRevokeBody),       handleRoleRevoke),
    route('GET',    '/auth/me',                                  bearer,                          handleMe),
    route('POST',   '/api-keys/introspect',                      limited(publicAccess, perClientIp('api_key_introspect_ip')), apiKeys.handleIntrospectApiKey),
    route('POST',   '/fleet/exchange',                           appSecret(FleetExchangeBody),    fleet.handleFleetExchange),
    route('POST',   '/fleet/usage',                              appSecret(FleetUsageBody),       fleet.handleFleetUsage),
    route('POST',   '/oauth/revoke',                             oauthClient,                     handleTokenRevocation),
    route('POST',   '/oauth/introspect',                         oauthClient,                     handleTokenIntrospection),
    // The provider (src/auth/provider): errors of the page routes are pages in words; the token endpoint's are RFC 6749's.
    route('GET',    '/oauth/authorize',                          limited(publicAccess, perClientIp('oauth_authorize_ip')), provider.handleAuthorize),
    route('POST',   '/oauth/sign-in/email',                      publicAccess,                    provider.handleSignInEmail),
    route('POST',   '/oauth/sign-in/code',                       publicAccess,                    provider.handleSignInCode),
    route('POST',   '/oauth/sign-in/second-factor',              publicAccess,                    provider.handleSignInSecondFactor),
    route('POST',   '/oauth/sign-in/second-factor/enroll',       publicAccess,                    provider.handleSignInEnrolTotp),
    route('POST',   '/oauth/sign-in/continue',                   publicAccess,                    provider.handleSignInContinue),
    route('POST',   '/oauth/sign-in/passkey/options',            limited(publicAccess, perClientIp('passkey_ceremony_ip')), provider.handlePasskeyOptions),
    route('POST',   '/oauth/sign-in/passkey',                    limited(publicAccess, perClientIp('passkey_ceremony_ip')), provider.handleSignInPasskey),
    route('POST',   '/oauth/sign-in/upstream',                   limited(publicAccess, perClientIp('oauth_authorize_ip')), provider.handleSignInUpstream),
    route('GET',    '/oauth/upstream/callback',                  limited(publicAccess, perClientIp('oauth_authorize_ip')), provider.handleUpstreamCallback),
    route('POST',   '/oauth/upstream/callback',                  limited(publicAccess, perClientIp('oauth_authorize_ip')), provider.handleUpstreamFormPost),
    route('POST',   '/oauth/upstream/callback/continue',         limited(publicAccess, perClientIp('oauth_authorize_ip')), provider.handleUpstreamFormPostContinue),
    route('GET',    '/oauth/sign-in.js',                         publicAccess,                    provider.handleSignInScript),
    route('POST',   '/oauth/consent',                            publicAccess,                    provider.handleConsent),
    route('POST',   '/oauth/tenant',                             publicAccess,                    provider.handlePickTenant),
    route('POST',   '/oauth/token',                              limited(tokenClient, perClientIp('oauth_token_ip')), provider.handleToken),
    route('GET',    '/oauth/userinfo',                           bearer,                          provider.handleUserinfo),
    route('POST',   '/oauth/userinfo',                           bearer,                          provider.handleUserinfo),
    route('GET',    '/oauth/logout',                             publicAccess,                    provider.handleEndSession),
    route('POST',   '/oauth/register',                           limited(provider.registration, perClientIp('oauth_register_ip')), provider.handleRegister),
    route('POST',   '/admin/apps',                               adminKey,                        admin.handleCreateApp),
    route('GET',    '/admin/apps',                               adminKey,                        admin.handleListApps),
    route('GET',    '/admin/apps/:app_id',                       adminKey,                        admin.handleGetApp),
    route('POST',   '/admin/apps/:app_id/secret',                adminKey,                        admin.handleRotateAppSecret),
    route('POST',   '/admin/apps/:app_id/tenants',               adminKey,                        admin.handleCreateTenant),
    route('GET',    '/admin/apps/:app_id/tenants',               adminKey,                        admin.handleListTenants),
    route('GET',    '/admin/apps/:app_id/tenants/:tenant_id',    adminKey,                        admin.handleGetTenant),
    route('GET',    '/admin/apps/:app_id/message-templates',     adminKey,                        admin.handleGetMessageTemplates),
    route('PUT',    '/admin/apps/:app_id/message-templates',     adminKey,                        admin.handlePutMessageTemplates),
    route('GET',    '/admin/apps/:app_id/sms-defences',          adminKey,                        smsDefences.handleGetSmsDefences),
    route('PUT',    '/admin/apps/:app_id/sms-defences',          adminKey,                        smsDefences.handlePutSmsDefences),
    route('PUT',    '/admin/apps/:app_id/passkeys',              adminKey,                        passkeys.handlePutPasskeySettings),
    route('POST',   '/admin/apps/:app_id/tenants/:tenant_id/invitations', adminKey,               invitations.handleAdminCreateInvitation),
    route('GET',    '/admin/apps/:app_id/tenants/:tenant_id/invitations', adminKey,               invitations.handleAdminListInvitations),
    route('POST',   '/admin/apps/:app_id/tenants/:tenant_id/invitations/:invitation_id/resend', adminKey, invitations.handleAdminResendInvitation),
    route('DELETE', '/admin/apps/:app_id/tenants/:tenant_id/invitations/:invitation_id', adminKey, invitations.handleAdminRevokeInvitation),
    route('POST',   '/admin/apps/:app_id/tenants/:tenant_id/domains', adminKey,                   tenantSso.handleClaimDomain),
    route('GET',    '/admin/apps/:app_id/tenants/:tenant_id/domains', adminKey,                   tenantSso.handleListDomains),
    route('POST',   '/admin/apps/:app_id/tenants/:tenant_id/domains/:domain_id/verify', adminKey, tenantSso.handleVerifyDomain),
    route('DELETE', '/admin/apps/:app_id/tenants/:tenant_id/domains/:domain_id', adminKey,        tenantSso.handleRemoveDomain),
    route('GET',    '/admin/apps/:app_id/second-factor-policy',  adminKey,                        secondFactor.handleGetSecondFactorPolicy),
    route('PUT',    '/admin/apps/:app_id/second-factor-policy',  adminKey,                        secondFactor.handlePutAppSecondFactorPolicy),
    route('PUT',    '/admin/apps/:app_id/tenants/:tenant_id/second-factor-policy', adminKey,      secondFactor.handlePutTenantSecondFactorPolicy),
    route('GET',    '/admin/apps/:app_id/invitation-templates',  adminKey,                        invitations.handleGetInvitationTemplate),
    route('PUT',    '/admin/apps/:app_id/invitation-templates',  adminKey,                        invitations.handlePutInvitationTemplate),
    route('POST',   '/admin/apps/:app_id/upstream-providers',    adminKey,                        upstream.handleCreateUpstreamProvider),
    route('GET',    '/admin/apps/:app_id/upstream-providers',    adminKey,                        upstream.handleListUpstreamProviders),
    route('GET',    '/admin/apps/:app_id/upstream-providers/:provider_id', adminKey,              upstream.handleGetUpstreamProvider),
    route('PUT',    '/admin/apps/:app_id/upstream-providers/:provider_id', adminKey,              upstream.handlePutUpstreamProvider),
    route('DELETE', '/admin/apps/:app_id/upstream-providers/:provider_id', adminKey,              upstream.handleDeleteUpstreamProvider),
    route('POST',   '/admin/apps/:app_id/upstream-providers/:provider_id/test', adminKey,         upstream.handleTestUpstreamProvider),
    route('POST',   '/admin/apps/:app_id/webhooks',              adminKey,                        webhooks.handleCreateWebhook),
    route('GET',    '/admin/apps/:app_id/webhooks',              adminKey,                        webhooks.handleListWebhooks),
    route('DELETE', '/admin/apps/:app_id/webhooks/:webhook_id',  adminKey,                        webhooks.handleDeleteWebhook),
    route('GET',    '/admin/apps/:app_id/webhook-deliveries',    adminKey,                        webhooks.handleListDeliveries),
    route('POST',   '/admin/apps/:app_id/webhook-deliveries/:delivery_id/redeliver', adminKey,    webhooks.handleRedeliver),
    route('POST',   '/admin/apps/:app_id/oauth-clients',         adminKey,                        provider.handleCreateClient),
    route('GET',    '/admin/apps/:app_id/oauth-clients',         adminKey,                        provider.handleListClients),
    route('GET',    '/admin/apps/:app_id/oauth-clients/:client_id', adminKey,                     provider.handleGetClient),
    route('DELETE', '/admin/apps/:app_id/oauth-clients/:client_id', adminKey,                     provider.handleDeleteClient),
    route('PUT',    '/admin/apps/:app_id/oauth-clients/:client_id', adminKey,                     clientChanges.handleUpdateClient),
    route('POST',   '/admin/apps/:app_id/oauth-clients/:client_id/secret', adminKey,              clientChanges.handleRotateClientSecret),
    route('PUT',    '/admin/apps/:app_id/branding',              adminKey,                        provider.handlePutBranding),
    route('PUT',    '/admin/apps/:app_id/oauth-resources',       adminKey,                        provider.handlePutResources),
    route('GET',    '/admin/apps/:app_id/oauth-resources',       adminKey,                        provider.handleGetResources),
    route('POST',   '/admin/apps/:app_id/api-keys',              adminKey,                        apiKeys.handleCreateApiKey),
    route('GET',    '/admin/apps/:app_id/api-keys',              adminKey,                        apiKeys.handleListApiKeys),
    route('POST',   '/admin/apps/:app_id/api-keys/:key_id/rotate', adminKey,                      apiKeys.handleRotateApiKey),
    route('DELETE', '/admin/apps/:app_id/api-keys/:key_id',      adminKey,                        apiKeys.handleRevokeApiKey),
    route('GET',    '/admin/usage',                              adminKey,                        handleGetUsage),
    route('GET',    '/admin/users',                              adminKey,                        admin.handleFindUsers),
    route('GET',    '/admin/users/:user_id',                     adminKey,                        admin.handleGetUser),
    route('DELETE', '/admin/users/:user_id',                     adminKey,                        admin.handleDeleteUser),
    route('POST',   '/admin/users/:user_id/restore',             adminKey,                        admin.handleRestoreUser),
    route('POST',   '/admin/users/:user_id/revoke-sessions',     adminKey,                        admin.handleRevokeUserSessions),
    route('DELETE', '/admin/users/:user_id/second-factor',       adminKey,                        secondFactor.handleResetSecondFactor),
    route('GET',    '/admin/users/:user_id/identities',          adminKey,                        upstream.handleListUserIdentities),
    route('GET',    '/admin/users/:user_id/consents',            adminKey,                        provider.handleListUserConsents),
    route('DELETE', '/admin/users/:user_id/consents',            adminKey,                        provider.handleRevokeUserConsent),
    route('GET',    '/admin/users/:user_id/sessions',            adminKey,                        userSessions.handleListUserSessions),
    route('DELETE', '/admin/users/:user_id/sessions/:session_id', adminKey,                       userSessions.handleEndUserSession),
    route('GET',    '/admin/audit-events',                       adminKey,                        admin.handleListAuditEvents),
    route('GET',    '/admin/rate-limits',                        adminKey,                        admin.handleListRateLimits),
    route('DELETE', '/admin/rate-limits/blocks/:rule/:subject',  adminKey,                        admin.handleLiftRateLimitBlock),
    route('GET',    '/admin/signing-keys',                       adminKey,                        admin.handleListSigningKeys),
    route('POST',   '/admin/signing-keys/rotate',                adminKey,                        admin.handleRotateSigningKey),
    route('GET',    '/.well-known/jwks.json',                    publicAccess,                    handleJwks),
    route('GET',    '/.well-known/openid-configuration',         publicAccess,                    handleDiscovery),
    route('GET',    '/.well-known/oauth-authorization-server',   publicAccess,                    handleAuthorizationServerMetadata),
  ];
}
