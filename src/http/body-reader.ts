// Reading a request body with a size cap. The declared Content-Length is checked before any
// byte is read, and the running total while chunks arrive, so an oversized body costs at most
// `maxBytes` of memory.

/** The part of a uWS HttpResponse that body reading needs. */
export interface BodySource {
  onData(handler: (chunk: ArrayBuffer, isLast: boolean) => void): void;
}

export type BodyOutcome = { kind: 'body'; body: Buffer } | { kind: 'too-large' };

/** llama-server's read timeout (-to): `onTimeout` runs when no byte of the body came for `ms`. */
export interface IdleTimeout {
  ms: number;
  onTimeout: () => void;
}

/**
 * Reads the whole body and calls `done` once: with the bytes, or with `too-large` as soon as
 * the declared or received length passes `maxBytes` (later chunks are then ignored).
 * `isClosed` is consulted per chunk: after the client went away, nothing more is collected.
 */
export function readBody(source: BodySource, declaredLength: number, maxBytes: number, isClosed: () => boolean, done: (outcome: BodyOutcome) => void, idle?: IdleTimeout): void {
  if (declaredLength > maxBytes) {
    done({ kind: 'too-large' });
    return;
  }
  const chunks: Buffer[] = [];
  let received = 0;
  let settled = false;
  let timer: NodeJS.Timeout | null = null;
  const rearm = (): void => {
    if (timer) clearTimeout(timer);
    timer = idle && idle.ms > 0 && !settled ? setTimeout(() => {
      if (!settled && !isClosed()) idle.onTimeout();
    }, idle.ms) : null;
  };
  rearm();
  source.onData((chunk, isLast) => {
    if (settled || isClosed()) return;
    if (isLast) settled = true;
    rearm();
    received += chunk.byteLength;
    if (received > maxBytes) {
      settled = true;
      rearm();
      chunks.length = 0;
      done({ kind: 'too-large' });
      return;
    }
    // The ArrayBuffer is only valid during this callback: copy it.
    chunks.push(Buffer.copyBytesFrom(new Uint8Array(chunk)));
    if (!isLast) return;
    done({ kind: 'body', body: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, received) });
  });
}
