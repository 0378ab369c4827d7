// CacheEvents (see the header): the comparison of each slot's cache with its last report, and the
// tiers' entries as they come and go.
#include "cache-events.h"

#include <algorithm>
#include <cstring>

namespace addon {

void CacheEvents::enable(int32_t block_size) {
    std::lock_guard<std::mutex> lock(mutex_);
    block_ = std::max<int32_t>(0, block_size);
    if (block_ > 0) tracking_ = true;
    reported_.clear();
    reported_lora_.clear();
    pending_.clear();
    for (const auto & [key, e] : entries_) push_stored(key.first, key.second, e);
}

// The tokens of `cache` that form full blocks before any image placeholder.
static size_t full_blocks(const std::vector<llama_token> & cache, int32_t block) {
    const auto image = std::find(cache.begin(), cache.end(), LLAMA_TOKEN_NULL);
    const size_t usable = static_cast<size_t>(image - cache.begin());
    return usable / static_cast<size_t>(block) * static_cast<size_t>(block);
}

void CacheEvents::observe(const std::vector<Slot> & slots) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (block_ <= 0) return;
    if (reported_.size() != slots.size()) {
        reported_.resize(slots.size());
        reported_lora_.resize(slots.size());
    }
    const size_t block = static_cast<size_t>(block_);
    for (size_t i = 0; i < slots.size(); i++) {
        const Slot & s = slots[i];
        std::vector<int32_t> & was = reported_[i];
        const size_t full = full_blocks(s.cache, block_);
        const bool same_lora = reported_lora_[i] == s.cache_lora;
        size_t common = 0;
        if (same_lora) {
            const size_t n = std::min(full, was.size());
            while (common + block <= n && std::memcmp(was.data() + common, s.cache.data() + common, block * sizeof(int32_t)) == 0) common += block;
        }
        if (common == was.size() && common == full) continue;
        CacheChange change;
        change.slot = s.id;
        change.keep = static_cast<int32_t>(common);
        change.tokens.assign(s.cache.begin() + static_cast<std::ptrdiff_t>(common), s.cache.begin() + static_cast<std::ptrdiff_t>(full));
        change.lora = s.cache_lora;
        pending_.push_back(std::move(change));
        was.assign(s.cache.begin(), s.cache.begin() + static_cast<std::ptrdiff_t>(full));
        reported_lora_[i] = s.cache_lora;
    }
}

void CacheEvents::push_stored(CacheTier tier, uint64_t id, const Entry & e) {
    if (block_ <= 0) return;
    const size_t full = e.tokens.size() / static_cast<size_t>(block_) * static_cast<size_t>(block_);
    if (full == 0) return;
    CacheChange change;
    change.tier = tier;
    change.slot = static_cast<int64_t>(id);
    change.tokens.assign(e.tokens.begin(), e.tokens.begin() + static_cast<std::ptrdiff_t>(full));
    change.lora = e.lora;
    pending_.push_back(std::move(change));
}

void CacheEvents::track_tiers() {
    std::lock_guard<std::mutex> lock(mutex_);
    tracking_ = true;
}

void CacheEvents::tier_stored(CacheTier tier, uint64_t id, const std::vector<int32_t> & tokens, const std::vector<float> & lora) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!tracking_) return;
    }
    const auto image = std::find(tokens.begin(), tokens.end(), LLAMA_TOKEN_NULL);
    Entry e{std::vector<int32_t>(tokens.begin(), image), lora};
    std::lock_guard<std::mutex> lock(mutex_);
    if (!tracking_) return;
    push_stored(tier, id, e);
    entries_[{tier, id}] = std::move(e);
}

void CacheEvents::tier_removed(CacheTier tier, uint64_t id) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (entries_.erase({tier, id}) == 0 || block_ <= 0) return;
    CacheChange change;
    change.tier = tier;
    change.slot = static_cast<int64_t>(id);
    pending_.push_back(std::move(change));
}

std::vector<CacheChange> CacheEvents::take() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<CacheChange> out;
    out.swap(pending_);
    return out;
}

}  // namespace addon
