-- A standby ("next") signing key: published in the JWKS from the moment it is made, it signs
-- nothing until a rotation makes it active. Verifiers that cached the JWKS before a rotation
-- therefore already hold the key that signs after it. At most one key is next.
alter table signing_keys drop constraint signing_keys_status;
alter table signing_keys add constraint signing_keys_status check (status in ('next', 'active', 'retired'));

create unique index signing_keys_one_next on signing_keys ((true)) where status = 'next';
