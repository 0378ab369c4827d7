// One check of a tenant's settings (checkTenantSettings), whichever source gives them: --tenants,
// the router's forwarded header, an auth-server key.
import t from 'tap';
import { checkTenantSettings, TENANT_WEIGHT_MAX, TenantSettingsError } from '../../../src/inference/tenants/tenant.js';
import { parseTenantsFile } from '../../../src/inference/tenants/tenant-table.js';
import { decodeTenant, encodeTenant } from '../../../src/inference/tenants/forwarded-tenant.js';

const WEIGHT = `must be a number above 0 and at most ${TENANT_WEIGHT_MAX}`;

t.test('weights above 0 and up to 100 pass; 0, negatives, above 100, non-finite and non-numbers do not', async (t) => {
  t.equal(TENANT_WEIGHT_MAX, 100);
  for (const weight of [0.001, 1, 2.5, 100]) t.same(checkTenantSettings({ weight }, 'x'), { weight });
  for (const weight of [0, -1, 100.5, 101, Infinity, NaN, '2', null]) {
    t.throws(() => checkTenantSettings({ weight }, 'x'), new TenantSettingsError(`x.weight: ${WEIGHT}`), String(weight));
  }
});

t.test('the class is "interactive" or "batch"; each limit an integer of 1 or more; no other field', async (t) => {
  t.same(checkTenantSettings({ priorityClass: 'batch', limits: { tokensPerMinute: 5 } }, 'x'), { priorityClass: 'batch', limits: { tokensPerMinute: 5 } });
  t.same(checkTenantSettings({}, 'x'), {});
  t.same(checkTenantSettings({ weight: undefined, limits: { requestsPerMinute: 2, tokensPerMinute: undefined } }, 'x'), { limits: { requestsPerMinute: 2 } }, 'undefined is absent');
  t.throws(() => checkTenantSettings({ priorityClass: 'urgent' }, 'x'), { message: 'x.priorityClass: must be "interactive" or "batch"' });
  t.throws(() => checkTenantSettings({ limits: { requestsPerMinute: 0 } }, 'x'), { message: 'x.limits.requestsPerMinute: must be an integer of 1 or more' });
  t.throws(() => checkTenantSettings({ limits: { perDay: 3 } }, 'x'), { message: 'x.limits: unknown field "perDay"' });
  t.throws(() => checkTenantSettings({ limits: [] }, 'x'), { message: 'x.limits: must be an object' });
  t.throws(() => checkTenantSettings({ name: 'a' }, 'x'), { message: 'x: unknown field "name"' });
  t.same(checkTenantSettings({ name: 'a', weight: 2 }, 'x', ['name']), { weight: 2 }, 'a field the caller allows is left to it');
  t.throws(() => checkTenantSettings('heavy', 'x'), { message: 'x: must be an object' });
});

t.test('--tenants refuses a weight above 100', async (t) => {
  t.throws(() => parseTenantsFile('{"tenants":{"a":{"weight":101}}}', 'f.json'), { message: `f.json: tenants.a.weight: ${WEIGHT}` });
  t.same(parseTenantsFile('{"tenants":{"a":{"weight":100}}}', 'f.json'), { tenants: { a: { weight: 100 } } });
});

t.test('the forwarded header: a tenant within the bounds comes through without limits; one outside them is no tenant', async (t) => {
  const tenant = { id: 'acme', key: 'key-1', appSlug: null, weight: 100, priorityClass: 'batch' as const, limits: { requestsPerMinute: 3 } };
  t.same(decodeTenant(encodeTenant(tenant)), { ...tenant, limits: {} });
  t.equal(decodeTenant(encodeTenant({ ...tenant, weight: 101 })), null);
  t.equal(decodeTenant(encodeTenant({ ...tenant, weight: 0 })), null);
  t.equal(decodeTenant(encodeURIComponent(JSON.stringify({ id: 'a', key: 'k', weight: 1 }))), null, 'no class');
  t.same(decodeTenant(encodeURIComponent(JSON.stringify({ id: 'a', key: 'k', weight: 1, priorityClass: 'batch', limits: { requestsPerMinute: 1 } }))),
    { id: 'a', key: 'k', appSlug: null, weight: 1, priorityClass: 'batch', limits: {} }, 'limits stay in the router');
  t.equal(decodeTenant(encodeURIComponent(JSON.stringify({ id: 'a', key: 'k', weight: 1, priorityClass: 'batch', share: 9 }))), null, 'an unknown field');
  t.equal(decodeTenant('%7B'), null);
  t.equal(decodeTenant(undefined), null);
});
