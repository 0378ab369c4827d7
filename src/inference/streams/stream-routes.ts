// The resumable stream routes, mounted behind the server's access rule (llama-server binds them
// under its API key like every non-public route).
import type { Route } from '../../http/router.js';
import type { Mount } from '../guards.js';
import { streamHandlers } from './stream-handlers.js';
import type { StreamSessions } from './stream-sessions.js';

export function streamRoutes(mount: Mount, sessions: StreamSessions, apiPrefix = ''): Route[] {
  const h = streamHandlers(sessions);
  return [
    mount('GET',    `${apiPrefix}/v1/stream`,         h.replay),
    mount('DELETE', `${apiPrefix}/v1/stream`,         h.stop),
    mount('POST',   `${apiPrefix}/v1/streams/lookup`, h.lookup),
  ];
}
