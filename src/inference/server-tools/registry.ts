// The built-in tools this server offers (--tools, -ag), in llama-server's order, and their
// selection: "all" or a list of names; an unknown name fails at start-up with the names known.
import { editFileTool } from './edit-file.js';
import { execShellCommandTool } from './exec-shell-command.js';
import { fileGlobSearchTool } from './file-glob-search.js';
import { getInfoTool } from './get-info.js';
import { grepSearchTool } from './grep-search.js';
import { readFileTool } from './read-file.js';
import type { ServerTool } from './tool.js';
import { writeFileTool } from './write-file.js';

export const BUILT_IN_TOOLS: readonly ServerTool[] = [readFileTool, fileGlobSearchTool, grepSearchTool, execShellCommandTool, writeFileTool, editFileTool, getInfoTool];

export class UnknownToolError extends Error {}

/** The tools named by --tools (parsed as a CSV row); throws UnknownToolError on a name not known. */
export function selectTools(names: readonly string[]): ServerTool[] {
  const known = BUILT_IN_TOOLS.map((t) => t.name);
  for (const name of names) {
    if (name !== 'all' && !known.includes(name)) throw new UnknownToolError(`unknown tool "${name}". available tools: ${known.join(', ')}`);
  }
  return BUILT_IN_TOOLS.filter((t) => names.includes('all') || names.includes(t.name));
}

/** A POST /tools that names no enabled tool, or asks a stream of one that cannot: 404. */
export class ToolLookupError extends Error {}

export function findTool(tools: readonly ServerTool[], name: string, requireStream: boolean): ServerTool {
  const tool = tools.find((t) => t.name === name);
  if (!tool) throw new ToolLookupError(`unknown tool "${name}"`);
  if (requireStream && !tool.supportStream) throw new ToolLookupError(`tool "${name}" does not support stream = true`);
  return tool;
}
