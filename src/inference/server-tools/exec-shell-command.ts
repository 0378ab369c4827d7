// exec_shell_command: `sh -c <command>` in the working directory, stdout and stderr together;
// at most 16 KB of output and 60 s (default 10 s), after which the command is killed. The answer
// ends with "[exit code: N]" and, when it ran out of time, " [exit due to timed out]". Streamed,
// each piece of output is pushed as it comes and the tail last. A client that leaves kills the
// command at once, streamed or not (llama-server notices only at the next piece of output).
import { fromBytes, optionalInt, requiredString } from './params.js';
import { functionDefinition, type ServerTool, type ToolCall, type ToolStream } from './tool.js';

const MAX_OUTPUT_SIZE = 16 * 1024;
const MAX_TIMEOUT = 60;
const DEFAULT_TIMEOUT = 10;

const tail = (exitCode: number, timedOut: boolean): string => `\n[exit code: ${exitCode}]${timedOut ? ' [exit due to timed out]' : ''}`;

/** max_output_size as llama-server takes it: an int made a size_t, so a negative one is the cap. */
function maxOutputOf(requested: number): number {
  return requested < 0 ? MAX_OUTPUT_SIZE : Math.min(requested, MAX_OUTPUT_SIZE);
}

export const execShellCommandTool: ServerTool = {
  name: 'exec_shell_command',
  displayName: 'Execute shell command',
  permissionWrite: true,
  supportStream: true,
  usesCwd: true,
  definition: () => functionDefinition('exec_shell_command', 'Execute a shell command and return its output (stdout and stderr combined).', {
    type: 'object',
    properties: {
      command: { type: 'string', description: 'Shell command to execute' },
      timeout: { type: 'integer', description: `Timeout in seconds (default ${DEFAULT_TIMEOUT}, max ${MAX_TIMEOUT})` },
      max_output_size: { type: 'integer', description: `Maximum output size in bytes (default ${MAX_OUTPUT_SIZE})` },
    },
    required: ['command'],
  }),

  async invoke({ params, io, signal }: ToolCall, stream?: ToolStream) {
    const command = requiredString(params, 'command');
    const timeout = Math.min(optionalInt(params, 'timeout', DEFAULT_TIMEOUT), MAX_TIMEOUT);
    const maxOutput = maxOutputOf(optionalInt(params, 'max_output_size', MAX_OUTPUT_SIZE));
    const args = ['sh', '-c', command];
    const runner = io();
    if (stream) {
      const res = await runner.run(args, maxOutput, timeout, (chunk) => {
        stream.push(fromBytes(chunk));
        return stream.alive();
      }, signal);
      if (!stream.alive()) return null;
      stream.push(tail(res.exitCode, res.timedOut));
      return null;
    }
    const res = await runner.run(args, maxOutput, timeout, undefined, signal);
    return { plain_text_response: fromBytes(res.output) + tail(res.exitCode, res.timedOut) };
  },
};
