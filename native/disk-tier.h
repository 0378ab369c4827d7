#pragma once
// The disk tier (--cache-disk): the prompt cache's last tier, after the slots' cells and the
// host-memory entries (--cache-ram). Its store (files, index, reader and writer threads, budget)
// is DiskCache (disk-cache.h), its file format disk-file.h; what goes there and when a prompt
// comes back from it is SlotCachePolicy's disk half (disk-tier.cpp), on the engine thread:
//  - a task arrives (Scheduler::take_inbox -> prefetch_from_disk): when a file holds kDiskMinGain
//    more of its prompt than any slot or host-memory entry, and is worth restoring for it
//    (restore_keeps_enough), its read is asked for (DiskCache::prefetch); the reader thread reads
//    and checks it, then wakes the engine (TaskQueue::wake);
//  - admission: choose_slot refuses a task whose read is pending (disk_read_pending); the other
//    tasks are admitted meanwhile;
//  - placing (place -> restore_from_disk): the state read is restored into the slot when it
//    still beats what the slot (and, with sharing, the pool) holds by kDiskMinGain tokens;
//  - saves: a finished task's cache (task_ending) is copied once the engine is idle or after
//    kDiskSaveDelayUs (save_due_to_disk) when it adds kDiskMinNew tokens (or an eighth of itself)
//    to what the files hold; host-memory entries evicted go there on the same terms
//    (connect_disk_tier); at shutdown every cache and entry that adds kJoinMinTokens
//    (persist_caches), waiting for the writer rather than dropping.
#include <cstdint>
#include <memory>

#include "disk-cache.h"
#include "engine-params.h"
#include "llama.h"
#include "task.h"

namespace addon {

// A state is written when it holds at least this many tokens (or an eighth of itself) beyond
// what the files already hold (so that a conversation growing turn by turn is written every few
// turns, not at each); at shutdown, when it holds kJoinMinTokens more. A prompt is restored from
// disk when that gives it at least kDiskMinGain more tokens than its slot or the pool would.
constexpr size_t kDiskMinNew = 256;
constexpr size_t kDiskMinGain = 64;
// A finished task's cache is copied for the disk tier once the engine is idle (a burst of
// requests pays nothing for it), or once it has waited this long while the engine stays busy (so
// that a server never idle still writes, and a crash loses at most this much).
constexpr int64_t kDiskSaveDelayUs = 2000000;

// The store for an engine's context, or null without --cache-disk (or for an embedding engine,
// which keeps no completion states). Its fingerprint: the llama.cpp build (the state format),
// the model and adapter files (cache_disk_identity), and everything that shapes the K/V a
// sequence holds or how it is laid out (KV types, flash attention, context and sequence sizes,
// the unified pool, SWA); adapter scales are per state (in each file's header). Throws
// Refusal(INVALID_ARGUMENT) when the directory cannot be created or written.
std::unique_ptr<DiskCache> disk_tier_open(const EngineParams & params, const llama_model * model, const llama_context * ctx, DiskCacheCounters & counters);

// Whether the task waits for its state's read (asked for when it arrived, not done yet).
bool disk_read_pending(const CompletionTask & task);

}  // namespace addon
