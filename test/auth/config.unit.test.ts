// auth-server configuration: flags, environment variables, defaults and refusals.
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { parseAuthServerArgs, readAuthServiceConfig } from '../../src/auth/config.js';
import { createOtpDelivery } from '../../src/auth/otp/delivery.js';

const ENV = { AUTH_ADMIN_KEY: 'admin-key-0123456789' };

t.test('defaults: 127.0.0.1:8081, ./.auth-data, keys inside it, log delivery, issuer from host and port, one worker per core', async (t) => {
  const options = parseAuthServerArgs([], { ...ENV, AUTH_WORKERS: undefined });
  t.not(options, 'help');
  if (options === 'help') return;
  t.equal(options.host, '127.0.0.1');
  t.equal(options.port, 8081);
  t.equal(options.workers, os.availableParallelism());
  const { databasePoolSize, ...service } = options.service;
  t.equal(databasePoolSize, Math.min(10, Math.max(2, Math.floor(80 / os.availableParallelism()))), 'the workers share 80 connections, 2 to 10 each');
  t.equal(options.issuerIsDefault, true);
  t.same(service, {
    databaseUrl: undefined,
    dataDir: path.resolve('.auth-data'),
    keyDir: path.resolve('.auth-data', 'keys'),
    issuer: 'http://127.0.0.1:8081',
    adminKey: 'admin-key-0123456789',
    otpDelivery: { kind: 'log' },
    otpLimits: undefined,
    embeddedDatabasePort: 0,
    verifiedTokenCacheSize: 10_000,
  });
});

t.test('environment variables configure everything', async (t) => {
  const options = parseAuthServerArgs([], {
    ...ENV, AUTH_HOST: '0.0.0.0', AUTH_PORT: '9000', DATABASE_URL: 'postgres://db/auth', AUTH_DATA_DIR: '/var/lib/auth',
    AUTH_KEY_DIR: '/etc/auth-keys', AUTH_OTP_DELIVERY: 'webhook', AUTH_OTP_WEBHOOK_URL: 'https://sms.test/send',
    AUTH_OTP_WEBHOOK_SECRET: 's3cret', AUTH_OTP_APP_HOURLY_LIMIT: '50', AUTH_EMBEDDED_DB_PORT: '5499', AUTH_DB_POOL_SIZE: '4',
    AUTH_WORKERS: '3', AUTH_TOKEN_CACHE_SIZE: '0', AUTH_TRUST_PROXY: '1', AUTH_AUDIT_RETENTION_DAYS: '30',
  });
  if (options === 'help') throw new Error('unexpected help');
  t.equal(options.host, '0.0.0.0');
  t.equal(options.port, 9000);
  t.equal(options.workers, 3);
  t.same(options.service, {
    databaseUrl: 'postgres://db/auth',
    dataDir: '/var/lib/auth',
    keyDir: '/etc/auth-keys',
    issuer: 'http://127.0.0.1:9000',
    adminKey: 'admin-key-0123456789',
    otpDelivery: { kind: 'webhook', url: 'https://sms.test/send', secret: 's3cret' },
    otpLimits: { appHourly: 50 },
    embeddedDatabasePort: 5499,
    databasePoolSize: 4,
    verifiedTokenCacheSize: 0,
    trustProxy: true,
    auditRetentionDays: 30,
  });
});

t.test('flags win over environment variables, in both --flag value and --flag=value forms', async (t) => {
  const options = parseAuthServerArgs(['--port', '7000', '--issuer=https://auth.example.com', '--admin-key', 'flag-admin-key-0123'], { ...ENV, AUTH_PORT: '9000' });
  if (options === 'help') throw new Error('unexpected help');
  t.equal(options.port, 7000);
  t.equal(options.service.issuer, 'https://auth.example.com');
  t.equal(options.issuerIsDefault, false);
  t.equal(options.service.adminKey, 'flag-admin-key-0123');
});

