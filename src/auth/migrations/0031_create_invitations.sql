-- Invitations into a tenant with a role, sent to an e-mail address or phone number. Accepted by
-- signing in as that address (any method) or by presenting the token from the message while
-- signed in as it. The token is stored as its SHA-256 only; a resend replaces it.
create table invitations (
  id uuid primary key,
  app_id uuid not null references apps (id) on delete cascade,
  tenant_id uuid not null,
  channel text not null,
  destination text not null,
  role text not null,
  token_hash bytea not null,
  state text not null default 'pending',
  invited_by text not null,
  created_at timestamptz not null,
  expires_at timestamptz not null,
  last_sent_at timestamptz not null,
  send_count integer not null default 1,
  accepted_at timestamptz,
  accepted_user_id uuid references users (id) on delete set null,
  ended_at timestamptz,
  constraint invitations_tenant foreign key (tenant_id, app_id) references tenants (id, app_id) on delete cascade,
  constraint invitations_channel check (channel in ('email', 'phone')),
  constraint invitations_role check (role in ('owner', 'admin', 'staff', 'viewer')),
  constraint invitations_state check (state in ('pending', 'accepted', 'revoked', 'expired')),
  constraint invitations_invited_by check (invited_by in ('admin', 'app')),
  constraint invitations_token_hash unique (token_hash)
);

-- One pending invitation per address and tenant.
create unique index invitations_pending_destination on invitations (tenant_id, channel, destination) where state = 'pending';
create index invitations_app_destination on invitations (app_id, channel, destination) where state = 'pending';
create index invitations_pending_expiry on invitations (expires_at) where state = 'pending';

-- An app's texts of invitation messages (defaults in src/auth/invitations/templates.ts where null).
create table app_invitation_templates (
  app_id uuid primary key references apps (id) on delete cascade,
  email_from text,
  email_subject text,
  email_text text,
  sms_text text,
  accept_url text,
  updated_at timestamptz not null,
  constraint app_invitation_templates_accept_url check (accept_url is null or position('{{token}}' in accept_url) > 0)
);
