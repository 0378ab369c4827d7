-- One row per (app, destination): the latest one-time code and the destination's send throttle.
-- Writing a new code replaces the old one, so only the latest code is ever valid.
create table otp_codes (
  app_id uuid not null references apps (id) on delete cascade,
  channel text not null,
  destination text not null,
  -- HMAC-SHA256 of the code under a server key; null once the code was used.
  code_hash bytea,
  expires_at timestamptz not null,
  -- Verification attempts against this code, right or wrong; the code is burned at the limit.
  attempts integer not null,
  sent_at timestamptz not null,
  -- Fixed one-hour window of the per-destination send limit.
  window_started_at timestamptz not null,
  sends_in_window integer not null,
  primary key (app_id, channel, destination),
  constraint otp_codes_channel check (channel in ('email', 'phone'))
);

-- Fixed one-hour window of the per-app send limit.
create table otp_app_send_windows (
  app_id uuid primary key references apps (id) on delete cascade,
  window_started_at timestamptz not null,
  sends_in_window integer not null
);
