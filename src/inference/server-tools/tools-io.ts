// Where a tool's file and process operations happen (server-tools.cpp tools_io): on this host
// (host-io.ts) or inside an isolate reached by a command (isolate-io.ts: a container, an ssh host).
import type { ExecResult } from './subprocess.js';

/** Entry kinds a listing returns. */
export type ListKind = 'files' | 'dirs' | 'all';

export interface ListEntry {
  /** '/'-separated, relative to the listed base. */
  rel: string;
  isDir: boolean;
}

export interface ListResult {
  entries: ListEntry[];
  /** Set when the base is not a directory. */
  err: string;
  /** Set when the walk could not see everything (time budget, unreadable directory). */
  truncated: boolean;
}

/** llama-server's caps for a listing: git ls-files output, and the time one listing may take. */
export const LIST_MAX_OUTPUT = 8 * 1024 * 1024;
export const LIST_TIMEOUT_SECONDS = 15;

/** Directories a listing reports but never descends into. */
export const JUNK_DIR_NAMES: readonly string[] = ['.git', '.svn', '.hg', 'node_modules', '__pycache__', '.venv', 'venv', 'dist', 'build', 'target', '.cache', '.idea', '.vscode'];

export const NOT_A_DIRECTORY = 'path does not exist or is not a directory';

export interface ToolsIo {
  /** The path against the working directory; an absolute path is returned as is. */
  resolve(path: string): string;
  isDirectory(path: string): Promise<boolean>;
  isRegularFile(path: string): Promise<boolean>;
  /** Size in bytes, or null when it cannot be read. */
  fileSize(path: string): Promise<number | null>;
  /** The file's bytes (one char per byte), or null. */
  readFile(path: string): Promise<string | null>;
  /** Writes the bytes, creating parent directories. */
  writeFile(path: string, bytes: string): Promise<boolean>;
  /** Entries under `base` (already resolved); maxDepth 0 is unlimited, 1 the direct children. */
  listEntries(base: string, maxDepth: number, kind: ListKind): Promise<ListResult>;
  /** Runs a command (stderr joined to stdout) in the working directory; `signal` kills it. */
  run(args: readonly string[], maxOutput: number, timeoutSeconds: number, onChunk?: (chunk: string) => boolean, signal?: AbortSignal): Promise<ExecResult>;
}

/** Depth of a '/'-separated relative path: "a/b/c" is 3. */
export const entryDepth = (rel: string): number => rel.split('/').length;

/** Non-empty lines of a command's output, '\r' and (optionally) a leading "./" removed, '\\' as '/'. */
export function splitLines(text: string, stripDotSlash: boolean): string[] {
  const out: string[] = [];
  for (let line of text.split('\n')) {
    if (line.endsWith('\r')) line = line.slice(0, -1);
    if (line === '') continue;
    if (stripDotSlash && line.startsWith('./')) line = line.slice(2);
    out.push(line.replaceAll('\\', '/'));
  }
  return out;
}
