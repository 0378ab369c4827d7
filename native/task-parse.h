#pragma once
// Turning a JS task object (CompletionTaskSpec in src/native/binding.ts) into a CompletionTask,
// in two steps, as llama-server's HTTP threads turn a request into a server_task:
//   parse_task   (JS thread)  reads the JS values into plain C++ data, checking their types;
//   prepare_task (any thread) does the blocking part: decodes and tokenizes images, checks the
//                prompt against the engine's limits, parses the grammar into a sampler chain.
// Neither touches the engine's context; the engine thread only ever sees prepared tasks.
#include <napi.h>

#include <memory>
#include <string>
#include <vector>

#include "llama.h"
#include "mtmd.h"
#include "task.h"

namespace addon {

// The facts of an engine that a task is checked against. The pointed-to objects are kept alive
// by whoever prepares the task (see TaskSubmitWorker).
struct TaskLimits {
    const llama_model * model = nullptr;
    const llama_vocab * vocab = nullptr;
    const std::vector<llama_token> * eog_tokens = nullptr;  // Model::eog_tokens
    mtmd_context * vision = nullptr;  // null: the engine has no projector
    int32_t n_ctx_seq = 0;            // most tokens one slot holds
    uint32_t n_batch = 0;
    int32_t n_parallel = 0;
    size_t n_loras = 0;
    bool embeddings = false;          // the engine embeds; it does not generate
};

// A task read from JS, not yet prepared.
struct TaskRequest {
    std::unique_ptr<CompletionTask> task;
    bool has_media = false;
    std::string prompt_text;                  // with media: the prompt, one marker per media file
    std::vector<std::vector<uint8_t>> media;  // with media: encoded image or audio files, in marker order
};

// JS thread. Throws a coded INVALID_ARGUMENT Napi::Error for values of the wrong type or shape
// (a bug in the TypeScript caller), a Refusal for content refused on sight.
TaskRequest parse_task(Napi::Env env, Napi::Object o, const TaskLimits & limits);

// Any thread (a worker, in practice). Completes `request.task` or throws a Refusal:
// TOKEN_OUT_OF_RANGE, EMPTY_PROMPT, EXCEEDS_CONTEXT, EXCEEDS_BATCH, NOT_SUPPORTED, BAD_MEDIA,
// BAD_SAMPLING.
void prepare_task(TaskRequest & request, const TaskLimits & limits);

// Any thread: the number of tokens the prompt of a parsed task holds, its images tokenized as
// prepare_task would (each image counted as its tokens, as llama-server counts them); nothing
// else is checked. Throws Refusal for bad images or token ids.
size_t count_prompt_tokens(TaskRequest & request, const TaskLimits & limits);

}  // namespace addon
