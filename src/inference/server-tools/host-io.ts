// Tool operations on this host (server-tools.cpp tools_io_basic). Paths: a leading `~` is the
// home directory, a relative path is taken against the request's working directory (x-tool-cwd)
// or the server's, "." and ".." are resolved lexically and a trailing separator dropped.
// Listings of files ask `git ls-files` first (so .gitignore applies inside a repository) and
// otherwise walk the tree: junk directories and links are never descended into, directories
// that cannot be read are skipped, and the walk stops after LIST_TIMEOUT_SECONDS.
import { mkdir, opendir, readFile, stat, writeFile } from 'node:fs/promises';
import type { Dir, Dirent } from 'node:fs';
import { homedir } from 'node:os';
import path from 'node:path';
import { fromBytes } from './params.js';
import { runSubprocess, type ExecResult } from './subprocess.js';
import { entryDepth, JUNK_DIR_NAMES, LIST_MAX_OUTPUT, LIST_TIMEOUT_SECONDS, NOT_A_DIRECTORY, type ListEntry, type ListKind, type ListResult, type ToolsIo } from './tools-io.js';

const HOME = process.env['HOME'] ?? homedir();

function expandHome(p: string): string {
  if (!p.startsWith('~')) return p;
  if (p.length > 1 && p[1] !== '/' && p[1] !== '\\') return p;
  return HOME === '' ? p : HOME + p.slice(1);
}

async function statOf(p: string): Promise<Awaited<ReturnType<typeof stat>> | null> {
  try {
    return await stat(p);
  } catch {
    return null;
  }
}

/**
 * `mkdir -p`, one level at a time: Node's recursive mkdir never settles under some paths
 * (e.g. /proc/<missing>/x with Node 20), and a bad path must fail, not hang the call.
 */
async function createDirectories(dir: string): Promise<void> {
  const missing: string[] = [];
  for (let d = dir; !(await statOf(d)); d = path.dirname(d)) {
    missing.unshift(d);
    if (path.dirname(d) === d) break;
  }
  for (const d of missing) {
    await mkdir(d).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'EEXIST') throw err;
    });
  }
}

interface WalkFrame {
  dir: string;
  rel: string;
  depth: number;
}

/** Kind of a directory entry, links followed (as std::filesystem's directory_entry); null if it cannot be read. */
async function entryKind(dir: string, entry: Dirent): Promise<{ isDir: boolean; isFile: boolean; isLink: boolean } | null> {
  if (!entry.isSymbolicLink()) return { isDir: entry.isDirectory(), isFile: entry.isFile(), isLink: false };
  const s = await statOf(path.join(dir, entry.name));
  return s ? { isDir: s.isDirectory(), isFile: s.isFile(), isLink: true } : null;
}

export class HostIo implements ToolsIo {
  /** `cwd`, when set, resolves relative paths and is where commands run. */
  constructor(private readonly cwd: string = '') {}

  resolve(p: string): string {
    const expanded = expandHome(p);
    const full = path.isAbsolute(expanded) ? expanded : path.join(this.cwd !== '' ? this.cwd : process.cwd(), expanded);
    const normal = path.normalize(full);
    return normal.length > 1 && normal.endsWith('/') ? normal.slice(0, -1) : normal;
  }

  async isDirectory(p: string): Promise<boolean> {
    return (await statOf(this.resolve(p)))?.isDirectory() ?? false;
  }

  async isRegularFile(p: string): Promise<boolean> {
    return (await statOf(this.resolve(p)))?.isFile() ?? false;
  }

  async fileSize(p: string): Promise<number | null> {
    const s = await statOf(this.resolve(p));
    return s?.isFile() ? Number(s.size) : null;
  }

  async readFile(p: string): Promise<string | null> {
    const full = this.resolve(p);
    // A directory opens as an empty stream in llama-server.
    if ((await statOf(full))?.isDirectory()) return '';
    try {
      return (await readFile(full)).toString('latin1');
    } catch {
      return null;
    }
  }

