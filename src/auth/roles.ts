// The roles a user holds in a tenant. One role per (user, tenant); the database enforces the
// same four names (migrations/0005_create_roles.sql, constraint roles_role_name).

/** The four role names, highest first. */
export const ROLE_NAMES = ['owner', 'admin', 'staff', 'viewer'] as const;
export type RoleName = (typeof ROLE_NAMES)[number];

/** Rank of each role: a role satisfies a requirement of its own rank or lower (owner > admin > staff > viewer). */
export const ROLE_RANK: Readonly<Record<RoleName, number>> = { viewer: 1, staff: 2, admin: 3, owner: 4 };

export function isRoleName(value: unknown): value is RoleName {
  return typeof value === 'string' && (ROLE_NAMES as readonly string[]).includes(value);
}
