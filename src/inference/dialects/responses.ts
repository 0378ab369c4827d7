// OpenAI Responses API objects and stream events, as llama-server writes them (server-task.cpp:
// to_json_oaicompat_resp, to_json_oaicompat_resp_stream and the partial results' events). The
// output of a reply is its reasoning item, its message item, then one function_call item per
// tool call, each present only when the reply has it.
import { randomBytes } from 'node:crypto';
import type { CompletionOutcome } from '../engine/engine.js';
import type { ChatMessageOut } from '../service/chat-output.js';
import { recordResponseId } from '../../telemetry/tracing.js';

const ALPHANUMERIC = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** llama-server's random_string: 32 alphanumeric characters. */
function randomString(): string {
  return [...randomBytes(32)].map((b) => ALPHANUMERIC[b % ALPHANUMERIC.length]).join('');
}

/** The ids of one response and of its reasoning and message items. */
export interface ResponseIds {
  response: string;
  reasoning: string;
  message: string;
}

/** New ids; the response's is recorded on the request's trace (gen_ai.response.id) when tracing is on. */
export function responseIds(): ResponseIds {
  const ids = { response: `resp_${randomString()}`, reasoning: `rs_${randomString()}`, message: `msg_${randomString()}` };
  recordResponseId(ids.response);
  return ids;
}

export interface ResponseUsage {
  input_tokens: number;
  output_tokens: number;
  total_tokens: number;
  input_tokens_details: { cached_tokens: number };
}

export function responseUsage(outcome: CompletionOutcome): ResponseUsage {
  return {
    input_tokens: outcome.nPrompt,
    output_tokens: outcome.nPredicted,
    total_tokens: outcome.nPrompt + outcome.nPredicted,
    input_tokens_details: { cached_tokens: outcome.nCached },
  };
}

export function outputTextPart(text: string): Record<string, unknown> {
  return { type: 'output_text', annotations: [], logprobs: [], text };
}

/** The reasoning item; `status` is left out of the streamed final item, as llama-server does. */
export function reasoningItem(id: string, text: string, status: 'completed' | null): Record<string, unknown> {
  return {
    id,
    summary: [],
    type: 'reasoning',
    content: [{ text, type: 'reasoning_text' }],
    encrypted_content: '',
    ...(status ? { status } : {}),
  };
}

export function messageItem(id: string, text: string): Record<string, unknown> {
  return { content: [outputTextPart(text)], id, role: 'assistant', status: 'completed', type: 'message' };
}

/** A tool call's item: its id is the call's id behind "fc_", its call_id behind "call_". */
export function functionCallItem(callId: string, name: string, args: string, status: 'completed' | 'in_progress'): Record<string, unknown> {
  return { id: `fc_${callId}`, type: 'function_call', status, arguments: args, call_id: `call_${callId}`, name };
}

/** The output items of a finished message, with the given reasoning and message ids. */
export function outputItems(message: ChatMessageOut, ids: Pick<ResponseIds, 'reasoning' | 'message'>, streamed: boolean): Array<Record<string, unknown>> {
  const output: Array<Record<string, unknown>> = [];
  if (message.reasoning_content) output.push(reasoningItem(ids.reasoning, message.reasoning_content, streamed ? null : 'completed'));
  if (message.content) output.push(messageItem(ids.message, message.content));
  for (const call of message.tool_calls ?? []) output.push(functionCallItem(call.id, call.function.name, call.function.arguments, 'completed'));
  return output;
}

/** The response object of POST /v1/responses (not streamed). */
export function responseObject(id: string, model: string, message: ChatMessageOut, outcome: CompletionOutcome): Record<string, unknown> {
  const now = Math.floor(Date.now() / 1000);
  // Not streamed, llama-server gives the items fresh ids.
  const ids = responseIds();
  return {
    completed_at: now,
    created_at: now,
    id,
    model,
    object: 'response',
    output: outputItems(message, ids, false),
    status: 'completed',
    usage: responseUsage(outcome),
  };
}

/** One named SSE event: `event: <type>` and its data, whose `type` is the same name. */
export interface ResponseEvent {
  type: string;
  [field: string]: unknown;
}

export function inProgress(type: 'response.created' | 'response.in_progress', id: string): ResponseEvent {
  return { type, response: { id, object: 'response', status: 'in_progress' } };
}
