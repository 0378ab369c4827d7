-- One per-destination code throttle instead of two: the rate-limit rule otp_request_address
-- (rate_limit_counters, 0013: configurable, listed and liftable on the admin console) counts the
-- code requests of an address; the fixed hour window kept on each otp_codes row (0006) counted
-- the same requests a second time with another limit. The row keeps sent_at, for the 60-second
-- resend interval.
alter table otp_codes
  drop column window_started_at,
  drop column sends_in_window;
