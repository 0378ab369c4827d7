// One running MCP server: a child process spoken to in JSON-RPC 2.0 over its stdin and stdout,
// one JSON message a line (MCP's stdio transport). Replies are matched to requests by id, so
// several calls may be in flight; a line that is not JSON, a notification, or a reply to a request
// that already gave up (timed out) is skipped. A request that gets no reply within the server's
// timeout, or whose caller aborts, or that is in flight when the process dies or is closed,
// resolves to an error reply (llama-server's messages); none ever throws.
//
// The server runs in a process group of its own and close() kills the whole group, so a
// grandchild holding the pipes dies with it; our ends of the pipes are destroyed without waiting
// for an end-of-file that a surviving grandchild could withhold.
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { once } from 'node:events';
import type { McpServerConfig } from './mcp-config.js';
import type { Json, JsonObject } from './params.js';

/** MCP's protocol revision that llama-server announces. */
export const MCP_PROTOCOL_VERSION = '2024-11-05';

export type RpcReply = { result: Json } | { error: { code: number; message: string } };

const rpcFailure = (message: string): RpcReply => ({ error: { code: -32603, message } });

/** What a tool is told about an MCP tool (tools/list). */
export interface McpToolDef {
  server: string;
  name: string;
  description: string;
  /** The tool's JSON schema for its arguments; {} when it gives none. */
  inputSchema: JsonObject;
}

interface Pending {
  settle(reply: RpcReply): void;
}

export class McpConnection {
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private buffered = '';
  private closedWith: string | null = null;
  private initialized = false;
  /** The last lines of the server's stderr, for the log when it fails. */
  private stderrTail = '';

