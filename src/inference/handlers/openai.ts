// POST /v1/chat/completions and POST /v1/completions: the OpenAI formats over the engine.
import type { HttpRequest, HttpResult } from '../../http/request.js';
import { compileBody } from '../../http/validation.js';
import { renderChat } from '../service/chat-prompt.js';
import { choiceCount, perChoice } from '../service/choices.js';
import type { CompletionOutcome, GeneratedToken } from '../engine/engine.js';
import { badRequest } from '../errors.js';
import { chatLogprobs, completionId, finishReason, textLogprobs, usage, withTimings } from '../dialects/openai.js';
import { buildTaskSpec, grammarFromSchema } from '../service/generation.js';
import { splitPrompts, tokenizePrompt } from '../service/prompt-input.js';
import { BODY_OPTIONS, ChatCompletionBody, OpenAICompletionBody } from '../schemas.js';
import type { InferenceService } from '../service/service.js';
import { TokenStream } from './token-stream.js';

const ChatBody = compileBody(ChatCompletionBody, BODY_OPTIONS);
const TextBody = compileBody(OpenAICompletionBody, BODY_OPTIONS);

export async function handleChatCompletions(service: InferenceService, req: HttpRequest): Promise<HttpResult | void> {
  const body = ChatBody.parse(req);
  const n = choiceCount(body.n, 'n', service);
  const { prompt, media } = await renderChat(service, body.messages, {
    addGenerationPrompt: body.add_generation_prompt,
    kwargs: body.chat_template_kwargs,
    media: { allowRemote: service.settings.allowRemoteMedia },
  });
  // With images the prompt is tokenized natively, around the images.
  const tokens = media.length > 0 ? new Int32Array(0) : await service.model.tokenizeAsync(prompt, true, true);
  if (media.length === 0) service.checkPromptFits(tokens);

  let grammar: string | undefined;
  const format = body.response_format;
  if (format?.type === 'json_object') grammar = grammarFromSchema(format.schema ?? { type: 'object' });
  if (format?.type === 'json_schema') grammar = grammarFromSchema(format.json_schema.schema ?? { type: 'object' });
  const topLogprobs = body.top_logprobs ?? 0;
  if (topLogprobs < 0 || topLogprobs > 20) throw badRequest('Invalid field "top_logprobs": must be between 0 and 20', { field: 'top_logprobs' });
  if (body.top_logprobs !== undefined && body.top_logprobs !== null && !body.logprobs) throw badRequest('"top_logprobs" needs "logprobs": true', { field: 'top_logprobs' });
  // OpenAI's logprobs/top_logprobs, or llama-server's n_probs (the spec lists it for chat): either
  // way the choices carry `logprobs.content`, with `top` alternatives per token.
  const top = body.logprobs === true ? topLogprobs : (body.n_probs ?? 0);
  const wantLogprobs = body.logprobs === true || top > 0;
  const spec = buildTaskSpec(service, body, tokens, {
    nPredict: body.max_completion_tokens ?? body.max_tokens ?? body.n_predict ?? undefined,
    ...(grammar !== undefined ? { grammar, grammarFromSchema: true } : {}),
    ...(wantLogprobs ? { nProbs: Math.max(1, top) } : {}),
  });
  if (media.length > 0) Object.assign(spec, { promptText: prompt, media });
  const specs = perChoice(spec, n);
  const id = completionId('chatcmpl');
  const created = Math.floor(Date.now() / 1000);
  const piece = (t: number): Uint8Array => service.model.tokenPiece(t, false);
  const base = (): Record<string, unknown> => ({ id, created, model: service.alias, system_fingerprint: fingerprint(service) });

  if (!body.stream) {
    const outcomes = await Promise.all(service.startAll(specs, req.signal));
    return {
      body: withTimings({
        ...base(),
        object: 'chat.completion',
        choices: outcomes.map((o, index) => ({
          index,
          message: { role: 'assistant', content: o.content },
          logprobs: wantLogprobs ? chatLogprobs(o.probabilities, piece, top) : null,
          finish_reason: finishReason(o.stop),
        })),
        usage: usage(outcomes),
      }, outcomes.length === 1 ? outcomes[0] : undefined),
    };
  }

  // Every task is submitted before the first event (the role chunk): a refusal is still
  // answered with its error status, as llama-server does.
  const stream = req.openEventStream();
  const chunk = (choices: unknown[]): string => JSON.stringify({ ...base(), object: 'chat.completion.chunk', choices });
  const tokenStreams = specs.map((_, index) => new TokenStream(stream, (batch: GeneratedToken[]) => {
    const text = batch.map((t) => t.text).join('');
    const probs = batch.filter((t) => t.token >= 0 && t.probs).map((t) => ({ token: t.token, prob: t.prob ?? 0, probs: t.probs ?? [] }));
    if (text === '' && probs.length === 0) return null;
    return chunk([{ index, delta: { content: text }, logprobs: wantLogprobs ? chatLogprobs(probs, piece, top) : null, finish_reason: null }]);
  }));
  // Tokens arrive on later turns of the event loop: each role chunk below is queued first.
  const runs = service.startAll(specs, req.signal, (index) => (t) => tokenStreams[index]!.push(t));
  const outcomes: CompletionOutcome[] = await Promise.all(runs.map(async (run, index) => {
    await stream.send(chunk([{ index, delta: { role: 'assistant', content: null }, logprobs: null, finish_reason: null }]));
    let outcome: CompletionOutcome;
    try {
      outcome = await run;
    } finally {
      await tokenStreams[index]!.flush();
    }
    const last = { ...base(), object: 'chat.completion.chunk', choices: [{ index, delta: {}, logprobs: null, finish_reason: finishReason(outcome.stop) }] };
    await stream.send(JSON.stringify(withTimings(last, outcome)));
    return outcome;
  }));
  if (body.stream_options?.include_usage) {
    await stream.send(JSON.stringify({ ...base(), object: 'chat.completion.chunk', choices: [], usage: usage(outcomes) }));
  }
  await stream.sendRaw('data: [DONE]\n\n');
}

