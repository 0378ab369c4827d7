// grep_search: lines matching a regular expression (ECMAScript, as std::regex; on the bytes of
// each file, as there) in a file or in the files under a directory (the file listing of
// host-io/isolate-io, filtered by include/exclude globs); at most 100 matches, with optional line
// numbers and context lines in grep's `path:line:text` / `path-line-text` form.
import { pathGlobMatch } from './glob.js';
import { getlines } from './lines.js';
import { fromBytes, optionalBoolean, optionalInt, optionalString, requiredString, toBytes } from './params.js';
import { functionDefinition, toolError, type ServerTool, type ToolCall } from './tool.js';

const MAX_RESULTS = 100;

/** The pattern as a RegExp over bytes, or the error answer. */
function compile(pattern: string, literal: boolean, ignoreCase: boolean): RegExp | string {
  const source = literal ? pattern.replace(/[\\^$.|?*+()[\]{}]/g, '\\$&') : pattern;
  try {
    return new RegExp(toBytes(source), ignoreCase ? 'i' : '');
  } catch (err) {
    return `invalid regex: ${(err as Error).message}`;
  }
}

/** The lines one file adds to the answer; `state` counts matches across files. */
function grepFile(content: string, displayPath: string, re: RegExp, ctxLines: number, showNum: boolean, state: { total: number; limitReached: boolean }): string {
  const lines = getlines(content);
  let out = '';
  for (let i = 0; i < lines.length; i++) {
    if (state.total >= MAX_RESULTS) {
      state.limitReached = true;
      break;
    }
    if (!re.test(lines[i]!)) continue;
    const from = ctxLines > 0 ? Math.max(0, i - ctxLines) : i;
    const to = ctxLines > 0 ? Math.min(lines.length - 1, i + ctxLines) : i;
    for (let j = from; j <= to; j++) {
      const sep = j === i ? ':' : '-';
      out += `${displayPath}${sep}${showNum ? `${j + 1}${sep}` : ''}${lines[j]}\n`;
    }
    if (ctxLines > 0) out += '--\n';
    state.total++;
  }
  return out;
}

export const grepSearchTool: ServerTool = {
  name: 'grep_search',
  displayName: 'Grep search',
  permissionWrite: false,
  supportStream: false,
  usesCwd: true,
  definition: () => functionDefinition('grep_search',
    'Search for a pattern in files under a path. Returns matching lines with file paths ' +
    '(and, unless searching a single file, paths relative to the given directory). ' +
    'Automatically skips files ignored by .gitignore (when the directory is inside a git repo) ' +
    'and common junk directories (.git, node_modules, build, dist, etc.) otherwise. ' +
    'include/exclude: a pattern with no \'/\' matches the basename at any depth; a pattern ' +
    'containing \'/\' matches the full relative path (auto-anchored with "**/" unless already anchored).', {
      type: 'object',
      properties: {
        path: { type: 'string', description: 'File or directory to search in' },
        pattern: { type: 'string', description: 'Pattern to search for (regular expression unless literal is true)' },
        include: { type: 'string', description: 'Glob pattern to filter files (default: **)' },
        exclude: { type: 'string', description: 'Glob pattern to exclude files' },
        return_line_numbers: { type: 'boolean', description: 'If true, include line numbers in results' },
        literal: { type: 'boolean', description: 'Treat pattern as a literal string instead of a regular expression (default: false)' },
        ignore_case: { type: 'boolean', description: 'Case-insensitive search (default: false)' },
        context_lines: { type: 'integer', description: 'Number of lines of context to show before and after each match (default: 0)' },
      },
      required: ['path', 'pattern'],
    }),

  async invoke({ params, io }: ToolCall) {
    const path = requiredString(params, 'path');
    const pattern = requiredString(params, 'pattern');
    const include = optionalString(params, 'include', '**');
    const exclude = optionalString(params, 'exclude', '');
    const showLineno = optionalBoolean(params, 'return_line_numbers', false);
    const re = compile(pattern, optionalBoolean(params, 'literal', false), optionalBoolean(params, 'ignore_case', false));
    const ctxLines = Math.max(0, optionalInt(params, 'context_lines', 0));
    if (typeof re === 'string') return toolError(re);
    const files = io();

    // (absolute path, path shown) of each file searched
    const targets: Array<[string, string]> = [];
    const absPath = files.resolve(path);
    if (await files.isRegularFile(absPath)) {
      targets.push([absPath, path]);
    } else if (await files.isDirectory(absPath)) {
      const listing = await files.listEntries(absPath, 0, 'files');
      if (listing.err !== '') return toolError(`${listing.err}: ${path}`);
      for (const e of listing.entries) {
        if (!pathGlobMatch(include, e.rel) || (exclude !== '' && pathGlobMatch(exclude, e.rel))) continue;
        targets.push([absPath === '/' ? `/${e.rel}` : `${absPath}/${e.rel}`, e.rel]);
      }
    } else {
      return toolError(`path does not exist: ${path}`);
    }

    const state = { total: 0, limitReached: false };
    let text = '';
    for (const [file, shown] of targets) {
      if (state.limitReached) break;
      const content = await files.readFile(file);
      if (content === null) continue;
      text += grepFile(content, toBytes(shown), re, ctxLines, showLineno || ctxLines > 0, state);
    }
    text += `\n---\nTotal matches: ${state.total}\n`;
    if (state.limitReached) text += `[${MAX_RESULTS} matches limit reached. Narrow the path/pattern/include to see more.]\n`;
    return { plain_text_response: fromBytes(text) };
  },
};
