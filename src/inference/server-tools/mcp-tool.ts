// One tool of an MCP server offered as a /tools tool (llama-server's server_mcp_tool), named
// "<server>_<tool>". Its parameters go to the server as the call's arguments (with the cwd and
// runtime that the request's headers or --tools-runtime add, as for every tool); it never streams.
import type { McpToolDef } from './mcp-connection.js';
import type { McpServers } from './mcp-servers.js';
import { functionDefinition, type ServerTool } from './tool.js';

export function mcpTool(def: McpToolDef, servers: McpServers): ServerTool {
  const name = `${def.server}_${def.name}`;
  return {
    name,
    type: 'mcp',
    displayName: name,
    permissionWrite: false,
    supportStream: false,
    usesCwd: false,
    definition: () => functionDefinition(name, def.description, def.inputSchema),
    invoke: (call) => servers.call(def.server, def.name, call.params, call.signal),
  };
}
