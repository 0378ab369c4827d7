-- API keys an app issues to its callers (inference clients): a key stands for the app, and
-- optionally one of its tenants, with a role, usage limits, a scheduling weight and a priority
-- class, which the inference server reads on each request (mount.ts createApiKeyVerifier).
-- The key itself ("lak_" + 32 random bytes, base64url) is shown once; only its SHA-256 is
-- stored, with its first 12 characters for people to recognise it in lists.
create table api_keys (
  id uuid primary key default gen_random_uuid(),
  app_id uuid not null references apps (id) on delete cascade,
  -- A tenant of the same app (the composite key tenants_id_app), or none: the key serves the
  -- app as a whole.
  tenant_id uuid,
  name text not null,
  role text not null default 'viewer',
  -- The SHA-256 of the whole key, replaced by a rotation: the previous key stops matching.
  key_hash bytea not null,
  display_prefix text not null,
  concurrent_requests integer,
  requests_per_minute integer,
  tokens_per_minute integer,
  weight double precision not null default 1,
  priority_class text not null default 'interactive',
  created_at timestamptz not null,
  expires_at timestamptz,
  rotated_at timestamptz,
  revoked_at timestamptz,
  -- Written at most once a minute per key and process (service/api-keys.ts markApiKeyUsed).
  last_used_at timestamptz,
  constraint api_keys_tenant foreign key (tenant_id, app_id) references tenants (id, app_id) on delete cascade,
  constraint api_keys_key_hash unique (key_hash),
  constraint api_keys_name_length check (char_length(name) between 1 and 200),
  constraint api_keys_role check (role in ('owner', 'admin', 'staff', 'viewer')),
  constraint api_keys_priority_class check (priority_class in ('interactive', 'batch')),
  constraint api_keys_weight check (weight > 0 and weight <= 100),
  constraint api_keys_limits check (
    coalesce(concurrent_requests, 1) >= 1 and coalesce(requests_per_minute, 1) >= 1 and coalesce(tokens_per_minute, 1) >= 1
  )
);

create index api_keys_app_created on api_keys (app_id, created_at, id);
