-- Passkeys (WebAuthn credentials). Each app is its own relying party: an RP ID (a registrable
-- domain of the app's pages, e.g. "example.com") and the origins its pages are served from
-- (e.g. "https://login.example.com"); an app without settings has no passkey ceremonies.
create table app_passkey_settings (
  app_id uuid primary key references apps (id) on delete cascade,
  rp_id text not null,
  rp_name text not null,
  origins text[] not null,
  updated_at timestamptz not null,
  constraint app_passkey_settings_rp_id check (rp_id ~ '^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$'),
  constraint app_passkey_settings_origins check (cardinality(origins) between 1 and 20)
);

-- One row per registered credential of a user in an app. credential_id is the authenticator's
-- id (base64url), unique per app; sign_count and backed_up are updated on each use (under the
-- row lock of the login that uses it); backup_eligible never changes after registration.
create table passkeys (
  id uuid primary key,
  app_id uuid not null,
  user_id uuid not null,
  credential_id text not null,
  public_key bytea not null,
  sign_count bigint not null,
  transports text[] not null default '{}',
  backup_eligible boolean not null,
  backed_up boolean not null,
  aaguid text not null,
  name text not null,
  created_at timestamptz not null,
  last_used_at timestamptz,
  foreign key (app_id, user_id) references app_memberships (app_id, user_id) on delete cascade,
  constraint passkeys_credential unique (app_id, credential_id)
);

create index passkeys_user on passkeys (app_id, user_id);

-- A ceremony in progress: the challenge handed out with the options, used up (deleted) by the
-- verification that presents it, so an assertion or attestation can be answered once only.
create table passkey_ceremonies (
  id uuid primary key,
  app_id uuid not null references apps (id) on delete cascade,
  -- Registration: the user registering; login: null (the credential names the user).
  user_id uuid,
  kind text not null,
  challenge text not null,
  expires_at timestamptz not null,
  constraint passkey_ceremonies_kind check (kind in ('registration', 'login')),
  constraint passkey_ceremonies_user check ((kind = 'registration') = (user_id is not null))
);

create index passkey_ceremonies_expires on passkey_ceremonies (expires_at);
