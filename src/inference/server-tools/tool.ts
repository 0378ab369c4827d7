// One built-in tool (server-tools.cpp server_tool): its name, how GET /tools describes it, and
// its invocation. A tool's own failures are answers ({"error": "..."}, status 200), as there;
// a missing or mistyped required parameter throws ToolParamError (400), a bad runtime
// ToolRuntimeError (500).
import type { Json, JsonObject } from './params.js';
import type { ToolsIo } from './tools-io.js';

/** What a call gets besides its parameters. */
export interface ToolCall {
  /** The parameters, with `cwd`, `runtime` and `resp_type` taken from the request's headers. */
  params: Json;
  /** The ToolsIo for the call's runtime and working directory (created on first use). */
  io(): ToolsIo;
  /** x-tool-runtime or --tools-runtime; "" on this host. */
  runtime: string;
  cwd: string;
  /** Aborted when the client left. */
  signal: AbortSignal;
}

/** A streamed call: each piece of output as it comes; `alive` is false once the client left. */
export interface ToolStream {
  push(chunk: string): void;
  alive(): boolean;
}

export interface ServerTool {
  readonly name: string;
  /** GET /tools' "type": "server" for the built-in tools (the default), "mcp" for an MCP server's. */
  readonly type?: 'server' | 'mcp';
  readonly displayName: string;
  readonly permissionWrite: boolean;
  /** The tool can stream its output (POST /tools with "stream": true). */
  readonly supportStream: boolean;
  /** The tool resolves paths and runs against the working directory. */
  readonly usesCwd: boolean;
  /** The OpenAI function definition. */
  definition(): JsonObject;
  /** The answer; a streaming call pushes its output and resolves to null. */
  invoke(call: ToolCall, stream?: ToolStream): Promise<JsonObject | null>;
}

/** GET /tools' entry for a tool, keys in llama-server's order. */
export function describeTool(tool: ServerTool): JsonObject {
  return {
    display_name: tool.displayName,
    tool: tool.name,
    type: tool.type ?? 'server',
    permissions: { write: tool.permissionWrite },
    uses_cwd: tool.usesCwd,
    definition: tool.definition(),
  };
}

/** A function definition with llama-server's key order. */
export function functionDefinition(name: string, description: string, parameters: JsonObject): JsonObject {
  return { type: 'function', function: { name, description, parameters } };
}

/** An error answer (status 200, as llama-server). */
export const toolError = (message: string): JsonObject => ({ error: message });
