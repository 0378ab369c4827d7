-- The usage batches inference-server replicas sent over HTTP (POST /fleet/usage), by app and the
-- batch id the replica made once for the batch: claimed in the transaction that adds the batch's
-- rows to usage_hourly, so a batch sent again (its answer lost, a timeout after the commit) adds
-- nothing (service/usage.ts recordAppUsageBatch). Kept a day, far past any retry.
create table usage_batches (
  app_id uuid not null references apps (id) on delete cascade,
  batch_id uuid not null,
  received_at timestamptz not null,
  primary key (app_id, batch_id)
);

create index usage_batches_received_at on usage_batches (received_at);
