#pragma once
// CacheEvents: what the slots' KV cells, the host-memory prompt cache (--cache-ram) and the disk
// tier (--cache-disk) hold, in full blocks of tokens, reported as changes for the KV-cache event
// publisher (src/inference/kv-events, vLLM's BlockStored / BlockRemoved).
// Off until enable() (block size > 0): then, after each step, observe() compares each slot's
// cache with what it reported last and records a change when the full blocks differ: the blocks
// kept (a prefix, in tokens) and the tokens of the full blocks after them. A block holding an
// image (a LLAMA_TOKEN_NULL placeholder) and all after it are never reported: their tokens do not
// name their contents. The cost on the engine thread is a comparison of each slot's reported
// prefix with its cache (memcmp), and a copy of the new blocks' tokens only.
// The two other tiers hold whole prompt states (entries): PromptCache (engine thread) and
// DiskCache (its writer thread, and start-up's adoption) call tier_stored when an entry comes in
// and tier_removed when it goes (evicted, replaced by a longer one, restored out of the host
// cache, rejected). Once tracking (track_tiers(), which an engine started for KV-cache events
// calls before its disk tier adopts its files, or the first enable()), their entries are kept
// here (tokens before any image, adapter scales) so that enable() reports what each tier holds
// (a disk tier's files adopted at start-up, before the publisher asked for anything), then each
// change as it comes. Not tracking (events off, the default), nothing is kept.
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "slot.h"

namespace addon {

// Where a change happened: a slot's cells, an entry of the host-memory cache, a disk tier's file.
enum class CacheTier : int32_t { slots = 0, host = 1, disk = 2 };

// One holder's change: it keeps its first `keep` reported tokens (a multiple of the block size) and
// now also holds `tokens` after them (whole blocks), computed with the adapter scales `lora`. A
// holder is a slot (`slot`: its id) or a tier's entry (`slot`: the entry's id, unique in its
// tier); an entry is stored once (keep 0) and removed once (keep 0, no tokens).
struct CacheChange {
    CacheTier tier = CacheTier::slots;
    int64_t slot = 0;
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
    // Any thread: from now on the tiers' entries are kept (see above).
    void track_tiers();
    // Any thread: an entry `id` of `tier` now holds the state of `tokens` (under adapter scales
    // `lora`), or no longer does.
    void tier_stored(CacheTier tier, uint64_t id, const std::vector<int32_t> & tokens, const std::vector<float> & lora);
    void tier_removed(CacheTier tier, uint64_t id);

private:
    std::mutex mutex_;
    int32_t block_ = 0;
    bool tracking_ = false;
    // Per slot: the tokens of the full blocks last reported, and their adapter scales.
    std::vector<std::vector<int32_t>> reported_;
    std::vector<std::vector<float>> reported_lora_;
    std::vector<CacheChange> pending_;
    // The tiers' entries: (tier, id) -> the tokens before any image, and the adapter scales.
    struct Entry {
        std::vector<int32_t> tokens;
        std::vector<float> lora;
    };
    std::map<std::pair<CacheTier, uint64_t>, Entry> entries_;
    // With mutex_ held and reporting on: the change storing an entry, if it has a full block.
    void push_stored(CacheTier tier, uint64_t id, const Entry & e);
};

}  // namespace addon
