// The resumable stream routes of a server that generates (llama-server's
// server_stream_make_*_handler):
//   GET    /v1/stream?conv_id=<id>&from=<byte offset>  replays the session's SSE bytes from the
//          offset, then follows it live until it ends
//   DELETE /v1/stream?conv_id=<id>                     stops the generation and evicts the session (204)
//   POST   /v1/streams/lookup {"conversation_ids": [...]}  the sessions of the ids asked about, never others
// The id travels in the query string: it may embed a model name with slashes ("conv::org/repo").
import type { HttpRequest, HttpResult } from '../../http/request.js';
import { ErrorType, badRequest, inferenceError } from '../errors.js';
import type { StreamSessions } from './stream-sessions.js';

/** The conv_id query parameter; a 400 when missing, as llama-server. */
export function conversationParam(req: HttpRequest): string {
  const id = req.query.get('conv_id') ?? '';
  if (id === '') throw badRequest('Missing conversation id in path');
  return id;
}

/** The `from` byte offset: a non-negative integer, 0 when absent. */
function offsetParam(req: HttpRequest): number {
  const from = req.query.get('from') ?? '';
  if (from === '') return 0;
  if (!/^\d{1,15}$/.test(from)) throw badRequest("Invalid 'from' offset");
  return Number(from);
}

export const streamNotFound = () => inferenceError(ErrorType.NOT_FOUND, 'Stream not found or expired');

/** The ids of a lookup body: its non-empty strings; null when the body is not JSON. */
export function requestedIds(req: HttpRequest): string[] | null {
  let body: unknown;
  try {
    body = JSON.parse(req.body.toString('utf8'));
  } catch {
    return null;
  }
  const ids = typeof body === 'object' && body !== null ? (body as Record<string, unknown>)['conversation_ids'] : undefined;
  return Array.isArray(ids) ? ids.filter((id): id is string => typeof id === 'string' && id !== '') : [];
}

export function streamHandlers(sessions: StreamSessions) {
  return {
    replay: async (req: HttpRequest): Promise<void> => {
      const session = sessions.get(conversationParam(req));
      if (!session) throw streamNotFound();
      let offset = offsetParam(req);
      if (offset < session.droppedBytes) throw badRequest('Stream offset lost, please restart');
      const stream = req.openEventStream({ ping: false });
      while (!req.signal.aborted && !stream.closed) {
        const bytes = session.readFrom(offset);
        if (bytes === null) return;
        if (bytes.length > 0) {
          offset += bytes.length;
          await stream.sendRaw(bytes);
        } else if (session.isDone) {
          return;
        } else {
          await session.changed(req.signal);
        }
      }
    },
    stop: (req: HttpRequest): HttpResult => {
      sessions.stop(conversationParam(req));
      return { status: 204 };
    },
    lookup: (req: HttpRequest): HttpResult => {
      const ids = requestedIds(req);
      if (ids === null) throw badRequest('invalid body: the body is not JSON');
      return {
        body: sessions.lookup(ids).map((s) => ({
          conversation_id: s.conversationId,
          is_done: s.isDone,
          total_bytes: s.totalBytes,
          started_at: s.startedAt,
          completed_at: s.completedAt,
        })),
      };
    },
  };
}
