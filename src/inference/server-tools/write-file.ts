// write_file: creates or replaces a file with the given content, parent directories included.
import { requiredString, toBytes } from './params.js';
import { functionDefinition, toolError, type ServerTool, type ToolCall } from './tool.js';

export const writeFileTool: ServerTool = {
  name: 'write_file',
  displayName: 'Write file',
  permissionWrite: true,
  supportStream: false,
  usesCwd: true,
  definition: () => functionDefinition('write_file',
    'Write content to a file, creating it (including parent directories) if it does not exist. May use with edit_file for more complex edits.', {
      type: 'object',
      properties: {
        path: { type: 'string', description: 'Path of the file to write' },
        content: { type: 'string', description: 'Content to write' },
      },
      required: ['path', 'content'],
    }),

  async invoke({ params, io }: ToolCall) {
    const path = requiredString(params, 'path');
    const content = toBytes(requiredString(params, 'content'));
    if (!(await io().writeFile(path, content))) return toolError(`failed to write file: ${path}`);
    return { result: 'file written successfully', path, bytes: content.length };
  },
};
