#!/usr/bin/env node
// inference-server: serves a GGUF model over HTTP (OpenAI-compatible and llama-server native APIs).
import { usage, UsageError } from '../cli/flags.js';
import { isNativeError, native, type NativeServerParams, type ServerParamValues } from '../native/binding.js';
import { cacheIdleSlotsWarning, logLevel, OWN_FLAGS, refuseUnhonoured, routerOptions, serverOptions, splitCommandLine, usesCommonLog, type OwnFlags } from './server-config.js';
import { createInferenceAuth, type InferenceAuth } from './access/auth-bridge.js';
import { startInferenceServer } from './server.js';
import { modelEntry } from './dialects/server-info.js';
import { routerLink, routerUsageReporter, spareCommandLine, startedByRouter, type RouterChild } from './multi-model/child-link.js';
import { vertexSettings, type VertexSettings } from './vertex-predict.js';
import { readMcpServerConfigs } from './server-tools/mcp-config.js';
import type { ToolsOptions } from './server-tools/tools-service.js';
import { checkRpcEndpoints, rpcArgument } from './rpc-servers.js';
import { namesRemoteModel, resolveModels } from './download/resolve-models.js';
import { logProgress, terminalProgress } from './download/progress.js';
import { startTracing, stopTracing } from '../telemetry/tracing.js';


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
    ...((options.tools?.mcp?.length ?? 0) > 0 ? ['MCP servers (experimental)'] : []),
  ];
}

/** This program's own lines: stderr, or llama.cpp's common log once a --log-* option asks for it. */
let say = (line: string, _level: 'info' | 'error' = 'info'): void => console.error(line);

function startAuth(own: OwnFlags, host: string, port: number): Promise<InferenceAuth> {
  return createInferenceAuth({
    mount: Boolean(own.auth),
    appSlug: own.authApp,
    role: own.authRole,
    issuer: own.authIssuer,
    jwksUrl: own.authJwksUrl,
    selfUrl: `http://${host}:${port}`,
    env: process.env,
  });
}

function onSignals(shutdown: () => void): void {
  process.once('SIGINT', shutdown);
  process.once('SIGTERM', shutdown);
}

/**
 * What this process serves besides its flags' routes, as llama-server: Vertex AI's protocol
 * (AIP_MODE=PREDICTION, on AIP_HTTP_PORT in place of --port) and the MCP servers' tools
 * (--mcp-servers-config, --mcp-servers-json; a file that cannot be read or JSON that does not
 * parse fails the start). A router's model process serves neither: the router does.
 */
function withProcessExtras<O extends { port: number; vertex?: VertexSettings; tools?: ToolsOptions }>(options: O, v: ServerParamValues, child: RouterChild | null): O {
  if (child) return options;
  const mcp = readMcpServerConfigs(v.mcpServersConfig, v.mcpServersJson, (warning) => say(`inference-server: ${warning}`, 'error'));
  const tools = options.tools ? { ...options.tools, mcp } : { names: [], runtime: '', mcp };
  const vertex = vertexSettings(process.env);
  if (!vertex) return { ...options, tools };
  if (vertex.port !== options.port) say(`inference-server: Vertex AI prediction mode: listening on AIP_HTTP_PORT ${vertex.port} in place of port ${options.port}`, 'error');
  return { ...options, tools, port: vertex.port, vertex };
}

/**
 * A model named by the hub or a URL (-hf, -hfd, -mu, -mmu) downloaded into the cache, or found
 * there, before anything loads, as llama-server does; the command line is then parsed again with
 * the local files as -m, -mm and -md (the later option wins in llama.cpp's parser).
 */
async function withLocalModels(llama: string[], params: NativeServerParams): Promise<NativeServerParams> {
  const values = params.values();
  if (!namesRemoteModel(values)) return params;
  const log = (line: string): void => say(`inference-server: ${line}`);
  const local = await resolveModels(values, {
    env: process.env,
    log,
    progress: process.stdout.isTTY ? terminalProgress(process.stdout) : logProgress(log),
    userAgent: `inference-server llama-cpp/${native.ServerParams.buildInfo()}`,
  });
  return parseServerArgs([...llama, '-m', local.model, ...(local.mmproj ? ['-mm', local.mmproj] : []), ...(local.draftModel ? ['-md', local.draftModel] : [])]);
}

