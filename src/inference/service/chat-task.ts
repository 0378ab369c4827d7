// A chat request -> the task the engine runs, for every dialect that is a chat underneath
// (OpenAI chat completions, Anthropic Messages, Responses, transcriptions), as llama-server keeps
// its oaicompat conversions in one place: the request's template is rendered (chat-prompt.ts), its
// prompt tokenized and checked against the context, and the task built from the request's
// generation fields plus what the template's format asks of the sampler. Handlers validate the
// request before and format the outcome after; nothing here knows a dialect.
import type { CompletionTaskSpec } from '../../native/binding.js';
import type { ChatCompletionBody } from '../schemas.js';
import type { Static } from '@sinclair/typebox';
import { chatSampling, renderChat, type RenderedChat } from './chat-prompt.js';
import { buildTaskSpec } from './generation.js';
import type { InferenceService } from './service.js';

/** A chat completion request, validated (every chat dialect is converted to one). */
export type ChatRequest = Static<typeof ChatCompletionBody>;

/** OpenAI's response_format, as the JSON schema the reply must follow (llama-server's json_schema otherwise). */
function responseSchema(body: ChatRequest): unknown {
  const format = body.response_format;
  if (format?.type === 'json_object') return format.schema ?? { type: 'object' };
  if (format?.type === 'json_schema') return format.json_schema.schema ?? { type: 'object' };
  return body.json_schema;
}

/** Renders the request's template: its prompt, media and the constraints of the template's format. */
export function renderChatRequest(service: InferenceService, body: ChatRequest): Promise<RenderedChat> {
  const schema = responseSchema(body);
  return renderChat(service, { ...body, ...(schema !== undefined ? { jsonSchema: schema } : {}) }, service.settings.media);
}

/** The tokens of a rendered chat's prompt, its images and audio included (the token-count routes of every dialect). */
export async function countChatTokens(service: InferenceService, chat: Pick<RenderedChat, 'prompt' | 'media'>): Promise<number> {
  if (chat.media.length > 0) return service.countTokensWithMedia(chat.prompt, chat.media);
  return (await service.model.tokenizeAsync(chat.prompt, true, true)).length;
}

/**
 * The task of a rendered chat: its prompt, the request's generation fields, and what the
 * template's format asks of the sampler. `nProbs`: the alternatives per token a dialect's
 * logprobs fields ask for (undefined: the request's n_probs).
 */
export async function chatTaskSpec(service: InferenceService, body: ChatRequest, chat: RenderedChat, nProbs: number | undefined): Promise<CompletionTaskSpec> {
  // With media the prompt is tokenized natively, around them.
  const tokens = chat.media.length > 0 ? new Int32Array(0) : await service.model.tokenizeAsync(chat.prompt, true, true);
  if (chat.media.length === 0) service.checkPromptFits(tokens);
  // A grammar the template's format returns (tools, response_format) replaces the request's own.
  const spec = buildTaskSpec(service, body, tokens, nProbs !== undefined ? { nProbs } : {});
  spec.sampling = { ...spec.sampling, ...chatSampling(chat) };
  spec.stop = [...(spec.stop ?? []), ...chat.params.additionalStops];
  if (chat.media.length > 0) Object.assign(spec, { promptText: chat.prompt, media: chat.media });
  return spec;
}
