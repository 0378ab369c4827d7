// The bodies of llama-server's read-only endpoints (/v1/models, /props, /slots, /metrics), built
// from a loaded service. A sleeping server answers with the ones taken before it slept.
import type { EngineMetrics } from '../../native/binding.js';
import { buildTaskSpec } from '../service/generation.js';
import type { InferenceService } from '../service/service.js';
import type { MetricsReport, RequestCounters } from '../service/metrics-ledger.js';
import { generationSettings } from './llama-server.js';

export function modelEntry(service: InferenceService): Record<string, unknown> {
  const m = service.metadata;
  return {
    id: service.alias,
    aliases: service.settings.aliases,
    tags: service.settings.tags,
    object: 'model',
    created: service.createdAt,
    owned_by: 'llamacpp',
    meta: {
      vocab_type: m.vocabType,
      n_vocab: m.vocabSize,
      n_ctx: service.info.nCtxSlot,
      n_ctx_train: m.nCtxTrain,
      n_embd: m.nEmbd,
      n_params: m.nParams,
      size: m.sizeBytes,
      architecture: m.architecture,
    },
  };
}

export function modelsBody(service: InferenceService): unknown {
  return {
    object: 'list',
    data: [modelEntry(service)],
    // llama-server also answers in the Ollama-style shape; clients of either read their half.
    // Its placeholders (no modification time, size or digest) are kept, so that the shape matches.
    models: [{
      name: service.alias, model: service.alias, modified_at: '', size: '', digest: '', type: 'model', description: '', tags: [''],
      capabilities: service.vision ? ['completion', 'multimodal'] : ['completion'],
      parameters: '',
      details: { parent_model: '', format: 'gguf', family: '', families: [''], parameter_size: '', quantization_level: '' },
    }],
  };
}

function tokenText(service: InferenceService, token: number | null): string {
  return token === null ? '' : Buffer.from(service.model.tokenPiece(token, true)).toString('utf8');
}

export function propsBody(service: InferenceService, sleeping: boolean): unknown {
  return {
    default_generation_settings: {
      id: 0,
      id_task: -1,
      n_ctx: service.info.nCtxSlot,
      speculative: service.info.speculative,
      is_processing: false,
      params: { ...generationSettings(buildTaskSpec(service, {}, new Int32Array(0)), {}), cache_prompt: true },
    },
    total_slots: service.info.nParallel,
    model_alias: service.alias,
    model_path: service.settings.modelPath,
    modalities: { vision: service.vision?.supportsVision ?? false, video: false, audio: service.vision?.supportsAudio ?? false },
    chat_template: service.settings.chatTemplate ?? service.metadata.chatTemplate ?? '',
    bos_token: tokenText(service, service.metadata.tokens.bos),
    eos_token: tokenText(service, service.metadata.tokens.eos),
    build_info: `llama.cpp addon (${service.metadata.architecture})`,
    n_ctx: service.info.nCtx,
    is_sleeping: sleeping,
  };
}

export function slotsBody(service: InferenceService): unknown[] {
  return service.engine.native.slots().map((s) => ({
    id: s.id,
    id_task: s.taskId ?? -1,
    n_ctx: s.nCtx,
    is_processing: s.state !== 'idle',
    state: s.state,
    n_prompt_tokens: s.nPrompt,
    n_decoded: s.nDecoded,
    n_cached_tokens: s.nCache,
  }));
}

