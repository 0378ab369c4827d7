// An OTLP/HTTP trace receiver in the test process: a plain node:http server taking the JSON
// encoding (OTEL_EXPORTER_OTLP_PROTOCOL=http/json) at /v1/traces. Spans are flattened with their
// resource's and scope's attributes; waitFor resolves once a span that matches has arrived, so a
// test awaits the export itself instead of sleeping.
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export type AttributeValue = string | number | boolean | AttributeValue[] | null;

export interface ReceivedSpan {
  name: string;
  kind: number;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  startMs: number;
  endMs: number;
  /** 0 unset, 1 ok, 2 error. */
  statusCode: number;
  statusMessage: string;
  attributes: Record<string, AttributeValue>;
  resource: Record<string, AttributeValue>;
  scope: string;
}

export interface ReceivedRequest {
  headers: IncomingHttpHeaders;
  contentType: string;
  bytes: number;
}

interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  boolValue?: boolean;
  arrayValue?: { values?: OtlpValue[] };
}

interface OtlpKeyValue {
  key: string;
  value: OtlpValue;
}

function valueOf(v: OtlpValue): AttributeValue {
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.arrayValue !== undefined) return (v.arrayValue.values ?? []).map(valueOf);
  return null;
}

function attributesOf(list: OtlpKeyValue[] | undefined): Record<string, AttributeValue> {
  return Object.fromEntries((list ?? []).map(({ key, value }) => [key, valueOf(value)]));
}

/** OTLP JSON's nanoseconds (a decimal string or a number) in milliseconds. */
function ms(nanos: string | number): number {
  return Number(BigInt(nanos) / 1000n) / 1000;
}

export class OtlpReceiver {
  readonly spans: ReceivedSpan[] = [];
  readonly requests: ReceivedRequest[] = [];
  private waiters: Array<{ match: (s: ReceivedSpan) => boolean; resolve: (s: ReceivedSpan) => void }> = [];
  private constructor(private readonly server: Server, readonly url: string) {}

  static async start(): Promise<OtlpReceiver> {
    let receiver: OtlpReceiver | null = null;
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks);
        const contentType = req.headers['content-type'] ?? '';
        receiver!.requests.push({ headers: req.headers, contentType, bytes: body.length });
        const json = contentType.startsWith('application/json');
        if (req.url === '/v1/traces' && json) receiver!.accept(JSON.parse(body.toString('utf8')));
        // An empty ExportTraceServiceResponse: `{}` in JSON, no bytes in protobuf.
        res.writeHead(200, { 'content-type': json ? 'application/json' : 'application/x-protobuf' }).end(json ? '{}' : '');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    receiver = new OtlpReceiver(server, `http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    return receiver;
  }

  /** Resolves with the first span, received or to come, that `match` accepts. */
  waitFor(match: (s: ReceivedSpan) => boolean): Promise<ReceivedSpan> {
    const found = this.spans.find(match);
    if (found) return Promise.resolve(found);
    return new Promise((resolve) => this.waiters.push({ match, resolve }));
  }

  /**
   * As waitFor, calling `flush` (the SDK's forceFlush) until the span has arrived: a span that
   * ends after a flush (a stream's, once the server notices its client left) goes with a later one.
   * Rejects, naming the spans that did arrive, when none matches within `deadlineMs`.
   */
  async flushedUntil(match: (s: ReceivedSpan) => boolean, flush: () => Promise<void>, deadlineMs = 30_000): Promise<ReceivedSpan> {
    const arrived = this.waitFor(match);
    let found = false;
    void arrived.then(() => { found = true; });
    const end = Date.now() + deadlineMs;
    while (!found) {
      if (Date.now() > end) {
        const seen = this.spans.map((s) => s.name).join(', ') || 'none';
        throw new Error(`no matching span was exported within ${deadlineMs / 1000} s (spans received: ${seen})`);
      }
      await flush();
      await Promise.race([arrived, new Promise((resolve) => setTimeout(resolve, 20))]);
    }
    return arrived;
  }

  /** Resolves with the span named `name`. */
  span(name: string): Promise<ReceivedSpan> {
    return this.waitFor((s) => s.name === name);
  }

  /** The spans whose parent is `parent`, received so far. */
  children(parent: ReceivedSpan): ReceivedSpan[] {
    return this.spans.filter((s) => s.parentSpanId === parent.spanId && s.traceId === parent.traceId);
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  private accept(request: { resourceSpans?: Array<{ resource?: { attributes?: OtlpKeyValue[] }; scopeSpans?: Array<{ scope?: { name?: string }; spans?: any[] }> }> }): void {
    for (const rs of request.resourceSpans ?? []) {
      const resource = attributesOf(rs.resource?.attributes);
      for (const ss of rs.scopeSpans ?? []) {
        for (const s of ss.spans ?? []) {
          const span: ReceivedSpan = {
            name: s.name,
            kind: s.kind,
            traceId: s.traceId,
            spanId: s.spanId,
            parentSpanId: s.parentSpanId ?? '',
            startMs: ms(s.startTimeUnixNano),
            endMs: ms(s.endTimeUnixNano),
            statusCode: s.status?.code ?? 0,
            statusMessage: s.status?.message ?? '',
            attributes: attributesOf(s.attributes),
            resource,
            scope: ss.scope?.name ?? '',
          };
          this.spans.push(span);
          const waiting = this.waiters.filter((w) => w.match(span));
          this.waiters = this.waiters.filter((w) => !w.match(span));
          for (const w of waiting) w.resolve(span);
        }
      }
    }
  }
}
