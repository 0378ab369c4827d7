// Prefix sharing across slots (engine thread), as vLLM's automatic prefix caching and SGLang's
// radix cache do it: a prompt starts from the longest prefix that any sequence of the KV pool
// holds, and a prompt that shares a prefix with one being computed waits for it instead of
// computing it a second time.
//
// - Lookup: the slots' caches are the index. With at most a few dozen slots, comparing the prompt
//   with each cache (and each prompting task) costs microseconds per admission, against
//   milliseconds per token saved; a radix tree would answer the same question. Images compare by
//   their hash and size (Slot::common_prefix).
// - Copy: llama_memory_seq_cp adds the new sequence's id to the source's cells (unified pool: no
//   computation, no data moved; the cells live while any sequence holds them). Between streams
//   (no unified pool) llama.cpp copies the source's whole stream buffer and the tail is dropped.
// - Exactness: only cells equal to a fresh computation are shared (Slot::exact_end), so that
//   greedy output does not depend on whether a prefix was shared.
// - Moving cells: a context shift or a --cache-reuse move changes a cell's position for every
//   sequence holding it, so the slot first gets cells of its own (unshare).
#include <algorithm>

#include "log.h"
#include "slot-cache-policy.h"
#include "speculation.h"

namespace addon {

// Length of the common prefix of two tasks' prompts: equal tokens, and the same image (hash and
// size) at the same position.
static size_t task_common_prefix(const CompletionTask & a, const CompletionTask & b) {
    const size_t end = std::min(a.prompt.size(), b.prompt.size());
    size_t n = 0;
    while (n < end && a.prompt[n] == b.prompt[n]) {
        if (a.prompt[n] != LLAMA_TOKEN_NULL) {
            n++;
            continue;
        }
        const auto at = [n](const MediaSpan & m) { return m.start == n; };
        const auto ma = std::find_if(a.media.begin(), a.media.end(), at);
        const auto mb = std::find_if(b.media.begin(), b.media.end(), at);
        if (ma == a.media.end() || mb == b.media.end() || ma->hash != mb->hash || ma->n_pos != mb->n_pos || n + ma->n_pos > end) break;
        n += ma->n_pos;
    }
    return n;
}

// A prompt's last token is always evaluated (its logits give the first generated token), so at
// most all but it is taken from elsewhere.
static size_t shareable_limit(const CompletionTask & task) { return task.prompt.empty() ? 0 : task.prompt.size() - 1; }

static bool may_share(const CompletionTask & task) { return task.kind == TaskKind::COMPLETION && task.cache_prompt; }

// The longest exact prefix of `task`'s prompt that another slot's cells hold now.
SlotCachePolicy::PrefixSource SlotCachePolicy::longest_cached_prefix(const Slot & dst, const CompletionTask & task) const {
    PrefixSource best;
    const size_t limit = shareable_limit(task);
    for (auto & s : slots_) {
        if (&s == &dst || s.cache.empty() || s.cache_lora != task.lora_scales) continue;
        const size_t n = std::min({s.common_prefix(task), s.exact_len(), limit});
        if (n > best.n) best = {&s, n};
    }
    return best;
}

// The longest prefix of `task`'s prompt that a prompting slot is about to compute (beyond what it
// holds now): the prefix `task` would compute a second time. A slot that itself waits for another
// (joined) computes its own part only a step after its source: it is a source only for a prefix
// kJoinMinTokens or more beyond what it takes from there. Below that, waiting a whole step for a
// few more shared tokens costs more than computing them (docs/benchmarks.md, "chained joins");
// its source, a candidate as well, gives the prefix they share.
SlotCachePolicy::PrefixSource SlotCachePolicy::longest_pending_prefix(const Slot & dst, const CompletionTask & task) const {
    PrefixSource best;
    const size_t limit = shareable_limit(task);
    for (auto & s : slots_) {
        if (&s == &dst || s.state != SlotState::PROMPT || !s.task || s.task->kind != TaskKind::COMPLETION || s.task->lora_scales != task.lora_scales) continue;
        // What the slot holds now stays exact only up to exact_end; what it computes is exact.
        if (s.exact_end < s.cache.size()) continue;
        const size_t n = std::min(task_common_prefix(*s.task, task), limit);
        if (s.joined() && n < s.join_len + kJoinMinTokens) continue;
        if (n > s.n_prompt_done && n > best.n) best = {&s, n};
    }
    return best;
}

// start_task, once the slot has kept `keep` tokens of its own cache: the prompt takes a longer
// prefix from another slot's cells if one holds it, and waits (joins) for a slot that is about to
// compute a longer one still. Returns the tokens the slot now holds.
size_t SlotCachePolicy::adopt_shared_prefix(Slot & slot, size_t keep) {
    const CompletionTask & task = *slot.task;
    if (!sharing_ || !may_share(task)) return keep;
    const PrefixSource cached = longest_cached_prefix(slot, task);
    if (cached.n > keep) {
        share_prefix(slot, *cached.slot, cached.n);
        keep = cached.n;
    }
    const PrefixSource pending = longest_pending_prefix(slot, task);
    if (pending.slot && pending.n >= keep + kJoinMinTokens) {
        slot.join_slot = pending.slot->id;
        slot.join_task = pending.slot->task->id;
        slot.join_len = pending.n;
        counters_.shared_joins++;
    }
    return keep;
}

// dst's sequence becomes src's first n positions (dst is busy, its prompt not yet fed past them).
void SlotCachePolicy::share_prefix(Slot & dst, Slot & src, size_t n) {
    llama_memory_t mem = llama_get_memory(ctx_);
    const size_t before = dst.cache.size();
    llama_memory_seq_rm(mem, dst.id, -1, -1);
    if (spec_) spec_->truncate(dst.id, 0);  // the draft model's copy catches up before its next draft
    if (params_.kv_unified) {
        llama_memory_seq_cp(mem, src.id, dst.id, 0, static_cast<llama_pos>(n));
    } else {
        // Between streams llama.cpp copies only whole streams: the source's all, then the tail goes.
        llama_memory_seq_cp(mem, src.id, dst.id, -1, -1);
        llama_memory_seq_rm(mem, dst.id, static_cast<llama_pos>(n), -1);
    }
    dst.cache.assign(src.cache.begin(), src.cache.begin() + static_cast<std::ptrdiff_t>(n));
    dst.cache_media.clear();
    for (const auto & m : src.cache_media) {
        if (m.start + m.n_pos <= n) dst.cache_media.push_back(m);
    }
    dst.n_prompt_done = n;
    dst.n_cached = static_cast<int32_t>(n);
    dst.exact_end = SIZE_MAX;
    if (params_.kv_unified) {
        dst.shared_len = n;
        src.shared_len = std::max(src.shared_len, n);
    } else {
        dst.shared_len = 0;
    }
    counters_.shared_tokens += n - std::min(n, before);
    log_debug("slot " + std::to_string(dst.id) + ": " + std::to_string(n) + " prompt tokens shared from slot " + std::to_string(src.id) + "\n");
}

// Each joined slot takes its prefix once its source holds it, or whatever the source holds when
// its task ends (`ending`: the slot whose task is ending now, whose cells may be freed next) or
// went to another stage; it computes the rest itself.
std::vector<Slot *> SlotCachePolicy::settle_joins(const Slot * ending) {
    std::vector<Slot *> settled;
    for (auto & d : slots_) {
        if (!d.joined() || !d.task) continue;
        Slot & src = slots_[d.join_slot];
        const bool computing = &src != ending && src.task && src.task->id == d.join_task && src.state == SlotState::PROMPT;
        size_t available = 0;
        if (src.cache_lora == d.task->lora_scales) available = std::min({src.common_prefix(*d.task), src.exact_len(), shareable_limit(*d.task)});
        if (computing && available < d.join_len) continue;
        d.join_slot = -1;
        d.join_task = -1;
        d.join_len = 0;
        if (available > d.cache.size()) share_prefix(d, src, available);
        settled.push_back(&d);
    }
    return settled;
}

// Gives the slot cells of its own for everything it holds (a copy of its sequence's state), so
// that moving its cells moves no other sequence's. False when the copy found no room: the slot's
// cache is then empty.
bool SlotCachePolicy::unshare(Slot & slot) {
    if (slot.shared_len == 0) return true;
    llama_memory_t mem = llama_get_memory(ctx_);
    std::vector<uint8_t> state(llama_state_seq_get_size(ctx_, slot.id));
    state.resize(llama_state_seq_get_data(ctx_, state.data(), state.size(), slot.id));
    llama_memory_seq_rm(mem, slot.id, -1, -1);
    slot.shared_len = 0;
    if (llama_state_seq_set_data(ctx_, state.data(), state.size(), slot.id) == 0) {
        llama_memory_seq_rm(mem, slot.id, -1, -1);
        slot.cache.clear();
        slot.forget_media_after(0);
        if (spec_) spec_->truncate(slot.id, 0);
        return false;
    }
    return true;
}

// Whether an idle slot's cells are worth their place in the pool while they wait for a prompt
// that continues them (cache_idle_slots; copied to the host-memory prompt cache when they go).
// Every cell below the pool's highest used one widens the span that each step's attention
// covers, running tasks' rows included, so kept idle caches slow every step (docs/benchmarks.md,
// "Figures moved from code comments"); llama-server frees them. An idle cache whose prompt is mostly shared with
// a running task (an agent's conversation beside others on the same system prompt and tools)
// adds little to the span beyond cells that stay anyway, and coming back it is taken whole, where
// from host memory it would be copied into cells of its own. So: kept when at least half of it,
// and kJoinMinTokens or more, is a prefix of a running task's prompt under the same adapters.
bool SlotCachePolicy::worth_keeping_idle(const Slot & idle) const {
    const size_t need = std::max(kJoinMinTokens, (idle.cache.size() + 1) / 2);
    if (idle.cache.size() < need) return false;
    for (const auto & s : slots_) {
        if (!s.busy() || !s.task || s.task->lora_scales != idle.cache_lora || s.task->prompt.size() < need) continue;
        if (std::equal(idle.cache.begin(), idle.cache.begin() + static_cast<std::ptrdiff_t>(need), s.task->prompt.begin())) return true;
    }
    return false;
}

}  // namespace addon
