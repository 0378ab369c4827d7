// POST /v1/completions: OpenAI's (legacy) text completion format over the engine.
import type { HttpRequest, HttpResult } from '../../http/request.js';
import { compileBody } from '../../http/validation.js';
import { badRequest } from '../errors.js';
import { completionId, systemFingerprint, textLogprobs, tokenProbabilities, usage, withTimings } from '../dialects/openai.js';
import { finishReason } from '../engine/request-usage.js';
import { BODY_OPTIONS, OpenAICompletionBody } from '../schemas.js';
import { choiceCount, perChoice } from '../service/choices.js';
import { buildTaskSpec } from '../service/generation.js';
import { checkProjector, splitPrompts, taskPrompt } from '../service/prompt-input.js';
import { progressTimings, StreamTimer, type Timings } from '../dialects/timings.js';
import { streamTasks } from './streaming.js';
import type { Admitted } from '../guards.js';

const TextBody = compileBody(OpenAICompletionBody, BODY_OPTIONS);

export async function handleTextCompletions({ service, tenant }: Admitted, req: HttpRequest): Promise<HttpResult | void> {
  const body = TextBody.parse(req);
  const n = choiceCount(body.n, 'n', service);
  const prompts = splitPrompts(body.prompt);
  if (prompts.length !== 1) throw badRequest('Invalid field "prompt": one prompt per request (text, tokens or a prompt object)', { field: 'prompt' });
  checkProjector(prompts, service.vision !== null);
  const fields = await taskPrompt(service.model, service.vocabSize, prompts[0]!);
  if (!fields.media) service.checkPromptFits(fields.prompt);
  if ((body.logprobs ?? 0) < 0 || (body.logprobs ?? 0) > 5) throw badRequest('Invalid field "logprobs": must be between 0 and 5', { field: 'logprobs' });
  // OpenAI's logprobs (0..5 alternatives), or llama-server's n_probs.
  const wantLogprobs = (body.logprobs !== undefined && body.logprobs !== null) || (body.n_probs ?? 0) > 0;
  const top = body.logprobs ?? body.n_probs ?? 0;
  const spec = {
    ...buildTaskSpec(service, body, fields.prompt, wantLogprobs ? { nProbs: Math.max(1, top) } : {}),
    ...fields,
  };
  const specs = perChoice(spec, n);
  const piece = (t: number): Uint8Array => service.model.tokenPiece(t, false);
  const echo = body.echo && typeof body.prompt === 'string' ? body.prompt : '';
  const base = { id: completionId('cmpl'), object: 'text_completion', created: Math.floor(Date.now() / 1000), model: service.alias, system_fingerprint: systemFingerprint(service) };
  const choiceLogprobs = (probs: Parameters<typeof textLogprobs>[0]) => (wantLogprobs ? textLogprobs(probs, piece, top) : null);

  if (!body.stream) {
    const outcomes = await service.runAll(specs, req.signal, tenant);
    return {
      body: withTimings({
        ...base,
        choices: outcomes.map((o, index) => ({ text: echo + o.content, index, logprobs: choiceLogprobs(o.probabilities), finish_reason: finishReason(o.stop) })),
        usage: usage(outcomes),
      }, outcomes.length === 1 ? outcomes[0] : undefined),
    };
  }

  const chunk = (choice: Record<string, unknown>): string => JSON.stringify({ ...base, choices: [choice] });
  await streamTasks(req, { service, tenant }, specs, {
    opening: (index) => (echo ? chunk({ text: echo, index, logprobs: null, finish_reason: null }) : null),
    tokens: (index) => {
      // As llama-server: with timings_per_token, every chunk carries the timings so far.
      const timer = new StreamTimer(spec.prompt.length);
      const timed = (data: Record<string, unknown>, timings: () => Timings): string =>
        JSON.stringify(body.timings_per_token ? { ...data, timings: timings() } : data);
      return (batch) => {
        const progress = batch[0]?.progress;
        if (progress) return timed({ ...base, choices: [{ text: '', index, logprobs: null, finish_reason: null }], prompt_progress: progress }, () => progressTimings(progress));
        timer.add(batch);
        const text = batch.map((t) => t.text).join('');
        const probs = tokenProbabilities(batch);
        if (text === '' && probs.length === 0) return null;
        return timed({ ...base, choices: [{ text, index, logprobs: choiceLogprobs(probs), finish_reason: null }] }, () => timer.timings());
      };
    },
    closing: (outcome, index) => JSON.stringify(withTimings({ ...base, choices: [{ text: '', index, logprobs: null, finish_reason: finishReason(outcome.stop) }] }, outcome)),
    final: (outcomes) => [...(body.stream_options?.include_usage ? [JSON.stringify({ ...base, choices: [], usage: usage(outcomes) })] : []), '[DONE]'],
  });
}
