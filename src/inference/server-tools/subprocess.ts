// Runs one child process for a tool, as server-tools.cpp run_subprocess: raw output bytes up to a
// cap (the pipe is still drained past it, then "\n[output truncated]" is appended), a time limit
// after which the child is killed, and an optional per-chunk callback that can stop it early.
// Unlike llama-server, which kills only the child, the whole process group is killed: a command
// such as `sleep 100; echo` cannot leave a grandchild holding the pipe past its time limit.
// A client that leaves (`signal`) kills it at once, streamed or not.
// An exit by signal reports 1 (subprocess.h's EXIT_FAILURE); a program that cannot be started
// reports -1 with the output "failed to spawn process".
import { spawn } from 'node:child_process';

export interface ExecResult {
  /** The output as bytes (one char per byte, see params.ts toBytes). */
  output: string;
  exitCode: number;
  timedOut: boolean;
}

export interface RunOptions {
  /** Most output bytes kept. */
  maxOutput: number;
  /** Seconds before the child is killed; 0 or less kills it at once. */
  timeoutSeconds: number;
  /** Each chunk of output as read (bytes); returning false kills the child (the client left). */
  onChunk?: (chunk: string) => boolean;
  /** stderr joins stdout (false when the bytes are file contents). Default true. */
  combineStderr?: boolean;
  cwd?: string;
  /** Written to the child's stdin, which is then closed (it is closed in any case). */
  stdin?: string;
  /** Aborted when the client left: the child is killed at once. */
  signal?: AbortSignal;
}

export const OUTPUT_TRUNCATED = '\n[output truncated]';

/** Kills the child's process group, or the child alone while it has not made its group yet. */
function killGroup(pid: number | undefined): void {
  if (pid === undefined) return;
  for (const target of [-pid, pid]) {
    try {
      process.kill(target, 'SIGKILL');
      return;
    } catch {
      // no such group (yet) or already gone
    }
  }
}

export function runSubprocess(args: readonly string[], options: RunOptions): Promise<ExecResult> {
  return new Promise((resolve) => {
    const child = spawn(args[0]!, args.slice(1), {
      cwd: options.cwd !== undefined && options.cwd !== '' ? options.cwd : undefined,
      stdio: ['pipe', 'pipe', options.combineStderr === false ? 'ignore' : 'pipe'],
      detached: true,
    });
    let output = '';
    let truncated = false;
    let timedOut = false;
    let stopped = false;
    let settled = false;
    const settle = (result: ExecResult): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      resolve(result);
    };
    const expire = (): void => {
      timedOut = true;
      killGroup(child.pid);
    };
    const timer = setTimeout(expire, Math.max(0, options.timeoutSeconds) * 1000);
    // No time at all: killed before any output is read, as llama-server's deadline already past.
    if (options.timeoutSeconds <= 0) {
      stopped = true;
      expire();
    }
    const take = (data: Buffer): void => {
      if (truncated || stopped) return;
      const bytes = data.toString('latin1');
      const room = options.maxOutput - output.length;
      if (bytes.length <= room) {
        output += bytes;
        if (options.onChunk && !options.onChunk(bytes)) {
          stopped = true;
          killGroup(child.pid);
        }
        return;
      }
      output += bytes.slice(0, Math.max(0, room));
      if (options.onChunk && room > 0) options.onChunk(bytes.slice(0, room));
      truncated = true;
    };
    const onAbort = (): void => {
      stopped = true;
      killGroup(child.pid);
    };
    if (options.signal?.aborted) onAbort();
    options.signal?.addEventListener('abort', onAbort, { once: true });
    child.stdout!.on('data', take);
    child.stderr?.on('data', take);
    child.stdin!.on('error', () => undefined);
    child.stdin!.end(Buffer.from(options.stdin ?? '', 'latin1'));
    child.on('error', () => {
      if (child.pid === undefined) settle({ output: 'failed to spawn process', exitCode: -1, timedOut: false });
    });
    child.on('close', (code) => {
      settle({ output: truncated ? output + OUTPUT_TRUNCATED : output, exitCode: code ?? 1, timedOut });
    });
  });
}
