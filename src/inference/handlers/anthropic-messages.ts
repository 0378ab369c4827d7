// POST /v1/messages and /v1/messages/count_tokens: Anthropic's Messages API over the chat path.
// The request is converted to chat fields as llama-server converts it, then rendered, run and
// parsed exactly as a chat completion; only the answer's shape is Anthropic's. Every error of
// these routes, the guard's included, is answered in Anthropic's shape by anthropicRoute.
import { HttpError } from '../../http/errors.js';
import type { HttpRequest, HttpResult } from '../../http/request.js';
import type { Route } from '../../http/router.js';
import { compileBody } from '../../http/validation.js';
import type { GeneratedToken } from '../engine/engine.js';
import { anthropicError, anthropicMessage, AnthropicEventWriter, sseEvent } from '../dialects/anthropic.js';
import { anthropicToChat } from '../service/anthropic-input.js';
import { completionId } from '../dialects/openai.js';
import { AnthropicMessagesBody, BODY_OPTIONS, ChatCompletionBody, ChatMessage } from '../schemas.js';
import { ChatOutput } from '../service/chat-output.js';
import { chatTaskSpec, countChatTokens, renderChatRequest, type ChatRequest } from '../service/chat-task.js';
import { streamTasks } from './streaming.js';
import { Type } from '@sinclair/typebox';
import type { Admitted } from '../guards.js';

const MessagesBody = compileBody(AnthropicMessagesBody, BODY_OPTIONS);
/** The converted request: a chat completion's fields, where (as in llama-server) no message is allowed. */
const ConvertedBody = compileBody(Type.Object({ ...ChatCompletionBody.properties, messages: Type.Array(ChatMessage) }), BODY_OPTIONS);

function chatRequest(req: HttpRequest): ChatRequest {
  return ConvertedBody.check(anthropicToChat(MessagesBody.parse(req))) as ChatRequest;
}

/** POST /v1/messages/count_tokens: the prompt's length, {"input_tokens": n}. */
export async function handleAnthropicCountTokens({ service }: Admitted, req: HttpRequest): Promise<HttpResult> {
  const body = chatRequest(req);
  return { body: { input_tokens: await countChatTokens(service, await renderChatRequest(service, body)) } };
}

/** POST /v1/messages: one message, or (stream: true) its events. */
export async function handleAnthropicMessages({ service, tenant }: Admitted, req: HttpRequest): Promise<HttpResult | void> {
  const body = chatRequest(req);
  const chat = await renderChatRequest(service, body);
  const spec = await chatTaskSpec(service, body, chat, undefined);
  const header = { id: completionId('chatcmpl'), model: service.alias };

  if (!body.stream) {
    const [outcome] = await service.runAll([spec], req.signal, tenant);
    return { body: anthropicMessage(header, new ChatOutput(chat).message(outcome!.content), outcome!) };
  }

  const output = new ChatOutput(chat);
  const writer = new AnthropicEventWriter(header);
  await streamTasks(req, { service, tenant }, [spec], {
    tokens: () => (batch: GeneratedToken[]) => {
      const events = writer.start(batch.find((t) => t.nPrompt !== undefined)?.nPrompt ?? spec.prompt.length);
      events.push(...writer.deltas(output.push(batch.map((t) => t.text).join(''))));
      return events.length > 0 ? events : null;
    },
    closing: (outcome) => [...writer.deltas(output.finish()), ...writer.finish(outcome, output.hasToolCalls)],
  });
}

/**
 * A route whose every answer is Anthropic's: errors, the guard's included, as
 * {"type": "error", "error": {...}} with their status, or, once events have gone out, as a last
 * `event: error`.
 */
export function anthropicRoute(route: Route): Route {
  return {
    ...route,
    handler: async (req) => {
      try {
        return await route.handler(req);
      } catch (thrown) {
        // Unexpected failures (not HttpErrors) go on to the server, which logs them as 500s.
        if (!(thrown instanceof HttpError)) throw thrown;
        const body = anthropicError(thrown);
        if (!req.streamStarted) return { status: thrown.status, body };
        // The stream the handler opened: openEventStream returns it.
        await req.openEventStream().send(sseEvent(body));
        return;
      }
    },
  };
}
