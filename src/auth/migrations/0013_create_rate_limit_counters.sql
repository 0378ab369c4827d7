-- Rate limits shared by every instance on the database: one fixed-window counter per (rule,
-- subject), e.g. ('otp_request_ip', '203.0.113.7'). take_rate_limit counts a hit with one
-- upsert, so concurrent hits serialise on the row lock and never pass the limit together.
-- Unlogged: counters are not worth a WAL write, a transaction that writes only this table
-- commits without waiting for a WAL flush (so the row lock is held for microseconds), and a
-- crash of PostgreSQL merely resets the windows.
create unlogged table rate_limit_counters (
  rule text not null,
  subject text not null,
  window_ends_at timestamptz not null,
  hits integer not null,
  -- The rule's limit when the last hit was counted: a subject is blocked while hits >= max_hits
  -- and the window lasts (the admin console lists these rows).
  max_hits integer not null,
  primary key (rule, subject)
);

create index rate_limit_counters_blocked on rate_limit_counters (window_ends_at) where hits >= max_hits;

-- Counts one hit of (p_rule, p_subject). Returns null when the hit is within the limit, else the
-- end of the window, when the subject may try again. A window that has ended starts over.
create function take_rate_limit(p_rule text, p_subject text, p_max_hits integer, p_window interval, p_now timestamptz)
returns timestamptz
language sql
as $$
  insert into rate_limit_counters as c (rule, subject, window_ends_at, hits, max_hits)
  values (p_rule, p_subject, p_now + p_window, 1, p_max_hits)
  on conflict (rule, subject) do update
  set window_ends_at = case when c.window_ends_at <= p_now then p_now + p_window else c.window_ends_at end,
      hits = case when c.window_ends_at <= p_now then 1 else c.hits + 1 end,
      max_hits = p_max_hits
  returning case when hits > max_hits then window_ends_at end
$$;
