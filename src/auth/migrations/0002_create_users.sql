-- Global identities. A user is found by a normalised e-mail address (lower case) or phone
-- number (E.164). Soft-deleted users keep their row, roles and memberships; deleted_at is set.
create table users (
  id uuid primary key default gen_random_uuid(),
  email text unique,
  phone text unique,
  created_at timestamptz not null,
  deleted_at timestamptz,
  constraint users_identified check (email is not null or phone is not null),
  constraint users_email_normalised check (email = lower(email) and char_length(email) <= 254),
  constraint users_phone_e164 check (phone ~ '^\+[1-9][0-9]{6,14}$')
);
