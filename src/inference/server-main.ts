#!/usr/bin/env node
// inference-server: serves a GGUF model over HTTP (OpenAI-compatible and llama-server native APIs).
import { usage, UsageError } from '../cli/flags.js';
import { isNativeError, native, type NativeServerParams } from '../native/binding.js';
import { logLevel, OWN_FLAGS, refusedOptions, serverOptions, splitCommandLine, usesCommonLog } from './server-config.js';
import { createInferenceAuth } from './access/auth-bridge.js';
import { startInferenceServer } from './server.js';


/** Our own flags' help, printed before llama-server's usage (which ends the process). */
function ownUsage(): string {
  return usage('inference-server', 'Serves a GGUF model over HTTP, as llama-server does: every llama-server option (listed after these) is accepted. Options of this server:', OWN_FLAGS);
}

/** llama-server's command line through llama.cpp's parser; exits as llama-server does on --help or a bad value. */
function parseServerArgs(argv: readonly string[]): NativeServerParams {
  try {
    return native.ServerParams.parse(['llama-server', ...argv]);
  } catch (err) {
    if (isNativeError(err) && err.code === 'BAD_ARGUMENTS') process.exit(1);
    throw err;
  }
}

/** llama-server's warning: the features that let a client reach files, commands or other hosts. */
function experimentalFeatures(options: ReturnType<typeof serverOptions>): string[] {
  return [
    ...(options.corsProxy ? ['MCP proxy (experimental)'] : []),
    ...(options.tools && options.tools.names.length > 0 ? ['server tools (experimental)'] : []),
    ...(options.tools && options.tools.names.length > 0 && options.tools.runtime !== '' ? ['tools runtime (experimental)'] : []),
  ];
}

/** This program's own lines: stderr, or llama.cpp's common log once a --log-* option asks for it. */
let say = (line: string, _level: 'info' | 'error' = 'info'): void => console.error(line);

async function main(): Promise<number> {
  try {
    const { own, llama } = splitCommandLine(process.argv.slice(2));
    if (llama.some((a) => a === '-h' || a === '--help' || a === '--usage')) console.log(ownUsage() + '\n');
    const params = parseServerArgs(llama);
    const values = params.values();
    const refused = refusedOptions(params.given());
    if (refused.length > 0) throw new UsageError(`cannot honour these options:\n  ${refused.join('\n  ')}`);
    if (usesCommonLog(params.given())) {
      native.useCommonLog();
      say = (line, level = 'info') => native.logWrite(level, `${line}\n`);
    }
    const options = serverOptions(values, own, native.systemInfo().supportsGpuOffload);
    const level = logLevel(values, params.given());
    if (level) native.setLogLevel(level);
    const { host, port, runtime } = options;
    const role = own.authRole;
    if (role !== undefined && !own.authApp) throw new UsageError('--auth-role needs --auth-app');
    const auth = await createInferenceAuth({
      mount: Boolean(own.auth),
      appSlug: own.authApp,
      role,
      issuer: own.authIssuer,
      jwksUrl: own.authJwksUrl,
      selfUrl: `http://${host}:${port}`,
      env: process.env,
    });
    const server = await startInferenceServer({
      ...options,
      serverParams: params,
      extraRoutes: auth.routes,
      ...(auth.acceptBearer ? { acceptBearer: auth.acceptBearer } : {}),
      log: (line) => say(line),
    });
    const risky = experimentalFeatures(options);
    if (risky.length > 0) say(`inference-server: security: ${risky.join(', ')} enabled - do not expose to untrusted environments`, 'error');
    say(`inference-server: listening on ${options.tls ? 'https' : 'http'}://${host}:${server.port} (backend ${native.systemInfo().backend}), loading ${runtime.model}`);
    const shutdown = (): void => {
      say('inference-server: shutting down');
      Promise.all([server.close(), auth.close()]).then(() => process.exit(0), () => process.exit(1));
    };
    process.once('SIGINT', shutdown);
    process.once('SIGTERM', shutdown);
    try {
      const service = await server.ready;
      const i = service.info;
      say(`inference-server: model ready (${service.metadata.architecture}, ${service.metadata.nParams} parameters), n_ctx ${i.nCtx}, ${i.nParallel} slots, n_batch ${i.nBatch}, threads ${i.nThreads}`);
    } catch (err) {
      say(`inference-server: ${(err as Error).message}`, 'error');
      await server.close();
      await auth.close();
      return 1;
    }
    return -1; // keep running
  } catch (err) {
    if (err instanceof UsageError) {
      say(`inference-server: ${err.message}`, 'error');
      return 1;
    }
    say(`inference-server: ${(err as Error).message}`, 'error');
    return 1;
  }
}

const code = await main();
if (code >= 0) process.exit(code);
