// The gauges of the Gateway API Inference Extension's model-server protocol, under this server's
// own names (llamacpp:...), which the endpoint picker maps by the pods' engine-type label
// (deploy/endpoint-picker.yaml). Waiting and running requests are llama-server's own gauges
// (llamacpp:requests_deferred, llamacpp:requests_processing, in metricsText); these add:
//   - llamacpp:kv_cache_usage_ratio: the fraction (0..1) of the context's KV cells (-c, one pool
//     for all slots) that hold slots' tokens: the tokens every slot holds, summed, over n_ctx, at
//     most 1. A prefix shared by k slots (prefix sharing) is counted k times, so the ratio is an
//     upper bound of the cells in use and a full pool reads 1.0. The host-memory and disk tiers are
//     not in it (as vLLM's gauge is its GPU pool's).
//   - llamacpp:lora_requests_info: vLLM's LoRA gauge: labels max_lora (adapters one batch can run:
//     every loaded one), running_lora_adapters and waiting_lora_adapters (comma-separated model
//     names of the adapters that requests holding a slot, and requests waiting for one, run with);
//     its value is the time of the scrape in seconds, as vLLM's is the time of its last update.
//   - llamacpp:cache_config_info: vLLM's cache_config_info for the picker's prefix scorer: labels
//     block_size (the KV-event block size, tokens) and num_gpu_blocks (n_ctx / block_size); value 1.

export interface ModelServerGauges {
  /** Tokens each slot holds in the KV pool. */
  slotTokens: readonly number[];
  nCtx: number;
  /** Names of the loaded adapters, and those in use now by slot-holding and waiting requests. */
  adapters: readonly string[];
  runningAdapters: readonly string[];
  waitingAdapters: readonly string[];
  blockSize: number;
  /** Seconds since the epoch. */
  now: number;
}

/** The KV pool's utilisation as defined above. */
export function kvCacheUsage(slotTokens: readonly number[], nCtx: number): number {
  if (nCtx <= 0) return 0;
  return Math.min(1, slotTokens.reduce((sum, n) => sum + n, 0) / nCtx);
}

/** A label value in the exposition format: backslash, quote and newline escaped. */
function labelValue(text: string): string {
  return text.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

export function modelServerMetricsText(g: ModelServerGauges): string {
  const lines = [
    '# HELP llamacpp:kv_cache_usage_ratio KV-cache utilisation: tokens held by the slots over the context\'s KV cells (1 = full).',
    '# TYPE llamacpp:kv_cache_usage_ratio gauge',
    `llamacpp:kv_cache_usage_ratio ${kvCacheUsage(g.slotTokens, g.nCtx)}`,
    '# HELP llamacpp:lora_requests_info Running stats on LoRA requests (vLLM\'s lora_requests_info).',
    '# TYPE llamacpp:lora_requests_info gauge',
    `llamacpp:lora_requests_info{max_lora="${g.adapters.length}",running_lora_adapters="${labelValue(g.runningAdapters.join(','))}",waiting_lora_adapters="${labelValue(g.waitingAdapters.join(','))}"} ${g.now}`,
    '# HELP llamacpp:cache_config_info Information of the KV cache: block size (tokens) and blocks in the context.',
    '# TYPE llamacpp:cache_config_info gauge',
    `llamacpp:cache_config_info{block_size="${g.blockSize}",num_gpu_blocks="${Math.floor(g.nCtx / g.blockSize)}"} 1`,
  ];
  return `${lines.join('\n')}\n`;
}
