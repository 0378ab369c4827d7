-- A second factor: TOTP (RFC 6238) with recovery codes, asked after a code login by the app's or
-- the tenant's policy; and what each session was signed in with (the `amr` of its tokens).

-- The authentication methods of a session (RFC 8176 values, e.g. {otp,mfa}), carried by every
-- access token of the family, refreshed ones included. Null for sessions from before.
alter table refresh_families add column amr text[];

-- A user's TOTP key, sealed (AES-256-GCM, the user id as associated data). Unconfirmed until a
-- first code proves the authenticator has it. last_used_step: the 30-second step of the last
-- accepted code, so a code is never accepted twice. failed_attempts counts wrong codes in a
-- row; past the limit the factor is locked until locked_until.
create table totp_factors (
  user_id uuid primary key references users (id) on delete cascade,
  secret_sealed bytea not null,
  confirmed_at timestamptz,
  last_used_step bigint,
  failed_attempts integer not null default 0,
  locked_until timestamptz,
  created_at timestamptz not null
);

-- Single-use recovery codes of a confirmed factor, stored as HMAC-SHA256 only.
create table recovery_codes (
  user_id uuid not null references users (id) on delete cascade,
  code_hash bytea not null,
  used_at timestamptz,
  primary key (user_id, code_hash)
);

-- off / optional / required for an app (tenant_id null) or one of its tenants; the stricter of
-- the app's and the login's tenant's applies.
create table second_factor_policies (
  app_id uuid not null references apps (id) on delete cascade,
  tenant_id uuid references tenants (id) on delete cascade,
  policy text not null,
  updated_at timestamptz not null,
  constraint second_factor_policies_policy check (policy in ('off', 'optional', 'required')),
  constraint second_factor_policies_scope unique nulls not distinct (app_id, tenant_id)
);

-- A code login waiting for its second factor: the token given to the app (stored as SHA-256),
-- what the first factor was, the tenant asked for; a few attempts, a few minutes.
create table second_factor_challenges (
  token_hash bytea primary key,
  app_id uuid not null references apps (id) on delete cascade,
  user_id uuid not null references users (id) on delete cascade,
  amr text[] not null,
  requested_tenant_id uuid,
  attempts integer not null default 0,
  created_at timestamptz not null,
  expires_at timestamptz not null
);