/** One model in this process (`child`: started by a router); -1 once it serves (keep running), else the exit code. */
async function runSingleModel(params: NativeServerParams, own: OwnFlags, child: RouterChild | null): Promise<number> {
  const options = withProcessExtras(serverOptions(params.values(), own, native.systemInfo().supportsGpuOffload), params.values(), child);
  const { host, port, runtime } = options;
  const auth = await startAuth(own, host, port);
  const server = await startInferenceServer({
    ...options,
    serverParams: params,
    extraRoutes: auth.routes,
    ...(auth.acceptBearer ? { acceptBearer: auth.acceptBearer } : {}),
    ...(auth.usage ? { usageRecorder: auth.usage } : {}),
    ...(auth.fleetStore ? { fleetStore: auth.fleetStore } : {}),
    // A router's model process takes its tenants from the router and reports their usage to it.
    ...(child ? { routerChild: { usage: routerUsageReporter() } } : {}),
    log: (line) => say(line),
  });
  const idleSlots = cacheIdleSlotsWarning(params.values());
  if (idleSlots) say(`inference-server: ${idleSlots}`, 'error');
  const risky = experimentalFeatures(options);
  if (risky.length > 0) say(`inference-server: security: ${risky.join(', ')} enabled - do not expose to untrusted environments`, 'error');
  say(`inference-server: listening on ${options.tls ? 'https' : 'http'}://${host}:${server.port} (backend ${native.systemInfo().backend}), loading ${runtime.model}`);
  let stopping = false;
  const shutdown = (): void => {
    stopping = true;
    say('inference-server: shutting down');
    server.close().then(() => auth.close()).then(stopTracing).then(() => process.exit(0), () => process.exit(1));
  };
  onSignals(shutdown);
  // A router's model process reports to its router (multi-model/child-link.ts).
  const link = child ? routerLink(shutdown) : null;
  link?.listening(server.port);
  try {
    const service = await server.ready;
    const i = service.info;
    say(`inference-server: model ready (${service.metadata.architecture}, ${service.metadata.nParams} parameters), n_ctx ${i.nCtx}, ${i.nParallel} slots, n_batch ${i.nBatch}, threads ${i.nThreads}`);
    link?.ready(modelEntry(service) as Record<string, unknown>);
    link?.onElsewhere((tokens) => service.engine.chargeTenants(tokens));
  } catch (err) {
    // A load cancelled by a shutdown is no failure: the shutdown ends the process (exit 0).
    if (stopping) return -1;
    say(`inference-server: ${(err as Error).message}`, 'error');
    await server.close();
    await auth.close();
    return 1;
  }
  return -1;
}

/** Router mode: many models, each in a child process; -1 once it listens. */
async function runRouter(params: NativeServerParams, own: OwnFlags): Promise<number> {
  const options = withProcessExtras(routerOptions(params.values(), own), params.values(), null);
  const auth = await startAuth(own, options.host, options.port);
  // The children run this same program (node, its flags and this script) with their model's flags.
  const command = [process.execPath, ...process.execArgv, process.argv[1]!];
  // Imported here: a model process (or a single-model server) does not load the router.
  const { startRouterServer } = await import('./multi-model/server.js');
  const server = await startRouterServer({
    ...options,
    command,
    readSpecs: () => params.routerModels(),
    buildInfo: native.ServerParams.buildInfo(),
    extraRoutes: auth.routes,
    ...(auth.acceptBearer ? { acceptBearer: auth.acceptBearer } : {}),
    ...(auth.usage ? { usageRecorder: auth.usage } : {}),
    ...(auth.fleetStore ? { fleetStore: auth.fleetStore } : {}),
    // llama-server's test switch: 2 s more per load and per proxied request.
    fakeDelayMs: (process.env['LLAMA_SERVER_DEBUG_FAKE_TIMING'] ?? '') !== '' ? 2000 : 0,
    log: (line) => say(line),
  });
  const names = server.registry.list().map((e) => e.spec.name);
  say(`inference-server: router listening on ${options.tls ? 'https' : 'http'}://${options.host}:${server.port}, ${names.length} models: ${names.join(', ') || '(none)'}`);
  onSignals(() => {
    say('inference-server: shutting down');
    server.close().then(() => auth.close()).then(stopTracing).then(() => process.exit(0), () => process.exit(1));
  });
  return -1;
}

async function main(): Promise<number> {
  try {
    // Whether a router started this process, decided here once (multi-model/child-link.ts); a
    // spare model process gets its command line when the router needs it.
    const child = startedByRouter();
    const argv = child?.spare ? await spareCommandLine() : process.argv.slice(2);
    const { own, llama } = splitCommandLine(argv);
    if (llama.some((a) => a === '-h' || a === '--help' || a === '--usage')) console.log(ownUsage() + '\n');
    // llama.cpp's parser registers --rpc endpoints at once, and ggml ends the process on one it cannot reach.
    const rpc = rpcArgument(llama, process.env);
    if (rpc !== undefined) await checkRpcEndpoints(rpc);
    const parsed = parseServerArgs(llama);
    refuseUnhonoured(parsed.given());
    if (usesCommonLog(parsed.given())) {
      native.useCommonLog();
      say = (line, level = 'info') => native.logWrite(level, `${line}\n`);
    }
    const level = logLevel(parsed.values(), parsed.given());
    if (level) native.setLogLevel(level);
    if (own.authRole !== undefined && !own.authApp) throw new UsageError('--auth-role needs --auth-app');
    const params = await withLocalModels(llama, parsed);
    // On only with an OTLP endpoint in the environment (docs/telemetry.md); a router's children inherit it.
    await startTracing('inference-server');
    const values = params.values();
    // As llama-server: without a model, the server is a router over many.
    if (values.model === '') return await runRouter(params, own);
    return await runSingleModel(params, own, child);
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
