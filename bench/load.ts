// Load-generation primitives for the benchmarks: deterministic prompts, a keep-alive JSON client,
// a streaming (SSE) completion client that timestamps every event, a raw-socket request loop for
// light endpoints, and small statistics helpers. Everything here is client-side; it knows nothing
// about which server it talks to.
import { request, type ClientRequest, type IncomingMessage } from 'node:http';
import { connect, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';

// ---------------------------------------------------------------------------------------------
// Prompts

/** mulberry32: a small seeded PRNG, so both servers see byte-identical prompts. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** `n` token ids in [lo, hi), a pure function of `seed` (ordinary vocabulary tokens, no specials). */
export function promptTokens(n: number, seed: number, lo = 100, hi = 40000): number[] {
  const next = prng(seed);
  const out = new Array<number>(n);
  for (let i = 0; i < n; i++) out[i] = lo + Math.floor(next() * (hi - lo));
  return out;
}

/** Identical sampling settings sent by every request (llama-server's defaults, spelled out). */
const SAMPLING = { temperature: 0.8, top_k: 40, top_p: 0.95, min_p: 0.05 };

/**
 * How a scenario's requests treat the prompt cache: 'no-cache' sends cache_prompt: false (each
 * task computes its whole prompt and, on ours, frees its cells when it ends); 'defaults' sends no
 * cache_prompt field, as real clients do (the servers' default: prompt caching on).
 */
export type CacheMode = 'no-cache' | 'defaults';

/** A /completion body: token-id prompt, ignore_eos (exactly nPredict tokens), cache_prompt false unless `mode` is 'defaults'. */
export function completionBody(prompt: number[], nPredict: number, seed: number, mode: CacheMode = 'no-cache'): Record<string, unknown> {
  return { prompt, n_predict: nPredict, ignore_eos: true, ...(mode === 'no-cache' ? { cache_prompt: false } : {}), seed, ...SAMPLING };
}

/** Scenario id and title suffixes, and the description's words, of a cache mode. */
export const CACHE_MODE = {
  'no-cache': { id: '', title: '', words: 'cache_prompt false' },
  defaults: { id: '-default', title: " (clients' defaults)", words: 'no cache_prompt field (clients\' default: prompt caching on)' },
} as const;

// ---------------------------------------------------------------------------------------------
// JSON requests

/**
 * JSON and streaming requests open a connection each (no keep-alive): cpp-httplib may close an
 * idle keep-alive connection just as the client reuses it ("socket hang up"), and a fresh
 * loopback connection costs both servers the same fraction of a millisecond.
 */
const agent = false as const;

export interface JsonResponse {
  status: number;
  body: any;
  text: string;
  ms: number;
}

export function httpJson(base: string, method: 'GET' | 'POST', path: string, body?: unknown, timeoutMs = 120_000): Promise<JsonResponse> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    const t0 = performance.now();
    const req = request(
      `${base}${path}`,
      {
        method,
        agent,
        headers: payload ? { 'content-type': 'application/json', 'content-length': String(payload.length) } : {},
        timeout: timeoutMs,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let parsed: unknown = undefined;
          try {
            parsed = JSON.parse(text);
          } catch {
            // not JSON
          }
          resolve({ status: res.statusCode ?? 0, body: parsed, text, ms: performance.now() - t0 });
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${method} ${path}: no answer within ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end(payload);
  });
}

// ---------------------------------------------------------------------------------------------
// Streaming completions

export interface StreamResult {
  /** Client-side milliseconds from sending the request. */
  firstTokenMs: number;
  /** Arrival of the final (stop) event. */
  endMs: number;
  /** Absolute performance.now() of the request start and of the final event. */
  startAt: number;
  endAt: number;
  /** Server-reported tokens generated (final event), and the server's timings. */
  predicted: number;
  promptN: number;
  timings: Record<string, number>;
  events: number;
}

export class BenchError extends Error {
  constructor(message: string, readonly detail?: string) {
    super(detail ? `${message}\n${detail}` : message);
    this.name = 'BenchError';
  }
}

export interface StreamOptions {
  timeoutMs?: number;
  /** Called on every event with its arrival (performance.now()) and its tokens_predicted so far. */
  onEvent?: (at: number, predicted: number) => void;
  /** Aborting closes the connection (the server cancels the task) and rejects with the reason. */
  signal?: AbortSignal;
  /** Extra request headers (e.g. an API key). */
  headers?: Record<string, string>;
}

