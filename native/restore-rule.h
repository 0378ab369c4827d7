#pragma once
// When a saved prompt state is worth restoring for a prompt, by its size: one rule for both tiers
// of the prompt cache (the host-memory entries, PromptCache::load; the disk tier's files,
// DiskCache::prefetch).
//
// The rule: a saved state is restored for a prompt only when the prompt keeps at least a quarter
// of the state's tokens (their common prefix), so that a large state is never restored for a
// sliver of it: restoring copies the whole state into the KV pool (and, from disk, reads the whole
// file first), and the cells past the common prefix are dropped again at once. A state of no
// tokens serves nothing. Which of the states that pass serves best is each tier's own choice.
// Pure: no llama_context, no N-API; checked in test/native/engine-rules.cpp.
#include <cstddef>

namespace addon {

// Whether a saved state of `state_tokens` tokens may be restored for a prompt sharing its first
// `common_prefix` tokens with it.
bool restore_keeps_enough(size_t common_prefix, size_t state_tokens);

}  // namespace addon
