// Tenants before any request: keys' labels, the --tenants file, and the settings' order.
import t from 'tap';
import { parseTenantsFile, TenantTable } from '../../../src/inference/tenants/tenant-table.js';

t.test('each key is its own tenant, labelled by its position unless the file names it', async (t) => {
  const table = new TenantTable(2, { keys: { 'key-2': { name: 'batch-team', priorityClass: 'batch', weight: 0.5, limits: { requestsPerMinute: 10 } } } });
  t.same(table.forKey(0), { id: 'key-1', key: 'key-1', appSlug: null, weight: 1, priorityClass: 'interactive', limits: {} });
  t.same(table.forKey(1), { id: 'batch-team', key: 'batch-team', appSlug: null, weight: 0.5, priorityClass: 'batch', limits: { requestsPerMinute: 10 } });
  t.same(table.anonymous(), { id: 'anonymous', key: 'anonymous', appSlug: null, weight: 1, priorityClass: 'interactive', limits: {} });
});

t.test('tokens: tenant_id, else sub; auth-server keys: tenantId, else key:<keyId>, with their settings under the file\'s', async (t) => {
  const table = new TenantTable(0, { tenants: { acme: { weight: 3 } } }, { requestsPerMinute: 5 });
  t.same(table.forToken('acme', 'user-1', 'app'), { id: 'acme', key: 'access-token', appSlug: 'app', weight: 3, priorityClass: 'interactive', limits: { requestsPerMinute: 5 } });
  t.same(table.forToken(null, 'user-1', 'app').id, 'user-1');
  t.same(table.forIssuedKey('k1', null, 'app', { weight: 2, priorityClass: 'batch', limits: { tokensPerMinute: 1000 } }),
    { id: 'key:k1', key: 'k1', appSlug: 'app', weight: 2, priorityClass: 'batch', limits: { tokensPerMinute: 1000 } });
  t.same(table.forIssuedKey('k2', 'acme', 'app', { weight: 2, limits: {} }),
    { id: 'acme', key: 'k2', appSlug: 'app', weight: 3, priorityClass: 'interactive', limits: { requestsPerMinute: 5 } }, 'the file\'s tenant entry first; no limits on the key: the defaults');
});

t.test('the file is checked field by field', async (t) => {
  t.same(parseTenantsFile('{"anonymous":{"limits":{"concurrentRequests":2}}}', 'f.json'), { anonymous: { limits: { concurrentRequests: 2 } } });
  t.throws(() => parseTenantsFile('[', 'f.json'), { message: /^f\.json: not JSON/ });
  t.throws(() => parseTenantsFile('{"users":{}}', 'f.json'), { message: 'f.json: unknown field "users"' });
  t.throws(() => parseTenantsFile('{"keys":{"key-1":{"weight":0}}}', 'f.json'), { message: 'f.json: keys.key-1.weight: must be a number above 0 and at most 100' });
  t.throws(() => parseTenantsFile('{"tenants":{"a":{"priorityClass":"urgent"}}}', 'f.json'), { message: 'f.json: tenants.a.priorityClass: must be "interactive" or "batch"' });
  t.throws(() => parseTenantsFile('{"tenants":{"a":{"name":"b"}}}', 'f.json'), { message: 'f.json: tenants.a: unknown field "name"' });
  t.throws(() => parseTenantsFile('{"keys":{"key-1":{"limits":{"requestsPerMinute":1.5}}}}', 'f.json'), { message: 'f.json: keys.key-1.limits.requestsPerMinute: must be an integer of 1 or more' });
  t.throws(() => new TenantTable(1, { keys: { 'key-2': {} } }), { message: '--tenants: keys.key-2: no such key (the keys of --api-key and --api-key-file are key-1 to key-1)' });
});