/**
 * POSTs a JSON payload to be answered as a stream: `onOk` gets a 200 response (as text); any
 * other status, a timeout or a socket error rejects through `reject`. The caller ends the request.
 */
function postStream(base: string, path: string, payload: Buffer, timeoutMs: number, what: string, reject: (err: Error) => void, onOk: (res: IncomingMessage) => void, headers: Record<string, string> = {}): ClientRequest {
  const req = request(
    `${base}${path}`,
    { method: 'POST', agent, headers: { ...headers, 'content-type': 'application/json', 'content-length': String(payload.length) }, timeout: timeoutMs },
    (res) => {
      res.setEncoding('utf8');
      if (res.statusCode === 200) return onOk(res);
      let text = '';
      res.on('data', (c: string) => (text += c));
      res.on('end', () => reject(new BenchError(`POST ${path} answered ${res.statusCode}`, `request: ${what}\nresponse: ${text.slice(0, 2000)}`)));
    },
  );
  req.on('timeout', () => req.destroy(new BenchError(`POST ${path}: no answer within ${timeoutMs} ms`)));
  req.on('error', reject);
  return req;
}

/**
 * Reads an SSE response's `data:` events as their chunks arrive: each complete event's JSON (not
 * [DONE]) goes to `onEvent` with the chunk's arrival time and its raw text; `onEvent` returns a
 * problem to stop on one. An `error:` line, an unparsable event or a returned problem calls
 * `fail` once, and nothing more is read. Returns the unparsed tail, for messages.
 */
function readSse(res: IncomingMessage, onEvent: (ev: any, at: number, raw: string) => string | undefined, fail: (problem: string) => void): () => string {
  let buf = '';
  let failed = false;
  const stop = (problem: string): void => {
    failed = true;
    fail(problem);
  };
  res.on('data', (chunk: string) => {
    const now = performance.now();
    buf += chunk;
    let sep: number;
    while (!failed && (sep = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, sep);
      buf = buf.slice(sep + 2);
      for (const line of block.split('\n')) {
        if (failed) return;
        if (line.startsWith('error:')) return stop(`streamed an error\nevent: ${line.slice(0, 2000)}`);
        if (!line.startsWith('data:')) continue;
        const data = line.slice(5).trim();
        if (data === '[DONE]') continue;
        let ev: any;
        try {
          ev = JSON.parse(data);
        } catch {
          return stop(`: unparsable SSE event\n${data.slice(0, 2000)}`);
        }
        const problem = onEvent(ev, now, data);
        if (problem) return stop(problem);
      }
    }
  });
  return () => buf;
}

/**
 * POSTs `body` with stream: true and reads the SSE events as they arrive. The first token time is
 * the arrival of the first non-final event (one that carries a generated token); the end is the
 * arrival of the final event (stop: true).
 */
export function streamCompletion(base: string, path: string, body: Record<string, unknown>, options: StreamOptions = {}): Promise<StreamResult> {
  const { timeoutMs = 300_000, onEvent, signal, headers } = options;
  return new Promise((resolve, reject) => {
    const payload = Buffer.from(JSON.stringify({ ...body, stream: true }));
    const startAt = performance.now();
    let firstAt = -1;
    let events = 0;
    let final: any;
    const req = postStream(base, path, payload, timeoutMs, describeBody(body), reject, (res) => {
      const tail = readSse(res, (ev, now, raw) => {
        events++;
        onEvent?.(now, Number(ev.tokens_predicted ?? ev.timings?.predicted_n ?? NaN));
        if (ev.error) return `streamed an error\nrequest: ${describeBody(body)}\nevent: ${raw.slice(0, 2000)}`;
        if (ev.stop === true) {
          final = ev;
          final.__at = now;
        } else if (firstAt < 0) {
          firstAt = now;
        }
        return undefined;
      }, (problem) => {
        reject(new BenchError(`POST ${path} ${problem}`));
        req.destroy();
      });
      res.on('error', reject);
      res.on('end', () => {
        if (!final) return reject(new BenchError(`POST ${path}: stream ended without a final event`, `request: ${describeBody(body)}\nunparsed tail: ${tail().slice(0, 500)}`));
        const timings = (final.timings ?? {}) as Record<string, number>;
        const predicted = Number(timings.predicted_n ?? final.tokens_predicted ?? 0);
        const endAt = final.__at as number;
        // A generation of one token may arrive only in the final event.
        if (firstAt < 0) firstAt = endAt;
        resolve({
          firstTokenMs: firstAt - startAt,
          endMs: endAt - startAt,
          startAt,
          endAt,
          predicted,
          promptN: Number(timings.prompt_n ?? final.tokens_evaluated ?? 0),
          timings,
          events,
        });
      });
    }, headers);
    if (signal) {
      const abort = (): void => {
        reject(signal.reason);
        req.destroy();
      };
      if (signal.aborted) return abort();
      signal.addEventListener('abort', abort, { once: true });
      req.on('close', () => signal.removeEventListener('abort', abort));
    }
    req.end(payload);
  });
}

