// Tool operations inside an isolate (server-tools.cpp tools_io_isolate): every operation is a
// POSIX command (sh, cat, wc, mkdir, dirname, find, timeout) run through a transport: an already
// running docker/podman container (`<engine> exec`), or a host reached over ssh. Paths are POSIX;
// a relative one is taken against the request's working directory. Commands get an in-isolate
// `timeout`, since killing the host-side client does not stop what runs in the isolate.
import { fromBytes } from './params.js';
import { runSubprocess, type ExecResult } from './subprocess.js';
import { entryDepth, JUNK_DIR_NAMES, LIST_MAX_OUTPUT, NOT_A_DIRECTORY, splitLines, type ListKind, type ListResult, type ToolsIo } from './tools-io.js';

/** Time limit of the auxiliary commands (stat, read, write, list). */
const ISOLATE_EXEC_TIMEOUT = 15;
const ISOLATE_READ_FILE_MAX_SIZE = 64 * 1024 * 1024;

/** Quotes argv into one string that a POSIX shell parses back into exactly argv. */
export function shellQuoteJoin(argv: readonly string[]): string {
  return argv.map((arg) => `'${arg.replaceAll("'", "'\\''")}'`).join(' ');
}

export abstract class IsolateIo implements ToolsIo {
  constructor(private readonly cwd: string = '') {}

  /** The host-side argv that runs `inner` (a complete POSIX argv) in the isolate. */
  abstract buildArgv(inner: readonly string[], needsStdin: boolean): string[];

  resolve(p: string): string {
    return this.cwd === '' || p.startsWith('/') ? p : `${this.cwd}/${p}`;
  }

  isDirectory(p: string): Promise<boolean> {
    return this.shellTest('-d', this.resolve(p));
  }

  isRegularFile(p: string): Promise<boolean> {
    return this.shellTest('-f', this.resolve(p));
  }

  async fileSize(p: string): Promise<number | null> {
    const res = await this.exec(['sh', '-c', 'wc -c < "$1"', '_', this.resolve(p)], 64, true);
    if (res.exitCode !== 0 || res.timedOut) return null;
    const n = /^\s*(\d+)/.exec(res.output);
    return n ? Number(n[1]) : null;
  }

  async readFile(p: string): Promise<string | null> {
    const res = await this.exec(['cat', '--', this.resolve(p)], ISOLATE_READ_FILE_MAX_SIZE, false);
    return res.exitCode !== 0 || res.timedOut ? null : res.output;
  }

  async writeFile(p: string, bytes: string): Promise<boolean> {
    // The content travels on stdin: nothing for the far side to re-parse, no temporary file here.
    const argv = this.buildArgv(['sh', '-c', 'mkdir -p "$(dirname "$1")" && cat > "$1"', '_', this.resolve(p)], true);
    const res = await runSubprocess(argv, { maxOutput: 4096, timeoutSeconds: ISOLATE_EXEC_TIMEOUT, stdin: bytes });
    return res.exitCode === 0 && !res.timedOut;
  }

  async listEntries(base: string, maxDepth: number, kind: ListKind): Promise<ListResult> {
    const out: ListResult = { entries: [], err: '', truncated: false };
    const absBase = this.resolve(base);
    if (!(await this.isDirectory(base))) return { ...out, err: NOT_A_DIRECTORY };
    if (kind === 'files') {
      const res = await this.exec(['sh', '-c', 'cd "$1" && git ls-files --cached --others --exclude-standard', '_', absBase], LIST_MAX_OUTPUT, true);
      if (res.exitCode === 0 && !res.timedOut) {
        out.entries = splitLines(fromBytes(res.output), false).filter((rel) => maxDepth === 0 || entryDepth(rel) <= maxDepth).map((rel) => ({ rel, isDir: false }));
        return out;
      }
    }
    if (kind !== 'files') for (const rel of await this.findEntries(absBase, maxDepth, true, out)) out.entries.push({ rel, isDir: true });
    if (kind !== 'dirs') for (const rel of await this.findEntries(absBase, maxDepth, false, out)) out.entries.push({ rel, isDir: false });
    return out;
  }

