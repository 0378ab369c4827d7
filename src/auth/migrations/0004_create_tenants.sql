-- Organisations or workspaces inside one app.
create table tenants (
  id uuid primary key default gen_random_uuid(),
  app_id uuid not null references apps (id) on delete cascade,
  name text not null,
  created_at timestamptz not null,
  -- Target of the (tenant_id, app_id) foreign key of roles: a role's tenant is in the role's app.
  constraint tenants_id_app unique (id, app_id),
  constraint tenants_name_length check (char_length(name) between 1 and 200)
);

create index tenants_app_created on tenants (app_id, created_at, id);
