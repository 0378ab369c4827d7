// POST /completion (and /completions): llama-server's native completion endpoint.
import type { HttpRequest, HttpResult } from '../../http/request.js';
import { compileBody } from '../../http/validation.js';
import { completionChunk, completionResponse, generationSettings, type NativeFormatOptions } from '../dialects/llama-server.js';
import { progressTimings, StreamTimer } from '../dialects/timings.js';
import type { CompletionTaskSpec } from '../../native/binding.js';
import { buildTaskSpec, type GenerationRequest } from '../service/generation.js';
import { choiceCount, perChoice } from '../service/choices.js';
import { badRequest } from '../errors.js';
import { checkProjector, splitPrompts, taskPrompt, type PromptInput } from '../service/prompt-input.js';
import { BODY_OPTIONS, CompletionBody } from '../schemas.js';
import type { InferenceService } from '../service/service.js';
import { streamTasks } from './streaming.js';
import type { Admitted } from '../guards.js';

const Body = compileBody(CompletionBody, BODY_OPTIONS);

export async function handleCompletion(admitted: Admitted, req: HttpRequest): Promise<HttpResult | void> {
  const { service } = admitted;
  const body = Body.parse(req);
  let prompt: PromptInput = body.prompt;
  if (body.multimodal_data) {
    // llama-server's top-level images, for a text prompt (or a prompt object without its own).
    if (typeof prompt !== 'string' && Array.isArray(prompt)) throw badRequest('Invalid field "prompt": with multimodal_data the prompt must be text with media markers', { field: 'prompt' });
    const text = typeof prompt === 'string' ? prompt : prompt.prompt_string;
    prompt = { prompt_string: text, multimodal_data: (typeof prompt === 'object' && prompt.multimodal_data) || body.multimodal_data };
  }
  const prompts = splitPrompts(prompt);
  checkProjector(prompts, service.vision !== null);
  const specs = await Promise.all(prompts.map(async (p) => {
    const fields = await taskPrompt(service.model, service.vocabSize, p);
    if (!fields.media) service.checkPromptFits(fields.prompt);
    return { ...buildTaskSpec(service, body, fields.prompt), ...fields };
  }));
  return answerCompletions(req, admitted, body, specs);
}

/** A task's prompt as llama-server reports it: its tokens as text, special tokens written out. */
export function promptText(service: InferenceService, spec: CompletionTaskSpec): string {
  return spec.promptText ?? service.model.detokenize(spec.prompt, false, true);
}

/**
 * Runs the tasks (n_cmpl of each) and answers in /completion's shape (also /infill's): one object,
 * an array for several prompts or completions, or an SSE stream of chunks then a final chunk per task.
 */
export async function answerCompletions(
  req: HttpRequest,
  admitted: Admitted,
  body: GenerationRequest,
  specs: CompletionTaskSpec[],
): Promise<HttpResult | void> {
  const { service, tenant } = admitted;
  // n_cmpl (alias n) completions of each prompt, indexed prompt by prompt as llama-server does.
  const nCmpl = choiceCount(body.n_cmpl ?? body.n, body.n_cmpl !== undefined ? 'n_cmpl' : 'n', service);
  specs = specs.flatMap((spec) => perChoice(spec, nCmpl));
  // Once per choice: a stream asks for them at its start and again for its closing response, and
  // the prompt's text is a detokenization of the whole prompt.
  const made = new Map<number, NativeFormatOptions>();
  const options = (index: number): NativeFormatOptions => {
    let o = made.get(index);
    if (!o) {
      o = {
        index,
        returnTokens: body.return_tokens ?? false,
        nProbs: specs[index]!.nProbs ?? 0,
        postSamplingProbs: specs[index]!.postSamplingProbs ?? false,
        timingsPerToken: body.timings_per_token ?? false,
        prompt: promptText(service, specs[index]!),
        generationSettings: generationSettings(specs[index]!, body),
        responseFields: body.response_fields ?? [],
      };
      made.set(index, o);
    }
    return o;
  };

  if (!body.stream) {
    const outcomes = await service.runAll(specs, req.signal, tenant);
    const responses = outcomes.map((o, i) => completionResponse(service, o, options(i)));
    return { body: responses.length === 1 ? responses[0] : responses };
  }
  await streamTasks(req, admitted, specs, {
    tokens: (index) => {
      const opts = options(index);
      const timer = new StreamTimer(specs[index]!.prompt.length);
      return (batch) => {
        const progress = batch[0]?.progress;
        if (progress) {
          const chunk = completionChunk(service, [], opts, progress.total, timer.nPredicted);
          if (opts.timingsPerToken) chunk.timings = progressTimings(progress);
          return JSON.stringify({ ...chunk, prompt_progress: progress });
        }
        timer.add(batch);
        const chunk = completionChunk(service, batch, opts, timer.promptTokens, timer.nPredicted);
        if (opts.timingsPerToken) chunk.timings = timer.timings();
        return JSON.stringify(chunk);
      };
    },
    closing: (outcome, index) => JSON.stringify(completionResponse(service, outcome, options(index), true)),
  });
}
