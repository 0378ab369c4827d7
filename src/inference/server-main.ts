#!/usr/bin/env node
// inference-server: serves a GGUF model over HTTP (OpenAI-compatible and llama-server native APIs).
import { native } from '../native/binding.js';
import { MODEL_FLAGS, parseFlags, resolveRuntime, usage, UsageError, type FlagSpec } from './options.js';
import { createInferenceAuth } from './auth-bridge.js';
import { POOLING_TYPES, startInferenceServer, type PoolingName } from './server.js';


const SERVER_FLAGS: FlagSpec[] = [
  ...MODEL_FLAGS,
  { names: ['--host'], kind: 'string', key: 'host', help: 'address to listen on (default 127.0.0.1)', env: 'LLAMA_ARG_HOST' },
  { names: ['--port'], kind: 'int', key: 'port', help: 'port to listen on (default 8080)', env: 'LLAMA_ARG_PORT' },
  { names: ['-np', '--parallel'], kind: 'int', key: 'parallel', help: 'number of slots (default 4)', env: 'LLAMA_ARG_N_PARALLEL' },
  { names: ['-a', '--alias'], kind: 'string', key: 'alias', help: 'model name reported by the API (default: the file name)' },
  { names: ['--context-shift'], kind: 'bool', key: 'contextShift', help: 'when a slot\'s context is full, drop old tokens (after n_keep) and go on generating (default: stop, truncated)' },
  { names: ['-n', '--n-predict'], kind: 'int', key: 'nPredict', help: 'default tokens to predict (default -1 = unlimited)' },
  { names: ['--api-key'], kind: 'list', key: 'apiKey', help: 'API keys; requests must send one (Authorization: Bearer or X-Api-Key)', env: 'LLAMA_API_KEY' },
  { names: ['--metrics'], kind: 'bool', key: 'metrics', help: 'serve Prometheus metrics at /metrics' },
  { names: ['--no-webui'], kind: 'bool', key: 'noWebui', help: 'do not serve the chat page at / (default: served)' },
  { names: ['--max-body-bytes'], kind: 'int', key: 'maxBodyBytes', help: 'largest accepted request body (default 33554432)' },
  { names: ['-mm', '--mmproj'], kind: 'string', key: 'mmproj', help: 'multimodal projector file (vision)' },
  { names: ['--media-allow-remote'], kind: 'bool', key: 'mediaAllowRemote', help: 'fetch http(s) image URLs in chat messages (default: only data URLs)' },
  { names: ['--embedding', '--embeddings'], kind: 'bool', key: 'embedding', help: 'serve embeddings (/v1/embeddings, /embedding); completions are refused' },
  { names: ['--rerank', '--reranking'], kind: 'bool', key: 'rerank', help: 'serve reranking (/v1/rerank); needs a reranker model' },
  { names: ['--pooling'], kind: 'string', key: 'pooling', help: 'embedding pooling: none, mean, cls, last, rank (default: the model\'s)' },
  { names: ['--lora'], kind: 'list', key: 'lora', help: 'LoRA adapters, applied at scale 1.0' },
  { names: ['--lora-scaled'], kind: 'list', key: 'loraScaled', help: 'LoRA adapters with their scales, FILE:SCALE' },
  { names: ['--lora-init-without-apply'], kind: 'bool', key: 'loraInitWithoutApply', help: 'load the adapters at scale 0 (apply later with POST /lora-adapters)' },
  { names: ['--auth'], kind: 'bool', key: 'auth', help: 'mount the authentication service on this port (configured by the AUTH_* variables, see docs/auth-service.md)' },
  { names: ['--auth-app'], kind: 'string', key: 'authApp', help: 'also accept access tokens of this auth-service app (slug) where an API key is accepted' },
  { names: ['--auth-role'], kind: 'string', key: 'authRole', help: 'with --auth-app: least role required in the token (viewer, staff, admin, owner)' },
  { names: ['--auth-issuer'], kind: 'string', key: 'authIssuer', help: 'with --auth-app and no --auth: the issuer (iss) of the auth-server whose tokens are accepted' },
  { names: ['--auth-jwks-url'], kind: 'string', key: 'authJwksUrl', help: 'with --auth-issuer: where its JWKS is, if not <issuer>/.well-known/jwks.json' },
  { names: ['-h', '--help'], kind: 'bool', key: 'help', help: 'show this help' },
];

