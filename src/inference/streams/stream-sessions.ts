// Every live stream session of a server, by conversation id (llama-server's
// stream_session_manager): at most one per conversation, a newer one stopping the older.
// A finished session is kept for the retention time so a client can still replay it, then
// collected by a periodic sweep.
import { nowSeconds, StreamSession } from './stream-session.js';

/** llama-server's limits: STREAM_SESSION_TTL_SECONDS, _MAX_BYTES, _GC_INTERVAL_SECONDS. */
export const STREAM_SESSION_TTL_SECONDS = 300;
export const STREAM_SESSION_MAX_BYTES = 4 * 1024 * 1024;
const STREAM_SESSION_GC_INTERVAL_MS = 60_000;

export interface SessionLimits {
  ttlSeconds: number;
  maxBytes: number;
}

export class StreamSessions {
  private readonly sessions = new Map<string, StreamSession>();
  private readonly sweep: NodeJS.Timeout;

  constructor(private readonly limits: SessionLimits = { ttlSeconds: STREAM_SESSION_TTL_SECONDS, maxBytes: STREAM_SESSION_MAX_BYTES }) {
    this.sweep = setInterval(() => this.collect(nowSeconds()), STREAM_SESSION_GC_INTERVAL_MS);
    this.sweep.unref();
  }

  /** Installs a fresh session for the conversation, stopping the one it replaces. */
  open(conversationId: string): StreamSession {
    const fresh = new StreamSession(conversationId, this.limits.maxBytes);
    const previous = this.sessions.get(conversationId);
    this.sessions.set(conversationId, fresh);
    previous?.stop();
    return fresh;
  }

  get(conversationId: string): StreamSession | undefined {
    return this.sessions.get(conversationId);
  }

  /** The sessions of each id asked about: the exact key and every "<id>::<model>". */
  lookup(ids: readonly string[]): StreamSession[] {
    const found: StreamSession[] = [];
    for (const id of ids) {
      for (const session of this.sessions.values()) {
        if (session.conversationId === id || session.conversationId.startsWith(`${id}::`)) found.push(session);
      }
    }
    return found;
  }

  /** Removes `session` if it is still the conversation's one, finalizing it (readers end). */
  evict(session: StreamSession): void {
    if (this.sessions.get(session.conversationId) === session) this.sessions.delete(session.conversationId);
    session.finalize();
  }

  /** The explicit stop: the producer is cancelled and the session removed. Unknown ids are ignored. */
  stop(conversationId: string): void {
    const session = this.sessions.get(conversationId);
    if (!session) return;
    this.sessions.delete(conversationId);
    session.stop();
  }

  /** Drops the sessions finished at least the retention time before `now` (unix seconds). */
  collect(now: number): void {
    for (const [id, session] of this.sessions) {
      if (session.completedAt !== 0 && session.completedAt <= now - this.limits.ttlSeconds) this.sessions.delete(id);
    }
  }

  get size(): number {
    return this.sessions.size;
  }

  /** Server shutdown: every session is finalized, so no reader waits. */
  close(): void {
    clearInterval(this.sweep);
    for (const session of this.sessions.values()) session.finalize();
    this.sessions.clear();
  }
}
