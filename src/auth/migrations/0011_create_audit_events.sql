-- The audit trail: one row per security event (see src/auth/audit.ts for the types). Rows are
-- written in the transaction of the change they record, so a rolled-back change leaves none.
-- Append-only: updates are refused, and deletes too except by the retention purge, which sets
-- auth.audit_purge for its own transaction (purgeAuditEvents). TRUNCATE (tests) is not a row
-- operation and passes.
create table audit_events (
  id bigint generated always as identity primary key,
  occurred_at timestamptz not null,
  type text not null,
  -- Who acted: an app backend (app credentials: logins and refreshes it makes for its users
  -- included), the administrator (admin key), or nobody authenticated (a rejected admin key).
  actor text not null,
  app_id uuid,
  user_id uuid,
  -- The refresh family (session) concerned, for login, refresh, reuse and revoke.
  family_id uuid,
  ip text,
  user_agent text,
  details jsonb not null default '{}'::jsonb,
  constraint audit_events_actor check (actor in ('app', 'admin', 'anonymous')),
  constraint audit_events_type_format check (type ~ '^[a-z_]+\.[a-z_]+$')
);

-- The admin query filters by app, user or type and pages by id, newest first.
create index audit_events_app on audit_events (app_id, id) where app_id is not null;
create index audit_events_user on audit_events (user_id, id) where user_id is not null;
create index audit_events_type on audit_events (type, id);
create index audit_events_occurred on audit_events (occurred_at);

create function audit_events_append_only() returns trigger
language plpgsql
as $$
begin
  if tg_op = 'DELETE' and current_setting('auth.audit_purge', true) = 'on' then
    return old;
  end if;
  raise exception 'audit_events is append-only (% refused)', tg_op using errcode = '55000';
end;
$$;

create trigger audit_events_append_only
before update or delete on audit_events
for each row execute function audit_events_append_only();
