// The tenants this server knows before any request (docs/tenants.md, "Per-key settings"): each
// key of --api-key / --api-key-file is a tenant labelled "key-N" (its position, from 1), unless
// --tenants FILE names it; FILE also sets weights, classes and limits by key, by tenant and for
// the anonymous tenant; --tenant-rpm / --tenant-tpm / --tenant-concurrency are the limits of every
// tenant the file does not limit itself. The file, in JSON:
//   { "keys":      { "key-1": { "name": "acme-batch", "weight": 1, "priorityClass": "batch",
//                                "limits": { "requestsPerMinute": 600, "tokensPerMinute": 200000, "concurrentRequests": 8 } } },
//     "tenants":   { "acme": { "weight": 2 } },         // by tenant id (also access tokens' tenants)
//     "anonymous": { "limits": { "requestsPerMinute": 60 } } }
// Settings apply in this order, the first that gives a field winning: the key's entry, the
// tenant's entry, what an auth-server key carries, the defaults.
import { readFileSync } from 'node:fs';
import { ANONYMOUS, checkTenantSettings, DEFAULT_SETTINGS, type Tenant, type TenantLimits, type TenantSettings } from './tenant.js';

/** One entry of the file: every field optional. */
export interface TenantEntry extends Partial<TenantSettings> {
  /** keys only: the key's label and tenant id, instead of "key-N". */
  name?: string;
}

export interface TenantsFile {
  keys?: Record<string, TenantEntry>;
  tenants?: Record<string, TenantEntry>;
  anonymous?: TenantEntry;
}

/** Checks an entry's fields (checkTenantSettings, and a key's name); throws an Error naming `where`. */
function checkEntry(value: unknown, where: string, allowName: boolean): TenantEntry {
  const settings = checkTenantSettings(value, where, allowName ? ['name'] : []);
  const name = (value as Record<string, unknown>)['name'];
  if (name !== undefined && (typeof name !== 'string' || name === '')) throw new Error(`${where}.name: must be a non-empty string`);
  return name === undefined ? settings : { ...settings, name };
}

/** The file's JSON, checked; throws an Error naming the file and the field. */
export function parseTenantsFile(text: string, path: string): TenantsFile {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new Error(`${path}: not JSON (${(err as Error).message})`);
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw new Error(`${path}: must be a JSON object`);
  const file = json as Record<string, unknown>;
  const out: TenantsFile = {};
  for (const [section, value] of Object.entries(file)) {
    if (section === 'anonymous') {
      out.anonymous = checkEntry(value, `${path}: anonymous`, false);
      continue;
    }
    if (section !== 'keys' && section !== 'tenants') throw new Error(`${path}: unknown field "${section}"`);
    if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new Error(`${path}: ${section} must be an object`);
    const entries: Record<string, TenantEntry> = {};
    for (const [name, entry] of Object.entries(value)) entries[name] = checkEntry(entry, `${path}: ${section}.${name}`, section === 'keys');
    out[section] = entries;
  }
  return out;
}

export function readTenantsFile(path: string): TenantsFile {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new Error(`--tenants: cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  return parseTenantsFile(text, path);
}

export class TenantTable {
  private readonly keyLabels: string[];

  /** `nKeys`: how many keys --api-key and --api-key-file gave, in their order. */
  constructor(nKeys: number, private readonly file: TenantsFile = {}, private readonly defaultLimits: TenantLimits = {}) {
    this.keyLabels = Array.from({ length: nKeys }, (_, i) => file.keys?.[`key-${i + 1}`]?.name ?? `key-${i + 1}`);
    for (const label of Object.keys(file.keys ?? {})) {
      const n = /^key-(\d+)$/.exec(label);
      if (!n || Number(n[1]) < 1 || Number(n[1]) > nKeys) throw new Error(`--tenants: keys.${label}: no such key (the keys of --api-key and --api-key-file are key-1 to key-${nKeys})`);
    }
  }

  /** The tenant of the key at `index` (0-based) of --api-key / --api-key-file. */
  forKey(index: number): Tenant {
    const label = this.keyLabels[index]!;
    return { id: label, key: label, appSlug: null, ...this.settings(label, this.file.keys?.[`key-${index + 1}`]) };
  }

  /** The tenant of an access token: its tenant_id, else its subject. */
  forToken(tenantId: string | null, subject: string, appSlug: string): Tenant {
    const id = tenantId ?? subject;
    return { id, key: 'access-token', appSlug, ...this.settings(id) };
  }

  /** The tenant of an auth-server API key: its tenantId, else "key:<keyId>"; usage labels it by its id. */
  forIssuedKey(keyId: string, tenantId: string | null, appSlug: string, issued: Partial<TenantSettings>): Tenant {
    const id = tenantId ?? `key:${keyId}`;
    return { id, key: keyId, appSlug, ...this.settings(id, undefined, issued) };
  }

  anonymous(): Tenant {
    return { id: ANONYMOUS, key: ANONYMOUS, appSlug: null, ...this.settings(ANONYMOUS, this.file.anonymous) };
  }

  private settings(tenantId: string, own?: TenantEntry, issued: Partial<TenantSettings> = {}): TenantSettings {
    const byTenant = tenantId === ANONYMOUS ? undefined : this.file.tenants?.[tenantId];
    return {
      weight: own?.weight ?? byTenant?.weight ?? issued.weight ?? DEFAULT_SETTINGS.weight,
      priorityClass: own?.priorityClass ?? byTenant?.priorityClass ?? issued.priorityClass ?? DEFAULT_SETTINGS.priorityClass,
      limits: own?.limits ?? byTenant?.limits ?? (issued.limits && Object.keys(issued.limits).length > 0 ? issued.limits : undefined) ?? this.defaultLimits,
    };
  }
}
