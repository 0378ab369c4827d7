// get_info: the OS (`uname -a`, "unknown" if it fails) and the working directory: the request's
// x-tool-cwd, else the server's, else (in an isolate) what `pwd` prints there.
import { fromBytes } from './params.js';
import { functionDefinition, type ServerTool, type ToolCall } from './tool.js';

const GET_INFO_MAX_OUTPUT = 4096;
const GET_INFO_TIMEOUT = 5;

export const getInfoTool: ServerTool = {
  name: 'get_info',
  displayName: 'Get Runtime Info',
  permissionWrite: false,
  supportStream: false,
  usesCwd: true,
  definition: () => functionDefinition('get_info', 'Returns runtime info: the OS name/version and the current working directory', {
    type: 'object',
    properties: {},
  }),

  async invoke({ io, runtime, cwd }: ToolCall) {
    const runner = io();
    const res = await runner.run(['uname', '-a'], GET_INFO_MAX_OUTPUT, GET_INFO_TIMEOUT);
    const os = res.exitCode === 0 && !res.timedOut ? fromBytes(res.output).trim() : 'unknown';
    let dir = cwd;
    if (dir === '') {
      if (runtime === '') {
        dir = process.cwd();
      } else {
        const pwd = await runner.run(['pwd'], GET_INFO_MAX_OUTPUT, GET_INFO_TIMEOUT);
        dir = pwd.exitCode === 0 && !pwd.timedOut ? fromBytes(pwd.output).trim() : 'unknown';
      }
    }
    return { os, cwd: dir };
  },
};