  run(args: readonly string[], maxOutput: number, timeoutSeconds: number, onChunk?: (chunk: string) => boolean, signal?: AbortSignal): Promise<ExecResult> {
    const inner = ['timeout', `${timeoutSeconds}s`, ...args];
    // The host-side limit is a little longer, so the in-isolate `timeout` can end it cleanly first.
    return runSubprocess(this.buildArgv(this.withCwd(inner), true), { maxOutput, timeoutSeconds: timeoutSeconds + 5, ...(onChunk ? { onChunk } : {}), ...(signal ? { signal } : {}) });
  }

  /** The working directory set by the command itself (not every transport has a `-w`); 127 if it is missing. */
  private withCwd(inner: string[]): string[] {
    return this.cwd === '' ? inner : ['sh', '-c', 'cd "$1" || exit 127; shift; exec "$@"', '_', this.cwd, ...inner];
  }

  private exec(inner: string[], maxOutput: number, combineStderr: boolean): Promise<ExecResult> {
    return runSubprocess(this.buildArgv(inner, false), { maxOutput, timeoutSeconds: ISOLATE_EXEC_TIMEOUT, combineStderr });
  }

  private async shellTest(flag: string, p: string): Promise<boolean> {
    const res = await this.exec(['sh', '-c', `[ ${flag} "$1" ]`, '_', p], 4096, true);
    return res.exitCode === 0 && !res.timedOut;
  }

  /** One `find` pass; junk directories are listed but never descended into. */
  private async findEntries(absBase: string, maxDepth: number, dirs: boolean, out: ListResult): Promise<string[]> {
    const prune = JUNK_DIR_NAMES.map((n) => `-name ${n}`).join(' -o ');
    let cmd = 'cd "$1" && find . -mindepth 1';
    if (maxDepth > 0) cmd += ` -maxdepth ${maxDepth}`;
    cmd += ` \\( ${prune} \\) -prune`;
    cmd += dirs ? ' -print -o -type d -print' : ' -o -type f -print';
    const res = await this.exec(['sh', '-c', cmd, '_', absBase], LIST_MAX_OUTPUT, true);
    out.truncated = out.truncated || res.timedOut;
    return splitLines(fromBytes(res.output), true);
  }
}

/** A running container driven through `<engine> exec` (docker and podman take the same arguments). */
export class ContainerIo extends IsolateIo {
  constructor(private readonly bin: string, private readonly containerId: string, cwd = '') {
    super(cwd);
  }

  buildArgv(inner: readonly string[], needsStdin: boolean): string[] {
    return [this.bin, 'exec', ...(needsStdin ? ['-i'] : []), this.containerId, ...inner];
  }
}

/** ssh without a console: key-based authentication and an already trusted host key only. */
const SSH_ARGV = ['ssh', '-o', 'BatchMode=yes', '-o', 'PasswordAuthentication=no', '-o', 'KbdInteractiveAuthentication=no', '-o', 'StrictHostKeyChecking=yes'];

/** A remote host over ssh: remoting, not isolation (the tools can do what the account can). */
export class SshIo extends IsolateIo {
  constructor(private readonly target: string, cwd = '') {
    super(cwd);
  }

  /** A target beginning with '-' would be read by ssh as an option (e.g. -oProxyCommand=...). */
  static isValidTarget(target: string): boolean {
    return target !== '' && !target.startsWith('-') && /^[A-Za-z0-9._@-]+$/.test(target);
  }

  buildArgv(inner: readonly string[], needsStdin: boolean): string[] {
    // The remote shell parses the command line again, so `inner` travels as one quoted word.
    return [...SSH_ARGV, ...(needsStdin ? [] : ['-n']), this.target, shellQuoteJoin(inner)];
  }
}