/** --lora FILE (scale 1), --lora-scaled FILE:SCALE; --lora-init-without-apply makes every scale 0. */
function loraOptions(plain: string[] = [], scaled: string[] = [], initWithoutApply: boolean): Array<{ path: string; scale: number }> {
  const out = plain.map((path) => ({ path, scale: 1 }));
  for (const item of scaled) {
    const at = item.lastIndexOf(':');
    const scale = at > 0 ? Number(item.slice(at + 1)) : NaN;
    if (at <= 0 || item.slice(at + 1).trim() === '' || !Number.isFinite(scale)) throw new UsageError(`--lora-scaled: expected FILE:SCALE, got "${item}"`);
    out.push({ path: item.slice(0, at), scale });
  }
  return initWithoutApply ? out.map((l) => ({ ...l, scale: 0 })) : out;
}

async function main(): Promise<number> {
  let flags;
  try {
    flags = parseFlags(process.argv.slice(2), SERVER_FLAGS);
    if (flags.help) {
      console.log(usage('inference-server', 'Serves a GGUF model over HTTP (OpenAI-compatible and llama-server native APIs).', SERVER_FLAGS));
      return 0;
    }
    const runtime = resolveRuntime(flags, native.systemInfo().supportsGpuOffload);
    const parallel = (flags.parallel as number | undefined) ?? 4;
    if (parallel < 1) throw new UsageError('-np: must be at least 1');
    const pooling = flags.pooling as string | undefined;
    if (pooling !== undefined && !(pooling in POOLING_TYPES)) throw new UsageError(`--pooling: expected one of ${Object.keys(POOLING_TYPES).join(', ')}, got "${pooling}"`);
    const loras = loraOptions(flags.lora as string[] | undefined, flags.loraScaled as string[] | undefined, Boolean(flags.loraInitWithoutApply));
    const host = (flags.host as string | undefined) ?? '127.0.0.1';
    const port = (flags.port as number | undefined) ?? 8080;
    const role = flags.authRole as string | undefined;
    if (role !== undefined && !['viewer', 'staff', 'admin', 'owner'].includes(role)) throw new UsageError(`--auth-role: expected viewer, staff, admin or owner, got "${role}"`);
    if (role !== undefined && !flags.authApp) throw new UsageError('--auth-role needs --auth-app');
    const auth = await createInferenceAuth({
      mount: Boolean(flags.auth),
      appSlug: flags.authApp as string | undefined,
      role,
      issuer: flags.authIssuer as string | undefined,
      jwksUrl: flags.authJwksUrl as string | undefined,
      selfUrl: `http://${host}:${port}`,
      env: process.env,
    });
    const server = await startInferenceServer({
      runtime,
      host,
      port,
      parallel,
      contextShift: Boolean(flags.contextShift),
      alias: flags.alias as string | undefined,
      apiKeys: (flags.apiKey as string[] | undefined) ?? [],
      metrics: Boolean(flags.metrics),
      nPredict: (flags.nPredict as number | undefined) ?? -1,
      maxBodyBytes: (flags.maxBodyBytes as number | undefined) ?? 32 * 1024 * 1024,
      embedding: Boolean(flags.embedding),
      rerank: Boolean(flags.rerank),
      pooling: pooling as PoolingName | undefined,
      loras,
      mmproj: flags.mmproj as string | undefined,
      allowRemoteMedia: Boolean(flags.mediaAllowRemote),
      extraRoutes: auth.routes,
      webui: !flags.noWebui,
      ...(auth.acceptBearer ? { acceptBearer: auth.acceptBearer } : {}),
      log: (line) => console.error(line),
    });
    console.error(`inference-server: listening on http://${host}:${server.port} (backend ${native.systemInfo().backend}), loading ${runtime.model}`);
    const shutdown = (): void => {
      console.error('inference-server: shutting down');
      Promise.all([server.close(), auth.close()]).then(() => process.exit(0), () => process.exit(1));
    };
    process.once('SIGINT', shutdown);
    process.once('SIGTERM', shutdown);
    try {
      const service = await server.ready;
      const i = service.info;
      console.error(`inference-server: model ready (${service.metadata.architecture}, ${service.metadata.nParams} parameters), n_ctx ${i.nCtx}, ${i.nParallel} slots, n_batch ${i.nBatch}, threads ${i.nThreads}`);
    } catch (err) {
      console.error(`inference-server: ${(err as Error).message}`);
      await server.close();
      await auth.close();
      return 1;
    }
    return -1; // keep running
  } catch (err) {
    if (err instanceof UsageError) {
      console.error(`inference-server: ${err.message}`);
      return 2;
    }
    console.error(`inference-server: ${(err as Error).message}`);
    return 1;
  }
}

const code = await main();
if (code >= 0) process.exit(code);
