// --rpc host:port,...: the rpc-server processes llama.cpp's RPC backend offloads layers to (with
// -ngl). ggml ends the process when an endpoint cannot be reached, so each is checked with a TCP
// connect before llama.cpp sees it, and an unreachable one fails the start with its name.
import { connect } from 'node:net';
import { UsageError } from '../cli/flags.js';

/** The endpoints of an --rpc value; each must be host:port. */
export function rpcEndpoints(value: string): Array<{ host: string; port: number; name: string }> {
  return value.split(',').map((name) => {
    const at = name.lastIndexOf(':');
    const host = name.slice(0, at).replace(/^\[(.*)\]$/, '$1');
    const port = Number(name.slice(at + 1));
    if (at <= 0 || !Number.isInteger(port) || port < 1 || port > 65535) throw new UsageError(`--rpc: "${name}" is not host:port`);
    return { host, port, name };
  });
}

/** Resolves when every endpoint accepts a TCP connection within `timeoutMs`; otherwise throws naming the first that does not. */
export async function checkRpcEndpoints(value: string, timeoutMs = 5000): Promise<void> {
  for (const { host, port, name } of rpcEndpoints(value)) {
    await new Promise<void>((resolve, reject) => {
      const socket = connect({ host, port });
      const fail = (why: string): void => {
        socket.destroy();
        reject(new UsageError(`--rpc: cannot reach the rpc-server at ${name} (${why})`));
      };
      socket.setTimeout(timeoutMs, () => fail('no answer'));
      socket.once('error', (err: NodeJS.ErrnoException) => fail(err.code ?? err.message));
      socket.once('connect', () => {
        socket.destroy();
        resolve();
      });
    });
  }
}

/** The --rpc value of llama-server's command line (or LLAMA_ARG_RPC), if any. */
export function rpcArgument(argv: readonly string[], env: NodeJS.ProcessEnv): string | undefined {
  let value = env.LLAMA_ARG_RPC;
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--rpc') value = argv[i + 1];
    else if (argv[i]!.startsWith('--rpc=')) value = argv[i]!.slice('--rpc='.length);
  }
  return value;
}
