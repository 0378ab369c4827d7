// The command line of tenants: --tenants FILE, --tenant-rpm/-tpm/-concurrency, --no-fair-share.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { UsageError } from '../../../src/cli/flags.js';
import { engineSettings, routerOptions, splitCommandLine, tenantOptions } from '../../../src/inference/server-config.js';
import { native } from '../../../src/native/binding.js';
import { TenantTable } from '../../../src/inference/tenants/tenant-table.js';

const dir = mkdtempSync(join(tmpdir(), 'tenant-flags-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const own = (...args: string[]) => splitCommandLine(args).own;

t.test('--tenant-rpm, --tenant-tpm and --tenant-concurrency are every tenant\'s default limits', async (t) => {
  t.same(tenantOptions(own('--tenant-rpm', '60', '--tenant-tpm', '100000', '--tenant-concurrency', '4')),
    { defaultLimits: { requestsPerMinute: 60, tokensPerMinute: 100000, concurrentRequests: 4 } });
  t.same(tenantOptions(own()), { defaultLimits: {} }, 'none: no limit');
  t.throws(() => tenantOptions(own('--tenant-rpm', '0')), new UsageError('--tenant-rpm: must be an integer of 1 or more, got 0'));
});

t.test('--tenants FILE is read and checked at start-up', async (t) => {
  const file = join(dir, 'tenants.json');
  writeFileSync(file, JSON.stringify({ keys: { 'key-1': { name: 'acme', priorityClass: 'batch' } } }));
  t.same(tenantOptions(own('--tenants', file)), { file: { keys: { 'key-1': { name: 'acme', priorityClass: 'batch' } } }, defaultLimits: {} });
  writeFileSync(file, '{"keys":{"key-1":{"weight":-1}}}');
  t.throws(() => tenantOptions(own('--tenants', file)), new UsageError(`--tenants: ${file}: keys.key-1.weight: must be a number above 0 and at most 100`));
  t.throws(() => tenantOptions(own('--tenants', join(dir, 'missing.json'))), new UsageError(`--tenants: cannot read ${join(dir, 'missing.json')} (ENOENT)`));
});

t.test('--api-key and --api-key-file (one key per line, as llama-server) give the keys in order: key-1, key-2, ...', async (t) => {
  const file = join(dir, 'keys.txt');
  writeFileSync(file, 'sk-from-file-1\nsk-from-file-2\n');
  const values = native.ServerParams.parse(['llama-server', '--api-key', 'sk-a,sk-b', '--api-key-file', file]).values();
  t.same(values.apiKeys, ['sk-a', 'sk-b', 'sk-from-file-1', 'sk-from-file-2']);
  const table = new TenantTable(values.apiKeys.length);
  t.same([0, 1, 2, 3].map((i) => table.forKey(i).id), ['key-1', 'key-2', 'key-3', 'key-4']);
});

t.test('--no-fair-share turns the engine\'s fair share off; absent, the engine decides (on); a router passes it to its model processes', async (t) => {
  const values = native.ServerParams.parse(['llama-server']).values();
  t.equal(engineSettings(values, own('--no-fair-share')).fairShare, false);
  t.equal(engineSettings(values, own()).fairShare, undefined);
  t.same(routerOptions(values, own('--no-fair-share')).childArgs, ['--no-fair-share']);
});
