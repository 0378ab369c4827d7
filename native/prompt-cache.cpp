#include "prompt-cache.h"

#include <algorithm>
#include <iterator>
#include <new>

#include "restore-rule.h"

namespace addon {

size_t common_prefix_length(const std::vector<llama_token> & a, const std::vector<llama_token> & b) {
    size_t n = 0;
    while (n < a.size() && n < b.size() && a[n] == b[n]) n++;
    return n;
}

PromptCache::PromptCache(int32_t limit_mib, size_t limit_tokens, size_t pool_tokens)
    : limit_bytes_(limit_mib < 0 ? 0 : static_cast<size_t>(limit_mib) * 1024 * 1024), limit_tokens_(limit_tokens), pool_tokens_(pool_tokens) {}

size_t PromptCache::bytes() const {
    size_t total = 0;
    for (const auto & e : entries_) total += e.size;
    return total;
}

size_t PromptCache::held_bytes() const {
    size_t total = buffers_.bytes();
    for (const auto & e : entries_) total += e.buffer.capacity;
    return total;
}

size_t PromptCache::n_tokens() const {
    size_t total = 0;
    for (const auto & e : entries_) total += e.tokens.size();
    return total;
}

size_t PromptCache::kept_bound() const {
    return static_cast<size_t>(bytes_per_token_ * static_cast<double>(pool_tokens_));
}

void PromptCache::keep_buffer(HostBuffer b) {
    buffers_.give(std::move(b));
    while (buffers_.bytes() > kept_bound() && buffers_.drop_oldest()) {}
}

void PromptCache::report_to(CacheEvents * events) {
    events_ = events;
    if (events_) {
        for (const auto & e : entries_) events_->tier_stored(CacheTier::host, e.id, e.tokens, e.lora);
    }
}

std::list<PromptCache::Entry>::iterator PromptCache::erase(std::list<Entry>::iterator it) {
    if (events_) events_->tier_removed(CacheTier::host, it->id);
    return entries_.erase(it);
}

void PromptCache::evict_oldest() { leave_oldest(); }

void PromptCache::leave_oldest() {
    Entry & e = entries_.front();
    if (!leaving_ || !leaving_(e.tokens, e.lora, e.buffer, e.size)) keep_buffer(std::move(e.buffer));
    erase(entries_.begin());
}

void PromptCache::drain() {
    while (!entries_.empty()) {
        Entry & e = entries_.back();
        if (leaving_) leaving_(e.tokens, e.lora, e.buffer, e.size);
        erase(std::prev(entries_.end()));
    }
    publish();
}

size_t PromptCache::capacity_for(size_t size) const {
    const size_t want = size + size / 8;
    return limit_bytes_ > 0 ? std::max(size, std::min(want, limit_bytes_)) : want;
}

HostBuffer PromptCache::take_buffer(size_t size) {
    const size_t want = capacity_for(size);
    for (;;) {
        HostBuffer b = buffers_.take(size);
        if (b.data) {
            reused_buffers_++;
            return b;
        }
        if (limit_bytes_ == 0 || held_bytes() + want <= limit_bytes_) break;
        if (buffers_.drop_oldest()) continue;
        if (entries_.empty()) break;
        evict_oldest();  // its buffer may fit
    }
    return HostBuffers::allocate(want);
}

void PromptCache::expect(const std::vector<size_t> & tokens) {
    // As many new buffers as saves since the last call: a server whose conversations come back
    // to their slots saves nothing and gets nothing written ahead.
    size_t allowed = saves_since_expect_;
    saves_since_expect_ = 0;
    if (bytes_per_token_ <= 0) return;
    std::vector<size_t> have = buffers_.capacities();
    size_t held = held_bytes();
    size_t kept = buffers_.bytes();
    for (size_t n : tokens) {
        const size_t size = static_cast<size_t>(bytes_per_token_ * static_cast<double>(n));
        if (size == 0) continue;
        // A buffer kept or on its way that would take this save (as take() chooses) serves it.
        auto fit = have.end();
        for (auto it = have.begin(); it != have.end(); ++it) {
            if (HostBuffers::fits(*it, size) && (fit == have.end() || *it < *fit)) fit = it;
        }
        if (fit != have.end()) {
            have.erase(fit);
            continue;
        }
        const size_t want = capacity_for(size);
        if (allowed == 0 || (limit_bytes_ > 0 && held + want > limit_bytes_) || kept + want > kept_bound()) continue;
        buffers_.prepare(want);
        allowed--;
        held += want;
        kept += want;
    }
    publish();
}

bool PromptCache::save(llama_context * ctx, int32_t seq, const std::vector<llama_token> & tokens, const std::vector<float> & lora) {
    if (tokens.empty()) return false;
    for (const auto & e : entries_) {
        if (e.lora == lora && common_prefix_length(e.tokens, tokens) == tokens.size()) return false;
    }
    const size_t size = llama_state_seq_get_size(ctx, seq);
    if (size == 0 || (limit_bytes_ > 0 && size > limit_bytes_)) return false;
    if (tokens.size() >= bound_tokens_) {
        // The kept buffers' bound and the sizes expected, from the longest save (a short one's fixed
        // overhead would inflate them).
        bound_tokens_ = tokens.size();
        bytes_per_token_ = static_cast<double>(size) / static_cast<double>(tokens.size());
    }
    for (auto it = entries_.begin(); it != entries_.end();) {
        if (it->lora == lora && common_prefix_length(it->tokens, tokens) == it->tokens.size()) {
            keep_buffer(std::move(it->buffer));
            it = erase(it);
        } else {
            ++it;
        }
    }
    HostBuffer b = take_buffer(size);
    if (!b.data) {
        // As llama-server: lower the limit to what the cache holds, so it stops growing.
        buffers_.clear();
        limit_bytes_ = std::max<size_t>(1, held_bytes() * 2 / 5);
        trim();
        return false;
    }
    const size_t written = llama_state_seq_get_data(ctx, b.data.get(), size, seq);
    if (written == 0) {
        keep_buffer(std::move(b));
        publish();
        return false;
    }
    entries_.push_back(Entry{tokens, lora, std::move(b), written, next_id_++});
    if (events_) events_->tier_stored(CacheTier::host, entries_.back().id, tokens, lora);
    saves_since_expect_++;
    publish();
    return true;
}

std::optional<std::vector<llama_token>> PromptCache::load(llama_context * ctx, int32_t seq, const std::vector<llama_token> & prompt,
                                                          const std::vector<float> & lora, const std::vector<llama_token> & current, bool & failed) {
    failed = false;
    if (prompt.empty()) return std::nullopt;
    const size_t lcp = common_prefix_length(current, prompt);
    // An empty slot: any entry wins.
    float keep_best = current.empty() ? -1.0f : static_cast<float>(lcp) / current.size();
    float sim_best = static_cast<float>(lcp) / prompt.size();
    auto best = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
        if (it->lora != lora) continue;
        const size_t n = common_prefix_length(it->tokens, prompt);
        if (!restore_keeps_enough(n, it->tokens.size())) continue;
        const float keep = static_cast<float>(n) / it->tokens.size();
        const float sim = static_cast<float>(n) / prompt.size();
        if (keep > keep_best && sim > sim_best) {
            keep_best = keep;
            sim_best = sim;
            best = it;
        }
    }
    if (best == entries_.end()) return std::nullopt;
    if (llama_state_seq_set_data(ctx, best->buffer.data.get(), best->size, seq) == 0) {
        failed = true;  // no room in the KV cache, most likely: the entry stays
        return std::nullopt;
    }
    std::vector<llama_token> tokens = std::move(best->tokens);
    keep_buffer(std::move(best->buffer));
    erase(best);
    publish();
    return tokens;
}

size_t PromptCache::longest_prefix(const std::vector<llama_token> & prompt, const std::vector<float> & lora) const {
    size_t best = 0;
    for (const auto & e : entries_) {
        if (e.lora == lora) best = std::max(best, common_prefix_length(e.tokens, prompt));
    }
    return best;
}

void PromptCache::trim() {
    while (limit_bytes_ > 0 && held_bytes() > limit_bytes_ && buffers_.drop_oldest()) {}
    while (limit_bytes_ > 0 && !entries_.empty() && held_bytes() > limit_bytes_) {
        Entry & e = entries_.front();
        if (leaving_) leaving_(e.tokens, e.lora, e.buffer, e.size);
        erase(entries_.begin());
    }
    if (limit_tokens_ > 0) {
        // As llama-server: the token limit grows to what the size limit would hold at the current
        // average size per token.
        const double per_token = std::max(1.0, static_cast<double>(bytes()) / std::max<size_t>(1, n_tokens()));
        const size_t limit = limit_bytes_ > 0 ? std::max(limit_tokens_, static_cast<size_t>(limit_bytes_ / per_token)) : limit_tokens_;
        while (!entries_.empty() && n_tokens() > limit) evict_oldest();
    }
    publish();
}

}  // namespace addon
