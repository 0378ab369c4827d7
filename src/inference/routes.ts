// The route table of inference-server: one line per route, its guard visible on the line.
//   public          no credentials; answered while the model loads
//   apiKey          503 while the model loads, then --api-key (or an --auth-app access token)
//                   and the tenant's limits (429 over one; docs/tenants.md); a sleeping model
//                   (--sleep-idle-seconds) is loaded again for the request
//   apiKeyReadOnly  as apiKey, but never wakes a sleeping model (answers from before it slept)
// llama-server's aliases of a route are listed beside it.
import type { Method, Route } from '../http/router.js';
import { apiKey, apiKeyReadOnly, inferenceRoute, publicAccess, type Admitted, type Guard, type InferenceHandler, type RouteContext } from './guards.js';
import { handleCompletion } from './handlers/completion.js';
import { handleEmbedding, handleOpenAIEmbeddings, handleRerank } from './handlers/embeddings.js';
import { handleInfill } from './handlers/infill.js';
import { handleHealth, handleModels, handleProps, handleSetProps, handleSlots, metricsHandler } from './handlers/info.js';
import { ErrorType, inferenceError } from './errors.js';
import { handleListLoraAdapters, handleSetLoraAdapters } from './handlers/lora-adapters.js';
import { anthropicRoute, handleAnthropicCountTokens, handleAnthropicMessages } from './handlers/anthropic-messages.js';
import { handleChatCompletions, handleChatInputTokens } from './handlers/chat-completions.js';
import { handleResponses, handleResponsesInputTokens } from './handlers/responses.js';
import { handleSlotAction } from './handlers/slot-actions.js';
import { handleTextCompletions } from './handlers/text-completions.js';
import { handleTranscriptions } from './handlers/transcriptions.js';
import { handleApplyTemplate, handleDetokenize, handleTokenize } from './handlers/tokenize.js';
import { resumable } from './streams/resumable.js';
import type { StreamSessions } from './streams/stream-sessions.js';

/** Endpoints llama-server serves only when asked (--metrics, --props) or until told not to (--no-slots). */
export interface RouteOptions {
  metrics: boolean;
  slots: boolean;
  /** POST /props. */
  props: boolean;
  /** --api-prefix: put before every path (e.g. "/llama"); "" for none. */
  apiPrefix?: string;
  /** The stream sessions that generating requests with X-Conversation-Id tee into; none: the header is ignored. */
  streams?: StreamSessions;
}

/** A switched-off endpoint answers 501 naming the flag that turns it on, as llama-server. */
function whenEnabled<I>(enabled: boolean, what: string, flag: string, handler: InferenceHandler<I>): InferenceHandler<I> {
  if (enabled) return handler;
  return () => {
    throw inferenceError(ErrorType.NOT_SUPPORTED, `This server does not support ${what}. Start it with \`${flag}\``);
  };
}

/**
 * A generating route's handler, its request counted by the engine as being prepared from its
 * arrival until it submits its tasks (InferenceService.beginPreparing), or until it ends without:
 * an idle engine that starts the first of several requests sent together waits for the others
 * while their chat templates are rendered and their prompts tokenized, so they share its first batch.
 */
function countedWhilePrepared(handler: InferenceHandler<Admitted>): InferenceHandler<Admitted> {
  return async (input, req) => {
    input.service.beginPreparing(req.signal);
    try {
      return await handler(input, req);
    } finally {
      input.service.endPreparing(req.signal);
    }
  };
}

