// The disk tier's policy: SlotCachePolicy's disk half (disk-tier.h states the rules), and the
// store's opening for an engine.
#include "disk-tier.h"

#include <algorithm>
#include <exception>

#include "build-info.h"
#include "errors.h"
#include "log.h"
#include "slot-cache-policy.h"

namespace addon {

static std::string disk_fingerprint(const EngineParams & p, const llama_model * model, const llama_context * ctx) {
    char desc[256];
    llama_model_desc(model, desc, sizeof(desc));
    const int type_k = p.server ? static_cast<int>(p.server->cache_type_k) : static_cast<int>(GGML_TYPE_F16);
    const int type_v = p.server ? static_cast<int>(p.server->cache_type_v) : static_cast<int>(GGML_TYPE_F16);
    const bool swa_full = p.server && p.server->swa_full;
    return std::string("llama.cpp ") + llama_build_info() + "\nmodel " + desc + " " + std::to_string(llama_model_n_params(model)) + "\n" +
           p.cache_disk_identity + "\nkv " + std::to_string(type_k) + "/" + std::to_string(type_v) + " fa " + std::to_string(p.flash_attn) +
           " n_ctx " + std::to_string(llama_n_ctx(ctx)) + " n_ctx_seq " + std::to_string(llama_n_ctx_seq(ctx)) + " n_seq " +
           std::to_string(llama_n_seq_max(ctx)) + " unified " + std::to_string(p.kv_unified) + " swa_full " + std::to_string(swa_full);
}

std::unique_ptr<DiskCache> disk_tier_open(const EngineParams & params, const llama_model * model, const llama_context * ctx, DiskCacheCounters & counters) {
    if (params.cache_disk_dir.empty() || params.embeddings) return nullptr;
    DiskCacheSettings settings;
    settings.dir = params.cache_disk_dir;
    settings.budget_bytes = params.cache_disk_bytes;
    settings.fingerprint = disk_fingerprint(params, model, ctx);
    settings.write_delay_ms = static_cast<int64_t>(params.cache_disk_test_write_delay_ms);
    settings.read_delay_ms = static_cast<int64_t>(params.cache_disk_test_read_delay_ms);
    try {
        return std::make_unique<DiskCache>(std::move(settings), counters);
    } catch (const std::exception & e) {
        throw Refusal(ErrorCode::INVALID_ARGUMENT, e.what());
    }
}

bool disk_read_pending(const CompletionTask & task) {
    return task.disk_prefetch && !task.disk_prefetch->done.load(std::memory_order_acquire);
}

// Entries the host-memory tier evicts go to disk when they add enough to what it holds; their
// buffer is handed over, not copied.
void SlotCachePolicy::connect_disk_tier() {
    prompt_cache_->on_leaving([this](std::vector<llama_token> & tokens, std::vector<float> & lora, HostBuffer & buffer, size_t size) {
        if (!disk_->worth_saving(tokens, lora, std::max(kDiskMinNew, tokens.size() / 8))) return false;
        return disk_->save_buffer(std::move(tokens), std::move(lora), std::move(buffer), size);
    });
}

// --cache-disk: a prompt that a file serves kDiskMinGain tokens better than the slots' caches and
// the host-memory tier has the file read when it arrives (the read happens on the disk tier's
// reader thread; the task is admitted once it is done). Counted as the prompt can use it, without
// its last token (always computed again).
void SlotCachePolicy::prefetch_from_disk(CompletionTask & task) const {
    if (!disk_ || task.kind != TaskKind::COMPLETION || !task.cache_prompt || !task.media.empty() || task.prompt.size() < 2) return;
    const size_t usable = task.prompt.size() - 1;
    size_t have = prompt_cache_ ? std::min(prompt_cache_->longest_prefix(task.prompt, task.lora_scales), usable) : 0;
    for (const auto & s : slots_) {
        if (s.cache_lora == task.lora_scales) have = std::max(have, std::min(common_prefix_length(s.cache, task.prompt), usable));
    }
    if (have >= usable || std::min(disk_->longest_prefix(task.prompt, task.lora_scales), usable) < have + kDiskMinGain) return;
    task.disk_prefetch = disk_->prefetch(task.prompt, task.lora_scales, have + kDiskMinGain - 1);
}

// At placement: the state read for the task (prefetch_from_disk) is restored into its slot when it
// still serves the prompt kDiskMinGain tokens better than the slot's cache (after the host-memory
// tier's swap) and, with sharing, the pool's cells; the slot's own cache goes to host memory
// first, as for a host-memory restore. The engine thread never reads the disk here.
void SlotCachePolicy::restore_from_disk(Slot & slot, CompletionTask & task) {
    std::shared_ptr<DiskPrefetch> read = std::move(task.disk_prefetch);
    if (!read || !read->state || task.prompt.size() < 2) return;
    const DiskCache::State & state = *read->state;
    const size_t usable = task.prompt.size() - 1;
    const bool same_lora = slot.cache_lora == task.lora_scales;
    size_t have = same_lora ? std::min(common_prefix_length(slot.cache, task.prompt), usable) : 0;
    if (sharing_) have = std::max(have, std::min(longest_cached_prefix(slot, task).n, usable));
    if (have >= usable || std::min(common_prefix_length(state.tokens, task.prompt), usable) < have + kDiskMinGain) return;
    if (prompt_cache_ && !slot.cache.empty()) {
        save_to_prompt_cache(slot);
        prompt_cache_->trim();
    }
    clear_slot(slot);
    bool ok = llama_state_seq_set_data(ctx_, state.data, state.size, slot.id) != 0;
    if (!ok) {
        // No room in the KV pool: idle slots make room, as for a host-memory restore.
        llama_memory_seq_rm(llama_get_memory(ctx_), slot.id, -1, -1);
        drop_idle_caches(&slot);
        ok = llama_state_seq_set_data(ctx_, state.data, state.size, slot.id) != 0;
    }
    if (!ok) {
        llama_memory_seq_rm(llama_get_memory(ctx_), slot.id, -1, -1);
        return;
    }
    disk_->restored(state);
    slot.cache = state.tokens;
    slot.cache_lora = task.lora_scales;
    if (log_debug_enabled()) log_debug("slot " + std::to_string(slot.id) + ": " + std::to_string(slot.cache.size()) + " tokens restored from the disk cache\n");
}

// A cache that can be written: not one holding images (it cannot be restored without them).
bool SlotCachePolicy::save_to_disk(const Slot & slot, size_t min_new, bool wait) {
    if (slot.cache.size() < min_new || !slot.cache_media.empty()) return false;
    if (!disk_->worth_saving(slot.cache, slot.cache_lora, min_new)) return false;
    return disk_->save(ctx_, slot.id, slot.cache, slot.cache_lora, wait);
}

void SlotCachePolicy::task_ending(const Slot & slot, int64_t now) {
    if (!disk_ || !slot.task || slot.task->kind != TaskKind::COMPLETION || !slot.task->cache_prompt) return;
    disk_due_.push_back(DiskDue{slot.id, now});
}

void SlotCachePolicy::save_due_to_disk(bool idle, int64_t now) {
    while (!disk_due_.empty() && (idle || now - disk_due_.front().since_us >= kDiskSaveDelayUs)) {
        const Slot & s = slots_[static_cast<size_t>(disk_due_.front().slot)];
        disk_due_.erase(disk_due_.begin());
        if (!s.busy()) save_to_disk(s, std::max(kDiskMinNew, s.cache.size() / 8), false);
        if (!idle) break;
    }
}

void SlotCachePolicy::persist_caches() {
    if (!disk_) return;
    disk_due_.clear();  // every slot's cache is looked at below
    for (const auto & s : slots_) save_to_disk(s, kJoinMinTokens, true);
    if (!prompt_cache_) return;
    prompt_cache_->on_leaving([this](std::vector<llama_token> & tokens, std::vector<float> & lora, HostBuffer & buffer, size_t size) {
        if (!disk_->worth_saving(tokens, lora, kJoinMinTokens)) return false;
        return disk_->save_buffer(std::move(tokens), std::move(lora), std::move(buffer), size, true);
    });
    prompt_cache_->drain();
}

}  // namespace addon
