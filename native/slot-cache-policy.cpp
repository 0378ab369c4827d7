// Slot choice, placing a task's prompt in its slot's cache, idle caches, eviction. Prefix sharing
// (the cells one slot takes from another) is in prefix-sharing.cpp, the disk tier's half in disk-tier.cpp.
#include "slot-cache-policy.h"

#include <algorithm>

#include "disk-tier.h"
#include "log.h"
#include "speculation.h"

namespace addon {

static int64_t now_us() { return ggml_time_us(); }

SlotCachePolicy::SlotCachePolicy(llama_context * ctx, std::vector<Slot> & slots, const EngineParams & params, bool sharing, Speculation * spec,
                                 EngineCounters & counters, DiskCache * disk)
    : ctx_(ctx), slots_(slots), params_(params), sharing_(sharing), spec_(spec), counters_(counters), disk_(disk) {
    // As llama-server: the cache holds at least a context's worth of tokens.
    if (params_.prompt_cache_mib != 0) prompt_cache_ = std::make_unique<PromptCache>(params_.prompt_cache_mib, llama_n_ctx(ctx_), llama_n_ctx(ctx_));
    if (prompt_cache_ && disk_) connect_disk_tier();
    // llama-server's debug line (its test suite looks for the tag) when idle slots go to the cache.
    if (prompt_cache_ && params_.cache_idle_slots) log_debug("srv    load_model: __TEST_TAG_CACHE_IDLE_SLOTS_ENABLED__\n");
}

// A task with id_slot gets that slot when it is idle. Otherwise one rule set, by whether prefix
// sharing is in effect:
// - without it, as llama-server's get_available_slot: the idle slot whose cache holds the largest
//   fraction of the prompt, when that fraction exceeds slot_prompt_similarity (-sps), else the
//   least recently used idle slot. Whether the task reuses the cache (cache_prompt) does not
//   change the choice: a prompt goes where it is cached, replacing that copy rather than another
//   slot's cache.
// - with it, where a prompt starts from matters little (any slot can take a prefix from any other
//   at no cost); what the choice destroys matters: the idle slot of the conversation the prompt
//   continues (one whose cache the prompt keeps but for its last answer's tail, the longest such),
//   else an empty slot (it loses nothing), else the least recently used idle slot, as
//   llama-server (every cell in the pool widens the span each step's attention covers, so an
//   unrelated idle cache is not kept at the expense of the others).
// A cache made under other LoRA scales holds nothing of the prompt (it cannot be reused).
Slot * SlotCachePolicy::choose_slot(const CompletionTask & task) {
    // A task whose state the disk tier is reading waits for the read (disk-tier.h).
    if (disk_read_pending(task)) return nullptr;
    if (task.id_slot >= 0) {
        Slot & s = slots_[task.id_slot];
        return s.busy() ? nullptr : &s;
    }
    Slot * best = nullptr;   // by the rule in effect
    double best_score = 0;
    Slot * empty = nullptr;  // with sharing: the least recently used empty slot
    Slot * lru = nullptr;
    for (auto & s : slots_) {
        if (s.busy()) continue;
        if (!lru || s.t_last_used_us < lru->t_last_used_us) lru = &s;
        const bool same_lora = s.cache_lora == task.lora_scales;
        if (sharing_) {
            if (s.cache.empty()) {
                if (!empty || s.t_last_used_us < empty->t_last_used_us) empty = &s;
                continue;
            }
            const size_t kept = same_lora ? std::min(s.common_prefix(task), s.cache.size()) : 0;
            const size_t loss = s.cache.size() - kept;
            if (kept > 0 && loss <= std::max(kContinuationLoss, s.cache.size() / 10) && static_cast<double>(kept) > best_score) {
                best = &s;
                best_score = static_cast<double>(kept);
            }
        } else if (params_.slot_prompt_similarity > 0 && !task.prompt.empty() && !s.cache.empty() && same_lora) {
            const double similarity = static_cast<double>(s.common_prefix(task)) / static_cast<double>(task.prompt.size());
            if (similarity > best_score && similarity > params_.slot_prompt_similarity) {
                best = &s;
                best_score = similarity;
            }
        }
    }
    return best ? best : empty ? empty : lru;
}

void SlotCachePolicy::place(Slot & slot, std::unique_ptr<CompletionTask> task, int64_t now) {
    llama_memory_t mem = llama_get_memory(ctx_);
    // As llama-server's get_available_slot, at every completion task's start with a prompt cache:
    // the slot's outgoing cache goes to host memory (one kept idle in the pool has no copy there
    // yet), and a task that uses the cache gets back the cached prompt that serves it best. With
    // sharing only when host memory holds a longer prefix than the pool's cells: a prefix in the
    // pool costs nothing, one from host memory a copy. Both are counted as the prompt can use them,
    // without its last token (always computed again): counted whole, an entry holding the whole
    // prompt beat the pool's cells holding all of it the prompt can use, and a prompt sent again
    // was restored into cells above the pool's, whose new tokens then went below them once the
    // idle slots' cells were freed; its cells out of position order, attention summed them in
    // another order and the greedy answer changed, where llama-server reuses its slot (one answer
    // per request: docs/llama-server-differences.md).
    if (prompt_cache_ && task->kind == TaskKind::COMPLETION) {
        log_debug("srv  get_availabl: updating prompt cache\n");
        const bool use_ram = task->cache_prompt && task->media.empty();
        const size_t usable = task->prompt.empty() ? 0 : task->prompt.size() - 1;
        const size_t in_ram = std::min(prompt_cache_->longest_prefix(task->prompt, task->lora_scales), usable);
        const bool load = use_ram && (!sharing_ || in_ram > longest_cached_prefix(slot, *task).n);
        swap_cached_prompt(slot, *task, load);
    }
    if (task->disk_prefetch) restore_from_disk(slot, *task);
    // K/V computed under other adapter scales cannot be reused.
    if (slot.cache_lora != task->lora_scales) {
        slot.cache.clear();
        slot.cache_lora = task->lora_scales;
    }
    std::vector<llama_token> previous;
    if (task->n_cache_reuse > 0 && task->cache_prompt && task->media.empty() && slot.cache_media.empty() && llama_memory_can_shift(mem)) {
        // Moving cells that other sequences share would move them for those too.
        unshare(slot);
        previous = slot.cache;
    }
    size_t keep = slot.assign(std::move(task), now);
    if (!previous.empty()) keep = reuse_cache_chunks(slot, previous, keep);
    if (!llama_memory_seq_rm(mem, slot.id, static_cast<llama_pos>(keep), -1)) {
        // Memory that cannot drop a suffix (recurrent models): start the sequence afresh.
        llama_memory_seq_rm(mem, slot.id, -1, -1);
        slot.cache.clear();
        slot.n_prompt_done = 0;
        slot.n_cached = 0;
    }
    adopt_shared_prefix(slot, slot.cache.size());
}

void SlotCachePolicy::after_admission(const std::vector<Slot *> & started) {
    if (started.empty() || !prompt_cache_) return;
    if (params_.cache_idle_slots) keep_idle_caches();
    if (prepare_saves_) expect_saves(started);
}

// --cache-idle-slots with --cache-ram, as llama-server when a task starts (here once the tasks
// admitted together have started): every idle slot's cache goes to the prompt cache (a later
// prompt that shares it gets it back from there), and with a unified KV pool its cells are
// freed, so that the pool's used span, which every step's attention covers, holds only what
// running tasks need. A slot holding images keeps its cache (it cannot be saved without them).
// With prefix sharing an idle cache that is mostly a prefix of a running task's prompt stays
// (worth_keeping_idle): it costs the span little, and the conversation it holds comes back at no
// cost. Such a cache is copied to host memory only when its cells go: KV pressure or a task that
// takes its slot. The copy is not free (docs/benchmarks.md, "idle caches on a GPU").
void SlotCachePolicy::keep_idle_caches() {
    for (auto & s : slots_) {
        if (s.busy() || s.cache.empty() || !s.cache_media.empty()) continue;
        if (params_.kv_unified && sharing_ && worth_keeping_idle(s)) continue;
        if (save_to_prompt_cache(s)) {
            log_debug("slot " + std::to_string(s.id) + ": __TEST_TAG_CACHE_IDLE_SLOT__\n");
            prompt_cache_->trim();
        }
        if (params_.kv_unified) clear_slot(s);
    }
}

// The caches of the tasks just started go to the prompt cache when their slots are taken or, with
// --cache-idle-slots, at the next admission once they end: buffers for them are prepared now,
// while the tasks run (HostBuffers), as many as this admission (and KV pressure since the last)
// saved: where conversations come back to their slots nothing is saved and nothing written
// ahead. The length expected is the prompt and the tokens asked for (a task without a limit: the
// prompt and a quarter of it, at least 256 tokens).
void SlotCachePolicy::expect_saves(const std::vector<Slot *> & started) {
    std::vector<size_t> lengths;
    for (const Slot * s : started) {
        if (!s->busy()) continue;
        const CompletionTask & t = *s->task;
        if (t.kind != TaskKind::COMPLETION || !t.cache_prompt || !t.media.empty()) continue;
        const size_t n_prompt = t.prompt.size();
        const size_t n_gen = t.n_predict > 0 ? static_cast<size_t>(t.n_predict) : std::max<size_t>(256, n_prompt / 4);
        lengths.push_back(std::min(n_prompt + n_gen, static_cast<size_t>(llama_n_ctx(ctx_))));
    }
    prompt_cache_->expect(lengths);
}

// Copies an idle slot's cache to the prompt cache (not a slot holding images, whose cache needs
// them); true when a copy was made. The caller trims the cache to its limits.
bool SlotCachePolicy::save_to_prompt_cache(const Slot & slot) {
    const int64_t t0 = now_us();
    if (!slot.cache_media.empty() || !prompt_cache_->save(ctx_, slot.id, slot.cache, slot.cache_lora)) return false;
    counters_.prompt_cache_saves++;
    if (log_debug_enabled()) log_debug("slot " + std::to_string(slot.id) + ": " + std::to_string(slot.cache.size()) + " tokens to the prompt cache in " +
              std::to_string((now_us() - t0) / 1000.0) + " ms (" + std::to_string(prompt_cache_->n_entries()) + " entries, " +
              std::to_string(prompt_cache_->held_bytes() >> 20) + " MiB held)\n");
    return true;
}

// --cache-ram: before a slot loses most of its cache to `task` (or when it is empty), its prompt
// goes to the prompt cache and (with `load`) the cached prompt that serves `task` best, if any
// beats what the slot holds, comes back into it.
void SlotCachePolicy::swap_cached_prompt(Slot & slot, const CompletionTask & task, bool load) {
    const bool same_lora = slot.cache_lora == task.lora_scales;
    const size_t lcp = same_lora ? common_prefix_length(slot.cache, task.prompt) : 0;
    if (!slot.cache.empty() && 2 * lcp >= slot.cache.size()) return;
    save_to_prompt_cache(slot);
    if (!load) {
        prompt_cache_->trim();
        return;
    }
    bool failed = false;
    const std::vector<llama_token> current = same_lora ? slot.cache : std::vector<llama_token>{};
    auto restored = prompt_cache_->load(ctx_, slot.id, task.prompt, task.lora_scales, current, failed);
    if (failed) {
        // No room for it in the KV pool: idle slots make room (into the prompt cache themselves
        // with --cache-idle-slots), as they would for the prompt's own decode.
        llama_memory_seq_rm(llama_get_memory(ctx_), slot.id, -1, -1);
        slot.cache.clear();
        drop_idle_caches(&slot);
        restored = prompt_cache_->load(ctx_, slot.id, task.prompt, task.lora_scales, {}, failed);
    }
    if (restored) {
        slot.cache = std::move(*restored);
        slot.cache_lora = task.lora_scales;
        slot.forget_media_after(0);
    } else if (failed) {
        llama_memory_seq_rm(llama_get_memory(ctx_), slot.id, -1, -1);
        slot.cache.clear();
        slot.forget_media_after(0);
    }
    prompt_cache_->trim();
}

// --cache-reuse (llama-server's algorithm): past the common prefix `keep`, every run of at least
// n_cache_reuse tokens of the `previous` cache that matches the prompt at the current position is
// shifted there (its K/V moved, not recomputed); tokens that match nothing are skipped. Returns
// the new number of cached prompt tokens; the caller drops the rest of the sequence. As after the
// prefix, the prompt's last token is always evaluated again.
size_t SlotCachePolicy::reuse_cache_chunks(Slot & slot, const std::vector<llama_token> & previous, size_t keep) {
    llama_memory_t mem = llama_get_memory(ctx_);
    const auto & prompt = slot.task->prompt;
    const size_t min_chunk = static_cast<size_t>(slot.task->n_cache_reuse);
    size_t head_c = keep;  // in the previous cache
    size_t head_p = keep;  // in the prompt; head_p <= head_c throughout
    while (head_c < previous.size() && head_p < prompt.size()) {
        size_t n_match = 0;
        while (head_c + n_match < previous.size() && head_p + n_match < prompt.size() && previous[head_c + n_match] == prompt[head_p + n_match]) {
            n_match++;
        }
        if (n_match < min_chunk) {
            head_c++;
            continue;
        }
        const auto shift = static_cast<llama_pos>(head_p) - static_cast<llama_pos>(head_c);
        slot.exact_end = std::min(slot.exact_end, head_p);  // moved K/V is not what a fresh computation gives
        llama_memory_seq_rm(mem, slot.id, static_cast<llama_pos>(head_p), static_cast<llama_pos>(head_c));
        llama_memory_seq_add(mem, slot.id, static_cast<llama_pos>(head_c), static_cast<llama_pos>(head_c + n_match), shift);
        slot.cache.insert(slot.cache.end(), prompt.begin() + head_p, prompt.begin() + head_p + n_match);
        head_c += n_match;
        head_p += n_match;
    }
    size_t reused = head_p;
    if (reused == prompt.size() && reused > 0) {
        reused--;
        slot.cache.pop_back();
    }
    slot.n_prompt_done = reused;
    slot.n_cached = static_cast<int32_t>(reused);
    return reused;
}

bool SlotCachePolicy::free_idle_cells() { return sharing_ ? evict_lru_idle() : drop_idle_caches(nullptr); }

// Empties the KV cache of every idle slot but `except`, saving each to the prompt cache first
// (--cache-idle-slots). True when anything was freed.
bool SlotCachePolicy::drop_idle_caches(const Slot * except) {
    bool freed = false;
    for (auto & s : slots_) {
        if (&s == except || s.busy() || s.cache.empty()) continue;
        if (prompt_cache_ && params_.cache_idle_slots && save_to_prompt_cache(s)) prompt_cache_->trim();
        clear_slot(s);
        freed = true;
    }
    return freed;
}

// KV pressure with prefix sharing: the least recently used idle slot's cells go (to the prompt
// cache first with --cache-ram and --cache-idle-slots); cells that running slots share stay with
// them. True when a slot was emptied.
bool SlotCachePolicy::evict_lru_idle() {
    Slot * lru = nullptr;
    for (auto & s : slots_) {
        if (s.busy() || s.cache.empty()) continue;
        if (!lru || s.t_last_used_us < lru->t_last_used_us) lru = &s;
    }
    if (!lru) return false;
    if (prompt_cache_ && params_.cache_idle_slots && save_to_prompt_cache(*lru)) prompt_cache_->trim();
    clear_slot(*lru);
    return true;
}

// llama-server's context shift: keep the first n_keep tokens (+ BOS), drop n_discard after them
// (default half of the rest) and move the remainder down. Not for prompts with images (their
// positions are not one per cache entry). False when the slot cannot be shifted.
bool SlotCachePolicy::shift_context(Slot & s) {
    const CompletionTask & task = *s.task;
    if (!params_.ctx_shift || !task.media.empty()) return false;
    const int32_t n_past = static_cast<int32_t>(s.cache.size());
    int32_t n_keep = task.n_keep < 0 ? static_cast<int32_t>(task.prompt.size()) : task.n_keep;
    if (llama_vocab_get_add_bos(llama_model_get_vocab(llama_get_model(ctx_)))) n_keep += 1;
    n_keep = std::max(0, std::min(s.n_ctx - 4, n_keep));
    const int32_t n_left = n_past - n_keep;
    const int32_t n_discard = std::clamp(task.n_discard > 0 ? task.n_discard : n_left / 2, 0, std::max(0, n_left - 1));
    if (n_discard == 0) return false;
    llama_memory_t mem = llama_get_memory(ctx_);
    // Cells past the discarded run move: they must be this slot's alone.
    if (s.shared_len > static_cast<size_t>(n_keep + n_discard) && !unshare(s)) return false;
    if (!llama_memory_seq_rm(mem, s.id, n_keep, n_keep + n_discard)) return false;
    llama_memory_seq_add(mem, s.id, n_keep + n_discard, n_past, -n_discard);
    s.shared_len = std::min(s.shared_len, static_cast<size_t>(n_keep));
    s.exact_end = std::min(s.exact_end, static_cast<size_t>(n_keep));
    if (spec_) spec_->shift(s.id, n_keep, n_discard, n_past);
    s.cache.erase(s.cache.begin() + n_keep, s.cache.begin() + n_keep + n_discard);
    s.truncated = true;
    counters_.context_shifts++;
    return true;
}

void SlotCachePolicy::clear_slot(Slot & slot) {
    llama_memory_seq_rm(llama_get_memory(ctx_), slot.id, -1, -1);
    slot.cache.clear();
    slot.cache_media.clear();
    slot.shared_len = 0;
    slot.exact_end = SIZE_MAX;
    if (spec_) spec_->truncate(slot.id, 0);
}

}  // namespace addon
