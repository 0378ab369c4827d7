#pragma once
// PromptCache: llama-server's host-memory prompt cache (--cache-ram). When a slot is about to
// lose most of its cached prompt, the K/V state of that prompt is copied to RAM; a later prompt
// that shares more with a saved one than with its slot's cache gets that state restored into the
// slot instead of recomputing it. The oldest entries go first when a limit is reached.
// Engine thread only.
#include <cstdint>
#include <list>
#include <optional>
#include <vector>

#include "llama.h"

namespace addon {

class PromptCache {
public:
    // limit_mib: -1 no size limit; limit_tokens: 0 no token limit (llama-server: the context size,
    // raised while the size limit would allow more).
    PromptCache(int32_t limit_mib, size_t limit_tokens);

    // Saves sequence `seq` of `ctx`, whose cached tokens are `tokens` (computed under adapter scales
    // `lora`), unless an entry already holds all of them; entries it contains are dropped. False
    // when nothing was saved (already held, over the size limit, out of memory).
    bool save(llama_context * ctx, int32_t seq, const std::vector<llama_token> & tokens, const std::vector<float> & lora);

    // Restores into sequence `seq` the entry (same adapter scales) that keeps at least a quarter of
    // itself for `prompt` and beats the slot's own cache (`current`) on both the share of itself kept
    // and the share of the prompt covered, as llama-server chooses. The entry leaves the cache; its
    // tokens are returned. nullopt: nothing better, or the restore failed (`failed` set: no room in
    // the KV cache; the entry stays and the sequence is left empty).
    std::optional<std::vector<llama_token>> load(llama_context * ctx, int32_t seq, const std::vector<llama_token> & prompt,
                                                 const std::vector<float> & lora, const std::vector<llama_token> & current, bool & failed);

    // The longest common prefix of `prompt` with an entry computed under the same adapter scales.
    size_t longest_prefix(const std::vector<llama_token> & prompt, const std::vector<float> & lora) const;

    // Evicts the oldest entries beyond the limits.
    void trim();

    size_t bytes() const;
    size_t n_entries() const { return entries_.size(); }

private:
    struct Entry {
        std::vector<llama_token> tokens;
        std::vector<float> lora;
        std::vector<uint8_t> state;
    };
    size_t n_tokens() const;

    std::list<Entry> entries_;  // oldest first
    size_t limit_bytes_ = 0;    // 0: none
    size_t limit_tokens_ = 0;   // 0: none
};

// Length of the common prefix of two token sequences.
size_t common_prefix_length(const std::vector<llama_token> & a, const std::vector<llama_token> & b);

}  // namespace addon
