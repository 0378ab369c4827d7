-- What each inference-server replica admitted of each tenant's limits, for limits held across a
-- fleet on one database (src/inference/tenants/fleet-limits.ts). Each replica adds its own
-- counts in batches (a few times a second, never a write per request) and reads the others'.
-- Requests and tokens by UTC second, kept for the 60-second window and deleted after; requests in
-- progress as each replica last reported them, with when (a replica silent for 10 s is gone).
create table tenant_rate_counts (
  tenant text not null,
  replica text not null,
  second bigint not null,
  requests bigint not null default 0,
  tokens bigint not null default 0,
  primary key (tenant, replica, second)
);

create index tenant_rate_counts_second on tenant_rate_counts (second);

create table tenant_replicas (
  replica text primary key,
  seen_at timestamptz not null
);

create table tenant_in_flight (
  tenant text not null,
  replica text not null references tenant_replicas (replica) on delete cascade,
  in_flight integer not null,
  primary key (tenant, replica)
);
