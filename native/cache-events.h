#pragma once
// CacheEvents: what the slots' KV cells hold, in full blocks of tokens, reported as changes for
// the KV-cache event publisher (src/inference/kv-events, vLLM's BlockStored / BlockRemoved).
// Off until enable() (block size > 0): then, after each step, observe() compares each slot's
// cache with what it reported last and records a change when the full blocks differ: the blocks
// kept (a prefix, in tokens) and the tokens of the full blocks after them. A block holding an
// image (a LLAMA_TOKEN_NULL placeholder) and all after it are never reported: their tokens do not
// name their contents. The cost on the engine thread is a comparison of each slot's reported
// prefix with its cache (memcmp), and a copy of the new blocks' tokens only.
#include <cstdint>
#include <mutex>
#include <vector>

#include "slot.h"

namespace addon {

// One slot's change: it keeps its first `keep` reported tokens (a multiple of the block size) and
// now also holds `tokens` after them (whole blocks), computed with the adapter scales `lora`.
struct CacheChange {
    int32_t slot = 0;
    int32_t keep = 0;
    std::vector<int32_t> tokens;
    std::vector<float> lora;
};

class CacheEvents {
public:
    // Any thread: starts (block_size > 0) or stops (0) reporting; a start reports every slot anew.
    void enable(int32_t block_size);
    // Engine thread, after a step: records the slots' changes since the previous call.
    void observe(const std::vector<Slot> & slots);
    // Any thread: the changes recorded since the previous call, oldest first.
    std::vector<CacheChange> take();

private:
    std::mutex mutex_;
    int32_t block_ = 0;
    // Per slot: the tokens of the full blocks last reported, and their adapter scales.
    std::vector<std::vector<int32_t>> reported_;
    std::vector<std::vector<float>> reported_lora_;
    std::vector<CacheChange> pending_;
};

}  // namespace addon