function describeBody(body: Record<string, unknown>): string {
  return JSON.stringify(body, (k, v) => (k === 'prompt' && Array.isArray(v) ? `[${v.length} token ids: ${v.slice(0, 4).join(',')},...]` : v));
}

// ---------------------------------------------------------------------------------------------
// Raw request loop (light endpoints)

export interface RateResult {
  requests: number;
  seconds: number;
  perSecond: number;
  errors: number;
  reconnects: number;
}

/**
 * Keeps `connections` keep-alive TCP connections busy with one prebuilt POST each (no
 * pipelining: each connection sends its next request when the previous answer is complete) for
 * `seconds`, and counts 200 answers completed before the deadline. Raw sockets keep the client's
 * per-request cost far below node:http's, since the client shares the machine with the server.
 */
export async function requestLoop(base: string, path: string, body: unknown, connections: number, seconds: number, validate: (body: string) => boolean): Promise<RateResult> {
  const url = new URL(base);
  const payload = Buffer.from(JSON.stringify(body));
  const head = `POST ${path} HTTP/1.1\r\nHost: ${url.host}\r\nContent-Type: application/json\r\nContent-Length: ${payload.length}\r\nConnection: keep-alive\r\n\r\n`;
  const req = Buffer.concat([Buffer.from(head, 'latin1'), payload]);
  let ok = 0;
  let errors = 0;
  let checked = 0;
  let failure: Error | undefined;
  const start = performance.now();
  const deadline = start + seconds * 1000;

  let reconnects = 0;

  // One connection's loop. A server may close a keep-alive connection (cpp-httplib does after a
  // number of requests, announcing it with "Connection: close"); the worker then reconnects and
  // resends, as a browser or load balancer would.
  const one = (): Promise<void> =>
    new Promise((resolve) => {
      let finished = false;
      const finish = (): void => {
        if (finished) return;
        finished = true;
        resolve();
      };
      const open = (): void => {
        if (performance.now() >= deadline || failure) return finish();
        const sock: Socket = connect(Number(url.port), url.hostname);
        sock.setNoDelay(true);
        let acc: Buffer = Buffer.alloc(0);
        let closed = false;
        const send = (): void => {
          if (performance.now() >= deadline || failure) {
            closed = true;
            sock.destroy();
            return finish();
          }
          sock.write(req);
        };
        sock.on('connect', send);
        sock.on('error', (err) => {
          if (!closed && performance.now() < deadline && (err as NodeJS.ErrnoException).code === 'ECONNREFUSED') failure ??= err;
        });
        sock.on('close', () => {
          if (closed) return;
          closed = true;
          if (performance.now() >= deadline || failure) return finish();
          if (++reconnects > 100_000) {
            failure ??= new BenchError(`POST ${path}: the server keeps closing connections`);
            return finish();
          }
          open();
        });
        sock.on('data', (chunk: Buffer) => {
          acc = acc.length === 0 ? chunk : Buffer.concat([acc, chunk]);
          for (;;) {
            const end = acc.indexOf('\r\n\r\n');
            if (end < 0) return;
            const headers = acc.subarray(0, end).toString('latin1');
            const status = Number(headers.slice(9, 12));
            let bodyEnd: number;
            const cl = /\r\ncontent-length:\s*(\d+)/i.exec(headers);
            if (cl) {
              bodyEnd = end + 4 + Number(cl[1]);
              if (acc.length < bodyEnd) return;
            } else if (/\r\ntransfer-encoding:\s*chunked/i.test(headers)) {
              const term = acc.indexOf('\r\n0\r\n\r\n', end);
              if (term < 0) return;
              bodyEnd = term + 7;
            } else {
              failure ??= new BenchError(`POST ${path}: answer without a length`, headers);
              closed = true;
              sock.destroy();
              return finish();
            }
            const text = acc.subarray(end + 4, bodyEnd).toString('utf8');
            acc = acc.subarray(bodyEnd);
            if (performance.now() <= deadline) {
              if (status === 200) ok++;
              else errors++;
            }
            if (status !== 200) failure ??= new BenchError(`POST ${path} answered ${status}`, text.slice(0, 1000));
            // Validate a sample of answers (the first ones, then now and then): parsing every
            // one would load the client, which shares the CPU with the server.
            if (checked < connections || (ok & 1023) === 0) {
              checked++;
              if (status === 200 && !validate(text)) failure ??= new BenchError(`POST ${path}: unexpected answer`, text.slice(0, 1000));
            }
            if (/\r\nconnection:\s*close/i.test(headers)) return; // the server closes; 'close' reconnects
            send();
          }
        });
      };
      open();
    });

  await Promise.all(Array.from({ length: connections }, one));
  if (failure) throw failure;
  const elapsed = (Math.min(performance.now(), deadline) - start) / 1000;
  return { requests: ok, seconds: elapsed, perSecond: ok / elapsed, errors, reconnects };
}

