// Starts an inference server in this test process on a free port, on a generated model (or one
// held in its model load, startLoadingServer).
import { execFileSync } from 'node:child_process';
import { mkdtemp, open, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startInferenceServer, type InferenceServer, type InferenceServerOptions } from '../../src/inference/server.js';
import { resolveRuntime } from '../../src/inference/options.js';
import { TEST_THREADS } from './test-threads.js';

export interface TestServer {
  server: InferenceServer;
  base: string;
  close(): Promise<void>;
}

export async function startTestServer(model: string, overrides: Partial<InferenceServerOptions> & { ctxSize?: number } = {}): Promise<TestServer> {
  const { ctxSize, ...rest } = overrides;
  const server = await startInferenceServer({
    runtime: { ...resolveRuntime({ model }, false), ctxSize: ctxSize ?? 4096, threads: TEST_THREADS },
    host: '127.0.0.1',
    port: 0,
    parallel: 4,
    apiKeys: [],
    metrics: true,
    nPredict: -1,
    maxBodyBytes: 1024 * 1024,
    ...rest,
  });
  try {
    await server.ready;
  } catch (err) {
    await server.close(); // a server that failed to start keeps nothing open
    throw err;
  }
  return { server, base: `http://127.0.0.1:${server.port}`, close: () => server.close() };
}

/**
 * A server whose model load is held at its first read (its model path is a FIFO) until
 * `failLoad()`, which lets the loader read bytes that are not a model: `ready` then rejects
 * ("not a GGUF file"), and the server is closed.
 */
export async function startLoadingServer(overrides: Partial<InferenceServerOptions> = {}): Promise<{ server: InferenceServer; base: string; failLoad(): Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), 'loading-'));
  const fifo = join(dir, 'model.gguf');
  execFileSync('mkfifo', [fifo]);
  const server = await startInferenceServer({
    runtime: resolveRuntime({ model: fifo }, false), host: '127.0.0.1', port: 0, parallel: 1, apiKeys: [], metrics: false, nPredict: -1, maxBodyBytes: 1 << 20,
    ...overrides,
  });
  return {
    server,
    base: `http://127.0.0.1:${server.port}`,
    async failLoad() {
      const writer = await open(fifo, 'w');
      await writer.write('NOPE');
      await writer.close();
      await server.ready.catch(() => {});
      await server.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

export async function postJson(url: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: any; headers: Headers }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: typeof body === 'string' ? body : JSON.stringify(body) });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON (e.g. SSE): the raw text
  }
  return { status: res.status, body: parsed, headers: res.headers };
}

/** Parses an SSE body into its `data:` payloads (JSON-parsed except [DONE]). */
export function parseSse(text: string): unknown[] {
  const events: unknown[] = [];
  for (const block of text.split('\n\n')) {
    if (block.trim() === '') continue;
    const lines = block.split('\n');
    for (const line of lines) {
      if (!line.startsWith('data: ')) throw new Error(`not an SSE data line: ${JSON.stringify(line)}`);
      const data = line.slice(6);
      events.push(data === '[DONE]' ? '[DONE]' : JSON.parse(data));
    }
  }
  return events;
}
