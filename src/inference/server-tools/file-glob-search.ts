// file_glob_search: entries under a directory matching a glob (glob.ts), files by default, at
// most 100. Answers the text the model reads plus the same entries as JSON and the absolute base
// (the web UI's picker joins them).
import { pathGlobMatch } from './glob.js';
import { optionalInt, optionalString, requiredString } from './params.js';
import { functionDefinition, toolError, type ServerTool, type ToolCall } from './tool.js';
import type { ListKind } from './tools-io.js';

const MAX_RESULTS = 100;
const KINDS: Record<string, ListKind> = { file: 'files', dir: 'dirs', all: 'all' };

export const fileGlobSearchTool: ServerTool = {
  name: 'file_glob_search',
  displayName: 'File search',
  permissionWrite: false,
  supportStream: false,
  usesCwd: true,
  definition: () => functionDefinition('file_glob_search',
    'Recursively search for files matching a glob pattern under a directory. ' +
    'Automatically skips files ignored by .gitignore (when the directory is inside a git repo) ' +
    'and common junk directories (.git, node_modules, build, dist, etc.) otherwise. ' +
    'A pattern with no \'/\' (e.g. "*.cpp") matches the file\'s basename at any depth. ' +
    'A pattern containing \'/\' matches the full relative path; unless already anchored with ' +
    '"**/" or a leading \'/\', it is automatically prefixed with "**/". ' +
    'Use type="dir" or "all" to also list directories; directory entries are suffixed with \'/\' in the output. ' +
    'Note: directory listings do not apply .gitignore filtering.', {
      type: 'object',
      properties: {
        path: { type: 'string', description: 'Base directory to search in' },
        include: { type: 'string', description: 'Glob pattern for files to include (e.g. "*.cpp" or "src/**/*.cpp"). Default: **' },
        exclude: { type: 'string', description: 'Glob pattern for files to exclude' },
        type: { type: 'string', description: 'Entry type to return: "file" (default), "dir" or "all"' },
        max_depth: { type: 'integer', description: 'Maximum depth to descend into subdirectories (default: 0 = unlimited; 1 = direct children only)' },
        limit: { type: 'integer', description: `Maximum number of results to return, capped at ${MAX_RESULTS} (default ${MAX_RESULTS})` },
      },
      required: ['path'],
    }),

  async invoke({ params, io }: ToolCall) {
    const files = io();
    const path = requiredString(params, 'path');
    const base = files.resolve(path);
    const include = optionalString(params, 'include', '**');
    const exclude = optionalString(params, 'exclude', '');
    const type = optionalString(params, 'type', 'file');
    const maxDepth = Math.max(0, optionalInt(params, 'max_depth', 0));
    const limitReq = optionalInt(params, 'limit', MAX_RESULTS);
    if (limitReq < 1) return toolError(`invalid limit: ${limitReq} (expected 1 or more)`);
    const limit = Math.min(limitReq, MAX_RESULTS);
    const kind = Object.hasOwn(KINDS, type) ? KINDS[type]! : null;
    if (!kind) return toolError(`invalid type: ${type} (expected "file", "dir" or "all")`);

    const listing = await files.listEntries(base, maxDepth, kind);
    if (listing.err !== '') return toolError(`${listing.err}: ${path}`);
    const matches = listing.entries.filter((e) => pathGlobMatch(include, e.rel) && !(exclude !== '' && pathGlobMatch(exclude, e.rel)));
    const shown = matches.slice(0, limit);
    let text = shown.map((e) => `${e.rel}${e.isDir ? '/' : ''}\n`).join('');
    text += `\n---\nTotal matches: ${matches.length}\n`;
    if (matches.length > shown.length) {
      text += `[${shown.length} results limit reached (${matches.length} total matches). Refine the glob pattern to narrow the search.]\n`;
    }
    if (listing.truncated) text += '[results truncated: time budget or unreadable directory]\n';
    return { plain_text_response: text, entries: shown.map((e) => ({ path: e.rel, type: e.isDir ? 'dir' : 'file' })), base };
  },
};
