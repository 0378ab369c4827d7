// Reading a request body with a size cap. The declared Content-Length is checked before any
// byte is read, and the running total while chunks arrive, so an oversized body costs at most
// `maxBytes` of memory.
//
// A refused body is still read to its end, and thrown away, before the refusal is reported (the
// 413 is then written and the connection closed once the response is flushed): RFC 9112 section
// 9.6. A server that closes a connection while the client is still sending leaves unread bytes
// that its TCP stack answers with a reset, and the reset can erase the response from the client's
// buffers before the client reads it (Node's fetch then fails with EPIPE or ECONNRESET instead of
// seeing the 413). So the close waits until nothing more is arriving: the client sent its whole
// body, or it went on past a bounded amount (DRAIN_MAX_BYTES beyond the cap, or DRAIN_MAX_MS),
// where the close is deliberate and a reset acceptable.
import type { IdleWatch, Watched } from './idle-watch.js';

/** The part of a uWS HttpResponse that body reading needs. */
export interface BodySource {
  onData(handler: (chunk: ArrayBuffer, isLast: boolean) => void): void;
}

export type BodyOutcome = { kind: 'body'; body: Buffer } | { kind: 'too-large' };

/** llama-server's read timeout (-to): `onTimeout` runs when no byte of the body came for the watch's time. */
export interface IdleTimeout {
  watch: IdleWatch;
  onTimeout: () => void;
}

/** How much of a refused body is read and thrown away before the refusal: bytes past the cap, and time. */
export interface DrainBound {
  bytes: number;
  ms: number;
}

export const DRAIN_MAX_BYTES = 16 * 1024 * 1024;
export const DRAIN_MAX_MS = 10_000;

/**
 * Reads the whole body and calls `done` once: with the bytes, or with `too-large` once a body
 * whose declared or received length passed `maxBytes` has been read to its end (nothing of it is
 * kept), or has gone `drain.bytes` past the cap, or `drain.ms` after it passed the cap. A declared
 * length beyond the cap plus `drain.bytes` is refused at once, unread. `isClosed` is consulted per
 * chunk and when the drain's time runs out: after the client went away, nothing more is collected
 * or reported.
 */
export function readBody(
  source: BodySource, declaredLength: number, maxBytes: number, isClosed: () => boolean, done: (outcome: BodyOutcome) => void,
  idle?: IdleTimeout, drain: DrainBound = { bytes: DRAIN_MAX_BYTES, ms: DRAIN_MAX_MS },
): void {
  if (declaredLength > maxBytes + drain.bytes) {
    done({ kind: 'too-large' });
    return;
  }
  const chunks: Buffer[] = [];
  let received = 0;
  let settled = false;
  let draining = false;
  // Not idle while draining: the drain has its own bound.
  let watched: Watched | null = idle ? idle.watch.watch(() => {
    watched = null;
    if (!settled && !isClosed()) idle.onTimeout();
  }) : null;
  let drainTimer: NodeJS.Timeout | null = null;
  const stopTimers = (): void => {
    watched?.stop();
    if (drainTimer) clearTimeout(drainTimer);
    watched = drainTimer = null;
  };
  const finish = (outcome: BodyOutcome): void => {
    settled = true;
    stopTimers();
    done(outcome);
  };
  const startDraining = (): void => {
    draining = true;
    chunks.length = 0;
    watched?.stop();
    watched = null;
    drainTimer = setTimeout(() => {
      if (settled) return;
      if (isClosed()) { settled = true; stopTimers(); return; }
      finish({ kind: 'too-large' });
    }, drain.ms);
    drainTimer.unref();
  };
  if (declaredLength > maxBytes) startDraining();
  source.onData((chunk, isLast) => {
    if (settled) return;
    if (isClosed()) { settled = true; stopTimers(); return; }
    received += chunk.byteLength;
    if (!draining && received > maxBytes) startDraining();
    if (draining) {
      if (isLast || received > maxBytes + drain.bytes) finish({ kind: 'too-large' });
      return;
    }
    watched?.touch();
    // The ArrayBuffer is only valid during this callback: copy it.
    chunks.push(Buffer.copyBytesFrom(new Uint8Array(chunk)));
    if (isLast) finish({ kind: 'body', body: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, received) });
  });
}
