// A chat request -> the prompt and the generation constraints its template asks for, through
// llama.cpp's chat layer (common/chat: Jinja templates with tools, tool-call history and
// reasoning; per-format grammars, lazy triggers and parsers), following llama-server's
// oaicompat_chat_params_parse rule for rule. Image and audio parts become the projector's media
// markers, their bytes collected in order.
import { isNativeError, type ChatContentPart, type ChatContinuation, type ChatInputMessage, type ChatInputs, type ChatParams, type ChatTool, type ChatToolChoice, type ReasoningFormat, type SamplingParams } from '../../native/binding.js';
import { nativeErrorToHttp } from '../engine/native-errors.js';
import { badRequest, ErrorType, inferenceError } from '../errors.js';
import type { ChatMessage, ChatPromptFields } from '../schemas.js';
import type { Static, TObject } from '@sinclair/typebox';
import { loadAudio, loadImage, type MediaPolicy } from './media.js';
import type { InferenceService } from './service.js';

export type ChatPromptRequest = Static<TObject<typeof ChatPromptFields>> & {
  /** OpenAI's response_format, as a JSON schema the reply must follow. */
  jsonSchema?: unknown;
  grammar?: string;
};

export interface RenderedChat {
  prompt: string;
  /** Encoded images and audio clips, one per media marker in `prompt`. */
  media: Uint8Array[];
  /** What llama.cpp's chat layer returned: grammar, triggers, stops, parser. */
  params: ChatParams;
  reasoningFormat: ReasoningFormat;
  /** Continuing the last assistant message (prefill, continue_final_message). */
  continuation: ChatContinuation;
  /** Tokens of thinking allowed; -1 unlimited. */
  reasoningBudget: number;
  /** Text forced before the end tag when the budget runs out ('' none). */
  reasoningBudgetMessage: string;
}

/** Message content parts for llama.cpp: text as it is, images and audio as media markers (their bytes kept). */
async function contentParts(service: InferenceService, m: ChatMessage, i: number, policy: MediaPolicy, media: Uint8Array[]): Promise<string | ChatContentPart[] | null> {
  if (m.content === undefined || m.content === null || typeof m.content === 'string') return m.content ?? null;
  const parts: ChatContentPart[] = [];
  for (const [j, part] of m.content.entries()) {
    if (part.type === 'text') {
      parts.push({ type: 'text', text: part.text });
      continue;
    }
    const field = `messages[${i}].content[${j}]`;
    // llama-server's answers without a projector that reads the part, 500s (its clients test for them).
    if (part.type === 'input_audio') {
      if (!service.vision?.supportsAudio) throw inferenceError(ErrorType.SERVER, 'audio input is not supported - hint: if this is unexpected, you may need to provide the mmproj');
      const data = part.input_audio.data ?? part.input_audio.url ?? '';
      media.push(await loadAudio(data, `${field}.input_audio.${part.input_audio.data !== undefined ? 'data' : 'url'}`, policy));
    } else {
      if (!service.vision?.supportsVision) {
        throw inferenceError(ErrorType.SERVER, 'image input is not supported - hint: if this is unexpected, you may need to provide the mmproj (start the server with -mm)');
      }
      media.push(await loadImage(part.image_url.url, `${field}.image_url.url`, policy));
    }
    parts.push({ type: 'media_marker', text: service.vision.marker });
  }
  return parts;
}

function toolCallArguments(args: string | Record<string, unknown> | undefined): string {
  return typeof args === 'string' ? args : JSON.stringify(args ?? {});
}

/** llama-server's rules on the shape of a history, each a 400. */
function checkMessages(messages: readonly ChatMessage[]): void {
  messages.forEach((m, i) => {
    const field = `messages[${i}]`;
    if (m.role !== 'assistant' && m.content === undefined) throw badRequest(`Invalid field "${field}": all non-assistant messages must contain 'content'`, { field });
    if (m.role === 'assistant' && m.content === undefined && !m.tool_calls) throw badRequest(`Invalid field "${field}": assistant message must contain either 'content' or 'tool_calls'`, { field });
  });
}

