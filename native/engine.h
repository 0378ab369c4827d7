#pragma once
// Engine: one llama_context shared by N slots, and the thread that drives it (continuous
// batching), as llama-server's server_context. The engine core; no N-API here (the JS object is
// EngineBinding, engine-binding.h).
//
// Parts: EngineParams (read once), TaskQueue (all that crosses threads, every lock), Scheduler
// (the engine thread: admission, batch, decode, sampling), SlotCachePolicy (what the slots' cells
// hold), BatchBuilder (what one step decodes). native/README.md traces one request through them.
//
// Threads: the engine thread runs Scheduler::run from start() until stop(); it alone touches the
// context, the batch and the slots. Any other thread talks to it only through queue().
#include <memory>
#include <thread>
#include <vector>

#include "common.h"
#include "disk-cache.h"
#include "engine-counters.h"
#include "engine-params.h"
#include "llama.h"
#include "mtmd.h"
#include "speculation.h"
#include "task-queue.h"

namespace addon {

class Scheduler;

// -bs: sampler chains a context was created with (llama_context_params.samplers).
using InitialSamplers = std::vector<std::unique_ptr<common_sampler, void (*)(common_sampler *)>>;

// A context and what was created with it (engine_context_create); the Engine takes them over.
struct EngineContext {
    llama_context * ctx = nullptr;
    // Speculative decoding (--spec-type, -md); null when off. Freed before ctx (its draft context reads ctx).
    std::unique_ptr<Speculation> spec;
    // -bs: the chains the context was created with (one per sequence), alive as long as it is.
    std::unique_ptr<InitialSamplers> samplers = std::make_unique<InitialSamplers>();

    EngineContext() = default;
    EngineContext(EngineContext && other) noexcept : ctx(other.ctx), spec(std::move(other.spec)), samplers(std::move(other.samplers)) { other.ctx = nullptr; }
    EngineContext & operator=(EngineContext &&) = delete;
    ~EngineContext();
};

// Any thread but the JS thread (it blocks): creates the context `params` describe for `model`,
// with its control vectors and speculative decoding. Throws Refusal (LOAD_FAILED, NOT_SUPPORTED).
EngineContext engine_context_create(const EngineParams & params, const llama_model * model);

// What /props and the server's info report of an engine (EngineBinding's info()).
struct EngineInfo {
    uint32_t n_ctx = 0;
    int32_t n_ctx_slot = 0;
    uint32_t n_ubatch = 0;
    int32_t n_threads = 0;
    int32_t n_threads_batch = 0;
    int32_t pooling = 0;
    int32_t n_embd_out = 0;
    EngineModes modes;
};

class Engine {
public:
    // Takes over `context`; `loras`: the adapters tasks' lora_scales index; `vision`: the
    // projector, or null. The caller keeps the model, adapters and projector alive until the
    // Engine is destroyed.
    Engine(EngineParams params, const llama_model * model, EngineContext context, std::vector<llama_adapter_lora *> loras, mtmd_context * vision);
    ~Engine();
    Engine(const Engine &) = delete;
    Engine & operator=(const Engine &) = delete;

    // Starts the engine thread.
    void start();
    // Any thread: stops the engine thread (its running tasks end where they are) and frees the
    // context. Idempotent; blocks until the thread has ended.
    void stop();

    TaskQueue & queue() { return queue_; }
    EngineCounters & counters() { return counters_; }
    const EngineParams & params() const { return params_; }
    const EngineInfo & info() const { return info_; }
    // For /metrics: the prompt cache's buffers reused and bytes held (0 without a prompt cache).
    uint64_t prompt_cache_reuses() const;
    uint64_t prompt_cache_bytes() const;
    // For /metrics: the disk tier's counters (zero without --cache-disk).
    const DiskCacheCounters & disk_counters() const { return disk_counters_; }
    // For /metrics: the speculation's counters, or null without speculative decoding.
    SpeculationCounters * speculation_counters() const { return context_.spec ? &context_.spec->counters() : nullptr; }
    std::string speculation_types() const { return context_.spec ? context_.spec->types() : std::string(); }

private:
    const EngineParams params_;
    EngineContext context_;
    EngineCounters counters_;
    TaskQueue queue_;
    EngineInfo info_;
    // Persistent CPU threadpools (with llama-server's polling), attached to the context: without
    // them ggml starts and joins its worker threads on every decode.
    std::unique_ptr<common_threadpools> threadpools_;
    DiskCacheCounters disk_counters_;
    // --cache-disk; outlives the scheduler, so that the writes it queued at the end are finished.
    std::unique_ptr<DiskCache> disk_;
    std::unique_ptr<Scheduler> scheduler_;
    std::thread thread_;
    bool stopped_ = false;
};

}  // namespace addon
