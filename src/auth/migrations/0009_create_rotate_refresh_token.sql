-- Refresh-token rotation and reuse detection in one statement, hence one transaction and one
-- round trip. The app's credentials are checked first (an unknown app and a wrong secret take
-- the same path; p_secret_hash is the SHA-256 of the presented secret, so the comparison can
-- at most reveal bits of a hash, never of the secret). The family row is then locked; each
-- statement of a PL/pgSQL function reads a fresh snapshot, so everything read after the lock
-- is what the previous holder committed.
--
-- Outcomes: invalid_credentials | rotated | not_found (unknown token, or a token of another app) | user_deleted |
-- reuse (a rotated token: the family is revoked here, and that revocation commits) | revoked |
-- expired (token older than 30 days or session older than 1 year) | tenant_not_found (the
-- requested tenant is not one where the user has a role; nothing is written).
-- On `rotated`: the app slug, user_id, the tenant the session now remembers, and the user's
-- roles in the app (oldest assignment first) from which the caller picks the token's tenant
-- and roles.
create function rotate_refresh_token(
  p_app_id uuid,
  p_secret_hash bytea,
  p_token_hash bytea,
  p_requested_tenant uuid,
  p_child_id uuid,
  p_child_hash bytea,
  p_now timestamptz,
  p_child_lifetime interval
)
returns table (outcome text, app_slug text, user_id uuid, remembered_tenant_id uuid, roles json)
language plpgsql
as $$
declare
  v record;
  v_slug text;
begin
  select a.slug into v_slug
  from apps a
  where a.id = p_app_id and a.secret_hash = p_secret_hash;
  if not found then
    return query select 'invalid_credentials', null::text, null::uuid, null::uuid, null::json;
    return;
  end if;

  -- The family is locked; when this waited for the lock, PostgreSQL re-read the family row, so
  -- current_token_id and revoked_at are the values committed by the previous holder. The token's
  -- columns used here (id, expires_at) never change.
  select
    t.id as token_id, t.expires_at as token_expires_at,
    f.id as family_id, f.user_id, f.tenant_id, f.current_token_id, f.expires_at as family_expires_at, f.revoked_at,
    u.deleted_at as user_deleted_at
  into v
  from refresh_tokens t
  join refresh_families f on f.id = t.family_id
  join users u on u.id = f.user_id
  where t.token_hash = p_token_hash and f.app_id = p_app_id
  for update of f;

  if not found then
    return query select 'not_found', null::text, null::uuid, null::uuid, null::json;
  elsif v.user_deleted_at is not null then
    return query select 'user_deleted', null::text, null::uuid, null::uuid, null::json;
  elsif v.token_id <> v.current_token_id then
    -- Replay of a rotated token. A new statement sees the live token committed by the rotation
    -- that held the lock before us.
    if v.revoked_at is null then
      with family as (
        update refresh_families
        set revoked_at = p_now, revoked_reason = 'reuse'
        where id = v.family_id
      )
      update refresh_tokens
      set state = 'revoked'
      where id = v.current_token_id and state = 'active';
    end if;
    return query select 'reuse', null::text, null::uuid, null::uuid, null::json;
  elsif v.revoked_at is not null then
    return query select 'revoked', null::text, null::uuid, null::uuid, null::json;
  elsif v.token_expires_at <= p_now or v.family_expires_at <= p_now then
    return query select 'expired', null::text, null::uuid, null::uuid, null::json;
  elsif p_requested_tenant is not null and not exists (
    select 1
    from roles r
    where r.user_id = v.user_id and r.tenant_id = p_requested_tenant and r.app_id = p_app_id
  ) then
    return query select 'tenant_not_found', null::text, null::uuid, null::uuid, null::json;
  else
    return query
    with parent as (
      update refresh_tokens
      set state = 'rotated', rotated_at = p_now
      where id = v.token_id
    ), child as (
      insert into refresh_tokens (id, family_id, parent_id, token_hash, state, issued_at, expires_at)
      values (p_child_id, v.family_id, v.token_id, p_child_hash, 'active', p_now, least(p_now + p_child_lifetime, v.family_expires_at))
    ), family as (
      update refresh_families
      set current_token_id = p_child_id, tenant_id = coalesce(p_requested_tenant, v.tenant_id)
      where id = v.family_id
    )
    select
      'rotated',
      v_slug,
      v.user_id,
      coalesce(p_requested_tenant, v.tenant_id),
      coalesce(
        (
          select json_agg(json_build_object('tenant_id', r.tenant_id, 'role', r.role) order by r.assigned_at, r.tenant_id)
          from roles r
          where r.app_id = p_app_id and r.user_id = v.user_id
        ),
        '[]'::json
      );
  end if;
end;
$$;
