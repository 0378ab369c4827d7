// The MCP servers to run (--mcp-servers-config FILE, --mcp-servers-json JSON), in the format of
// Cursor and Claude Desktop that llama-server reads (server-mcp.cpp parse_cursor_format):
//   {"mcpServers": {"<name>": {"command": "...", "args": [...], "env": {...}, "cwd": "...", "timeout_ms": 30000}}}
// A file that cannot be read or JSON that does not parse fails the start; a server without a
// command, or whose name another source already used, is skipped with a warning.
import { readFileSync } from 'node:fs';

export interface McpServerConfig {
  name: string;
  command: string;
  args: string[];
  /** Variables set for the server on top of this process's environment. */
  env: Record<string, string>;
  /** "" for this process's working directory. */
  cwd: string;
  /** Each request's time limit (a tool call's included). */
  timeoutMs: number;
}

/** llama-server's per-call limit when the config gives none. */
export const DEFAULT_MCP_TIMEOUT_MS = 30_000;

type Warn = (message: string) => void;

/** The servers of both sources, the file's first; throws (llama-server's message) where llama-server fails its start. */
export function readMcpServerConfigs(file: string, json: string, warn: Warn): McpServerConfig[] {
  const configs: McpServerConfig[] = [];
  const append = (text: string): void => {
    const parsed = parseMcpServers(text, warn);
    if (parsed.length === 0) warn('MCP config: no servers found in JSON');
    for (const config of parsed) {
      if (configs.some((c) => c.name === config.name)) warn(`MCP config: duplicate server name '${config.name}', skipping`);
      else configs.push(config);
    }
  };
  if (file !== '') {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      throw new Error(`failed to open MCP config file: ${file}`);
    }
    append(text);
  }
  if (json !== '') append(json);
  return configs;
}

function parseMcpServers(text: string, warn: Warn): McpServerConfig[] {
  let root: unknown;
  try {
    root = JSON.parse(text);
  } catch (err) {
    throw new Error(`failed to parse MCP config JSON: ${(err as Error).message}`);
  }
  const servers = isObject(root) ? root['mcpServers'] : undefined;
  if (!isObject(servers)) return [];
  const out: McpServerConfig[] = [];
  for (const [name, raw] of Object.entries(servers)) {
    const entry = isObject(raw) ? raw : {};
    const field = <T>(key: string, check: (v: unknown) => v is T, fallback: T): T => {
      const value = entry[key];
      if (value === undefined) return fallback;
      if (!check(value)) throw new Error(`failed to parse MCP config JSON: mcpServers.${name}.${key} has the wrong type`);
      return value;
    };
    const command = field('command', isString, '');
    const args = field('args', isStringArray, []);
    const env = field('env', isStringRecord, {});
    const cwd = field('cwd', isString, '');
    const timeoutMs = field('timeout_ms', isPositiveInteger, DEFAULT_MCP_TIMEOUT_MS);
    if (command === '') {
      warn(`MCP server '${name}' has no command, skipping`);
      continue;
    }
    out.push({ name, command, args, env, cwd, timeoutMs });
  }
  return out;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
const isString = (v: unknown): v is string => typeof v === 'string';
const isStringArray = (v: unknown): v is string[] => Array.isArray(v) && v.every(isString);
const isStringRecord = (v: unknown): v is Record<string, string> => isObject(v) && Object.values(v).every(isString);
const isPositiveInteger = (v: unknown): v is number => Number.isInteger(v) && (v as number) > 0;