  async writeFile(p: string, bytes: string): Promise<boolean> {
    const full = this.resolve(p);
    try {
      await createDirectories(path.dirname(full));
      await writeFile(full, Buffer.from(bytes, 'latin1'));
      return true;
    } catch {
      return false;
    }
  }

  async listEntries(base: string, maxDepth: number, kind: ListKind): Promise<ListResult> {
    if (!(await statOf(base))?.isDirectory()) return { entries: [], err: NOT_A_DIRECTORY, truncated: false };
    const deadline = Date.now() + LIST_TIMEOUT_SECONDS * 1000;
    if (kind === 'files') {
      const res = await this.run(['git', '-C', base, 'ls-files', '--cached', '--others', '--exclude-standard'], LIST_MAX_OUTPUT, LIST_TIMEOUT_SECONDS);
      if (res.exitCode === 0 && !res.timedOut) return { entries: await this.gitEntries(base, fromBytes(res.output), maxDepth), err: '', truncated: false };
    }
    const out: ListResult = { entries: [], err: '', truncated: false };
    out.entries = await this.walk(base, maxDepth, kind, deadline, out);
    return out;
  }

  run(args: readonly string[], maxOutput: number, timeoutSeconds: number, onChunk?: (chunk: string) => boolean, signal?: AbortSignal): Promise<ExecResult> {
    return runSubprocess(args, { maxOutput, timeoutSeconds, combineStderr: true, cwd: this.cwd, ...(onChunk ? { onChunk } : {}), ...(signal ? { signal } : {}) });
  }

  private async gitEntries(base: string, text: string, maxDepth: number): Promise<ListEntry[]> {
    const entries: ListEntry[] = [];
    for (let line of text.split('\n')) {
      if (line.endsWith('\r')) line = line.slice(0, -1);
      if (line === '') continue;
      line = line.replaceAll('\\', '/');
      if (maxDepth > 0 && entryDepth(line) > maxDepth) continue;
      if ((await statOf(path.join(base, line)))?.isFile()) entries.push({ rel: line, isDir: false });
    }
    return entries;
  }

  /** llama-server's walker: depth first, a stack of directories, entries in directory order. */
  private async walk(base: string, maxDepth: number, kind: ListKind, deadline: number, out: ListResult): Promise<ListEntry[]> {
    const result: ListEntry[] = [];
    const stack: WalkFrame[] = [{ dir: base, rel: '', depth: 0 }];
    while (stack.length > 0) {
      if (Date.now() >= deadline) {
        out.truncated = true;
        return result;
      }
      const { dir, rel, depth } = stack.pop()!;
      let handle: Dir;
      try {
        handle = await opendir(dir);
      } catch (err) {
        // Permission errors are skipped silently, as skip_permission_denied.
        if ((err as NodeJS.ErrnoException).code !== 'EACCES') out.truncated = true;
        continue;
      }
      try {
        for (let entry = await handle.read(); entry !== null; entry = await handle.read()) {
          if (Date.now() >= deadline) {
            out.truncated = true;
            return result;
          }
          const k = await entryKind(dir, entry);
          if (!k) continue;
          const childRel = rel === '' ? entry.name : `${rel}/${entry.name}`;
          if (k.isDir) {
            if (kind !== 'files') result.push({ rel: childRel, isDir: true });
            if (JUNK_DIR_NAMES.includes(entry.name)) continue;
            if (!k.isLink && (maxDepth === 0 || depth + 1 < maxDepth)) stack.push({ dir: path.join(dir, entry.name), rel: childRel, depth: depth + 1 });
          } else if (k.isFile && kind !== 'dirs') {
            result.push({ rel: childRel, isDir: false });
          }
        }
      } catch {
        out.truncated = true;
      } finally {
        await handle.close().catch(() => undefined);
      }
    }
    return result;
  }
}
