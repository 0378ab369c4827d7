// The configured MCP servers (llama-server's server_mcp): at start-up each is run once to list
// its tools (at most 10 s each; one that fails is left out, with a warning, and the server starts
// anyway), then stopped. A tool call runs on the server's one live process, started on first use
// and started again when it has died; one that cannot be started is not tried again for 5 s (its
// calls answer {"error": "MCP server unavailable: <name>"}). close() kills them all at once, so a
// call in flight answers "cancelled" and shutdown never waits for a slow tool.
import type { McpServerConfig } from './mcp-config.js';
import { McpConnection, type McpToolDef } from './mcp-connection.js';
import type { Json, JsonObject } from './params.js';

/** llama-server's limits: tool discovery per server at start-up, and the pause after a failed start. */
export const MCP_WARMUP_TIMEOUT_MS = 10_000;
export const MCP_COOLDOWN_MS = 5_000;

type Log = (line: string) => void;

export class McpServers {
  private readonly live = new Map<string, Promise<McpConnection | null>>();
  /** A server that failed to start: not tried again before this time (ms). */
  private readonly coolingUntil = new Map<string, number>();
  private stopping = false;

  private constructor(private readonly configs: readonly McpServerConfig[], readonly tools: readonly McpToolDef[], private readonly log: Log) {}

  /** Runs each server once to list its tools (in the configs' order). */
  static async start(configs: readonly McpServerConfig[], log: Log): Promise<McpServers> {
    const tools: McpToolDef[] = [];
    for (const config of configs) {
      let connection: McpConnection;
      try {
        connection = await McpConnection.start(config);
      } catch (err) {
        log(`MCP warmup: failed to spawn '${config.name}': ${(err as Error).message}`);
        continue;
      }
      try {
        const found = await connection.listTools(AbortSignal.timeout(MCP_WARMUP_TIMEOUT_MS));
        log(`MCP warmup: '${config.name}' discovered ${found.length} tools`);
        tools.push(...found);
      } catch (err) {
        log(`MCP warmup: '${config.name}': ${(err as Error).message} (${connection.diagnostics()})`);
      } finally {
        connection.close();
      }
    }
    return new McpServers(configs, tools, log);
  }

  /** Calls a tool of a server; never throws (see McpConnection.callTool). */
  async call(server: string, tool: string, args: Json, signal: AbortSignal): Promise<JsonObject> {
    const connection = await this.connection(server);
    if (!connection) return { error: `MCP server unavailable: ${server}` };
    return connection.callTool(tool, args, signal);
  }

  close(): void {
    this.stopping = true;
    for (const pending of this.live.values()) void pending.then((c) => c?.close());
    this.live.clear();
  }

  /**
   * The server's live process: the running one, or a new one. Nothing awaits between the check
   * of the map and the new entry, so concurrent calls start one process, not one each.
   */
  private async connection(name: string): Promise<McpConnection | null> {
    if (this.stopping) return null;
    const entry = this.live.get(name);
    const current = entry ? await entry : null;
    if (current?.alive) return current;
    // Another call replaced the entry while this one waited: use theirs.
    if (this.live.get(name) !== entry) return this.connection(name);
    if (current) {
      this.log(`MCP '${name}' is no longer alive: ${current.diagnostics()}`);
      current.close();
      this.live.delete(name);
    }
    if ((this.coolingUntil.get(name) ?? 0) > Date.now()) return null;
    const config = this.configs.find((c) => c.name === name);
    if (!config) return null;
    const starting = McpConnection.start(config).then(
      (c) => {
        if (this.stopping) {
          c.close();
          return null;
        }
        return c;
      },
      (err: Error) => {
        this.log(`MCP '${name}': failed to start: ${err.message}`);
        this.coolingUntil.set(name, Date.now() + MCP_COOLDOWN_MS);
        if (this.live.get(name) === starting) this.live.delete(name);
        return null;
      },
    );
    this.live.set(name, starting);
    return starting;
  }
}
