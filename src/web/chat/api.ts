// The page's client of the inference API (same origin; paths are relative to the page, so the
// page works under --api-prefix). The API key, when the server asks for
// one, travels in the Authorization header only, never in a URL; it is kept in sessionStorage
// (this tab, until it closes).

const KEY_STORAGE = 'inference-chat:api-key';

/** The server answered 401: the key is missing or wrong. */
export class KeyRequired extends Error {}

/** The server answered 503: the model is still loading. */
export class Loading extends Error {}

export interface Props {
  model_alias: string;
  total_slots: number;
  n_ctx: number;
  modalities?: { vision?: boolean; audio?: boolean };
  default_generation_settings?: { params?: Record<string, unknown> };
}

export interface Slot {
  id: number;
  is_processing: boolean;
}

export interface Timings {
  predicted_n: number;
  predicted_per_second: number;
}

/** What one streamed chunk adds to the answer. */
export interface Delta {
  content?: string;
  reasoning?: string;
  toolCalls?: Array<{ index: number; name?: string; arguments?: string }>;
  timings?: Timings;
  finishReason?: string;
}

export class InferenceApi {
  private key: string | null = sessionStorage.getItem(KEY_STORAGE);

  setKey(key: string): void {
    this.key = key;
    sessionStorage.setItem(KEY_STORAGE, key);
  }

  private headers(json: boolean): Record<string, string> {
    const headers: Record<string, string> = {};
    if (this.key) headers['Authorization'] = `Bearer ${this.key}`;
    if (json) headers['Content-Type'] = 'application/json';
    return headers;
  }

  private async get(path: string): Promise<Response> {
    const response = await fetch(path, { headers: this.headers(false), cache: 'no-store' });
    checkStatus(response);
    if (!response.ok) throw new Error(`GET ${path}: HTTP ${response.status}`);
    return response;
  }

  async props(): Promise<Props> {
    return (await this.get('props')).json() as Promise<Props>;
  }

  async slots(): Promise<Slot[]> {
    return (await this.get('slots')).json() as Promise<Slot[]>;
  }

  /** Prometheus text of /metrics, or null when the server runs without --metrics. */
  async metrics(): Promise<Map<string, number> | null> {
    const response = await fetch('metrics', { headers: this.headers(false), cache: 'no-store' });
    if (response.status === 404 || response.status === 501) return null;
    checkStatus(response);
    if (!response.ok) throw new Error(`GET /metrics: HTTP ${response.status}`);
    const values = new Map<string, number>();
    for (const line of (await response.text()).split('\n')) {
      const match = /^llamacpp:(\w+) (\S+)$/.exec(line);
      if (match) values.set(match[1]!, Number(match[2]));
    }
    return values;
  }

  /** POST /v1/chat/completions with stream: true; calls onDelta per chunk until the stream ends. */
  async streamChat(body: Record<string, unknown>, signal: AbortSignal, onDelta: (delta: Delta) => void): Promise<void> {
    const response = await fetch('v1/chat/completions', {
      method: 'POST',
      headers: this.headers(true),
      body: JSON.stringify({ ...body, stream: true }),
      signal,
    });
    if (!response.ok) {
      checkStatus(response);
      const error = await response.json().catch(() => null) as { error?: { message?: string } } | null;
      throw new Error(error?.error?.message ?? `HTTP ${response.status}`);
    }
    const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let end: number;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const event = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        for (const line of event.split('\n')) {
          if (!line.startsWith('data: ') || line === 'data: [DONE]') continue;
          onDelta(deltaOf(JSON.parse(line.slice(6))));
        }
      }
    }
  }
}

function checkStatus(response: Response): void {
  if (response.status === 401) throw new KeyRequired('API key required');
  if (response.status === 503) throw new Loading('Loading model');
}

interface Chunk {
  error?: { message?: string };
  timings?: Timings;
  choices?: Array<{
    finish_reason?: string | null;
    delta?: {
      content?: string | null;
      reasoning_content?: string | null;
      tool_calls?: Array<{ index: number; function?: { name?: string; arguments?: string } }>;
    };
  }>;
}

function deltaOf(chunk: Chunk): Delta {
  if (chunk.error) throw new Error(chunk.error.message ?? 'the server reported an error');
  const choice = chunk.choices?.[0];
  const delta: Delta = {};
  if (choice?.delta?.content) delta.content = choice.delta.content;
  if (choice?.delta?.reasoning_content) delta.reasoning = choice.delta.reasoning_content;
  if (choice?.delta?.tool_calls) {
    delta.toolCalls = choice.delta.tool_calls.map((c) => ({ index: c.index, name: c.function?.name, arguments: c.function?.arguments }));
  }
  if (choice?.finish_reason) delta.finishReason = choice.finish_reason;
  if (chunk.timings) delta.timings = chunk.timings;
  return delta;
}
