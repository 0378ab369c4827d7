-- A refresh family is one login session; every rotation adds a token to it. Rotation, reuse
-- detection and revocation all lock the family row first (`for update`), so they are serialised
-- per session. current_token_id names the one token that may still be used.
create table refresh_families (
  id uuid primary key,
  app_id uuid not null,
  user_id uuid not null,
  -- Tenant chosen at login or refresh; null: the user's default tenant (see sessions service).
  tenant_id uuid references tenants (id) on delete set null,
  current_token_id uuid not null,
  created_at timestamptz not null,
  -- Absolute session lifetime: created_at + 1 year. No rotation moves it.
  expires_at timestamptz not null,
  revoked_at timestamptz,
  revoked_reason text,
  foreign key (app_id, user_id) references app_memberships (app_id, user_id) on delete cascade,
  constraint refresh_families_revoked_reason check (
    (revoked_at is null and revoked_reason is null)
    or (revoked_at is not null and revoked_reason in ('logout', 'reuse', 'revoke_user', 'user_deleted'))
  )
);

create index refresh_families_live on refresh_families (app_id, user_id) where revoked_at is null;
create index refresh_families_user_live on refresh_families (user_id) where revoked_at is null;

-- Only the SHA-256 of a refresh token is stored.
create table refresh_tokens (
  id uuid primary key,
  family_id uuid not null references refresh_families (id) on delete cascade,
  parent_id uuid references refresh_tokens (id) on delete cascade,
  token_hash bytea not null unique,
  state text not null,
  issued_at timestamptz not null,
  -- issued_at + 30 days, capped at the family's expires_at.
  expires_at timestamptz not null,
  rotated_at timestamptz,
  constraint refresh_tokens_state check (state in ('active', 'rotated', 'revoked')),
  constraint refresh_tokens_hash_length check (octet_length(token_hash) = 32)
);

create index refresh_tokens_family on refresh_tokens (family_id);
