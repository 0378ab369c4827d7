-- rotate_refresh_token: the one current definition. Migrations 0009, 0012 and 0014 each stated
-- the whole function again to change a part of it (the audit rows, the per-family rate), so its
-- text was spread over three files and a review had to diff them. From now on a change edits
-- this file: migrate.ts applies it after the numbered migrations whenever its text changed
-- (checksum in schema_functions), and its diff shows what changed. A change of the arguments or
-- of the result type needs a `drop function` of the old signature before the create.
--
-- What it does, in one transaction holding the family's row lock: checks the app credentials;
-- rotates a live token (new child, family's current token, token.refreshed audit row); treats a
-- rotated token as a replay (revokes the family and its live token, token.reuse_detected);
-- refuses a revoked family, an expired token or session, a deleted user, a requested tenant
-- without a role; counts the family's refresh rate (take_rate_limit, rule refresh_family) after
-- every other check and answers `rate_limited` with retry_at instead of rotating. A rotation
-- also answers the session's `amr` (how the user signed in, read from the locked family), which
-- every access token of the family carries, so a refresh needs no second statement to find it
-- (the result column came with migration 0045, which dropped the old signature).
create or replace function rotate_refresh_token(
  p_app_id uuid,
  p_secret_hash bytea,
  p_token_hash bytea,
  p_requested_tenant uuid,
  p_child_id uuid,
  p_child_hash bytea,
  p_now timestamptz,
  p_child_lifetime interval,
  p_ip text default null,
  p_user_agent text default null,
  p_family_max_hits integer default null,
  p_family_window interval default null
)
returns table (outcome text, app_slug text, user_id uuid, remembered_tenant_id uuid, roles json, retry_at timestamptz, amr text[])
language plpgsql
as $$
declare
  v record;
  v_slug text;
  v_blocked_until timestamptz;
begin
  select a.slug into v_slug
  from apps a
  where a.id = p_app_id and a.secret_hash = p_secret_hash;
  if not found then
    return query select 'invalid_credentials', null::text, null::uuid, null::uuid, null::json, null::timestamptz, null::text[];
    return;
  end if;

  -- The family is locked; when this waited for the lock, PostgreSQL re-read the family row, so
  -- current_token_id and revoked_at are the values committed by the previous holder. The token's
  -- columns used here (id, expires_at) never change.
  select
    t.id as token_id, t.expires_at as token_expires_at,
    f.id as family_id, f.user_id, f.tenant_id, f.current_token_id, f.expires_at as family_expires_at, f.revoked_at,
    f.amr, u.deleted_at as user_deleted_at
  into v
  from refresh_tokens t
  join refresh_families f on f.id = t.family_id
  join users u on u.id = f.user_id
  where t.token_hash = p_token_hash and f.app_id = p_app_id
  for update of f;

  if not found then
    return query select 'not_found', null::text, null::uuid, null::uuid, null::json, null::timestamptz, null::text[];
  elsif v.user_deleted_at is not null then
    return query select 'user_deleted', null::text, null::uuid, null::uuid, null::json, null::timestamptz, null::text[];
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
      insert into audit_events (occurred_at, type, actor, app_id, user_id, family_id, ip, user_agent)
      values (p_now, 'token.reuse_detected', 'app', p_app_id, v.user_id, v.family_id, p_ip, p_user_agent);
    end if;
    return query select 'reuse', null::text, null::uuid, null::uuid, null::json, null::timestamptz, null::text[];
  elsif v.revoked_at is not null then
    return query select 'revoked', null::text, null::uuid, null::uuid, null::json, null::timestamptz, null::text[];
  elsif v.token_expires_at <= p_now or v.family_expires_at <= p_now then
    return query select 'expired', null::text, null::uuid, null::uuid, null::json, null::timestamptz, null::text[];
  elsif p_requested_tenant is not null and not exists (
    select 1
    from roles r
    where r.user_id = v.user_id and r.tenant_id = p_requested_tenant and r.app_id = p_app_id
  ) then
    return query select 'tenant_not_found', null::text, null::uuid, null::uuid, null::json, null::timestamptz, null::text[];
  else
    -- The family's refresh rate, counted under the family lock (so without contention of its own).
    if p_family_max_hits is not null then
      v_blocked_until := take_rate_limit('refresh_family', v.family_id::text, p_family_max_hits, p_family_window, p_now);
      if v_blocked_until is not null then
        return query select 'rate_limited', null::text, null::uuid, null::uuid, null::json, v_blocked_until, null::text[];
        return;
      end if;
    end if;
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
    ), audit as (
      insert into audit_events (occurred_at, type, actor, app_id, user_id, family_id, ip, user_agent)
      values (p_now, 'token.refreshed', 'app', p_app_id, v.user_id, v.family_id, p_ip, p_user_agent)
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
      ),
      null::timestamptz,
      v.amr;
  end if;
end;
$$;
