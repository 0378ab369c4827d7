-- Events for app backends: each app registers webhook endpoints for a chosen set of audit event
-- types, and every audit event of the app (or, for a user's deletion and restoration, of an app
-- the user is a member of) becomes one pending delivery per subscribed endpoint. The deliveries
-- are the outbox: a trigger on audit_events writes them, so they commit or roll back with the
-- change the event records, and a dispatcher sends them after the commit (webhooks/dispatcher.ts).
create table webhook_endpoints (
  id uuid primary key default gen_random_uuid(),
  app_id uuid not null references apps (id) on delete cascade,
  url text not null,
  -- The signing secret (Standard Webhooks "whsec_..."), sealed with AES-256-GCM under a key
  -- derived from the master key, the endpoint id as associated data.
  secret_ciphertext bytea not null,
  event_types text[] not null,
  created_at timestamptz not null,
  constraint webhook_endpoints_url check (url ~ '^https?://'),
  constraint webhook_endpoints_event_types check (cardinality(event_types) between 1 and 50)
);

create index webhook_endpoints_app on webhook_endpoints (app_id);

create table webhook_deliveries (
  -- The webhook-id header is 'msg_' and this id: the same on every retry, so receivers can
  -- drop duplicates.
  id uuid primary key default gen_random_uuid(),
  endpoint_id uuid not null references webhook_endpoints (id) on delete cascade,
  app_id uuid not null,
  audit_event_id bigint not null,
  event_type text not null,
  -- The body sent: {"type", "timestamp", "data"} as Standard Webhooks suggests.
  payload jsonb not null,
  created_at timestamptz not null,
  -- pending: to be sent at next_attempt_at; delivered: a 2xx answer; dead: every retry failed
  -- (the admin may redeliver it, which makes it pending again).
  state text not null default 'pending',
  attempts integer not null default 0,
  next_attempt_at timestamptz not null,
  last_attempt_at timestamptz,
  last_status integer,
  last_error text,
  delivered_at timestamptz,
  constraint webhook_deliveries_state check (state in ('pending', 'delivered', 'dead'))
);

create index webhook_deliveries_due on webhook_deliveries (next_attempt_at) where state = 'pending';
create index webhook_deliveries_app on webhook_deliveries (app_id, state, created_at desc);

-- The outbox write: one delivery per endpoint subscribed to the event, in the event's
-- transaction. A commit that enqueued something notifies the dispatchers (NOTIFY is sent at
-- commit, and not at all on rollback).
create function enqueue_webhook_deliveries() returns trigger
language plpgsql
as $$
declare
  v_apps uuid[];
begin
  -- The apps the event concerns: its own, or for an event of no app about a user (deletion,
  -- restoration, revocation by the admin), every app the user is a member of.
  if new.app_id is not null then
    v_apps := array[new.app_id];
  elsif new.user_id is not null then
    select coalesce(array_agg(m.app_id), '{}') into v_apps from app_memberships m where m.user_id = new.user_id;
  else
    return null;
  end if;
  insert into webhook_deliveries (endpoint_id, app_id, audit_event_id, event_type, payload, created_at, next_attempt_at)
  select e.id, e.app_id, new.id, new.type,
    jsonb_build_object(
      'type', new.type,
      'timestamp', to_char(new.occurred_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
      'data', jsonb_build_object(
        'event_id', new.id::text,
        'app_id', e.app_id,
        'user_id', new.user_id,
        'session_id', new.family_id,
        'ip', new.ip,
        'user_agent', new.user_agent,
        'details', new.details
      )
    ),
    new.occurred_at, new.occurred_at
  from webhook_endpoints e
  where e.app_id = any (v_apps) and new.type = any (e.event_types);
  if found then
    perform pg_notify('auth_webhook_deliveries', '');
  end if;
  return null;
end;
$$;

create trigger enqueue_webhook_deliveries
after insert on audit_events
for each row execute function enqueue_webhook_deliveries();
