// A completion request that names its conversation (X-Conversation-Id) survives its client
// (llama-server's server_res_spipe): its SSE bytes are teed into the conversation's stream
// session, and its generation is stopped by DELETE /v1/stream (or a newer request of the same
// conversation), not by the client going away, so GET /v1/stream can replay it. Without the
// header the request is untouched: a client that disconnects cancels it at once.
import { EVENT_STREAM_TAIL } from '../../http/complete-chunks.js';
import { formatEvent, type EventStream } from '../../http/event-stream.js';
import { toHttpError } from '../../http/errors.js';
import type { HttpRequest, HttpResult } from '../../http/request.js';
import { formatInferenceError } from '../errors.js';
import type { StreamSession } from './stream-session.js';
import type { StreamSessions } from './stream-sessions.js';

export const CONVERSATION_HEADER = 'x-conversation-id';

/**
 * Writes to the session always, to the client while it is there; closed only once stopped. The
 * session keeps the bytes the client gets, whole events' tails included (complete-chunks.ts), so
 * that a replay from any byte offset continues the client's stream exactly.
 */
function teeStream(session: StreamSession, client: EventStream | null): EventStream {
  const write = async (chunk: string | Uint8Array, wholeEvents: boolean): Promise<void> => {
    if (session.signal.aborted) return;
    session.append(wholeEvents ? concat(chunk, EVENT_STREAM_TAIL) : chunk);
    if (client && !client.closed) await client.sendRaw(chunk, wholeEvents);
  };
  return {
    send: (event) => write(formatEvent(event), true),
    sendRaw: (chunk, wholeEvents = false) => write(chunk, wholeEvents),
    get started() {
      return client?.started ?? false;
    },
    get closed() {
      return session.signal.aborted;
    },
    end: () => client?.end(),
  };
}

function concat(chunk: string | Uint8Array, tail: string): string | Uint8Array {
  return typeof chunk === 'string' ? chunk + tail : Buffer.concat([chunk, Buffer.from(tail)]);
}

/** Runs `run` on a view of `req` bound to a stream session when the request names a conversation. */
export async function resumable(sessions: StreamSessions, req: HttpRequest, run: (req: HttpRequest) => Promise<HttpResult | void> | HttpResult | void): Promise<HttpResult | void> {
  const conversationId = req.headers[CONVERSATION_HEADER] ?? '';
  if (conversationId === '') return run(req);
  const session = sessions.open(conversationId);
  let stream: EventStream | null = null;
  const view: HttpRequest = {
    method: req.method,
    path: req.path,
    query: req.query,
    params: req.params,
    headers: req.headers,
    body: req.body,
    remoteAddress: req.remoteAddress,
    signal: session.signal,
    openEventStream: (init) => {
      if (stream) return stream;
      let client: EventStream | null = null;
      // A client already gone leaves the generation to the session alone.
      if (!req.signal.aborted) client = req.openEventStream(init);
      stream = teeStream(session, client);
      return stream;
    },
    get streamStarted() {
      return req.streamStarted;
    },
    setResponseHeader: (name, value) => req.setResponseHeader(name, value),
  };
  try {
    return await run(view);
  } catch (err) {
    // The error event the client gets once streaming began is the session's last event too.
    if (stream) session.append(formatEvent(JSON.stringify(formatInferenceError(toHttpError(err)).body)) + EVENT_STREAM_TAIL);
    throw err;
  } finally {
    // A request that never streamed leaves nothing to replay.
    if (stream) session.finalize();
    else sessions.evict(session);
  }
}
