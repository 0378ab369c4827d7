-- Defences of an app against SMS pumping (codes requested to premium or sequential numbers to
-- earn the sender's fees), all off until the app's row says otherwise:
-- allowed_calling_codes: the countries (E.164 calling codes, "1", "44", "351") codes may be
-- sent to (null: all); daily_cap: SMS codes per app per UTC day; prefix_hourly: per number
-- prefix (the number without its last 3 digits: a block of 1,000 numbers) per hour;
-- country_hourly: per calling code per hour; the verification-ratio guard: once a country has
-- had ratio_min_sent codes sent in the current hour, it is throttled for the rest of the hour
-- when fewer than ratio_min_verified of them (verified / sent) were verified.
create table app_sms_defences (
  app_id uuid primary key references apps (id) on delete cascade,
  allowed_calling_codes text[],
  daily_cap integer,
  prefix_hourly integer,
  country_hourly integer,
  ratio_min_sent integer not null default 20,
  ratio_min_verified real,
  updated_at timestamptz not null,
  constraint app_sms_defences_limits check (
    coalesce(daily_cap, 1) >= 1 and coalesce(prefix_hourly, 1) >= 1 and coalesce(country_hourly, 1) >= 1
    and ratio_min_sent >= 1 and coalesce(ratio_min_verified, 0) between 0 and 1
  )
);

-- Fixed windows aligned to the UTC day or hour: hits per (app, kind, subject, window start).
-- Every attempt is counted, refused ones included; the first hit over the limit is the trip
-- that gets audited. Rows of ended windows are deleted by the next hit of the app.
create table sms_send_counters (
  app_id uuid not null references apps (id) on delete cascade,
  kind text not null,
  subject text not null,
  window_start timestamptz not null,
  hits integer not null,
  primary key (app_id, kind, subject, window_start),
  constraint sms_send_counters_kind check (kind in ('daily_cap', 'prefix_velocity', 'country_velocity', 'allow_list'))
);

-- Codes sent and verified per country and hour, for the verification-ratio guard.
create table sms_country_hours (
  app_id uuid not null references apps (id) on delete cascade,
  calling_code text not null,
  hour_start timestamptz not null,
  sent integer not null default 0,
  verified integer not null default 0,
  -- Set by the request that found the ratio collapsed; the country is refused until the hour ends.
  throttled_at timestamptz,
  primary key (app_id, calling_code, hour_start)
);
