#pragma once
// A completion task: everything the engine thread needs to run one request, already validated
// and converted by TypeScript (no JSON crosses into C++). Read from JS on the JS thread, prepared
// on a worker (task-parse.h), then owned by the engine thread.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "admission.h"
#include "common.h"
#include "mtmd.h"
#include "sampling.h"

namespace addon {

enum class TaskKind { COMPLETION, EMBEDDING };

// An image inside a prompt: positions [start, start + n_pos) of the prompt are placeholders
// (LLAMA_TOKEN_NULL) that the projector's embeddings fill when the slot reaches them.
struct MediaSpan {
    size_t start = 0;
    size_t n_pos = 0;
    uint64_t hash = 0;  // of the encoded image file: the prompt cache reuses an image only when it is the same
    mtmd::input_chunk_ptr chunk;
};

struct DiskPrefetch;

struct CompletionTask {
    int64_t id = 0;
    int64_t t_queued_us = 0;       // when it entered the engine's inbox (how long it has waited for a slot)
    TaskKind kind = TaskKind::COMPLETION;  // EMBEDDING: the prompt is embedded, nothing generated
    std::vector<llama_token> prompt;
    int32_t n_predict = -1;        // -1: until EOS or the slot's context is full
    int32_t id_slot = -1;          // -1: the idle slot whose cache shares the longest prefix
    bool cache_prompt = true;      // reuse the longest common prefix already in the slot's KV cache
    bool return_progress = false;  // PROGRESS events: when the prompt starts, then after each batch of it
    int32_t n_probs = 0;           // top-N probabilities per generated token (pre-sampling softmax)
    bool post_sampling_probs = false; // n_probs from the sampler chain's final candidates, not the raw softmax
    int64_t t_max_predict_ms = 0;  // 0: no time limit; else stop at the first new line after it
    int32_t n_cache_reuse = 0;     // shortest cached chunk reused by shifting it into place (0: off)
    int32_t n_keep = 0;            // context shift: prompt tokens kept at the start (-1: the whole prompt)
    int32_t n_discard = 0;         // context shift: tokens dropped after them (0: half of the rest)
    int32_t n_indent = 0;          // > 0: a line after the first that starts less indented ends generation (code completion)
    std::vector<std::string> stop; // stop strings (not emitted)
    common_params_sampling sampling;
    common_sampler_ptr sampler;    // built from `sampling` when the task is prepared (parses the grammar)
    std::vector<float> lora_scales; // one scale per adapter of the engine (0 = not applied)
    std::vector<MediaSpan> media;   // images and audio chunks, in prompt order
    // --cache-disk: the read of the state it is to be restored from, asked for when it arrived
    // (SlotCachePolicy::prefetch_from_disk); it is admitted once the read is done.
    std::shared_ptr<DiskPrefetch> disk_prefetch;
    TenantShare share;              // whom it belongs to and how it ranks (admission.h)
    int64_t admission_cost = 0;     // tokens its tenant was charged when it got a slot (admission_cost)
};

enum class StopType { NONE, EOS, LIMIT, WORD };

struct TokenProb {
    llama_token id;
    std::string piece;
    float p;
};

// One message from the engine thread to JS. Events of one task arrive in order.
struct EngineEvent {
    enum class Kind { TOKEN, DONE, ERROR, EMBEDDING, PROGRESS } kind;
    int64_t task_id = 0;

    // TOKEN: a generated token and the text it releases (may be empty while a stop string or a
    // UTF-8 sequence is incomplete). DONE: `text` holds any held-back remainder.
    llama_token token = LLAMA_TOKEN_NULL;
    std::string text;
    float prob = 0.0f;
    std::vector<TokenProb> probs;

    // DONE (EMBEDDING: n_prompt, t_prompt_ms and slot_id too)
    StopType stop = StopType::NONE;
    std::string stopping_word;
    bool truncated = false;
    int32_t n_prompt = 0;     // tokens of the prompt (also on a task's first TOKEN event; 0 on later ones)
    int32_t n_cached = 0;     // prompt tokens reused from the slot's cache
    int32_t n_predicted = 0;  // generated tokens
    double t_prompt_ms = 0;
    double t_predict_ms = 0;
    int32_t slot_id = -1;
    int32_t n_draft = 0;           // speculative decoding: drafted tokens
    int32_t n_draft_accepted = 0;  // ... and those accepted

    // PROGRESS (return_progress): the prompt's tokens, those reused from the cache, those in the
    // cache so far (cached included), and the time since the task started.
    int32_t n_processed = 0;
    double t_elapsed_ms = 0;

    // ERROR
    std::string message;

    // EMBEDDING: one pooled vector, or one vector per prompt token (pooling none), row-major.
    std::vector<float> embedding;
    int32_t n_vectors = 0;
};

}  // namespace addon