async function inputMessages(service: InferenceService, messages: readonly ChatMessage[], policy: MediaPolicy, media: Uint8Array[]): Promise<ChatInputMessage[]> {
  checkMessages(messages);
  const out: ChatInputMessage[] = [];
  for (const [i, m] of messages.entries()) {
    out.push({
      role: m.role,
      content: await contentParts(service, m, i, policy, media),
      ...(m.reasoning_content ? { reasoningContent: m.reasoning_content } : {}),
      ...(m.tool_calls ? { toolCalls: m.tool_calls.map((c) => ({ ...(c.id ? { id: c.id } : {}), name: c.function.name, arguments: toolCallArguments(c.function.arguments) })) } : {}),
      ...(m.tool_call_id !== undefined ? { toolCallId: m.tool_call_id } : {}),
      ...(m.name !== undefined && m.role === 'tool' ? { toolName: m.name } : {}),
    });
  }
  return out;
}

function tools(body: ChatPromptRequest): ChatTool[] {
  return (body.tools ?? []).map((t) => ({
    name: t.function.name,
    ...(t.function.description !== undefined ? { description: t.function.description } : {}),
    parameters: JSON.stringify(t.function.parameters ?? {}),
  }));
}

/** OpenAI's tool_choice; a named function is answered as "required", as llama-server. */
function toolChoice(choice: ChatPromptRequest['tool_choice'], names: readonly string[]): ChatToolChoice {
  if (choice === undefined || choice === null) return 'auto';
  if (typeof choice === 'string') return choice;
  if (!names.includes(choice.function.name)) {
    throw badRequest(`Invalid field "tool_choice": no tool named "${choice.function.name}"`, { field: 'tool_choice' });
  }
  return 'required';
}

function continuation(value: ChatPromptRequest['continue_final_message']): ChatContinuation {
  if (value === true) return 'auto';
  if (value === 'reasoning_content') return 'reasoning';
  if (value === 'content') return 'content';
  return 'none';
}

/** The request's kwargs over the server's (--chat-template-kwargs), as JSON text, with reasoning_effort. */
function templateKwargs(service: InferenceService, body: ChatPromptRequest): Record<string, string> {
  const merged: Record<string, unknown> = { ...service.settings.templateKwargs, ...body.chat_template_kwargs };
  const kwargs = Object.fromEntries(Object.entries(merged).map(([k, v]) => [k, JSON.stringify(v)]));
  if (body.reasoning_effort && body.reasoning_effort !== 'none') kwargs.reasoning_effort = JSON.stringify(body.reasoning_effort);
  return kwargs;
}

/** --reasoning, then enable_thinking in the kwargs, then reasoning_effort "none". */
function enableThinking(service: InferenceService, body: ChatPromptRequest, kwargs: Record<string, string>): boolean | undefined {
  let enabled = service.settings.chat.enableThinking;
  const kwarg = kwargs.enable_thinking;
  if (kwarg === 'true') enabled = true;
  else if (kwarg === 'false') enabled = false;
  else if (kwarg !== undefined && kwarg.startsWith('"')) throw badRequest('invalid type for "enable_thinking" (expected boolean, got string)', { field: 'chat_template_kwargs' });
  if (body.reasoning_effort === 'none') enabled = false;
  return enabled;
}

