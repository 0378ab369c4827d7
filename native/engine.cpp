// The engine core: creating its context, and the engine thread's life.
#include "engine.h"

#include <algorithm>
#include <exception>

#include "disk-tier.h"
#include "errors.h"
#include "log.h"
#include "scheduler.h"

namespace addon {

EngineContext::~EngineContext() {
    spec.reset();  // before the target context, which its draft context reads
    if (ctx) llama_free(ctx);
}

// ggml's CPU backend computes a graph on an OpenMP team whose master is the calling thread, and
// libgomp keeps that team's threads for the master until the master exits. A decode on a
// long-lived libuv worker (the speculation check decodes two tokens) would leave an idle team
// behind; with more OpenMP threads than CPUs libgomp stops spinning at barriers for every team,
// the engine thread's included (docs/benchmarks.md, "Figures moved from code comments").
// Such work runs on a thread of its own that exits at once and takes its team with it.
template <typename Fn>
static void on_own_thread(Fn && fn) {
    std::exception_ptr error;
    std::thread worker([&] {
        try {
            fn();
        } catch (...) {
            error = std::current_exception();
        }
    });
    worker.join();
    if (error) std::rethrow_exception(error);
}

static llama_context_params context_params(const EngineParams & p) {
    llama_context_params cp = p.server ? common_context_params_to_llama(*p.server) : llama_context_default_params();
    cp.n_ctx = p.n_ctx;
    cp.n_batch = p.n_batch;
    cp.n_ubatch = p.n_ubatch;
    cp.n_seq_max = static_cast<uint32_t>(p.n_parallel);
    cp.n_threads = p.n_threads;
    cp.n_threads_batch = p.n_threads_batch;
    cp.kv_unified = p.kv_unified;
    cp.flash_attn_type = p.flash_attn < 0 ? LLAMA_FLASH_ATTN_TYPE_AUTO : p.flash_attn == 0 ? LLAMA_FLASH_ATTN_TYPE_DISABLED : LLAMA_FLASH_ATTN_TYPE_ENABLED;
    cp.no_perf = true;
    cp.embeddings = p.embeddings;
    if (p.pooling >= 0) cp.pooling_type = static_cast<enum llama_pooling_type>(p.pooling);
    // An input is embedded in one pass: the whole of it must fit one physical batch.
    if (p.embeddings) cp.n_ubatch = cp.n_batch;
    // Outputs per step, as llama-server: generation takes at most one per slot (its next token,
    // or the last prompt token); embeddings may output every token (pooling none). The worst-case
    // compute buffer is reserved for this many rows of logits. With speculation a slot's drafted
    // tokens take outputs too (common_speculative_get_output_limits).
    const int32_t n_draft = p.server && !p.embeddings ? Speculation::configured_n_max(*p.server) : 0;
    const auto limits = common_speculative_get_output_limits(static_cast<int32_t>(cp.n_batch), static_cast<int32_t>(cp.n_seq_max), n_draft);
    cp.n_outputs_max = p.embeddings ? cp.n_batch : static_cast<uint32_t>(std::max(limits.total, static_cast<int32_t>(cp.n_seq_max)));
    cp.n_outputs_max_per_seq = static_cast<uint32_t>(std::max(1, limits.per_seq));
    return cp;
}

// --control-vector(-scaled), --control-vector-layer-range: as llama.cpp's common_init_from_params.
static void apply_control_vectors(llama_context * ctx, const llama_model * model, const common_params & server) {
    const int32_t start = server.control_vector_layer_start <= 0 ? 1 : server.control_vector_layer_start;
    const int32_t end = server.control_vector_layer_end <= 0 ? llama_model_n_layer(model) : server.control_vector_layer_end;
    log_capture_begin();
    const common_control_vector_data cvec = common_control_vector_load(server.control_vectors);
    const int32_t err = cvec.n_embd == -1 ? -1 : llama_set_adapter_cvec(ctx, cvec.data.data(), cvec.data.size(), cvec.n_embd, start, end);
    const std::string errors = log_capture_end();
    if (err != 0) throw Refusal(ErrorCode::LOAD_FAILED, "failed to apply the control vector" + (errors.empty() ? std::string() : ": " + errors));
}

EngineContext engine_context_create(const EngineParams & p, const llama_model * model) {
    EngineContext out;
    llama_context_params cp = context_params(p);
    // -bs: as common_init_from_params, the context is created with a chain per sequence.
    std::vector<llama_sampler_seq_config> configs;
    if (p.backend_sampling) {
        for (int32_t i = 0; i < p.n_parallel; i++) {
            common_params_sampling defaults;
            out.samplers->emplace_back(common_sampler_init(model, defaults), common_sampler_free);
            configs.push_back({i, common_sampler_get(out.samplers->back().get())});
        }
        cp.samplers = configs.data();
        cp.n_samplers = configs.size();
    }
    log_capture_begin();
    out.ctx = llama_init_from_model(const_cast<llama_model *>(model), cp);
    const std::string errors = log_capture_end();
    if (!out.ctx) throw Refusal(ErrorCode::LOAD_FAILED, "failed to create the inference context" + (errors.empty() ? std::string() : ": " + errors));
    if (p.ctx_shift && !p.embeddings && !llama_memory_can_shift(llama_get_memory(out.ctx))) {
        throw Refusal(ErrorCode::NOT_SUPPORTED, "context shift is not supported by this model's memory (drop --context-shift)");
    }
    if (p.server && !p.server->control_vectors.empty()) apply_control_vectors(out.ctx, model, *p.server);
    if (p.server && !p.embeddings) {
        on_own_thread([&] {
            out.spec = Speculation::create(*p.server, const_cast<llama_model *>(model), out.ctx, p.n_parallel, p.n_threads, p.n_threads_batch);
        });
    }
    return out;
}

// The batch size the context took (llama.cpp clamps the one asked for to the context's size):
// the engine builds its batches to it.
static EngineParams with_context_batch(EngineParams p, const llama_context * ctx) {
    p.n_batch = llama_n_batch(ctx);
    return p;
}

Engine::Engine(EngineParams params, const llama_model * model, EngineContext context, std::vector<llama_adapter_lora *> loras, mtmd_context * vision)
    : params_(with_context_batch(std::move(params), context.ctx)), context_(std::move(context)), queue_(counters_) {
    llama_context * ctx = context_.ctx;
    int32_t n_ctx_seq = static_cast<int32_t>(llama_n_ctx_seq(ctx));
    // --kv-unified-per-slot caps each slot below its share of the pool, as llama-server's n_ctx_slot().
    if (params_.n_ctx_slot_max > 0) n_ctx_seq = std::min(n_ctx_seq, params_.n_ctx_slot_max);
    info_.n_ctx = llama_n_ctx(ctx);
    info_.n_ctx_slot = n_ctx_seq;
    info_.n_ubatch = llama_n_ubatch(ctx);
    info_.n_threads = llama_n_threads(ctx);
    info_.n_threads_batch = llama_n_threads_batch(ctx);
    info_.pooling = static_cast<int32_t>(llama_pooling_type(ctx));
    info_.n_embd_out = info_.pooling == LLAMA_POOLING_TYPE_RANK ? static_cast<int32_t>(std::max<uint32_t>(1, llama_model_n_cls_out(model)))
                                                                : llama_model_n_embd_out(model);
    info_.modes = engine_modes_decide(params_, model, ctx, context_.spec != nullptr);
    common_params cpu;
    cpu.cpuparams.n_threads = info_.n_threads;
    cpu.cpuparams_batch.n_threads = info_.n_threads_batch;
    threadpools_ = std::make_unique<common_threadpools>();
    threadpools_->init(ctx, cpu);
    // With --kv-events the tiers' entries are tracked from the start: the disk files adopted below too.
    if (params_.cache_events) queue_.cache_events().track_tiers();
    disk_ = disk_tier_open(params_, model, ctx, disk_counters_);
    // A task waiting for its state's read is admitted once the read is done.
    if (disk_) disk_->set_on_read([this] { queue_.wake(); });
    // Its files (those adopted at start-up first) for the KV-cache events.
    if (disk_) disk_->report_to(&queue_.cache_events());
    SchedulerParts parts{ctx, model, vision, std::move(loras), context_.spec.get(), n_ctx_seq, static_cast<enum llama_pooling_type>(info_.pooling), info_.n_embd_out, disk_.get()};
    scheduler_ = std::make_unique<Scheduler>(params_, info_.modes, std::move(parts), queue_, counters_);
}

Engine::~Engine() { stop(); }

void Engine::start() {
    thread_ = std::thread([this] { scheduler_->run(); });
}

void Engine::stop() {
    if (stopped_) return;
    stopped_ = true;
    queue_.stop();
    if (thread_.joinable()) thread_.join();
    // The engine thread has ended: this thread may read the slots' cells, whose states go to disk.
    if (scheduler_ && disk_) scheduler_->persist_caches();
    scheduler_.reset();  // its slots' tasks and backend sampler chains go before the context
    context_.spec.reset();  // its draft context reads the context
    if (context_.ctx) {
        llama_detach_threadpool(context_.ctx);
        llama_free(context_.ctx);
        context_.ctx = nullptr;
    }
    threadpools_.reset();
    disk_.reset();  // finishes the writes queued
}

uint64_t Engine::prompt_cache_reuses() const {
    const PromptCache * cache = scheduler_ ? scheduler_->prompt_cache() : nullptr;
    return cache ? cache->reused_buffers() : 0;
}

uint64_t Engine::prompt_cache_bytes() const {
    const PromptCache * cache = scheduler_ ? scheduler_->prompt_cache() : nullptr;
    return cache ? cache->published_bytes() : 0;
}

}  // namespace addon
