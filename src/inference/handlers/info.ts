// GET /health, /v1/models, /props, /slots, /metrics.
import type { HttpRequest, HttpResult } from '../../http/request.js';
import { ErrorType, inferenceError } from '../errors.js';
import { generationSettings } from '../dialects/llama-server.js';
import { buildTaskSpec } from '../service/generation.js';
import type { InferenceService } from '../service/service.js';
import type { RequestCounters, ServerState } from '../state.js';

/** Public: 503 while the model loads, then ok. */
export function handleHealth(state: ServerState): HttpResult {
  state.ready();
  return { body: { status: 'ok' } };
}

function modelEntry(service: InferenceService): Record<string, unknown> {
  const m = service.metadata;
  return {
    id: service.alias,
    object: 'model',
    created: service.createdAt,
    owned_by: 'llamacpp',
    meta: {
      vocab_type: m.vocabType,
      n_vocab: m.vocabSize,
      n_ctx_train: m.nCtxTrain,
      n_embd: m.nEmbd,
      n_params: m.nParams,
      size: m.sizeBytes,
      architecture: m.architecture,
    },
  };
}

export function handleModels(service: InferenceService): HttpResult {
  return {
    body: {
      object: 'list',
      data: [modelEntry(service)],
      // llama-server also answers in the Ollama-style shape; clients of either read their half.
      models: [{ name: service.alias, model: service.alias, type: 'model', capabilities: ['completion'] }],
    },
  };
}

export function handleProps(service: InferenceService): HttpResult {
  return {
    body: {
      default_generation_settings: {
        id: 0,
        id_task: -1,
        n_ctx: service.info.nCtxSlot,
        speculative: false,
        is_processing: false,
        params: { ...generationSettings(buildTaskSpec(service, {}, new Int32Array(0)), {}), cache_prompt: true },
      },
      total_slots: service.info.nParallel,
      model_alias: service.alias,
      model_path: service.settings.modelPath,
      modalities: { vision: service.vision?.supportsVision ?? false, audio: false },
      chat_template: service.metadata.chatTemplate ?? '',
      bos_token: tokenText(service, service.metadata.tokens.bos),
      eos_token: tokenText(service, service.metadata.tokens.eos),
      build_info: `llama.cpp addon (${service.metadata.architecture})`,
      n_ctx: service.info.nCtx,
      is_sleeping: false,
    },
  };
}

/** POST /props (with --props): llama-server accepts it and changes nothing yet; so does this server. */
export function handleSetProps(): HttpResult {
  return { body: { success: true } };
}

function tokenText(service: InferenceService, token: number | null): string {
  return token === null ? '' : Buffer.from(service.model.tokenPiece(token, true)).toString('utf8');
}

/** GET /slots; with ?fail_on_no_slot, 503 when every slot is busy (as llama-server). */
export function handleSlots(service: InferenceService, req: HttpRequest): HttpResult {
  const slots = service.engine.native.slots();
  if (req.query.get('fail_on_no_slot') && slots.every((s) => s.state !== 'idle')) throw inferenceError(ErrorType.UNAVAILABLE, 'no slot available');
  return {
    body: slots.map((s) => ({
      id: s.id,
      id_task: s.taskId ?? -1,
      n_ctx: s.nCtx,
      is_processing: s.state !== 'idle',
      state: s.state,
      n_prompt_tokens: s.nPrompt,
      n_decoded: s.nDecoded,
      n_cached_tokens: s.nCache,
    })),
  };
}

/** Prometheus text of the engine's counters and the server's request counters. */
export function metricsHandler(counters: RequestCounters) {
  return (service: InferenceService): HttpResult => {
    const m = service.engine.native.metrics();
    const lines: string[] = [];
    const metric = (name: string, type: 'counter' | 'gauge', help: string, value: number): void => {
      lines.push(`# HELP llamacpp:${name} ${help}`, `# TYPE llamacpp:${name} ${type}`, `llamacpp:${name} ${Number.isFinite(value) ? value : 0}`);
    };
    metric('prompt_tokens_total', 'counter', 'Number of prompt tokens processed.', m.promptTokens);
    metric('prompt_seconds_total', 'counter', 'Prompt process time.', m.promptMs / 1000);
    metric('tokens_predicted_total', 'counter', 'Number of generation tokens processed.', m.predictedTokens);
    metric('tokens_predicted_seconds_total', 'counter', 'Predict process time.', m.predictedMs / 1000);
    metric('prompt_tokens_seconds', 'gauge', 'Average prompt throughput in tokens/s.', m.promptMs > 0 ? (1000 * m.promptTokens) / m.promptMs : 0);
    metric('predicted_tokens_seconds', 'gauge', 'Average generation throughput in tokens/s.', m.predictedMs > 0 ? (1000 * m.predictedTokens) / m.predictedMs : 0);
    metric('n_decode_total', 'counter', 'Total number of llama_decode() calls.', m.decodeCalls);
    metric('context_shifts_total', 'counter', 'Times a full slot dropped old tokens to go on generating (--context-shift).', m.contextShifts);
    metric('requests_total', 'counter', 'HTTP requests received.', counters.requests);
    metric('requests_failed_total', 'counter', 'HTTP requests answered with an error status.', counters.errors);
    metric('tasks_completed_total', 'counter', 'Completion tasks finished.', m.tasksDone);
    metric('requests_processing', 'gauge', 'Number of requests processing (busy slots).', m.busySlots);
    metric('requests_deferred', 'gauge', 'Number of requests waiting for a slot.', m.queued);
    return { text: lines.join('\n') + '\n', contentType: 'text/plain; version=0.0.4' };
  };
}