/** The template inputs of a request, with llama-server's prefill and continuation rules. */
function chatInputs(service: InferenceService, body: ChatPromptRequest, messages: ChatInputMessage[]): ChatInputs {
  const toolList = tools(body);
  const choice = toolChoice(body.tool_choice, toolList.map((t) => t.name));
  let addGenerationPrompt = body.add_generation_prompt ?? true;
  let continueFinal = continuation(body.continue_final_message);
  const last = messages.at(-1);
  if (continueFinal === 'none' && service.settings.chat.prefillAssistant && last?.role === 'assistant') {
    if (messages.at(-2)?.role === 'assistant') throw badRequest('Cannot have 2 or more assistant messages at the end of the list.', { field: 'messages' });
    continueFinal = 'auto';
    addGenerationPrompt = false;
  }
  if (continueFinal !== 'none' && addGenerationPrompt) throw badRequest('Cannot set both add_generation_prompt and continue_final_message to true.', { field: 'continue_final_message' });
  if (continueFinal !== 'none' && last?.role === 'assistant' && (last.toolCalls?.length ?? 0) > 0) {
    throw badRequest('Cannot continue an assistant message that contains tool calls.', { field: 'messages' });
  }
  if (toolList.length > 0 && choice !== 'none' && body.grammar !== undefined) throw badRequest('Cannot use custom grammar constraints with tools.', { field: 'grammar' });
  const kwargs = templateKwargs(service, body);
  const thinking = enableThinking(service, body, kwargs);
  const template = service.settings.chatTemplate;
  return {
    messages,
    tools: toolList,
    toolChoice: choice,
    ...(body.parallel_tool_calls !== undefined ? { parallelToolCalls: body.parallel_tool_calls } : {}),
    addGenerationPrompt,
    continueFinalMessage: continueFinal,
    reasoningFormat: body.reasoning_format ?? service.settings.chat.reasoningFormat,
    ...(thinking !== undefined ? { enableThinking: thinking } : {}),
    ...(body.jsonSchema !== undefined ? { jsonSchema: JSON.stringify(body.jsonSchema) } : {}),
    ...(body.grammar !== undefined ? { grammar: body.grammar } : {}),
    kwargs,
    useJinja: service.settings.chat.useJinja,
    forcePureContent: service.settings.chat.skipChatParsing,
    now: Date.now(),
    ...(template ? { template } : {}),
  };
}

export async function renderChat(service: InferenceService, body: ChatPromptRequest, policy: MediaPolicy = { allowRemote: false }): Promise<RenderedChat> {
  const media: Uint8Array[] = [];
  const messages = await inputMessages(service, body.messages, policy, media);
  const inputs = chatInputs(service, body, messages);
  let params: ChatParams;
  try {
    params = await service.model.applyChatAsync(inputs);
  } catch (err) {
    if (isNativeError(err)) throw nativeErrorToHttp(err);
    throw err;
  }
  const budget = body.reasoning_budget_tokens ?? body.thinking_budget_tokens ?? -1;
  return {
    prompt: params.prompt,
    media,
    params,
    reasoningFormat: inputs.reasoningFormat ?? 'none',
    continuation: inputs.continueFinalMessage ?? 'none',
    reasoningBudget: budget === -1 ? service.settings.chat.reasoningBudget : budget,
    reasoningBudgetMessage: body.reasoning_budget_message ?? service.settings.chat.reasoningBudgetMessage,
  };
}

/** What a rendered chat asks of the sampler, as llama-server passes it on (tool-call grammar, triggers, reasoning budget). */
export function chatSampling(chat: RenderedChat): Partial<SamplingParams> {
  const p = chat.params;
  return {
    ...(p.grammar ? { grammar: p.grammar, grammarToolCalls: true } : {}),
    grammarLazy: p.grammarLazy,
    grammarTriggers: p.grammarTriggers,
    preservedTokens: p.preservedTokens,
    generationPrompt: p.generationPrompt,
    ...(p.thinkingEndTags.length > 0
      ? {
          reasoningBudgetTokens: chat.reasoningBudget,
          reasoningBudgetStartTag: p.thinkingStartTag,
          reasoningBudgetEndTags: p.thinkingEndTags,
          ...(chat.reasoningBudgetMessage !== '' ? { reasoningBudgetMessage: chat.reasoningBudgetMessage } : {}),
        }
      : {}),
  };
}