/** Prometheus text of the engine's counters and the server's request counters. */
export function metricsText(report: MetricsReport, counters: RequestCounters): string {
  const m = report.totals;
  const lines: string[] = [];
  const metric = (name: string, type: 'counter' | 'gauge', help: string, value: number): void => {
    lines.push(`# HELP llamacpp:${name} ${help}`, `# TYPE llamacpp:${name} ${type}`, `llamacpp:${name} ${Number.isFinite(value) ? value : 0}`);
  };
  // llama-server's names, help and order; then this server's own.
  metric('prompt_tokens_total', 'counter', 'Number of prompt tokens processed, excluding cached tokens', m.promptTokens);
  metric('prompt_tokens_cached_total', 'counter', 'Number of prompt tokens reused from the cache', m.cachedTokens);
  metric('prompt_seconds_total', 'counter', 'Total time spent processing prompts', m.promptMs / 1000);
  metric('tokens_predicted_total', 'counter', 'Number of generation tokens processed', m.predictedTokens);
  metric('tokens_predicted_seconds_total', 'counter', 'Total time spent generating tokens', m.predictedMs / 1000);
  metric('n_decode_total', 'counter', 'Total number of llama_decode() calls, excluding speculative decoding and multimodal decoding', m.decodeCalls);
  metric('n_tokens_max', 'counter', 'Largest observed sequence length (prompt + generation)', m.nTokensMax);
  metric('spec_decode_num_draft_tokens_total', 'counter', 'Speculative: Total draft tokens generated', m.draftTokens ?? 0);
  metric('spec_decode_num_accepted_tokens_total', 'counter', 'Speculative: Total draft tokens accepted by the target model', m.draftAccepted ?? 0);
  metric('spec_decode_num_drafts_total', 'counter', 'Speculative: Total speculative decoding verification steps', m.draftSteps ?? 0);
  metric('prompt_tokens_seconds', 'gauge', 'Average prompt throughput in tokens/s', report.promptRate);
  metric('predicted_tokens_seconds', 'gauge', 'Average generation throughput in tokens/s', report.predictedRate);
  metric('requests_processing', 'gauge', 'Number of requests processing', m.busySlots);
  metric('requests_deferred', 'gauge', 'Number of requests deferred', m.queued);
  metric('n_busy_slots_per_decode', 'gauge', 'Average number of busy slots per llama_decode() call', m.decodeCalls > 0 ? m.busySlotDecodes / m.decodeCalls : 0);
  // Prefix sharing (this server's own): of the cached tokens, those taken from another slot's cells.
  metric('prompt_tokens_shared_total', 'counter', 'Number of prompt tokens taken from another slot\'s KV cells (prefix sharing), included in prompt_tokens_cached_total', m.sharedTokens);
  metric('prompt_shared_joins_total', 'counter', 'Number of prompts that waited for another slot to compute their shared prefix', m.sharedJoins);
  if (m.acceptedPerPos && (m.draftSteps ?? 0) > 0) {
    // llama-server's labeled counter: one series per draft position.
    lines.push('# HELP llamacpp:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft position', '# TYPE llamacpp:spec_decode_num_accepted_tokens_per_pos_total counter');
    m.acceptedPerPos.forEach((n, i) => lines.push(`llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="${i}"} ${n}`));
  }
  metric('context_shifts_total', 'counter', 'Times a full slot dropped old tokens to go on generating (--context-shift).', m.contextShifts);
  metric('prompt_cache_saves_total', 'counter', 'Slot caches copied to the host-memory prompt cache (--cache-ram).', m.promptCacheSaves);
  metric('prompt_cache_buffer_reuses_total', 'counter', 'Of those, copies into a buffer requested ahead for the task (written on a thread of its own) or kept from a restored or evicted entry.', m.promptCacheReuses);
  metric('prompt_cache_bytes', 'gauge', 'Host memory held by the prompt cache: saved prompts and buffers kept for reuse.', m.promptCacheBytes);
  // The disk tier (--cache-disk; zero when off).
  metric('prompt_cache_disk_hits_total', 'counter', 'Prompts restored from the disk tier (--cache-disk).', m.diskHits);
  metric('prompt_cache_disk_misses_total', 'counter', 'Prompts the disk tier was asked for and had no state worth restoring (a file failing its checks counts here).', m.diskMisses);
  metric('prompt_cache_disk_bytes_written_total', 'counter', 'Bytes of state files written by the disk tier.', m.diskBytesWritten);
  metric('prompt_cache_disk_files_written_total', 'counter', 'State files written by the disk tier.', m.diskFilesWritten);
  metric('prompt_cache_disk_bytes_read_total', 'counter', 'Bytes of state files read by the disk tier for restores.', m.diskBytesRead);
  metric('prompt_cache_disk_evictions_total', 'counter', 'State files deleted for the budget (least recently used) or superseded by a longer state.', m.diskEvictions);
  metric('prompt_cache_disk_rejected_total', 'counter', 'State files deleted unread: temporary, another model or layout, truncated, or failing their checksum.', m.diskRejected);
  metric('prompt_cache_disk_dropped_total', 'counter', 'States not written because too many writes were waiting.', m.diskDropped);
  metric('prompt_cache_disk_adopted_total', 'counter', 'State files found valid at start-up.', m.diskAdopted);
  metric('prompt_cache_disk_pending', 'gauge', 'Disk tier writes queued or in progress.', m.diskPending);
  metric('prompt_cache_disk_bytes', 'gauge', 'Bytes of this model\'s state files in the disk tier.', m.diskBytes);
  metric('fair_share_tokens_elsewhere_total', 'counter', 'Router mode: tokens the tenants used on the router\'s other model processes, charged to their fair share here.', m.tokensElsewhere);
  metric('requests_total', 'counter', 'HTTP requests that use the model (read-only endpoints are not counted).', counters.requests);
  metric('requests_failed_total', 'counter', 'Of those, requests answered with an error status.', counters.errors);
  metric('tasks_completed_total', 'counter', 'Completion tasks finished.', m.tasksDone);
  return lines.join('\n') + '\n';
}
