#include "prompt-cache.h"

#include <algorithm>
#include <new>

namespace addon {

size_t common_prefix_length(const std::vector<llama_token> & a, const std::vector<llama_token> & b) {
    size_t n = 0;
    while (n < a.size() && n < b.size() && a[n] == b[n]) n++;
    return n;
}

PromptCache::PromptCache(int32_t limit_mib, size_t limit_tokens)
    : limit_bytes_(limit_mib < 0 ? 0 : static_cast<size_t>(limit_mib) * 1024 * 1024), limit_tokens_(limit_tokens) {}

size_t PromptCache::bytes() const {
    size_t total = 0;
    for (const auto & e : entries_) total += e.state.size();
    return total;
}

size_t PromptCache::n_tokens() const {
    size_t total = 0;
    for (const auto & e : entries_) total += e.tokens.size();
    return total;
}

bool PromptCache::save(llama_context * ctx, int32_t seq, const std::vector<llama_token> & tokens, const std::vector<float> & lora) {
    if (tokens.empty()) return false;
    for (const auto & e : entries_) {
        if (e.lora == lora && common_prefix_length(e.tokens, tokens) == tokens.size()) return false;
    }
    const size_t size = llama_state_seq_get_size(ctx, seq);
    if (limit_bytes_ > 0 && size > limit_bytes_) return false;
    entries_.remove_if([&](const Entry & e) { return e.lora == lora && common_prefix_length(e.tokens, tokens) == e.tokens.size(); });
    while (limit_bytes_ > 0 && !entries_.empty() && bytes() + size > limit_bytes_) entries_.pop_front();
    Entry entry{tokens, lora, {}};
    try {
        entry.state.resize(size);
    } catch (const std::bad_alloc &) {
        // As llama-server: lower the limit to what the cache holds, so it stops growing.
        limit_bytes_ = std::max<size_t>(1, bytes() * 2 / 5);
        trim();
        return false;
    }
    entry.state.resize(llama_state_seq_get_data(ctx, entry.state.data(), entry.state.size(), seq));
    if (entry.state.empty()) return false;
    entries_.push_back(std::move(entry));
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
        if (it->lora != lora || it->tokens.empty()) continue;
        const size_t n = common_prefix_length(it->tokens, prompt);
        const float keep = static_cast<float>(n) / it->tokens.size();
        const float sim = static_cast<float>(n) / prompt.size();
        if (keep < 0.25f) continue;  // do not trade a large prompt for a sliver of it
        if (keep > keep_best && sim > sim_best) {
            keep_best = keep;
            sim_best = sim;
            best = it;
        }
    }
    if (best == entries_.end()) return std::nullopt;
    if (llama_state_seq_set_data(ctx, best->state.data(), best->state.size(), seq) == 0) {
        failed = true;  // no room in the KV cache, most likely: the entry stays
        return std::nullopt;
    }
    std::vector<llama_token> tokens = std::move(best->tokens);
    entries_.erase(best);
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
    while (limit_bytes_ > 0 && !entries_.empty() && bytes() > limit_bytes_) entries_.pop_front();
    if (limit_tokens_ == 0) return;
    // As llama-server: the token limit grows to what the size limit would hold at the current
    // average size per token.
    const double per_token = std::max(1.0, static_cast<double>(bytes()) / std::max<size_t>(1, n_tokens()));
    const size_t limit = limit_bytes_ > 0 ? std::max(limit_tokens_, static_cast<size_t>(limit_bytes_ / per_token)) : limit_tokens_;
    while (!entries_.empty() && n_tokens() > limit) entries_.pop_front();
}

}  // namespace addon
