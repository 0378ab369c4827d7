#pragma once
// EngineParams: an engine's settings, read once from the JS settings object (engine-binding's
// read_engine_params, a flat field mapping) and handed to the engine core unchanged. Defaults,
// ranges and the rules that depend on the build (a GPU device or not) and on the model live here
// and nowhere else: engine_params_defaults, engine_params_check, engine_modes_decide.
// No N-API here: the engine core is built without it.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "common.h"
#include "llama.h"

namespace addon {

struct EngineParams {
    uint32_t n_ctx = 0;
    int32_t n_parallel = 4;
    uint32_t n_batch = 2048;
    uint32_t n_ubatch = 512;
    int32_t n_threads = 0;        // 0: llama.cpp's count of math cores
    int32_t n_threads_batch = 0;  // 0: same as n_threads
    bool kv_unified = true;
    int32_t flash_attn = -1;      // -1 auto, 0 off, 1 on
    bool embeddings = false;      // embedding mode: tasks are embedded, never generated
    int32_t pooling = -1;         // llama_pooling_type; -1: the model's own
    bool ctx_shift = false;       // a generating slot whose context is full drops old tokens instead of stopping
    int32_t prompt_cache_mib = 0; // --cache-ram: host-memory prompt cache size (-1 no limit, 0 off)
    bool cache_events = false;    // --kv-events: CacheEvents tracks the tiers' entries from the start (cache-events.h)
    bool cache_idle_slots = true; // --cache-idle-slots: idle slots go to the prompt cache (see SlotCachePolicy::keep_idle_caches)
    // --cache-disk: the prompt cache's disk tier (DiskCache), off when empty; its budget in bytes
    // (0: no limit); and what identifies the model's files (path, size, time, a hash of their
    // first and last bytes, and the adapters'), which the engine completes into the fingerprint.
    std::string cache_disk_dir;
    uint64_t cache_disk_bytes = 0;
    std::string cache_disk_identity;
    // Tests only (a slow disk; DiskCacheSettings): each disk-tier write waits this long (ms) half
    // way through its state, each read this long before it starts. 0: no wait.
    double cache_disk_test_write_delay_ms = 0;
    double cache_disk_test_read_delay_ms = 0;
    bool special = false;         // -sp: generated special tokens keep their text
    int32_t n_ctx_slot_max = 0;   // --kv-unified-per-slot: cap on a slot's context (0: none)
    bool backend_sampling = false; // -bs: the context takes per-sequence sampler chains (tasks opt in)
    // Chunked prefill: tokens one step decodes while any slot is generating (its tokens first,
    // prompt chunks fill the rest, at least half the budget), so that a long prompt delays the
    // generating slots by one chunk per step instead of a whole n_batch. 0: no budget (prompts
    // fill n_batch, as llama-server). With nothing generating, prompts always fill n_batch.
    // Default 512 without a GPU device, 0 (the time target alone) with one (docs/options.md).
    int32_t prefill_budget = 512;
    // Chunked prefill's time target (ms): while any slot is generating, a step carries no more
    // prompt tokens than StepCost says fit in this long beside the generating tokens (at least
    // a quarter of n_ubatch, so prompts never starve). 0: no time target. Applies together with
    // prefill_budget: the smaller share wins.
    double prefill_budget_ms = 1000;
    // Adaptive LIFO (ms): free slots go to waiting tasks oldest first, but once the oldest has
    // waited this long (overload: requests arrive faster than they are served), newest first, so
    // that most clients are answered promptly and the oldest wait longer. 0: always oldest first.
    double overload_lifo_ms = 1000;
    // Fair share (admission.h): free slots go to tenants by weighted fair queuing on tokens, the
    // adaptive LIFO applying within each tenant's queue. false: every task counts as one tenant's
    // (one queue: class, priority, then arrival order with the adaptive LIFO). With one tenant both
    // orders are the same.
    bool fair_share = true;
    // Burst wait (ms): an idle engine that receives tasks waits for the rest of their burst while
    // it keeps coming, until none came for this long (at most five times this long in all), so
    // that requests sent together share their first batch; requests the server is still
    // preparing are waited for up to 25 times this long. 0: starts at once. Default 4 without a
    // GPU device, 0 with one.
    double burst_wait_ms = 4;
    // llama-server's -sps: a task without id_slot goes to the idle slot whose cache holds the
    // largest fraction of its prompt when that fraction exceeds this, else to the least recently
    // used idle slot. 0: always the least recently used. Default: the server command line's.
    double slot_prompt_similarity = 0.1;
    // Prefix sharing across slots (prefix-sharing.cpp). Unset: on exactly when the pool is
    // unified; never where the model's memory cannot share cells (engine_modes_decide).
    std::optional<bool> prefix_sharing;
    // The step modes (engine_modes_decide says what each does and when it applies). Unset: the
    // engine decides; false turns one off (for comparisons); true asks for it where it applies.
    std::optional<bool> split_steps;
    std::optional<bool> early_outputs;
    std::optional<bool> prepare_saves;
    // llama-server's parsed command line, when given: its context flags (KV cache types, SWA,
    // RoPE/YaRN, offload) apply as there; the fields above still decide what they name.
    std::shared_ptr<common_params> server;
};

// Whether the build has a GPU or integrated-GPU backend device (the CUDA or Metal build on a
// machine with such a device): the defaults measured on CPUs only do not apply there.
bool engine_gpu_build();

// The defaults before any field is read: those that depend on the build (`gpu`) and, when given,
// on llama-server's command line (`server`: -sps).
EngineParams engine_params_defaults(bool gpu, std::shared_ptr<common_params> server);

// `value` of the JS settings field `key` (prefillBudget, prefillBudgetMs, burstWaitMs,
// overloadLifoMs, slotPromptSimilarity, cacheDiskTestWriteDelayMs, cacheDiskTestReadDelayMs), checked against its range; NaN (not a number) is out of
// every range. Throws Refusal(INVALID_ARGUMENT) with the field's message.
double engine_param_in_range(const char * key, double value);

// Settles the derived fields once all are read: at least one slot, n_batch at least n_parallel,
// n_ubatch at most n_batch, thread counts (0: llama.cpp's count of math cores).
void engine_params_settle(EngineParams & p);

// What the engine does, decided once its context exists (engine.h's Engine reports it).
struct EngineModes {
    // Prefix sharing: cells hold one position's K/V for good (not recurrent or hybrid memory,
    // no sliding window), and embeddings reuse nothing.
    bool sharing = false;
    // A step holding generating tokens, prompt tokens and kTiledAttentionRows rows or more decodes
    // them by two llama_decode calls, the generating rows first. On the CPU backend such a batch
    // takes ggml's tiled flash attention, which skips a tile of KV cells only when every query row
    // of its 64-row tile is masked there: one tile holding the generating rows of N sequences
    // beside prompt rows must read every cell those sequences hold, for all 64 rows, in every
    // head; in a pool full of other conversations that tile took about a third of a chunked
    // prompt step (docs/benchmarks.md, "split steps"). Decoded alone, the few generating rows take
    // the untiled kernel. Costs one more pass over the weights per such step; on a CPU build
    // only (the CUDA kernels were not measured), not with a draft model, not for embeddings.
    bool split_steps = false;
    // A step's rows are decoded by one llama_decode call per stretch of whole ubatches that ends
    // with an output, whose outputs are sampled and sent before the next call (Scheduler::
    // decode_rows). On a CPU build (ubatches computed in turn), with a unified pool (whose
    // ubatches are n_ubatch rows in order, as the calls take them: the same work, the same
    // results), a plain KV cache (not recurrent or hybrid), not with a draft model, not for
    // embeddings.
    bool early_outputs = false;
    // Buffers for the prompt cache's expected saves written ahead on the buffer thread
    // (HostBuffers): with a GPU device, or more hardware threads than decoding uses (on a machine
    // whose cores all decode, that thread takes them from the decode: docs/benchmarks.md).
    bool prepare_saves = false;
};

// GGML_FA_TILE_Q in ggml-cpu/common.h: the rows of one tile of the CPU's tiled flash attention.
constexpr int32_t kTiledAttentionRows = 64;

EngineModes engine_modes_decide(const EngineParams & p, const llama_model * model, const llama_context * ctx, bool speculative);

}  // namespace addon
