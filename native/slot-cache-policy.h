#pragma once
// SlotCachePolicy: what the KV cells of the slots hold, and what happens to them (engine thread).
//   - slot choice: which idle slot a task goes to (choose_slot, one rule set);
//   - placing a task: what of the slot's cache it keeps, what it gets back from the host-memory
//     prompt cache (--cache-ram), what it reuses by shifting (--cache-reuse), what it takes from
//     another slot's cells or waits for (prefix sharing, prefix-sharing.cpp);
//   - idle caches: which stay in the pool and which go to host memory (--cache-idle-slots);
//   - the disk tier (--cache-disk, DiskCache): what is written there (a finished task's cache
//     that adds enough to what the files hold, host-memory entries evicted, every cache at
//     shutdown) and when a prompt is restored from it (disk-tier.h states it; disk-tier.cpp);
//   - eviction under KV pressure; the context shift; emptying a slot.
// It works on the slots, the context's memory and the prompt cache, never on JS values, so its
// rules are tested without a server (test/native/engine-rules.cpp).
#include <cstdint>
#include <memory>
#include <vector>

#include "engine-counters.h"
#include "engine-params.h"
#include "llama.h"
#include "prompt-cache.h"
#include "slot.h"

namespace addon {

class DiskCache;
class Speculation;

// Tokens below this are not worth waiting for: a prompt that would wait for another slot to
// compute fewer shared tokens computes them itself in the same step.
constexpr size_t kJoinMinTokens = 32;
// A cache the prompt keeps almost all of: it loses at most this many tokens (or a tenth of itself).
constexpr size_t kContinuationLoss = 32;
class SlotCachePolicy {
public:
    // `sharing`: prefix sharing in effect (EngineModes); `spec`: the draft model's copies of the
    // sequences follow every change (null without speculation).
    // `disk`: the disk tier (--cache-disk), null when off; it outlives the policy.
    SlotCachePolicy(llama_context * ctx, std::vector<Slot> & slots, const EngineParams & params, bool sharing, Speculation * spec,
                    EngineCounters & counters, DiskCache * disk);

    bool sharing() const { return sharing_; }
    // The host-memory prompt cache (--cache-ram); null when off.
    PromptCache * prompt_cache() const { return prompt_cache_.get(); }
    // Whether the engine writes buffers for expected saves ahead (EngineModes::prepare_saves).
    void set_prepare_saves(bool on) { prepare_saves_ = on; }

    // The idle slot `task` goes to, or null (its id_slot is busy, no slot is idle, or its state is
    // still being read from the disk tier).
    Slot * choose_slot(const CompletionTask & task);
    // Gives `slot` the task and settles its cache for it: returns with slot.cache holding the
    // prompt tokens whose K/V the slot's sequence now holds (its own, restored, shifted into
    // place, or shared), slot.n_prompt_done set to where the prompt's decode starts, and a join
    // set up when another slot is about to compute a longer prefix.
    void place(Slot & slot, std::unique_ptr<CompletionTask> task, int64_t now_us);
    // Once every task admitted together has its slot: idle caches go to host memory (or stay,
    // judged against all the started tasks), and buffers for the expected saves are asked for.
    void after_admission(const std::vector<Slot *> & started);

    // Prefix sharing: each joined slot takes its prefix once its source holds it, or whatever the
    // source holds when its task ends (`ending`) or moves on; returns the slots that took theirs.
    std::vector<Slot *> settle_joins(const Slot * ending);
    // Gives the slot cells of its own for everything it holds, so that moving its cells moves no
    // other sequence's. False when the copy found no room: the slot's cache is then empty.
    bool unshare(Slot & slot);

    // llama-server's context shift (--context-shift) for a generating slot whose context is full:
    // keeps the first n_keep tokens (+ BOS), drops n_discard after them and moves the rest down.
    // False when the slot cannot be shifted (off, images, nothing to drop, no room to unshare).
    bool shift_context(Slot & slot);

    // KV pressure: frees idle slots' cells (copied to host memory first with --cache-idle-slots);
    // with sharing the least recently used idle slot's, else every idle slot's. False when no
    // idle slot held any.
    bool free_idle_cells();
    // Empties the slot's KV cells, and the draft model's copy of them.
    void clear_slot(Slot & slot);

    // --cache-disk, a task arrives: when a file holds kDiskMinGain more of its prompt than any slot
    // or the host-memory tier, its read is asked for (DiskCache::prefetch, on the reader thread).
    void prefetch_from_disk(CompletionTask & task) const;

    // The slot's task ends (before its slot is released): its cache is due for the disk tier
    // (save_due_to_disk), where it goes when it adds enough to what the files hold (kDiskMinNew).
    void task_ending(const Slot & slot, int64_t now_us);
    // Each turn of the engine's loop: the caches due go to the disk tier, every one when the engine
    // is `idle`, else those due for kDiskSaveDelayUs, one per turn. A slot busy again meanwhile is
    // skipped (its cache is due again at its task's end).
    void save_due_to_disk(bool idle, int64_t now_us);
    // Shutdown, the engine thread ended: every slot's cache and every host-memory entry that adds
    // kJoinMinTokens to the files goes to the disk tier (waiting for the writer rather than dropping).
    void persist_caches();

private:
    struct PrefixSource {
        Slot * slot = nullptr;
        size_t n = 0;
    };
    // prefix-sharing.cpp
    size_t adopt_shared_prefix(Slot & slot, size_t keep);
    PrefixSource longest_cached_prefix(const Slot & dst, const CompletionTask & task) const;
    PrefixSource longest_pending_prefix(const Slot & dst, const CompletionTask & task) const;
    void share_prefix(Slot & dst, Slot & src, size_t n);
    bool worth_keeping_idle(const Slot & idle) const;
    // slot-cache-policy.cpp
    void keep_idle_caches();
    bool save_to_prompt_cache(const Slot & slot);
    void swap_cached_prompt(Slot & slot, const CompletionTask & task, bool load);
    size_t reuse_cache_chunks(Slot & slot, const std::vector<llama_token> & previous, size_t keep);
    bool drop_idle_caches(const Slot * except);
    bool evict_lru_idle();
    void expect_saves(const std::vector<Slot *> & started);
    // disk-tier.cpp
    void connect_disk_tier();
    void restore_from_disk(Slot & slot, CompletionTask & task);
    bool save_to_disk(const Slot & slot, size_t min_new, bool wait);

    llama_context * ctx_;
    std::vector<Slot> & slots_;
    const EngineParams & params_;
    bool sharing_;
    bool prepare_saves_ = false;
    Speculation * spec_;
    EngineCounters & counters_;
    std::unique_ptr<PromptCache> prompt_cache_;
    DiskCache * disk_;
    struct DiskDue {
        int32_t slot;
        int64_t since_us;
    };
    std::vector<DiskDue> disk_due_;  // oldest first
};

}  // namespace addon
