-- auth-server as an OpenID Connect provider and OAuth 2.1 authorization server: the clients of
-- an app (its web, native and backend programs), the browser sessions of the hosted sign-in
-- page, the sign-ins in progress on it, and the one-use authorization codes. Secrets, cookies
-- and codes are stored as their SHA-256 only.
create table oauth_clients (
  -- The client_id: a UUID, so that a client_credentials token's sub is shaped like every other.
  id uuid primary key default gen_random_uuid(),
  app_id uuid not null references apps (id) on delete cascade,
  name text not null,
  logo_uri text,
  -- confidential: authenticates at the token endpoint; public: cannot keep a secret (SPA, native).
  client_type text not null,
  token_endpoint_auth_method text not null,
  secret_hash bytea,
  -- The public keys of private_key_jwt, a JWK Set.
  jwks jsonb,
  redirect_uris text[] not null default '{}',
  post_logout_redirect_uris text[] not null default '{}',
  grant_types text[] not null,
  scopes text[] not null,
  created_at timestamptz not null,
  updated_at timestamptz not null,
  constraint oauth_clients_name_length check (char_length(name) between 1 and 200),
  constraint oauth_clients_type check (client_type in ('confidential', 'public')),
  constraint oauth_clients_auth_method check (
    (client_type = 'public' and token_endpoint_auth_method = 'none' and secret_hash is null)
    or (client_type = 'confidential' and token_endpoint_auth_method in ('client_secret_basic', 'client_secret_post') and secret_hash is not null)
    or (client_type = 'confidential' and token_endpoint_auth_method = 'private_key_jwt' and jwks is not null)
  )
);

create index oauth_clients_app on oauth_clients (app_id, created_at, id);

-- One browser signed in to one app on the hosted page: the browser holds a random cookie, the
-- row its hash. prompt=none, max_age and RP-initiated logout read and end it.
create table oauth_browser_sessions (
  id uuid primary key,
  browser_hash bytea not null,
  app_id uuid not null,
  user_id uuid not null,
  -- When the user last proved who they are (the id_token's auth_time), and how (RFC 8176 amr).
  auth_time timestamptz not null,
  amr text[] not null,
  created_at timestamptz not null,
  expires_at timestamptz not null,
  ended_at timestamptz,
  foreign key (app_id, user_id) references app_memberships (app_id, user_id) on delete cascade
);

create unique index oauth_browser_sessions_live on oauth_browser_sessions (browser_hash, app_id) where ended_at is null;

-- An authorization request waiting for its user to sign in on the hosted page: the validated
-- parameters, the browser it was shown to, and the CSRF token its forms carry.
create table oauth_sign_in_requests (
  id uuid primary key,
  browser_hash bytea not null,
  csrf_hash bytea not null,
  client_id uuid not null references oauth_clients (id) on delete cascade,
  parameters jsonb not null,
  -- The address a code was sent to, once one was.
  identifier jsonb,
  created_at timestamptz not null,
  expires_at timestamptz not null
);

create index oauth_sign_in_requests_expiry on oauth_sign_in_requests (expires_at);

-- An authorization code: one use, 60 seconds. family_id is the session its exchange started,
-- which a replay of the code revokes.
create table oauth_authorization_codes (
  code_hash bytea primary key,
  client_id uuid not null references oauth_clients (id) on delete cascade,
  app_id uuid not null,
  user_id uuid not null,
  browser_session_id uuid,
  redirect_uri text not null,
  scope text not null,
  nonce text,
  code_challenge text not null,
  auth_time timestamptz not null,
  amr text[] not null,
  tenant_id uuid,
  created_at timestamptz not null,
  expires_at timestamptz not null,
  used_at timestamptz,
  family_id uuid,
  foreign key (app_id, user_id) references app_memberships (app_id, user_id) on delete cascade
);

create index oauth_authorization_codes_expiry on oauth_authorization_codes (expires_at);

-- private_key_jwt assertions seen, kept until they expire: an assertion is used once.
create table oauth_client_assertions (
  client_id uuid not null references oauth_clients (id) on delete cascade,
  jti text not null,
  expires_at timestamptz not null,
  primary key (client_id, jti)
);

-- A session started by a code exchange belongs to its client (a refresh by another client is
-- refused), remembers the scope granted, and the browser session that logout ends with it.
alter table refresh_families
  add column client_id uuid references oauth_clients (id) on delete cascade,
  add column scope text,
  add column browser_session_id uuid;

create index refresh_families_browser_session on refresh_families (browser_session_id) where browser_session_id is not null;
