#pragma once
// What an engine publishes for /metrics and /slots: counters the engine thread adds to (atomics,
// read from any thread) and one summary per slot (published under TaskQueue's summary lock).
#include <atomic>
#include <cstdint>

#include "slot.h"

namespace addon {

struct SlotSummary {
    int32_t id = 0;
    SlotState state = SlotState::IDLE;
    int64_t task_id = -1;
    int32_t n_prompt = 0;
    int32_t n_decoded = 0;
    int32_t n_cache = 0;
};

struct EngineCounters {
    std::atomic<uint64_t> prompt_tokens{0};
    std::atomic<uint64_t> prompt_us{0};
    std::atomic<uint64_t> predicted_tokens{0};
    std::atomic<uint64_t> predicted_us{0};
    std::atomic<uint64_t> decode_calls{0};
    std::atomic<uint64_t> split_steps{0};        // steps decoded in two calls, generating rows first (EngineModes::split_steps)
    std::atomic<uint64_t> early_output_calls{0}; // calls ended early so that their outputs went out before the rest (EngineModes::early_outputs)
    std::atomic<uint64_t> cached_tokens{0};      // prompt tokens reused from a slot's cache
    std::atomic<uint64_t> shared_tokens{0};      // of those, tokens taken from another slot's cells (prefix sharing)
    std::atomic<uint64_t> shared_joins{0};       // prompts that waited for another slot to compute their prefix
    std::atomic<uint64_t> busy_slot_decodes{0};  // busy slots summed over decode calls
    std::atomic<uint64_t> n_tokens_max{0};       // longest sequence seen in a slot (prompt + generation)
    std::atomic<uint64_t> context_shifts{0};
    std::atomic<uint64_t> prompt_cache_saves{0}; // slot caches copied to the host-memory prompt cache
    std::atomic<uint64_t> tasks_done{0};
    std::atomic<uint64_t> tokens_elsewhere{0};   // router mode: tenants' tokens on other model processes, charged to fair share
    std::atomic<int32_t> queued{0};
    std::atomic<int32_t> busy_slots{0};
};

}  // namespace addon
