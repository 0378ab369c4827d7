#pragma once
// Slot: one sequence of the shared context (seq_id == slot id) and the task running in it.
// Owned and touched only by the engine thread.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "task.h"

namespace addon {

enum class SlotState { IDLE, PROMPT, GENERATING };

struct Slot {
    int32_t id = 0;
    int32_t n_ctx = 0;                  // most tokens this slot's sequence may hold
    SlotState state = SlotState::IDLE;
    std::unique_ptr<CompletionTask> task;

    std::vector<llama_token> cache;     // tokens whose K/V is in the context for this sequence
    size_t n_prompt_done = 0;           // prompt tokens already placed in the cache
    size_t n_progress_sent = 0;         // n_prompt_done at the last PROGRESS event (return_progress)
    int32_t i_batch = -1;               // batch index of this slot's logits in the current step
    llama_token sampled = LLAMA_TOKEN_NULL;

    std::string generated;              // text generated so far (stop strings removed)
    size_t n_sent = 0;                  // bytes of `generated` already sent
    size_t indent_scan = 0;             // n_indent: lines starting after this offset are not yet checked
    int32_t n_decoded = 0;
    int32_t n_cached = 0;
    StopType stop = StopType::NONE;
    std::string stopping_word;
    bool truncated = false;
    bool backend_sampler = false;       // the task's chain is attached to the context (-bs)

    int64_t t_start_us = 0;             // the task's prompt processing began (its slot assigned, the prompt cache served)
    uint64_t admission = 0;             // order the task was given its slot in (prompts go in this order)
    int64_t t_prompt_done_us = 0;       // first token sampled
    int64_t t_last_used_us = 0;         // for least-recently-used slot choice
    uint64_t last_step = 0;             // engine step that last decoded this slot (fair LoRA groups)
    // Decode calls made (Engine::step_counter_) when the task got its slot, and when its first
    // token was sampled: a prompt admitted before a generating slot's first token came with it
    // (chunked prefill does not hold it back for that slot; Engine::prompt_share).
    uint64_t admitted_at = 0;
    uint64_t first_token_at = 0;
    std::vector<float> cache_lora;      // adapter scales the cached K/V were computed with
    // Prefix sharing (engine-sharing.cpp). `shared_len`: the leading positions whose cells other
    // sequences may hold too (copied in from or out to another slot); a context shift or a
    // --cache-reuse move of a position below it must first give the slot cells of its own, since
    // moving a shared cell moves it for every sequence. `exact_end`: cache entries at and past it
    // are not what computing them afresh gives (a context shift or --cache-reuse moved them), so
    // they are never shared. `join_*`: while join_slot >= 0 the slot's prompt waits for slot
    // join_slot (running task join_task) to compute its first join_len tokens, and then copies them.
    size_t shared_len = 0;
    size_t exact_end = SIZE_MAX;
    int32_t join_slot = -1;
    int64_t join_task = -1;
    size_t join_len = 0;
    // Images in the cache: positions [start, start + n_pos) hold the embeddings of the image with
    // this hash. Entries past the cache's end, or over text, are stale and never match.
    // `chunk` (a copy of the image's chunk) lets a slot file carry the image.
    struct CachedMedia { size_t start; size_t n_pos; uint64_t hash; std::shared_ptr<mtmd_input_chunk> chunk; };
    std::vector<CachedMedia> cache_media;

    bool busy() const { return state != SlotState::IDLE; }
    bool joined() const { return join_slot >= 0; }
    // Cache entries that may be shared: the common prefix with a fresh computation.
    size_t exact_len() const { return std::min(exact_end, cache.size()); }

    // Length of the prefix of `task`'s prompt already in this slot's cache: equal tokens, and
    // whole images that are the same image at the same position.
    size_t common_prefix(const CompletionTask & task) const;

    // An image of the running task has been evaluated into the cache.
    void media_cached(const MediaSpan & span);
    // Drops the image entries that do not end within the first `end` cache positions.
    void forget_media_after(size_t end);

    // Prepares the slot for `task`: keeps the longest common prefix of the cache (when the task
    // allows it), resets counters. Returns the number of cache tokens kept; the caller removes
    // the rest from the context memory.
    size_t assign(std::unique_ptr<CompletionTask> task, int64_t now_us);

    // Accepts a sampled token's text: appends it, applies stop strings and the n_indent rule,
    // returns the text that may be sent now and sets `stop` when generation must end. `is_eog`
    // marks end-of-generation.
    std::string accept_piece(const std::string & piece, bool is_eog);

    // n_indent: cuts `generated` at the first under-indented line after the first; true if it did.
    bool cut_underindented_line();

    // Text held back (partial stop string or incomplete UTF-8) that must be flushed at the end.
    std::string unsent() const;
    // unsent(), now marked as sent (generation has ended at a cut of `generated`).
    std::string take_unsent();

    void release(int64_t now_us);
};

// Length of the longest prefix of `text` that is complete UTF-8 (an incomplete final sequence
// is excluded).
size_t utf8_complete_prefix(const std::string & text);

}  // namespace addon