// ---------------------------------------------------------------------------------------------
// Statistics

export function median(xs: readonly number[]): number {
  return percentile(xs, 50);
}

/** Linear-interpolation percentile (p in [0, 100]). */
export function percentile(xs: readonly number[], p: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const rank = (p / 100) * (s.length - 1);
  const lo = Math.floor(rank);
  const hi = Math.ceil(rank);
  return s[lo]! + (s[hi]! - s[lo]!) * (rank - lo);
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------------------------
// Streaming chat completions (OpenAI format)

export interface ChatStreamResult {
  /** Client-side milliseconds from sending the request to the first chunk that carries text, reasoning or a tool call. */
  firstTokenMs: number;
  startAt: number;
  /** Arrival (performance.now()) of the end of the stream. */
  endAt: number;
  /** From the last chunk's timings (both servers send them): prompt tokens evaluated and taken from a cache. */
  promptTokens: number;
  cachedTokens: number;
  /** The answer: its content, reasoning and tool calls' deltas, concatenated in arrival order. */
  text: string;
}

/**
 * POSTs a chat body with stream: true to /v1/chat/completions. The first token is the first chunk
 * whose delta carries content, reasoning or a tool call: a chunk with only the role (which one
 * server sends at once and the other with the first token) does not count.
 */
export function streamChat(base: string, body: Record<string, unknown>, timeoutMs = 300_000, headers: Record<string, string> = {}): Promise<ChatStreamResult> {
  return new Promise((resolve, reject) => {
    const payload = Buffer.from(JSON.stringify({ ...body, stream: true }));
    const startAt = performance.now();
    let firstAt = -1;
    let timings: Record<string, number> = {};
    let text = '';
    const req = postStream(base, '/v1/chat/completions', payload, timeoutMs, 'a chat', reject, (res) => {
      readSse(res, (ev, now, raw) => {
        if (ev.error) return `streamed an error\nevent: ${raw.slice(0, 2000)}`;
        const delta = ev.choices?.[0]?.delta ?? {};
        if (firstAt < 0 && (delta.content || delta.reasoning_content || delta.tool_calls?.length)) firstAt = now;
        text += (delta.reasoning_content ?? '') + (delta.content ?? '');
        for (const call of delta.tool_calls ?? []) text += `${call.function?.name ?? ''}${call.function?.arguments ?? ''}`;
        if (ev.timings) timings = ev.timings;
        return undefined;
      }, (problem) => {
        reject(new BenchError(`POST /v1/chat/completions ${problem}`));
        req.destroy();
      });
      res.on('error', reject);
      res.on('end', () => {
        const endAt = performance.now();
        if (firstAt < 0) firstAt = endAt;
        resolve({ firstTokenMs: firstAt - startAt, startAt, endAt, promptTokens: Number(timings.prompt_n ?? NaN), cachedTokens: Number(timings.cache_n ?? NaN), text });
      });
    }, headers);
    req.end(payload);
  });
}
