-- Sign-in through other identity providers ("upstream" providers: Google, Entra ID, Apple,
-- GitHub, any OpenID Connect issuer), configured per app.
--
-- A user created by an upstream sign-in may have neither an e-mail address nor a phone number
-- (the provider did not prove one we can trust): such a user is identified by a linked
-- identity only, so the check that every user has one of the two goes.
alter table users drop constraint users_identified;

-- One configured provider of an app. The client secret (and Apple's private key) are sealed
-- (AES-256-GCM under a key derived from the master key, the row id as associated data).
-- `settings` holds what only one kind has: Apple's team and key ids, Entra's allowed tenants,
-- GitHub's base URLs (GitHub Enterprise Server).
create table upstream_providers (
  id uuid primary key,
  app_id uuid not null references apps (id) on delete cascade,
  kind text not null,
  label text not null,
  client_id text not null,
  client_secret_sealed bytea,
  discovery_url text,
  scopes text[] not null,
  redirect_uris text[] not null,
  trusted_email_domains text[] not null,
  settings jsonb not null default '{}',
  created_at timestamptz not null,
  updated_at timestamptz not null,
  constraint upstream_providers_kind check (kind in ('oidc', 'google', 'entra', 'apple', 'github')),
  constraint upstream_providers_redirect_uris check (cardinality(redirect_uris) between 1 and 20)
);

create index upstream_providers_app on upstream_providers (app_id);

-- An authorization request in flight: created by POST /auth/upstream/start, taken (deleted) by
-- the one callback that presents its state. PKCE verifier and nonce never leave the server.
-- link_user_id: the flow links the identity to this signed-in user instead of signing in.
create table upstream_flows (
  state text primary key,
  app_id uuid not null references apps (id) on delete cascade,
  provider_id uuid not null references upstream_providers (id) on delete cascade,
  nonce text not null,
  code_verifier text not null,
  redirect_uri text not null,
  link_user_id uuid references users (id) on delete cascade,
  created_at timestamptz not null,
  expires_at timestamptz not null
);

create index upstream_flows_expires on upstream_flows (expires_at);

-- An upstream identity linked to a user, keyed by (issuer, subject): the provider's own
-- identifier of the person, never the e-mail address (which can change, or be asserted
-- without proof). email is what the provider last said, for display; email_verified whether
-- it said the address was verified.
create table user_identities (
  id uuid primary key,
  user_id uuid not null references users (id) on delete cascade,
  provider_id uuid references upstream_providers (id) on delete set null,
  issuer text not null,
  subject text not null,
  email text,
  email_verified boolean not null,
  created_at timestamptz not null,
  last_used_at timestamptz not null,
  constraint user_identities_issuer_subject unique (issuer, subject)
);

create index user_identities_user on user_identities (user_id);
