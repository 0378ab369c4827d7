-- What the inference server metered, per app, tenant, key, model and UTC hour. Its processes
-- hand rows over in batches (mount.ts AuthService.usage.record) that add to the counters, so
-- several processes flushing the same hour sum up (queries/usage.ts addUsageHours).
create table usage_hourly (
  -- Null for usage of keys that are not this service's (a plain --api-key) or of an app slug
  -- this service does not know.
  app_id uuid references apps (id) on delete cascade,
  -- Labels, not references: a tenant id or name, an API key id or a non-secret label.
  tenant text not null,
  key_label text not null,
  model text not null,
  -- The start of the UTC hour.
  hour timestamptz not null,
  requests bigint not null default 0,
  prompt_tokens bigint not null default 0,
  cached_prompt_tokens bigint not null default 0,
  completion_tokens bigint not null default 0,
  queue_ms bigint not null default 0,
  compute_ms bigint not null default 0,
  -- A null app is one value here (PostgreSQL 15): usage without an app has one row per hour too.
  constraint usage_hourly_row unique nulls not distinct (app_id, tenant, key_label, model, hour),
  constraint usage_hourly_hour check (hour = date_trunc('hour', hour, 'UTC')),
  constraint usage_hourly_labels check (char_length(tenant) <= 200 and char_length(key_label) <= 200 and char_length(model) <= 200)
);

create index usage_hourly_hour on usage_hourly (hour);

-- The (app, hour) pairs whose usage.hourly event was written: the claim that makes emission
-- exactly-once across workers and instances (service/usage.ts emitClosedUsageHours).
create table usage_hours_emitted (
  app_id uuid not null references apps (id) on delete cascade,
  hour timestamptz not null,
  emitted_at timestamptz not null,
  primary key (app_id, hour)
);

-- The usage.hourly events are written by the service itself, on no one's request.
alter table audit_events drop constraint audit_events_actor;
alter table audit_events add constraint audit_events_actor check (actor in ('app', 'admin', 'anonymous', 'service'));
