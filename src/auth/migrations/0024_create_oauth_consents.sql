-- Consent of a user to a third-party client: the scopes granted, remembered until revoked. An
-- admin-made client is first-party unless made with first_party false; a client that registered
-- itself or is a metadata document is third-party and asks for consent.
alter table oauth_clients
  add column first_party boolean not null default true;

create table oauth_consents (
  user_id uuid not null references users (id) on delete cascade,
  client_id uuid not null references oauth_clients (id) on delete cascade,
  app_id uuid not null references apps (id) on delete cascade,
  scopes text[] not null,
  granted_at timestamptz not null,
  primary key (user_id, client_id)
);
