// Migrations, the embedded PostgreSQL, and several service instances on one database.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import postgres from 'postgres';
import { createDatabaseClient } from '../../src/auth/database/client.js';
import { startEmbeddedPostgres } from '../../src/auth/database/embedded-postgres.js';
import { applyMigrations, migrationsDirectory } from '../../src/auth/database/migrate.js';
import { createAuthService, type AuthServiceConfig } from '../../src/auth/mount.js';
import { ADMIN_KEY, Outbox } from './fixtures/harness.js';

const root = await fs.mkdtemp(path.join(os.tmpdir(), 'auth-migrations-'));
await fs.chmod(root, 0o711); // as root, PostgreSQL runs as the postgres user and must enter it
const cluster = await startEmbeddedPostgres({ dir: path.join(root, 'cluster'), disposable: true });
t.teardown(async () => {
  await cluster.stop();
  await fs.rm(root, { recursive: true, force: true });
});

const MIGRATIONS = (await fs.readdir(migrationsDirectory())).filter((f) => f.endsWith('.sql')).sort();
const FUNCTIONS = (await fs.readdir(path.join(migrationsDirectory(), 'functions'))).filter((f) => f.endsWith('.sql')).sort().map((f) => `functions/${f}`);

let databaseCount = 0;
/** A fresh empty database in the shared cluster. */
async function freshDatabase(): Promise<string> {
  const name = `db${++databaseCount}`;
  const admin = postgres(cluster.url, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database ${name}`);
  await admin.end();
  return cluster.url.replace(/\/postgres$/, `/${name}`);
}

function serviceConfig(dir: string, overrides: Partial<AuthServiceConfig> = {}): AuthServiceConfig {
  return { dataDir: dir, keyDir: path.join(dir, 'keys'), issuer: 'http://auth.test', adminKey: ADMIN_KEY, otpDelivery: new Outbox(), disposableDatabase: true, log: () => {}, ...overrides };
}

t.test('migrations are numbered files applied in order and recorded; a second run applies nothing', async (t) => {
  t.match(MIGRATIONS, ['0001_create_apps.sql']);
  t.ok(MIGRATIONS.every((name) => /^\d{4}_[a-z0-9_]+\.sql$/.test(name)));
  const sql = createDatabaseClient(await freshDatabase());
  t.teardown(() => sql.end());
  t.same(await applyMigrations(sql), [...MIGRATIONS, ...FUNCTIONS]);
  const recorded = await sql`select version, name from schema_migrations order by version`;
  t.same(recorded.map((r) => r.name), MIGRATIONS);
  // Numbers may leave gaps (work in parallel reserves ranges: 0022-0029, 0030-0039); each is its file's.
  t.same(recorded.map((r) => r.version), MIGRATIONS.map((name) => Number(name.slice(0, 4))));
  t.same(await applyMigrations(sql), []);
});

t.test('two instances migrating one database at once apply each migration exactly once', async (t) => {
  const url = await freshDatabase();
  const a = createDatabaseClient(url);
  const b = createDatabaseClient(url);
  t.teardown(async () => { await a.end(); await b.end(); });
  const [fromA, fromB] = await Promise.all([applyMigrations(a), applyMigrations(b)]);
  t.same([...fromA, ...fromB].sort(), [...MIGRATIONS, ...FUNCTIONS].sort(), 'between them, every migration and function file once');
  t.ok(fromA.length === 0 || fromB.length === 0, 'one of them found everything applied');
  const [{ n }] = await a`select count(*)::int as n from schema_migrations`;
  t.equal(n, MIGRATIONS.length);
});

t.test('a function file is applied after the numbered migrations, again when its text changes, and not otherwise', async (t) => {
  t.same(FUNCTIONS, ['functions/rotate_refresh_token.sql']);
  const sql = createDatabaseClient(await freshDatabase());
  t.teardown(() => sql.end());
  const dir = await fs.mkdtemp(path.join(root, 'functions-'));
  await fs.mkdir(path.join(dir, 'functions'));
  await fs.writeFile(path.join(dir, '0001_create_things.sql'), 'create table things (id int);');
  const define = (body: string) => fs.writeFile(path.join(dir, 'functions', 'answer.sql'), `create or replace function answer() returns int language sql as $$ select ${body} $$;`);
  await define('41');
  t.same(await applyMigrations(sql, dir), ['0001_create_things.sql', 'functions/answer.sql']);
  t.same(await applyMigrations(sql, dir), [], 'unchanged: nothing runs');
  await define('42');
  t.same(await applyMigrations(sql, dir), ['functions/answer.sql'], 'its text changed: it runs again');
  const [row] = await sql<{ answer: number }[]>`select answer()`;
  t.equal(row!.answer, 42);
  const recorded = await sql`select name from schema_functions`;
  t.same(recorded.map((r) => r.name), ['answer.sql']);
});

t.test('rotate_refresh_token: the function file is the function 0014 created plus the amr column, for which 0045 drops the old signature', async (t) => {
  const sql = createDatabaseClient(await freshDatabase());
  t.teardown(() => sql.end());
  const before0045 = await fs.mkdtemp(path.join(root, 'numbered-'));
  for (const name of MIGRATIONS.filter((m) => m < '0045')) await fs.copyFile(path.join(migrationsDirectory(), name), path.join(before0045, name));
  await applyMigrations(sql, before0045);
  // The name is resolved when the statement runs (a parameter): a '...'::regproc constant would be
  // resolved once, when postgres.js prepares the statement, and name the dropped function after.
  const definition = async () => (await sql<{ def: string }[]>`select pg_get_functiondef(to_regproc(${'rotate_refresh_token'})) as def`)[0]!.def;
  const of0014 = await definition();
  t.same(await applyMigrations(sql), [...MIGRATIONS.filter((m) => m >= '0045'), ...FUNCTIONS], 'an upgraded database applies 0045 and then the file');
  const now = await definition();
  t.match(now, /retry_at timestamp with time zone, amr text\[\]\)/, 'a rotation answers the session\'s amr');
  const withoutAmr = now.replace(', amr text[])', ')').replaceAll(', null::text[];', ';').replace('f.amr, u.deleted_at', 'u.deleted_at').replace('null::timestamptz,\n      v.amr;', 'null::timestamptz;');
  t.equal(withoutAmr, of0014, 'and nothing else changed');
});

t.test('a failing migration leaves nothing applied', async (t) => {
  const url = await freshDatabase();
  const sql = createDatabaseClient(url);
  t.teardown(() => sql.end());
  const broken = await fs.mkdtemp(path.join(root, 'broken-'));
  await fs.copyFile(path.join(migrationsDirectory(), '0001_create_apps.sql'), path.join(broken, '0001_create_apps.sql'));
  await fs.writeFile(path.join(broken, '0002_break.sql'), 'create table oops (;');
  await t.rejects(applyMigrations(sql, broken));
  const [exists] = await sql`select to_regclass('apps') as apps, to_regclass('schema_migrations') as migrations`;
  t.same({ ...exists }, { apps: null, migrations: null });
});

t.test('the compiled dist/auth/database/migrate.js finds the migrations in src/auth/migrations', async (t) => {
  const fromDist = migrationsDirectory(new URL('../../dist/auth/database/migrate.js', import.meta.url).href);
  const fromSrc = migrationsDirectory(new URL('../../src/auth/database/migrate.ts', import.meta.url).href);
  t.equal(path.resolve(fromSrc), path.resolve(fromDist.replace(`${path.sep}dist${path.sep}`, `${path.sep}src${path.sep}`)));
  t.same((await fs.readdir(fromDist)).filter((f) => f.endsWith('.sql')).sort(), MIGRATIONS);
  // inference-server's bundle (scripts/bundle.mjs) holds this module in a chunk two levels below the root.
  const fromBundle = migrationsDirectory(new URL('../../dist/bundle/chunk-ABCD.js', import.meta.url).href);
  t.equal(path.resolve(fromBundle), path.resolve(fromSrc), 'and so does a chunk of the bundle');
});

t.test('the embedded cluster keeps its data across restarts', async (t) => {
  const dir = path.join(root, 'restart');
  const first = await startEmbeddedPostgres({ dir, disposable: false });
  const sqlA = postgres(first.url, { max: 1, onnotice: () => {} });
  await sqlA`create table kept (value text)`;
  await sqlA`insert into kept values ('still here')`;
  await sqlA.end();
  await first.stop();
  const second = await startEmbeddedPostgres({ dir, disposable: false });
  const sqlB = postgres(second.url, { max: 1, onnotice: () => {} });
  t.same((await sqlB`select value from kept`).map((r) => r.value), ['still here']);
  await sqlB.end();
  await second.stop();
  await t.rejects(fs.access(path.join(dir, 'pgdata', 'postmaster.pid')), 'stopped cleanly');
});

t.test('the cluster belongs to the postgres system user when running as root, else to the current user', async (t) => {
  const stat = await fs.stat(path.join(root, 'cluster', 'pgdata'));
  const expected = process.getuid!() === 0 ? Number((await import('node:child_process')).execFileSync('id', ['-u', 'postgres']).toString()) : process.getuid!();
  t.equal(stat.uid, expected);
  t.equal(stat.mode & 0o777, 0o700);
  t.equal((await fs.stat(path.join(root, 'cluster', 'password'))).mode & 0o777, 0o600, 'the generated superuser password is private');
});

t.test('a service restarted on its data directory keeps its apps, users and signing key', async (t) => {
  const dir = path.join(root, 'service');
  await fs.mkdir(dir, { mode: 0o711 });
  const first = await createAuthService(serviceConfig(dir));
  const [app] = await first.sql`insert into apps (slug, name, secret_hash, created_at) values ('kept', 'Kept', ${Buffer.alloc(32)}, now()) returning id`;
  const keys = await first.sql`select kid, status from signing_keys order by status`;
  await first.close();
  const second = await createAuthService(serviceConfig(dir));
  t.teardown(() => second.close());
  t.same((await second.sql`select id from apps`).map((r) => r.id), [app!.id]);
  t.same((await second.sql`select kid, status from signing_keys order by status`).map((r) => ({ ...r })), keys.map((r) => ({ ...r })));
  t.same(keys.map((r) => r.status), ['active', 'next']);
});

t.test('two instances starting at once on one database create one active and one next signing key and accept each other\'s tokens', async (t) => {
  const url = await freshDatabase();
  const dir = path.join(root, 'pair');
  await fs.mkdir(dir, { mode: 0o711 });
  const [a, b] = await Promise.all([createAuthService(serviceConfig(dir, { databaseUrl: url })), createAuthService(serviceConfig(dir, { databaseUrl: url }))]);
  t.teardown(async () => { await a.close(); await b.close(); });
  const keys = await a.sql`select kid, status from signing_keys order by status`;
  t.same(keys.map((r) => r.status), ['active', 'next']);
  const { getKey } = b.accessTokenKeys;
  t.ok(await getKey({ alg: 'RS256', kid: keys[0]!.kid }, { payload: '', signature: '' } as never), 'b resolves the key a created');
});

t.test('a key directory whose master key did not create the signing keys is refused at start', async (t) => {
  const url = await freshDatabase();
  const dirA = path.join(root, 'keys-a');
  const dirB = path.join(root, 'keys-b');
  const a = await createAuthService(serviceConfig(dirA, { databaseUrl: url }));
  await a.close();
  await t.rejects(createAuthService(serviceConfig(dirB, { databaseUrl: url })), /master\.key is not the one that created it/);
});

t.test('the master key file is created once with mode 0600', async (t) => {
  const stat = await fs.stat(path.join(root, 'keys-a', 'keys', 'master.key'));
  t.equal(stat.mode & 0o777, 0o600);
  t.equal(Buffer.from((await fs.readFile(path.join(root, 'keys-a', 'keys', 'master.key'), 'utf8')).trim(), 'base64').length, 32);
});