t.test('--workers sets the worker threads, and the default pool of each shares 80 connections (2 to 10 per worker)', async (t) => {
  const poolOf = (workers: string): unknown => {
    const options = parseAuthServerArgs(['--workers', workers], ENV);
    if (options === 'help') throw new Error('unexpected help');
    return { workers: options.workers, pool: options.service.databasePoolSize };
  };
  t.same(poolOf('1'), { workers: 1, pool: 10 });
  t.same(poolOf('8'), { workers: 8, pool: 10 });
  t.same(poolOf('16'), { workers: 16, pool: 5 });
  t.same(poolOf('40'), { workers: 40, pool: 2 });
  t.same(poolOf('64'), { workers: 64, pool: 2 });
  const explicit = parseAuthServerArgs(['--workers', '16', '--db-pool-size', '7'], ENV);
  t.equal(explicit !== 'help' && explicit.service.databasePoolSize, 7, 'an explicit pool size wins');
  t.throws(() => parseAuthServerArgs(['--workers', '0'], ENV), /AUTH_WORKERS must be an integer from 1 to 1024, got "0"/);
});

t.test('-h and --help ask for the usage', async (t) => {
  t.equal(parseAuthServerArgs(['--help'], {}), 'help');
  t.equal(parseAuthServerArgs(['-h'], {}), 'help');
});

t.test('bad input is refused with a message', async (t) => {
  t.throws(() => parseAuthServerArgs([], {}), /admin key is required/);
  t.throws(() => parseAuthServerArgs(['--bogus', '1'], ENV), /unknown option --bogus/);
  t.throws(() => parseAuthServerArgs(['--port'], ENV), /option --port needs a value/);
  t.throws(() => parseAuthServerArgs(['--port', '70000'], ENV), /AUTH_PORT must be an integer from 0 to 65535/);
  t.throws(() => parseAuthServerArgs(['--port', '80a'], ENV), /AUTH_PORT must be an integer/);
  t.throws(() => parseAuthServerArgs(['--otp-delivery', 'carrier-pigeon'], ENV), /unknown OTP delivery "carrier-pigeon"/);
  t.throws(() => parseAuthServerArgs(['--otp-delivery', 'webhook'], ENV), /needs --otp-webhook-url/);
  t.throws(() => parseAuthServerArgs(['--token-cache-size', '-1'], ENV), /AUTH_TOKEN_CACHE_SIZE must be an integer from 0 to 10000000, got "-1"/);
});

t.test('readAuthServiceConfig reads the same variables for a host such as inference-server', async (t) => {
  const config = readAuthServiceConfig({ ...ENV, DATABASE_URL: 'postgres://db/auth' }, { issuer: 'http://127.0.0.1:8080' });
  t.match(config, { databaseUrl: 'postgres://db/auth', issuer: 'http://127.0.0.1:8080', adminKey: ENV.AUTH_ADMIN_KEY });
});

t.test('the log delivery is refused when NODE_ENV=production', async (t) => {
  t.throws(() => createOtpDelivery({ kind: 'log' }, { NODE_ENV: 'production' }), /refused when NODE_ENV=production/);
  t.equal(createOtpDelivery({ kind: 'log' }, { NODE_ENV: 'development' }).name, 'log');
});

t.test('the admin console is off unless AUTH_ADMIN_CONSOLE (or --admin-console) is 1', async (t) => {
  const off = parseAuthServerArgs([], ENV);
  const on = parseAuthServerArgs(['--admin-console', '1'], ENV);
  const fromEnv = parseAuthServerArgs([], { ...ENV, AUTH_ADMIN_CONSOLE: '1' });
  const zero = parseAuthServerArgs(['--admin-console', '0'], ENV);
  if (off === 'help' || on === 'help' || fromEnv === 'help' || zero === 'help') throw new Error('unexpected help');
  t.equal(off.service.adminConsole, undefined);
  t.equal(zero.service.adminConsole, undefined);
  t.equal(on.service.adminConsole, true);
  t.equal(fromEnv.service.adminConsole, true);
  t.throws(() => parseAuthServerArgs(['--admin-console', 'yes'], ENV), /AUTH_ADMIN_CONSOLE must be an integer from 0 to 1/);
});
