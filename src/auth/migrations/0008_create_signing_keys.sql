-- RS256 signing keys. The private key is stored encrypted (AES-256-GCM) under a key derived from
-- the master key in the key directory. Exactly one key is active; retired keys stay published in
-- the JWKS until every access token they signed has expired.
create table signing_keys (
  kid text primary key,
  public_jwk jsonb not null,
  private_key_ciphertext bytea not null,
  status text not null,
  created_at timestamptz not null,
  retired_at timestamptz,
  constraint signing_keys_status check (status in ('active', 'retired')),
  constraint signing_keys_retired_at check ((status = 'retired') = (retired_at is not null))
);

create unique index signing_keys_one_active on signing_keys ((true)) where status = 'active';
