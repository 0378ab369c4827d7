-- Resource indicators (RFC 8707): the resources (APIs, e.g. an inference-server) whose audience
-- an app's tokens may carry, a code's and a session's resource; clients registered by
-- themselves (RFC 7591) or named by a metadata document URL (Client ID Metadata Documents).
alter table apps
  add column oauth_resources text[] not null default '{}';

alter table oauth_authorization_codes
  add column resource text;

alter table refresh_families
  add column resource text;

alter table oauth_clients
  -- dynamic: registered at POST /oauth/register; metadata_document: client_id is metadata_url.
  add column origin text not null default 'admin',
  add column metadata_url text,
  -- When a metadata document's copy must be fetched again (its HTTP caching headers).
  add column metadata_expires_at timestamptz,
  add constraint oauth_clients_origin check (origin in ('admin', 'dynamic', 'metadata_document')),
  add constraint oauth_clients_metadata_url check ((origin = 'metadata_document') = (metadata_url is not null));

create unique index oauth_clients_metadata_url on oauth_clients (metadata_url) where metadata_url is not null;