export function inferenceRoutes(ctx: RouteContext, options: RouteOptions): Route[] {
  const prefix = options.apiPrefix ?? '';
  const route = <I>(method: Method, path: string, guard: Guard<I>, handler: InferenceHandler<I>): Route => inferenceRoute(ctx, method, prefix + path, guard, handler);
  // The generating routes (llama-server's server_res_generator) get two wrappers, each visible on
  // their line: countedWhilePrepared (counted by the engine until they submit) and resumed
  // (with X-Conversation-Id, a stream session that outlives the client; as is without sessions).
  const streams = options.streams;
  // A session's view has the session's signal; the admitted tenant stays the handler's input.
  const resumed = (handler: InferenceHandler<Admitted>): InferenceHandler<Admitted> =>
    (streams ? (input, req) => resumable(streams, req, (view) => handler(input, view)) : handler);
  const prepared = countedWhilePrepared;
  return [
    route('GET',  '/health',               publicAccess, handleHealth),
    route('GET',  '/v1/health',            publicAccess, handleHealth),
    route('POST', '/completion',           apiKey,       resumed(prepared(handleCompletion))),
    route('POST', '/completions',          apiKey,       resumed(prepared(handleCompletion))),
    route('POST', '/infill',               apiKey,       resumed(prepared(handleInfill))),
    route('POST', '/v1/completions',       apiKey,       resumed(prepared(handleTextCompletions))),
    route('POST', '/v1/chat/completions',  apiKey,       resumed(prepared(handleChatCompletions))),
    route('POST', '/chat/completions',     apiKey,       resumed(prepared(handleChatCompletions))),
    route('POST', '/v1/responses',         apiKey,       resumed(prepared(handleResponses))),
    route('POST', '/responses',            apiKey,       resumed(prepared(handleResponses))),
    route('GET',  '/v1/models',            apiKeyReadOnly, handleModels),
    route('GET',  '/models',               apiKeyReadOnly, handleModels),
    route('GET',  '/props',                apiKeyReadOnly, handleProps),
    route('POST', '/props',                apiKey,       whenEnabled(options.props, 'changing global properties', '--props', handleSetProps)),
    route('GET',  '/slots',                apiKeyReadOnly, whenEnabled(options.slots, 'slots endpoint', '--slots', handleSlots)),
    route('POST', '/slots/:id_slot',       apiKey,       handleSlotAction),
    route('POST', '/tokenize',             apiKey,       handleTokenize),
    route('POST', '/detokenize',           apiKey,       handleDetokenize),
    route('POST', '/apply-template',       apiKey,       handleApplyTemplate),
    route('GET',  '/lora-adapters',        apiKey,       handleListLoraAdapters),
    route('POST', '/lora-adapters',        apiKey,       handleSetLoraAdapters),
    route('POST', '/v1/embeddings',        apiKey,       handleOpenAIEmbeddings),
    route('POST', '/embeddings',           apiKey,       handleEmbedding),
    route('POST', '/embedding',            apiKey,       handleEmbedding),
    route('POST', '/v1/rerank',            apiKey,       handleRerank),
    route('POST', '/rerank',               apiKey,       handleRerank),
    route('POST', '/v1/reranking',         apiKey,       handleRerank),
    route('POST', '/reranking',            apiKey,       handleRerank),
    route('GET',  '/metrics',              apiKeyReadOnly, whenEnabled(options.metrics, 'metrics endpoint', '--metrics', metricsHandler(ctx.host, ctx.tenancy.usage))),
    route('POST', '/chat/completions/input_tokens',    apiKey, handleChatInputTokens),
    route('POST', '/v1/chat/completions/input_tokens', apiKey, handleChatInputTokens),
    route('POST', '/responses/input_tokens',           apiKey, handleResponsesInputTokens),
    route('POST', '/v1/responses/input_tokens',        apiKey, handleResponsesInputTokens),
    route('POST', '/v1/audio/transcriptions',          apiKey,       resumed(prepared(handleTranscriptions))),
    route('POST', '/audio/transcriptions',             apiKey,       resumed(prepared(handleTranscriptions))),
    // Anthropic's Messages API: every answer, errors included, in Anthropic's shape.
    anthropicRoute(route('POST', '/v1/messages',              apiKey, resumed(prepared(handleAnthropicMessages)))),
    anthropicRoute(route('POST', '/v1/messages/count_tokens', apiKey, handleAnthropicCountTokens)),
  ];
}
