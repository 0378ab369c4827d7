-- The hosted sign-in page signs in through upstream identity providers: a sign-in request that
-- sent its browser to a provider names that flow by the SHA-256 of its state, so the callback
-- finds the request (and checks it is the same browser's) and its client gets the code.
alter table oauth_sign_in_requests add column upstream_state_hash bytea;
create index oauth_sign_in_requests_upstream_state on oauth_sign_in_requests (upstream_state_hash) where upstream_state_hash is not null;
