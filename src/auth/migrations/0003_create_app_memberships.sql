-- A user exists "in an app" once they have logged in to it.
create table app_memberships (
  app_id uuid not null references apps (id) on delete cascade,
  user_id uuid not null references users (id) on delete cascade,
  created_at timestamptz not null,
  last_login_at timestamptz not null,
  primary key (app_id, user_id)
);

create index app_memberships_user on app_memberships (user_id);
