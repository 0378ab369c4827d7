-- At most one role per (user, tenant); the tenant fixes the app. The user must be a member of
-- that app and the tenant must belong to it: both are foreign keys, so no query can break it.
create table roles (
  user_id uuid not null,
  tenant_id uuid not null,
  app_id uuid not null,
  role text not null,
  assigned_at timestamptz not null,
  primary key (user_id, tenant_id),
  foreign key (app_id, user_id) references app_memberships (app_id, user_id) on delete cascade,
  foreign key (tenant_id, app_id) references tenants (id, app_id) on delete cascade,
  constraint roles_role_name check (role in ('owner', 'admin', 'staff', 'viewer'))
);

create index roles_app_user on roles (app_id, user_id);
