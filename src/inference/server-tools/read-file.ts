// read_file: a file's text, optionally a 1-based line range with line-number prefixes; at most
// 16 KB of answer ("[output truncated]" after), and a file over 16 KB only with end_line. With
// the x-resp-type: base64 header (the web UI's, never the model's), the raw file up to 32 MB.
import { getlines } from './lines.js';
import { fromBytes, optionalBoolean, optionalInt, optionalString, requiredString, toBytes } from './params.js';
import { functionDefinition, toolError, type ServerTool, type ToolCall } from './tool.js';

const READ_FILE_MAX_SIZE = 16 * 1024;
const READ_FILE_MAX_SIZE_BASE64 = 32 * 1024 * 1024;
const ARROW = toBytes('\u2192');

export const readFileTool: ServerTool = {
  name: 'read_file',
  displayName: 'Read file',
  permissionWrite: false,
  supportStream: false,
  usesCwd: true,
  definition: () => functionDefinition('read_file',
    'Read the contents of a file. Optionally specify a 1-based line range. If append_loc is true, each line is prefixed with its line number (e.g. "1\u2192...").', {
      type: 'object',
      properties: {
        path: { type: 'string', description: 'Path to the file' },
        start_line: { type: 'integer', description: 'First line to read, 1-based (default: 1)' },
        end_line: { type: 'integer', description: 'Last line to read, 1-based inclusive (default: end of file)' },
        append_loc: { type: 'boolean', description: 'Prefix each line with its line number' },
      },
      required: ['path'],
    }),

  async invoke({ params, io }: ToolCall) {
    const path = requiredString(params, 'path');
    const startLine = optionalInt(params, 'start_line', 1);
    const endLine = optionalInt(params, 'end_line', -1);
    const appendLoc = optionalBoolean(params, 'append_loc', false);
    const asBase64 = optionalString(params, 'resp_type', '') === 'base64';
    const files = io();

    const size = await files.fileSize(path);
    if (size === null) return toolError(`cannot stat file: ${path}`);
    if (asBase64) {
      if (size > READ_FILE_MAX_SIZE_BASE64) return toolError(`file too large (${size} bytes, max ${READ_FILE_MAX_SIZE_BASE64})`);
      const content = await files.readFile(path);
      if (content === null) return toolError(`failed to open file: ${path}`);
      return { base64: Buffer.from(content, 'latin1').toString('base64'), size_bytes: content.length };
    }
    if (size > READ_FILE_MAX_SIZE && endLine === -1) {
      return toolError(`file too large (${size} bytes, max ${READ_FILE_MAX_SIZE}). Use start_line/end_line to read a portion.`);
    }
    const content = await files.readFile(path);
    if (content === null) return toolError(`failed to open file: ${path}`);

    let result = '';
    let lineno = 0;
    for (const line of getlines(content)) {
      lineno++;
      if (lineno < startLine) continue;
      if (endLine !== -1 && lineno > endLine) break;
      const outLine = appendLoc ? `${lineno}${ARROW}${line}\n` : `${line}\n`;
      if (result.length + outLine.length > READ_FILE_MAX_SIZE) {
        result += '[output truncated]';
        break;
      }
      result += outLine;
    }
    return { plain_text_response: fromBytes(result) };
  },
};
