-- The hosted sign-in page asks for a second factor: a sign-in request whose code was right
-- waits on a second-factor challenge, named here by its hash (the page's forms carry only the
-- request id and its CSRF token, bound to the browser's cookie).
alter table oauth_sign_in_requests add column second_factor_challenge_hash bytea;
