-- rotate_refresh_token answers the session's `amr` with a rotation (a new result column), so a
-- refresh is one statement again instead of the rotation and a read of the family's amr. A new
-- column changes the result type, which `create or replace` cannot do: the old signature is
-- dropped here, and migrations/functions/rotate_refresh_token.sql (applied right after the
-- numbered migrations, in the same transaction) creates the new one.
drop function rotate_refresh_token(uuid, bytea, bytea, uuid, uuid, bytea, timestamptz, interval, text, text, integer, interval);
