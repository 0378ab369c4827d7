// The enabled built-in tools, the MCP servers' tools after them, and the --tools-runtime they run
// in: built once at start-up (an unknown tool name or a bad runtime fails it, as llama-server's
// tools setup), closed with the server (which stops a container it started and the MCP servers).
import type { Json, JsonObject } from './params.js';
import { ToolParamError, jsonTypeName } from './params.js';
import { selectTools } from './registry.js';
import { makeToolsIo, startToolsRuntime, type ToolsRuntime } from './runtime.js';
import type { ServerTool, ToolCall } from './tool.js';
import type { ToolsIo } from './tools-io.js';
import type { McpServerConfig } from './mcp-config.js';
import { McpServers } from './mcp-servers.js';
import { mcpTool } from './mcp-tool.js';

export interface ToolsOptions {
  /** --tools (CSV, "all" for every tool); -ag is "all". */
  names: readonly string[];
  /** --tools-runtime; "" runs the tools on this host. */
  runtime: string;
  /** --mcp-servers-config, --mcp-servers-json. */
  mcp?: readonly McpServerConfig[];
}

/** What a POST /tools request brings besides the tool's parameters. */
export interface CallHeaders {
  /** x-tool-cwd: the working directory. */
  cwd: string;
  /** x-tool-runtime: an isolate for this call instead of --tools-runtime. */
  runtime: string;
  /** x-resp-type (read_file: "base64"). */
  respType: string;
}

/**
 * `params[key] = value` as nlohmann does it: null becomes an object, any other non-object
 * refuses (type_error.305).
 */
function setParam(params: Json, key: string, value: string): JsonObject {
  if (params === null) return { [key]: value };
  if (typeof params !== 'object' || Array.isArray(params)) {
    throw new ToolParamError(`[json.exception.type_error.305] cannot use operator[] with a string argument with ${jsonTypeName(params)}`);
  }
  return { ...params, [key]: value };
}

/** The parameters without any cwd/runtime/resp_type of the model's: only the headers set those. */
function withoutReserved(params: Json): Json {
  if (params === null || typeof params !== 'object' || Array.isArray(params)) return params;
  const { cwd: _cwd, runtime: _runtime, resp_type: _respType, ...rest } = params;
  return rest;
}

export class ToolsService {
  private constructor(readonly tools: readonly ServerTool[], private readonly runtime: ToolsRuntime | null, private readonly mcp: McpServers | null) {}

  /** /tools is served when a built-in tool is enabled or an MCP server configured. */
  static wanted(options: ToolsOptions | undefined): options is ToolsOptions {
    return options !== undefined && (options.names.length > 0 || (options.mcp?.length ?? 0) > 0);
  }

  /**
   * Throws UnknownToolError or ToolRuntimeError when the options cannot be honoured. An MCP tool
   * whose name a tool before it took is left out, with a warning.
   */
  static async start(options: ToolsOptions, log: (line: string) => void = () => {}): Promise<ToolsService> {
    const tools = options.names.length > 0 ? selectTools(options.names) : [];
    const runtime = await startToolsRuntime(options.runtime);
    const mcp = options.mcp && options.mcp.length > 0 ? await McpServers.start(options.mcp, log) : null;
    for (const def of mcp?.tools ?? []) {
      const tool = mcpTool(def, mcp!);
      if (tools.some((t) => t.name === tool.name)) log(`MCP tool "${tool.name}" from server "${def.server}" collides with an existing tool, skipping`);
      else tools.push(tool);
    }
    return new ToolsService(tools, runtime, mcp);
  }

  /** A call's parameters and its ToolsIo (made when the tool first asks for it). */
  async prepareCall(rawParams: Json, headers: CallHeaders, signal: AbortSignal): Promise<ToolCall> {
    let params = withoutReserved(rawParams);
    if (headers.cwd !== '') params = setParam(params, 'cwd', headers.cwd);
    const runtime = headers.runtime !== '' ? headers.runtime : this.runtime ? await this.runtime.spec() : '';
    if (runtime !== '') params = setParam(params, 'runtime', runtime);
    if (headers.respType !== '') params = setParam(params, 'resp_type', headers.respType);
    let io: ToolsIo | null = null;
    return { params, runtime, cwd: headers.cwd, signal, io: () => (io ??= makeToolsIo(runtime, headers.cwd)) };
  }

  close(): Promise<void> {
    this.mcp?.close();
    return this.runtime?.close() ?? Promise.resolve();
  }
}