export async function handleTextCompletions(service: InferenceService, req: HttpRequest): Promise<HttpResult | void> {
  const body = TextBody.parse(req);
  const n = choiceCount(body.n, 'n', service);
  const prompts = splitPrompts(body.prompt);
  if (prompts.length !== 1) throw badRequest('Invalid field "prompt": one prompt per request (string or tokens)', { field: 'prompt' });
  const tokens = await tokenizePrompt(service.model, service.vocabSize, prompts[0]!);
  service.checkPromptFits(tokens);
  if ((body.logprobs ?? 0) < 0 || (body.logprobs ?? 0) > 5) throw badRequest('Invalid field "logprobs": must be between 0 and 5', { field: 'logprobs' });
  // OpenAI's logprobs (0..5 alternatives), or llama-server's n_probs.
  const wantLogprobs = (body.logprobs !== undefined && body.logprobs !== null) || (body.n_probs ?? 0) > 0;
  const top = body.logprobs ?? body.n_probs ?? 0;
  const spec = buildTaskSpec(service, body, tokens, {
    nPredict: body.max_tokens ?? body.n_predict ?? undefined,
    ...(wantLogprobs ? { nProbs: Math.max(1, top) } : {}),
  });
  const specs = perChoice(spec, n);
  const id = completionId('cmpl');
  const created = Math.floor(Date.now() / 1000);
  const piece = (t: number): Uint8Array => service.model.tokenPiece(t, false);
  const echo = body.echo && typeof body.prompt === 'string' ? body.prompt : '';
  const base = (): Record<string, unknown> => ({ id, object: 'text_completion', created, model: service.alias, system_fingerprint: fingerprint(service) });

  if (!body.stream) {
    const outcomes = await Promise.all(service.startAll(specs, req.signal));
    return {
      body: withTimings({
        ...base(),
        choices: outcomes.map((o, index) => ({
          text: echo + o.content,
          index,
          logprobs: wantLogprobs ? textLogprobs(o.probabilities, piece, top) : null,
          finish_reason: finishReason(o.stop),
        })),
        usage: usage(outcomes),
      }, outcomes.length === 1 ? outcomes[0] : undefined),
    };
  }

  const stream = req.openEventStream();
  const tokenStreams = specs.map((_, index) => new TokenStream(stream, (batch) => {
    const text = batch.map((t) => t.text).join('');
    const probs = batch.filter((t) => t.token >= 0 && t.probs).map((t) => ({ token: t.token, prob: t.prob ?? 0, probs: t.probs ?? [] }));
    if (text === '' && probs.length === 0) return null;
    return JSON.stringify({ ...base(), choices: [{ text, index, logprobs: wantLogprobs ? textLogprobs(probs, piece, top) : null, finish_reason: null }] });
  }));
  // Tokens arrive on later turns of the event loop: each echo chunk below is queued first.
  const runs = service.startAll(specs, req.signal, (index) => (t) => tokenStreams[index]!.push(t));
  const outcomes: CompletionOutcome[] = await Promise.all(runs.map(async (run, index) => {
    if (echo) await stream.send(JSON.stringify({ ...base(), choices: [{ text: echo, index, logprobs: null, finish_reason: null }] }));
    let outcome: CompletionOutcome;
    try {
      outcome = await run;
    } finally {
      await tokenStreams[index]!.flush();
    }
    await stream.send(JSON.stringify(withTimings({ ...base(), choices: [{ text: '', index, logprobs: null, finish_reason: finishReason(outcome.stop) }] }, outcome)));
    return outcome;
  }));
  if (body.stream_options?.include_usage) {
    await stream.send(JSON.stringify({ ...base(), choices: [], usage: usage(outcomes) }));
  }
  await stream.sendRaw('data: [DONE]\n\n');
}

function fingerprint(service: InferenceService): string {
  return `b-${service.metadata.architecture}-${service.info.nCtx}`;
}
