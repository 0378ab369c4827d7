-- Enterprise SSO per tenant: a tenant's own identity provider (an upstream provider that
-- belongs to the tenant), the role its first sign-in gives, whether the tenant's domains must
-- sign in through it; and the tenant's e-mail domains, each proven by a DNS TXT record.
alter table upstream_providers add column tenant_id uuid references tenants (id) on delete cascade;
alter table upstream_providers add column default_role text;
alter table upstream_providers add column require_sso boolean not null default false;
alter table upstream_providers add constraint upstream_providers_default_role check (default_role in ('owner', 'admin', 'staff', 'viewer'));
alter table upstream_providers add constraint upstream_providers_tenant_settings check (tenant_id is not null or (default_role is null and not require_sso));
-- One SSO provider per tenant.
create unique index upstream_providers_tenant on upstream_providers (tenant_id) where tenant_id is not null;

-- A domain a tenant claims; verified once `_auth-verify.<domain>` holds TXT "auth-verify=<token>".
-- A verified domain belongs to one tenant of the app.
create table tenant_domains (
  id uuid primary key,
  app_id uuid not null references apps (id) on delete cascade,
  tenant_id uuid not null references tenants (id) on delete cascade,
  domain text not null,
  verification_token text not null,
  verified_at timestamptz,
  created_at timestamptz not null,
  constraint tenant_domains_domain check (domain ~ '^[a-z0-9]([a-z0-9-]{0,62})(\.[a-z0-9]([a-z0-9-]{0,62}))+$' and char_length(domain) <= 253),
  constraint tenant_domains_once unique (tenant_id, domain)
);

create unique index tenant_domains_verified on tenant_domains (app_id, domain) where verified_at is not null;
