// POST /v1/responses (and /responses), POST /v1/responses/input_tokens: OpenAI's Responses API,
// as llama-server serves it: the request is converted to a chat completion (responsesToChat),
// run through the chat path, and answered as a response object or its stream of named events.
import type { HttpRequest, HttpResult } from '../../http/request.js';
import { parseJson } from '../../http/validation.js';
import type { GeneratedToken } from '../engine/engine.js';
import { eventPayload, ResponseEvents } from '../dialects/responses-stream.js';
import { responseIds, responseObject } from '../dialects/responses.js';
import { progressTimings, StreamTimer } from '../dialects/timings.js';
import { ChatOutput } from '../service/chat-output.js';
import { responsesToChat } from '../service/responses-input.js';
import { chatTaskSpec, renderChatRequest, type ChatRequest } from '../service/chat-task.js';
import { ChatBody, chatInputTokens } from './chat-completions.js';
import { streamTasks } from './streaming.js';
import type { Admitted } from '../guards.js';

/** The request's body, converted and checked as the chat completion it stands for. */
function chatRequest(req: HttpRequest): ChatRequest {
  return ChatBody.check(responsesToChat(parseJson(req, false)));
}

/** POST /v1/responses/input_tokens: the length of the prompt a Responses request would run. */
export function handleResponsesInputTokens({ service }: Admitted, req: HttpRequest): Promise<HttpResult> {
  return chatInputTokens(service, chatRequest(req));
}

export async function handleResponses({ service, tenant }: Admitted, req: HttpRequest): Promise<HttpResult | void> {
  const body = chatRequest(req);
  const chat = await renderChatRequest(service, body);
  const spec = await chatTaskSpec(service, body, chat, undefined);
  const ids = responseIds();

  if (!body.stream) {
    const [outcome] = await service.runAll([spec], req.signal, tenant);
    return { body: responseObject(ids.response, service.alias, new ChatOutput(chat).message(outcome!.content), outcome!) };
  }

  const output = new ChatOutput(chat);
  const events = new ResponseEvents(ids, service.alias);
  await streamTasks(req, { service, tenant }, [spec], {
    tokens: () => {
      const timer = new StreamTimer(spec.prompt.length);
      return (batch: GeneratedToken[]) => {
        // return_progress: as llama-server, the first report opens the response and rides on its
        // response.in_progress event; later reports have no event of their own.
        const progress = batch[0]?.progress;
        if (progress) {
          const opening = events.opening();
          if (opening.length === 0) return null;
          opening.at(-1)!.prompt_progress = progress;
          if (body.timings_per_token) opening.at(-1)!.timings = progressTimings(progress);
          return opening.map(eventPayload);
        }
        timer.add(batch);
        const list = events.deltas(output.push(batch.map((t) => t.text).join('')));
        if (list.length === 0) return null;
        // As llama-server: with timings_per_token, a token's last event carries the timings so far.
        if (body.timings_per_token) list.at(-1)!.timings = timer.timings();
        return list.map(eventPayload);
      };
    },
    closing: (outcome) => {
      const rest = events.deltas(output.finish());
      const message = output.message(outcome.content);
      return [...rest, ...events.closing(message, outcome, true)].map(eventPayload);
    },
  });
}
