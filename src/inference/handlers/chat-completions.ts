// POST /v1/chat/completions (and /chat/completions): OpenAI's chat format over the engine.
import type { HttpRequest, HttpResult } from '../../http/request.js';
import { compileBody } from '../../http/validation.js';
import type { CompletionOutcome, GeneratedToken } from '../engine/engine.js';
import { badRequest } from '../errors.js';
import { completionResponse, generationSettings } from '../dialects/llama-server.js';
import { chatFinishReason, chatLogprobs, completionId, systemFingerprint, tokenProbabilities, usage, withTimings } from '../dialects/openai.js';
import { progressTimings, StreamTimer } from '../dialects/timings.js';
import { BODY_OPTIONS, ChatCompletionBody } from '../schemas.js';
import { chatTaskSpec, countChatTokens, renderChatRequest, type ChatRequest } from '../service/chat-task.js';
import { ChatOutput } from '../service/chat-output.js';
import { choiceCount, perChoice } from '../service/choices.js';
import type { InferenceService } from '../service/service.js';
import { promptText } from './completion.js';
import { streamTasks } from './streaming.js';
import type { Admitted } from '../guards.js';

export const ChatBody = compileBody(ChatCompletionBody, BODY_OPTIONS);

/** OpenAI's logprobs/top_logprobs, or llama-server's n_probs (listed for chat): `top` alternatives per token. */
function logprobsRequest(body: ChatRequest): { want: boolean; top: number } {
  const topLogprobs = body.top_logprobs ?? 0;
  if (topLogprobs < 0 || topLogprobs > 20) throw badRequest('Invalid field "top_logprobs": must be between 0 and 20', { field: 'top_logprobs' });
  if (body.top_logprobs !== undefined && body.top_logprobs !== null && !body.logprobs) throw badRequest('"top_logprobs" needs "logprobs": true', { field: 'top_logprobs' });
  const top = body.logprobs === true ? topLogprobs : (body.n_probs ?? 0);
  return { want: body.logprobs === true || top > 0, top };
}

/** POST /v1/chat/completions/input_tokens: the length of the prompt a chat request would run. */
export function handleChatInputTokens({ service }: Admitted, req: HttpRequest): Promise<HttpResult> {
  return chatInputTokens(service, ChatBody.parse(req));
}

/** The input_tokens answer for a chat request (also the Responses API's). */
export async function chatInputTokens(service: InferenceService, body: ChatRequest): Promise<HttpResult> {
  return { body: { input_tokens: await countChatTokens(service, await renderChatRequest(service, body)), object: 'response.input_tokens' } };
}

export async function handleChatCompletions({ service, tenant }: Admitted, req: HttpRequest): Promise<HttpResult | void> {
  const body = ChatBody.parse(req);
  const n = choiceCount(body.n, 'n', service);
  const chat = await renderChatRequest(service, body);
  const logprobs = logprobsRequest(body);
  const spec = await chatTaskSpec(service, body, chat, logprobs.want ? Math.max(1, logprobs.top) : undefined);
  const specs = perChoice(spec, n);
  const id = completionId('chatcmpl');
  const created = Math.floor(Date.now() / 1000);
  const piece = (t: number): Uint8Array => service.model.tokenPiece(t, false);
  const base = { id, created, model: service.alias, system_fingerprint: systemFingerprint(service) };
  const choiceLogprobs = (probs: Parameters<typeof chatLogprobs>[0]) => (logprobs.want ? chatLogprobs(probs, piece, logprobs.top) : null);
  const verbose = (outcome: CompletionOutcome) => (body.verbose || service.settings.verbose
    ? { __verbose: completionResponse(service, outcome, { index: 0, returnTokens: false, nProbs: 0, postSamplingProbs: false, timingsPerToken: false, prompt: promptText(service, spec), generationSettings: generationSettings(spec, body), responseFields: [] }) }
    : {});

  if (!body.stream) {
    const outcomes = await service.runAll(specs, req.signal, tenant);
    return {
      body: withTimings({
        ...base,
        object: 'chat.completion',
        choices: outcomes.map((o, index) => {
          const message = new ChatOutput(chat, index).message(o.content);
          return { index, message, logprobs: choiceLogprobs(o.probabilities), finish_reason: chatFinishReason(o.stop, message.tool_calls !== undefined) };
        }),
        usage: usage(outcomes),
        ...(outcomes.length === 1 ? verbose(outcomes[0]!) : {}),
      }, outcomes.length === 1 ? outcomes[0] : undefined),
    };
  }

  const chunk = (choices: unknown[]): Record<string, unknown> => ({ ...base, object: 'chat.completion.chunk', choices });
  // As llama-server: the engine's timings go on the last chunk (the usage chunk when asked for),
  // and with timings_per_token every token chunk carries the timings so far.
  const includeUsage = body.stream_options?.include_usage ?? false;
  const outputs = specs.map((_, index) => new ChatOutput(chat, index));
  await streamTasks(req, { service, tenant }, specs, {
    opening: (index) => JSON.stringify(chunk([{ index, delta: { role: 'assistant', content: null }, logprobs: null, finish_reason: null }])),
    tokens: (index) => {
      const timer = new StreamTimer(spec.prompt.length);
      return (batch: GeneratedToken[]) => {
        // return_progress: llama-server repeats the role delta with each progress report.
        const progress = batch[0]?.progress;
        if (progress) {
          const data = chunk([{ index, delta: { role: 'assistant', content: null }, logprobs: null, finish_reason: null }]);
          if (body.timings_per_token) data.timings = progressTimings(progress);
          return JSON.stringify({ ...data, prompt_progress: progress });
        }
        timer.add(batch);
        const deltas = outputs[index]!.push(batch.map((t) => t.text).join(''));
        const probs = tokenProbabilities(batch);
        if (deltas.length === 0 && probs.length === 0) return null;
        // The token's probabilities ride on its first delta.
        return (deltas.length > 0 ? deltas : [{}]).map((delta, i) => {
          const data = chunk([{ index, delta, logprobs: i === 0 ? choiceLogprobs(probs) : null, finish_reason: null }]);
          if (body.timings_per_token) data.timings = timer.timings();
          return JSON.stringify(data);
        });
      };
    },
    closing: (outcome, index) => {
      const output = outputs[index]!;
      const rest = output.finish().map((delta) => JSON.stringify(chunk([{ index, delta, logprobs: null, finish_reason: null }])));
      const last = chunk([{ index, delta: {}, logprobs: null, finish_reason: chatFinishReason(outcome.stop, output.hasToolCalls) }]);
      return [...rest, JSON.stringify(withTimings(last, includeUsage ? undefined : outcome))];
    },
    final: (outcomes) => [
      ...(includeUsage ? [JSON.stringify(withTimings({ ...chunk([]), usage: usage(outcomes) }, outcomes.length === 1 ? outcomes[0] : undefined))] : []),
      '[DONE]',
    ],
  });
}
