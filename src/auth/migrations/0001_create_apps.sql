-- Registered applications. `id` is the app_id of request bodies, `slug` the app_id and aud of
-- access tokens. The secret is returned once when it is made; only its SHA-256 is stored.
create table apps (
  id uuid primary key default gen_random_uuid(),
  slug text not null unique,
  name text not null,
  secret_hash bytea not null,
  created_at timestamptz not null,
  secret_rotated_at timestamptz,
  constraint apps_slug_format check (slug ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'),
  constraint apps_name_length check (char_length(name) between 1 and 200),
  constraint apps_secret_hash_length check (octet_length(secret_hash) = 32)
);