  private constructor(private readonly config: McpServerConfig, private readonly child: ChildProcessWithoutNullStreams) {
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk: string) => this.receive(chunk));
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (chunk: string) => {
      this.stderrTail = (this.stderrTail + chunk).slice(-2000);
    });
    // A server that exits closes the transport; writes to it afterwards fail quietly.
    child.stdin.on('error', () => {});
    child.on('error', () => this.shut('transport closed'));
    child.on('exit', () => this.shut('transport closed'));
  }

  /** Starts the server; throws (with the reason) when its command cannot be run. */
  static async start(config: McpServerConfig): Promise<McpConnection> {
    const child = spawn(config.command, config.args, {
      env: { ...process.env, ...config.env },
      ...(config.cwd !== '' ? { cwd: config.cwd } : {}),
      stdio: ['pipe', 'pipe', 'pipe'],
      detached: true,
    });
    try {
      await once(child, 'spawn');
    } catch (err) {
      throw new Error(`cannot run ${config.command}: ${(err as Error).message}`);
    }
    return new McpConnection(config, child);
  }

  get alive(): boolean {
    return this.closedWith === null;
  }

  /** Why the server is unusable, for the log: its exit and the end of its stderr. */
  diagnostics(): string {
    const exit = this.child.exitCode !== null ? `exit code ${this.child.exitCode}` : this.child.signalCode ? `signal ${this.child.signalCode}` : 'running';
    return `${exit}${this.stderrTail.trim() ? `; stderr: ${this.stderrTail.trim().split('\n').slice(-3).join(' | ')}` : ''}`;
  }

  /** initialize (once per process), then the server's tools; throws with the server's error. */
  async listTools(signal?: AbortSignal): Promise<McpToolDef[]> {
    await this.ensureInitialized(signal);
    const reply = await this.request('tools/list', undefined, signal);
    if ('error' in reply) throw new Error(`tools/list failed: ${reply.error.message}`);
    const result = reply.result as { tools?: unknown };
    if (!Array.isArray(result?.tools)) return [];
    return result.tools.filter(isObject).map((t) => ({
      server: this.config.name,
      name: typeof t['name'] === 'string' ? t['name'] : '',
      description: typeof t['description'] === 'string' ? t['description'] : '',
      inputSchema: isObject(t['inputSchema']) ? (t['inputSchema'] as JsonObject) : {},
    }));
  }

  /**
   * tools/call, answered as /tools answers: {"plain_text_response": the text parts joined by
   * new lines}, or {"error": ...} for a JSON-RPC error, a result with isError, a timeout, a dead
   * server.
   */
  async callTool(name: string, args: Json, signal?: AbortSignal): Promise<JsonObject> {
    try {
      await this.ensureInitialized(signal);
    } catch (err) {
      return { error: (err as Error).message };
    }
    const reply = await this.request('tools/call', { name, arguments: args }, signal);
    if ('error' in reply) return { error: reply.error.message };
    return toolAnswer(reply.result);
  }

  /** Kills the server (and anything it started) and answers the requests in flight "cancelled". */
  close(): void {
    this.shut('cancelled');
    try {
      if (this.child.pid !== undefined) process.kill(-this.child.pid, 'SIGKILL');
    } catch {
      // already gone
    }
    this.child.stdin.destroy();
    this.child.stdout.destroy();
    this.child.stderr.destroy();
  }

  private async ensureInitialized(signal?: AbortSignal): Promise<void> {
    if (this.initialized) return;
    const reply = await this.request('initialize', {
      protocolVersion: MCP_PROTOCOL_VERSION,
      capabilities: {},
      clientInfo: { name: 'llama.cpp', version: '1.0' },
    }, signal);
    if ('error' in reply) throw new Error(`initialize failed: ${reply.error.message}`);
    this.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    this.initialized = true;
  }

  private request(method: string, params: JsonObject | undefined, signal?: AbortSignal): Promise<RpcReply> {
    if (this.closedWith !== null) return Promise.resolve(rpcFailure(this.closedWith));
    if (signal?.aborted) return Promise.resolve(rpcFailure('cancelled'));
    const id = this.nextId++;
    return new Promise<RpcReply>((resolve) => {
      const timer = setTimeout(() => settle(rpcFailure('request timed out')), this.config.timeoutMs);
      const onAbort = (): void => settle(rpcFailure('cancelled'));
      const settle = (reply: RpcReply): void => {
        if (!this.pending.delete(id)) return;
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        resolve(reply);
      };
      this.pending.set(id, { settle });
      signal?.addEventListener('abort', onAbort, { once: true });
      this.send({ jsonrpc: '2.0', id, method, ...(params ? { params } : {}) });
    });
  }

  private send(message: JsonObject): void {
    if (this.closedWith === null) this.child.stdin.write(`${JSON.stringify(message)}\n`);
  }

  private receive(chunk: string): void {
    this.buffered += chunk;
    let newline: number;
    while ((newline = this.buffered.indexOf('\n')) >= 0) {
      const line = this.buffered.slice(0, newline).trim();
      this.buffered = this.buffered.slice(newline + 1);
      if (line !== '') this.dispatch(line);
    }
  }

  /** A reply settles its request; anything else (a notification, a request of the server's, a stale reply, not JSON) is skipped. */
  private dispatch(line: string): void {
    let message: unknown;
    try {
      message = JSON.parse(line);
    } catch {
      return;
    }
    if (!isObject(message) || typeof message['id'] !== 'number' || 'method' in message) return;
    const pending = this.pending.get(message['id']);
    if (!pending) return;
    if ('error' in message) pending.settle(rpcFailure(errorMessage(message['error'])));
    else if ('result' in message) pending.settle({ result: message['result'] as Json });
    else pending.settle(rpcFailure('invalid response from MCP server'));
  }

  private shut(reason: string): void {
    if (this.closedWith !== null) return;
    this.closedWith = reason;
    for (const pending of [...this.pending.values()]) pending.settle(rpcFailure(reason));
  }
}

/** llama-server's reading of a JSON-RPC error: its message, the string itself, or "unknown error". */
function errorMessage(error: unknown): string {
  if (isObject(error)) return typeof error['message'] === 'string' ? error['message'] : 'unknown error';
  return typeof error === 'string' ? error : 'unknown error';
}

/** A tools/call result as /tools answers it (server-mcp.cpp mcp_result_to_response). */
function toolAnswer(result: Json): JsonObject {
  const parts = isObject(result) && Array.isArray(result['content']) ? result['content'] : [];
  let text = '';
  for (const part of parts) {
    if (!isObject(part) || part['type'] !== 'text') continue;
    if (text !== '') text += '\n';
    text += typeof part['text'] === 'string' ? part['text'] : '';
  }
  if (isObject(result) && result['isError'] === true) return { error: text === '' ? 'MCP tool returned an error' : text };
  return { plain_text_response: text };
}

function isObject(v: unknown): v is Record<string, Json> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
