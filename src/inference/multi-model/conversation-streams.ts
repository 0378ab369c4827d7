// Router mode's resumable stream routes (llama-server's router_stream_get, router_streams_lookup,
// router_stream_delete): each conversation's routes go to the child that owns its session, found
// through ConversationOwners. While that model loads, GET answers 503 (retry later) and DELETE
// cancels the request parked in the load wait.
import type { HttpRequest, HttpResult } from '../../http/request.js';
import { ErrorType, inferenceError } from '../errors.js';
import { conversationParam, requestedIds, streamNotFound } from '../streams/stream-handlers.js';
import type { ConversationOwners } from './conversation-owners.js';
import { listedStatus, modelProcess, type ModelRegistry } from './model-registry.js';
import { forward } from './proxy.js';

/** llama-server's STREAM_LOOKUP_TIMEOUT_MS: the router's own calls to a child. */
const CHILD_CALL_TIMEOUT_MS = 250;

interface Owner {
  name: string;
  port: number;
}

/** The running child that owns the conversation, if its model is ready. */
function ownerOf(registry: ModelRegistry, owners: ConversationOwners, conversationId: string): Owner | null {
  const model = owners.lookup(conversationId);
  const entry = model === undefined ? undefined : registry.find(model);
  const port = entry ? modelProcess(entry)?.port ?? 0 : 0;
  if (!entry || listedStatus(entry) !== 'loaded' || port === 0) return null;
  return { name: entry.spec.name, port };
}

/** A call of the router to a child; null when it failed or timed out. */
async function callChild(port: number, method: string, path: string, body?: string): Promise<Response | null> {
  try {
    return await fetch(`http://127.0.0.1:${port}${path}`, {
      method,
      ...(body !== undefined ? { body, headers: { 'Content-Type': 'application/json' } } : {}),
      signal: AbortSignal.timeout(CHILD_CALL_TIMEOUT_MS),
    });
  } catch {
    return null;
  }
}

export function conversationStreamHandlers(registry: ModelRegistry, owners: ConversationOwners) {
  return {
    replay: (req: HttpRequest): Promise<HttpResult | void> => {
      const conversationId = conversationParam(req);
      const owner = ownerOf(registry, owners, conversationId);
      if (owner) return forward(req, owner.port, owner.name, null);
      const model = owners.lookup(conversationId);
      const entry = model === undefined ? undefined : registry.find(model);
      if (entry && listedStatus(entry) === 'loading') {
        throw inferenceError(ErrorType.UNAVAILABLE, 'Stream owner model is loading, retry later');
      }
      throw streamNotFound();
    },
    stop: async (req: HttpRequest): Promise<HttpResult> => {
      const conversationId = conversationParam(req);
      const owner = ownerOf(registry, owners, conversationId);
      if (owner) await callChild(owner.port, 'DELETE', `/v1/stream?conv_id=${encodeURIComponent(conversationId)}`);
      // Erasing the entry cancels a request still waiting for the model's load.
      owners.forget(conversationId);
      return { status: 204 };
    },
    lookup: async (req: HttpRequest): Promise<HttpResult> => {
      const byPort = new Map<number, string[]>();
      for (const id of requestedIds(req) ?? []) {
        const owner = ownerOf(registry, owners, id);
        if (owner) byPort.set(owner.port, [...(byPort.get(owner.port) ?? []), id]);
      }
      const answers = await Promise.all([...byPort].map(async ([port, ids]) => {
        const res = await callChild(port, 'POST', '/v1/streams/lookup', JSON.stringify({ conversation_ids: ids }));
        if (res?.status !== 200) return [];
        const entries: unknown = await res.json().catch(() => null);
        return Array.isArray(entries) ? entries.filter((e) => typeof e === 'object' && e !== null && !Array.isArray(e)) : [];
      }));
      return { body: answers.flat() };
    },
  };
}
