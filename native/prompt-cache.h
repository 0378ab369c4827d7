#pragma once
// PromptCache: llama-server's host-memory prompt cache (--cache-ram). When a slot is about to
// lose most of its cached prompt, the K/V state of that prompt is copied to RAM; a later prompt
// that shares more with a saved one than with its slot's cache gets that state restored into the
// slot instead of recomputing it. The oldest entries go first when a limit is reached.
//
// The copies go into memory already written where it can (HostBuffers): a restored or evicted
// entry's buffer is kept for the next save, and the engine says which saves to expect (the caches
// of the tasks it starts), for which buffers are written ahead of time, as many as the saves made
// since it last said (a server whose conversations stay in their slots writes none). The size limit counts those
// buffers with the entries (host memory held never exceeds --cache-ram), and the buffers kept
// beyond the entries never hold more than the KV pool could (n_ctx tokens at the longest save's
// size per token).
// Engine thread only, but for the two counters published for /metrics.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <vector>

#include "cache-events.h"
#include "host-buffers.h"
#include "llama.h"

namespace addon {

class PromptCache {
public:
    // limit_mib: -1 no size limit; limit_tokens: 0 no token limit (llama-server: the context size,
    // raised while the size limit would allow more). pool_tokens: the KV pool's size in tokens,
    // which bounds the spare buffers.
    PromptCache(int32_t limit_mib, size_t limit_tokens, size_t pool_tokens);

    // Saves sequence `seq` of `ctx`, whose cached tokens are `tokens` (computed under adapter scales
    // `lora`), unless an entry already holds all of them; entries it contains are dropped. False
    // when nothing was saved (already held, over the size limit, out of memory).
    bool save(llama_context * ctx, int32_t seq, const std::vector<llama_token> & tokens, const std::vector<float> & lora);

    // Restores into sequence `seq` the entry (same adapter scales) worth restoring for `prompt`
    // (restore_keeps_enough: at least a quarter of it kept) that beats the slot's own cache
    // (`current`) on both the share of itself kept and the share of the prompt covered, as
    // llama-server chooses. The entry leaves the cache; its
    // tokens are returned. nullopt: nothing better, or the restore failed (`failed` set: no room in
    // the KV cache; the entry stays and the sequence is left empty).
    std::optional<std::vector<llama_token>> load(llama_context * ctx, int32_t seq, const std::vector<llama_token> & prompt,
                                                 const std::vector<float> & lora, const std::vector<llama_token> & current, bool & failed);

    // The longest common prefix of `prompt` with an entry computed under the same adapter scales.
    size_t longest_prefix(const std::vector<llama_token> & prompt, const std::vector<float> & lora) const;

    // Evicts the oldest entries beyond the limits.
    void trim();

    // An entry leaving for good (evicted, or drained): the callee may take its buffer (returns
    // true; the disk tier writes it), else the buffer is kept for reuse or freed.
    using Leaving = std::function<bool(std::vector<llama_token> & tokens, std::vector<float> & lora, HostBuffer & buffer, size_t size)>;
    void on_leaving(Leaving f) { leaving_ = std::move(f); }
    // Hands every entry to the on_leaving callback, newest first, and empties the cache (shutdown).
    void drain();

    // Saves of caches of these lengths (tokens) are to be expected: buffers are prepared for those
    // that no buffer kept or being prepared would hold, within the limits, at most as many as
    // saves were made since the previous call. Nothing before the first save (the size per token
    // is not known yet).
    void expect(const std::vector<size_t> & tokens);

    // Reports each entry as it comes and goes (CacheEvents' host tier), starting with those held now.
    void report_to(CacheEvents * events);

    size_t bytes() const;        // the entries' states
    size_t held_bytes() const;   // host memory held: entries' and kept buffers' capacity
    size_t n_entries() const { return entries_.size(); }

    // For /metrics, readable from any thread: held_bytes() after the last change, and the saves
    // that went into a buffer kept or requested ahead (expect) instead of one allocated for them.
    uint64_t published_bytes() const { return published_bytes_.load(); }
    uint64_t reused_buffers() const { return reused_buffers_.load(); }

private:
    struct Entry {
        std::vector<llama_token> tokens;
        std::vector<float> lora;
        HostBuffer buffer;
        size_t size = 0;  // bytes of state in `buffer`
        uint64_t id = 0;  // for the KV-cache events
    };
    // Every entry leaves through here (the events hear of it); returns the next one.
    std::list<Entry>::iterator erase(std::list<Entry>::iterator it);
    size_t n_tokens() const;
    // Bytes to allocate for a state of `size` bytes: an eighth more, so that a conversation's next,
    // slightly longer save fits too.
    size_t capacity_for(size_t size) const;
    // A buffer of at least `size` bytes: a kept one that fits, else a new one once kept buffers
    // and then the oldest entries made room under the size limit. Empty when the allocation failed.
    HostBuffer take_buffer(size_t size);
    // `b` is kept for reuse; the oldest kept buffers go beyond the bound.
    void keep_buffer(HostBuffer b);
    size_t kept_bound() const;
    void evict_oldest();
    void publish() { published_bytes_ = held_bytes(); }

    // The oldest entry leaves (on_leaving); its buffer is kept for reuse unless the callee took it.
    void leave_oldest();
    std::list<Entry> entries_;  // oldest first
    uint64_t next_id_ = 0;
    CacheEvents * events_ = nullptr;
    Leaving leaving_;
    HostBuffers buffers_;
    size_t limit_bytes_ = 0;    // 0: none
    size_t limit_tokens_ = 0;   // 0: none
    size_t pool_tokens_ = 0;
    size_t bound_tokens_ = 0;      // tokens of the longest save
    double bytes_per_token_ = 0;   // its bytes per token
    size_t saves_since_expect_ = 0;
    std::atomic<uint64_t> published_bytes_{0};
    std::atomic<uint64_t> reused_buffers_{0};
};

// Length of the common prefix of two token sequences.
size_t common_prefix_length(const std::vector<llama_token> & a, const std::vector<llama_token> & b);

}  // namespace addon
