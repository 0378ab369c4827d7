// The Engine's JS-thread half: creation, the methods JS calls, task submission and event
// delivery. The engine thread's loop is in engine.cpp.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <thread>

#include "common.h"
#include "engine.h"
#include "server-params.h"
#include "errors.h"
#include "js-values.h"
#include "log.h"
#include "lora.h"
#include "model-worker.h"
#include "model.h"
#include "vision.h"

// o[key], when given, into `out`: a number from 0 to `max` (a fraction allowed); anything else
// throws INVALID_ARGUMENT with `message`.
static void read_in_range(Napi::Env env, Napi::Object o, const char * key, double max, const char * message, double & out) {
    Napi::Value v = o.Get(key);
    if (v.IsUndefined()) return;
    const double d = v.IsNumber() ? v.As<Napi::Number>().DoubleValue() : -1;
    if (!(d >= 0 && d <= max)) addon::throw_coded(env, addon::ErrorCode::INVALID_ARGUMENT, message);
    out = d;
}

static constexpr double HOUR_MS = 3600000;

namespace addon {

Napi::FunctionReference Engine::constructor;

// ---------------------------------------------------------------------------------------------
// Creation: the context is allocated on a worker thread.

// ggml's CPU backend computes a graph on an OpenMP team whose master is the calling thread, and
// libgomp keeps that team's threads for the master until the master exits. A decode on the
// long-lived libuv worker (the speculation check decodes two tokens) would leave an idle team
// behind; with more OpenMP threads than CPUs libgomp stops spinning at barriers for every team,
// the engine thread's included (measured: speculative decoding 25-35% slower on 2 cores). Such
// work runs on a thread of its own that exits at once and takes its team with it.
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

class EngineCreateWorker : public ModelWorker {
public:
    EngineCreateWorker(Napi::Env env, Model * model, Napi::Object model_obj, Napi::Function on_events, EngineParams params)
        : ModelWorker(env, model, model_obj), params_(params) {
        on_events_ = Napi::Persistent(on_events);
    }
    void set_loras(Napi::Array loras) { loras_ = Napi::Persistent(loras); }
    void set_vision(Napi::Object vision) { vision_ = Napi::Persistent(vision); }
    ~EngineCreateWorker() override {
        spec_.reset();  // before the target context, which its draft context reads
        if (ctx_) llama_free(ctx_);
    }

    void Execute() override {
        llama_context_params cp = params_.server ? common_context_params_to_llama(*params_.server) : llama_context_default_params();
        cp.n_ctx = params_.n_ctx;
        cp.n_batch = params_.n_batch;
        cp.n_ubatch = params_.n_ubatch;
        cp.n_seq_max = static_cast<uint32_t>(params_.n_parallel);
        cp.n_threads = params_.n_threads;
        cp.n_threads_batch = params_.n_threads_batch;
        cp.kv_unified = params_.kv_unified;
        cp.flash_attn_type = params_.flash_attn < 0 ? LLAMA_FLASH_ATTN_TYPE_AUTO
                             : params_.flash_attn == 0 ? LLAMA_FLASH_ATTN_TYPE_DISABLED : LLAMA_FLASH_ATTN_TYPE_ENABLED;
        cp.no_perf = true;
        cp.embeddings = params_.embeddings;
        if (params_.pooling >= 0) cp.pooling_type = static_cast<enum llama_pooling_type>(params_.pooling);
        // An input is embedded in one pass: the whole of it must fit one physical batch.
        if (params_.embeddings) cp.n_ubatch = cp.n_batch;
        // Outputs per step, as llama-server: generation takes at most one per slot (its next token,
        // or the last prompt token); embeddings may output every token (pooling none). The worst-case
        // compute buffer is reserved for this many rows of logits.
        // With speculation a slot's drafted tokens take outputs too (common_speculative_get_output_limits).
        const int32_t n_draft = params_.server && !params_.embeddings ? Speculation::configured_n_max(*params_.server) : 0;
        const auto limits = common_speculative_get_output_limits(static_cast<int32_t>(cp.n_batch), static_cast<int32_t>(cp.n_seq_max), n_draft);
        cp.n_outputs_max = params_.embeddings ? cp.n_batch : static_cast<uint32_t>(std::max(limits.total, static_cast<int32_t>(cp.n_seq_max)));
        cp.n_outputs_max_per_seq = static_cast<uint32_t>(std::max(1, limits.per_seq));
        // -bs: as common_init_from_params, the context is created with a chain per sequence.
        std::vector<llama_sampler_seq_config> configs;
        if (params_.backend_sampling) {
            for (int32_t i = 0; i < params_.n_parallel; i++) {
                common_params_sampling defaults;
                samplers_->emplace_back(common_sampler_init(model_->get(), defaults), common_sampler_free);
                configs.push_back({i, common_sampler_get(samplers_->back().get())});
            }
            cp.samplers = configs.data();
            cp.n_samplers = configs.size();
        }
        log_capture_begin();
        ctx_ = llama_init_from_model(model_->get(), cp);
        std::string errors = log_capture_end();
        if (!ctx_) {
            fail(ErrorCode::LOAD_FAILED, "failed to create the inference context" + (errors.empty() ? std::string() : ": " + errors));
        } else if (params_.ctx_shift && !params_.embeddings && !llama_memory_can_shift(llama_get_memory(ctx_))) {
            fail(ErrorCode::NOT_SUPPORTED, "context shift is not supported by this model's memory (drop --context-shift)");
        } else {
            if (params_.server && !params_.server->control_vectors.empty()) apply_control_vectors(*params_.server);
            if (params_.server && !params_.embeddings) {
                try {
                    on_own_thread([&] {
                        spec_ = Speculation::create(*params_.server, model_->get(), ctx_, params_.n_parallel, params_.n_threads, params_.n_threads_batch);
                    });
                } catch (const Refusal & r) {
                    fail(r.code, r.message);
                }
            }
        }
    }

    // --control-vector(-scaled), --control-vector-layer-range: as llama.cpp's common_init_from_params.
    void apply_control_vectors(const common_params & server) {
        const int32_t start = server.control_vector_layer_start <= 0 ? 1 : server.control_vector_layer_start;
        const int32_t end = server.control_vector_layer_end <= 0 ? llama_model_n_layer(model_->get()) : server.control_vector_layer_end;
        log_capture_begin();
        const common_control_vector_data cvec = common_control_vector_load(server.control_vectors);
        int32_t err = cvec.n_embd == -1 ? -1 : llama_set_adapter_cvec(ctx_, cvec.data.data(), cvec.data.size(), cvec.n_embd, start, end);
        std::string errors = log_capture_end();
        if (err != 0) fail(ErrorCode::LOAD_FAILED, "failed to apply the control vector" + (errors.empty() ? std::string() : ": " + errors));
    }

    Napi::Value result(Napi::Env env) override {
        llama_context * ctx = ctx_;
        ctx_ = nullptr;
        Napi::Object p = Napi::Object::New(env);
        p.Set("nParallel", params_.n_parallel);
        p.Set("nBatch", params_.n_batch);
        p.Set("embeddings", params_.embeddings);
        p.Set("contextShift", params_.ctx_shift);
        p.Set("promptCacheMib", params_.prompt_cache_mib);
        p.Set("cacheIdleSlots", params_.cache_idle_slots);
        p.Set("kvUnified", params_.kv_unified);
        p.Set("special", params_.special);
        p.Set("nCtxSlotMax", params_.n_ctx_slot_max);
        p.Set("backendSampling", params_.backend_sampling);
        p.Set("prefillBudget", params_.prefill_budget);
        p.Set("prefillBudgetMs", params_.prefill_budget_ms);
        p.Set("overloadLifoMs", params_.overload_lifo_ms);
        p.Set("burstWaitMs", params_.burst_wait_ms);
        p.Set("slotPromptSimilarity", params_.slot_prompt_similarity);
        p.Set("prefixSharing", params_.prefix_sharing);
        p.Set("loras", loras_.IsEmpty() ? Napi::Array::New(env) : loras_.Value());
        if (!vision_.IsEmpty()) p.Set("vision", vision_.Value());
        if (spec_) p.Set("speculation", Napi::External<Speculation>::New(env, spec_.release()));
        // The engine adopts the -bs chains the context points to.
        auto * samplers = samplers_.release();
        return Engine::constructor.New({Napi::External<llama_context>::New(env, ctx), model_ref_.Value(), on_events_.Value(), p,
                                        Napi::External<InitialSamplers>::New(env, samplers)});
    }

private:
    Napi::FunctionReference on_events_;
    Napi::Reference<Napi::Array> loras_;
    Napi::ObjectReference vision_;
    EngineParams params_;
    llama_context * ctx_ = nullptr;
    // Declared after ctx_: destroyed after the destructor frees a context that points to them.
    std::unique_ptr<InitialSamplers> samplers_ = std::make_unique<InitialSamplers>();
    std::unique_ptr<Speculation> spec_;  // freed before ctx_ (the destructor), whose draft context reads it
};

// Engine.create(model, params, onEvents) -> Promise<Engine>
// An optional boolean field: -1 absent, 0 false, 1 true; another type is INVALID_ARGUMENT.
static int32_t read_optional_bool(Napi::Env env, Napi::Object o, const char * key) {
    Napi::Value v = o.Get(key);
    if (v.IsUndefined()) return -1;
    if (!v.IsBoolean()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, std::string("params.") + key + " must be a boolean");
    return v.As<Napi::Boolean>() ? 1 : 0;
}

Napi::Value Engine::create(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    if (info.Length() < 3 || !info[0].IsObject() || !info[1].IsObject() || !info[2].IsFunction()) {
        throw_coded(env, ErrorCode::INVALID_ARGUMENT, "Engine.create(model, params, onEvents)");
    }
    Napi::Object model_obj = info[0].As<Napi::Object>();
    Model * model = Model::from_js(env, model_obj);
    Napi::Object o = info[1].As<Napi::Object>();
    EngineParams p;
    p.n_parallel = std::max(1, read_i32(o, "nParallel", 4));
    p.n_ctx = read_u32(o, "nCtx", 0);
    p.n_batch = std::max<uint32_t>(read_u32(o, "nBatch", 2048), static_cast<uint32_t>(p.n_parallel));
    p.n_ubatch = std::min(read_u32(o, "nUbatch", 512), p.n_batch);
    p.n_threads = read_i32(o, "nThreads", 0);
    if (p.n_threads <= 0) p.n_threads = common_cpu_get_num_math();
    p.n_threads_batch = read_i32(o, "nThreadsBatch", 0);
    if (p.n_threads_batch <= 0) p.n_threads_batch = p.n_threads;
    if (o.Get("kvUnified").IsBoolean()) p.kv_unified = o.Get("kvUnified").As<Napi::Boolean>();
    p.flash_attn = read_i32(o, "flashAttn", -1);
    if (o.Get("embeddings").IsBoolean()) p.embeddings = o.Get("embeddings").As<Napi::Boolean>();
    p.pooling = read_i32(o, "pooling", -1);
    if (o.Get("contextShift").IsBoolean()) p.ctx_shift = o.Get("contextShift").As<Napi::Boolean>();
    p.prompt_cache_mib = read_i32(o, "promptCacheMib", 0);
    if (o.Get("cacheIdleSlots").IsBoolean()) p.cache_idle_slots = o.Get("cacheIdleSlots").As<Napi::Boolean>();
    p.special = o.Get("special").ToBoolean();
    p.n_ctx_slot_max = std::max(0, read_i32(o, "nCtxSlotMax", 0));
    p.backend_sampling = o.Get("backendSampling").ToBoolean();
    // Without a GPU device EngineParams' 512-token budget keeps the generating slots' gaps short; on
    // an H200 its extra steps only delayed newcomers (32 streams' TTFT p50 1.86x llama-server's,
    // 0.87x without it), and a step of n_batch prompt tokens takes milliseconds: the time target alone.
    if (Engine::gpu_build()) p.prefill_budget = 0;
    if (!o.Get("prefillBudget").IsUndefined()) {
        Napi::Value v = o.Get("prefillBudget");
        const double d = v.IsNumber() ? v.As<Napi::Number>().DoubleValue() : -1;
        if (!(d >= 0 && d <= INT32_MAX && d == static_cast<double>(static_cast<int64_t>(d)))) {
            throw_coded(env, ErrorCode::INVALID_ARGUMENT, "params.prefillBudget must be an integer >= 0 (0: no budget)");
        }
        p.prefill_budget = static_cast<int32_t>(d);
    }
    read_in_range(env, o, "prefillBudgetMs", HOUR_MS, "params.prefillBudgetMs must be a number of milliseconds from 0 (no time target) to 3600000", p.prefill_budget_ms);
    p.prefix_sharing = read_optional_bool(env, o, "prefixSharing");
    // The first step of a CPU build takes tens of milliseconds at least, and a burst's late
    // arrivals wait for it; on a GPU a step takes a few milliseconds: no wait there.
    if (Engine::gpu_build()) p.burst_wait_ms = 0;
    read_in_range(env, o, "burstWaitMs", 1000, "params.burstWaitMs must be a number of milliseconds from 0 (no wait) to 1000", p.burst_wait_ms);
    read_in_range(env, o, "overloadLifoMs", HOUR_MS, "params.overloadLifoMs must be a number of milliseconds from 0 (always oldest first) to 3600000", p.overload_lifo_ms);
    if (o.Get("serverParams").IsObject()) p.server = std::make_shared<common_params>(ServerParams::from_js(env, o.Get("serverParams")).params());
    if (p.server) p.slot_prompt_similarity = p.server->slot_prompt_similarity;
    read_in_range(env, o, "slotPromptSimilarity", 1, "params.slotPromptSimilarity must be a number from 0 (always the least recently used slot) to 1", p.slot_prompt_similarity);
    auto * worker = new EngineCreateWorker(env, model, model_obj, info[2].As<Napi::Function>(), p);
    if (o.Get("loras").IsArray()) {
        Napi::Array loras = o.Get("loras").As<Napi::Array>();
        for (uint32_t i = 0; i < loras.Length(); i++) {
            Napi::Value v = loras.Get(i);
            if (!v.IsObject() || !v.As<Napi::Object>().InstanceOf(LoraAdapter::constructor.Value())) {
                delete worker;
                throw_coded(env, ErrorCode::INVALID_ARGUMENT, "params.loras must be LoraAdapter objects");
            }
            LoraAdapter * a = LoraAdapter::Unwrap(v.As<Napi::Object>());
            if (a->model() != model || !a->get()) {
                delete worker;
                throw_coded(env, ErrorCode::INVALID_ARGUMENT, "a LoRA adapter belongs to another model or is disposed");
            }
        }
        worker->set_loras(loras);
    }
    if (o.Get("vision").IsObject()) {
        Napi::Object v = o.Get("vision").As<Napi::Object>();
        if (!v.InstanceOf(Vision::constructor.Value()) || Vision::Unwrap(v)->model() != model || !Vision::Unwrap(v)->get()) {
            delete worker;
            throw_coded(env, ErrorCode::INVALID_ARGUMENT, "params.vision must be a Vision loaded for this model");
        }
        worker->set_vision(v);
    }
    worker->Queue();
    return worker->promise();
}

Napi::Function Engine::define(Napi::Env env) {
    Napi::Function fn = DefineClass(env, "Engine", {
        StaticMethod<&Engine::create>("create"),
        InstanceMethod<&Engine::js_submit>("submit"),
        InstanceMethod<&Engine::js_announce>("announce"),
        InstanceMethod<&Engine::js_cancel>("cancel"),
        InstanceMethod<&Engine::js_slots>("slots"),
        InstanceMethod<&Engine::js_metrics>("metrics"),
        InstanceMethod<&Engine::js_info>("info"),
        InstanceMethod<&Engine::js_dispose>("dispose"),
        InstanceMethod<&Engine::js_slot_action>("slotAction"),
        InstanceMethod<&Engine::js_count_tokens>("countTokens"),
    });
    constructor = Napi::Persistent(fn);
    constructor.SuppressDestruct();
    return fn;
}

Engine::Engine(const Napi::CallbackInfo & info) : Napi::ObjectWrap<Engine>(info) {
    Napi::Env env = info.Env();
    if (info.Length() < 4 || !info[0].IsExternal()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, "Engine cannot be constructed directly; use Engine.create()");
    ctx_ = info[0].As<Napi::External<llama_context>>().Data();
    Napi::Object model_obj = info[1].As<Napi::Object>();
    model_ = Model::Unwrap(model_obj);
    model_ref_ = Napi::Persistent(model_obj);
    model_->retain();
    vocab_ = model_->vocab();
    Napi::Object p = info[3].As<Napi::Object>();
    params_.n_parallel = read_i32(p, "nParallel", 1);
    if (info.Length() > 4 && info[4].IsExternal()) initial_samplers_.reset(info[4].As<Napi::External<InitialSamplers>>().Data());
    params_.backend_sampling = p.Get("backendSampling").ToBoolean();
    params_.n_batch = llama_n_batch(ctx_);
    params_.ctx_shift = p.Get("contextShift").ToBoolean();
    params_.prompt_cache_mib = read_i32(p, "promptCacheMib", 0);
    params_.cache_idle_slots = p.Get("cacheIdleSlots").ToBoolean();
    if (p.Get("kvUnified").IsBoolean()) params_.kv_unified = p.Get("kvUnified").As<Napi::Boolean>();
    params_.special = p.Get("special").ToBoolean();
    // As llama-server: the cache holds at least a context's worth of tokens.
    if (params_.prompt_cache_mib != 0) prompt_cache_ = std::make_unique<PromptCache>(params_.prompt_cache_mib, llama_n_ctx(ctx_), llama_n_ctx(ctx_));
    // llama-server's debug line (its test suite looks for the tag) when idle slots go to the cache.
    if (prompt_cache_ && params_.cache_idle_slots) log_debug("srv    load_model: __TEST_TAG_CACHE_IDLE_SLOTS_ENABLED__\n");
    params_.prefill_budget = read_i32(p, "prefillBudget", params_.prefill_budget);
    params_.prefill_budget_ms = read_f64(p, "prefillBudgetMs", params_.prefill_budget_ms);
    params_.overload_lifo_ms = read_f64(p, "overloadLifoMs", params_.overload_lifo_ms);
    params_.burst_wait_ms = read_f64(p, "burstWaitMs", params_.burst_wait_ms);
    params_.slot_prompt_similarity = read_f64(p, "slotPromptSimilarity", params_.slot_prompt_similarity);
    n_ctx_seq_ = static_cast<int32_t>(llama_n_ctx_seq(ctx_));
    // --kv-unified-per-slot caps each slot below its share of the pool, as llama-server's n_ctx_slot().
    const int32_t slot_max = read_i32(p, "nCtxSlotMax", 0);
    if (slot_max > 0) n_ctx_seq_ = std::min(n_ctx_seq_, slot_max);
    if (p.Get("loras").IsArray()) {
        Napi::Array loras = p.Get("loras").As<Napi::Array>();
        for (uint32_t i = 0; i < loras.Length(); i++) {
            Napi::Object obj = loras.Get(i).As<Napi::Object>();
            LoraAdapter * a = LoraAdapter::Unwrap(obj);
            a->retain();
            loras_.push_back(a);
            lora_handles_.push_back(a->get());
            lora_refs_.push_back(Napi::Persistent(obj));
        }
    }
    if (p.Get("vision").IsObject()) {
        Napi::Object v = p.Get("vision").As<Napi::Object>();
        vision_ = Vision::Unwrap(v);
        vision_->retain();
        vision_ref_ = Napi::Persistent(v);
    }
    if (p.Get("speculation").IsExternal()) spec_.reset(p.Get("speculation").As<Napi::External<Speculation>>().Data());
    embeddings_ = p.Get("embeddings").ToBoolean();
    sharing_ = prefix_sharing_in_effect(read_i32(p, "prefixSharing", -1));
    choose_step_modes();
    pooling_ = llama_pooling_type(ctx_);
    n_embd_out_ = pooling_ == LLAMA_POOLING_TYPE_RANK ? static_cast<int32_t>(std::max<uint32_t>(1, llama_model_n_cls_out(model_->get())))
                                                      : llama_model_n_embd_out(model_->get());

    {
        common_params cpu;
        cpu.cpuparams.n_threads = llama_n_threads(ctx_);
        cpu.cpuparams_batch.n_threads = llama_n_threads_batch(ctx_);
        threadpools_ = std::make_unique<common_threadpools>();
        threadpools_->init(ctx_, cpu);
    }
    batch_ = llama_batch_init(static_cast<int32_t>(std::max<uint32_t>(params_.n_batch, params_.n_parallel)), 0, 1);
    slots_.resize(params_.n_parallel);
    summaries_.resize(params_.n_parallel);
    for (int32_t i = 0; i < params_.n_parallel; i++) {
        slots_[i].id = i;
        slots_[i].n_ctx = n_ctx_seq_;
        summaries_[i].id = i;
    }
    tsfn_ = Napi::ThreadSafeFunction::New(env, info[2].As<Napi::Function>(), "engine-events", 0, 1);
    tsfn_live_ = true;
    tsfn_.Unref(env);  // referenced only while tasks are active (see track_active)
    thread_ = std::thread([this] { run(); });
}

Engine::~Engine() {
    stop_thread();
    free_context();
    if (tsfn_live_) {
        tsfn_.Abort();
        tsfn_live_ = false;
    }
}

void Engine::stop_thread() {
    {
        std::lock_guard<std::mutex> lock(inbox_mutex_);
        stopping_ = true;
    }
    inbox_cv_.notify_all();
    if (thread_.joinable()) thread_.join();
}

void Engine::free_context() {
    for (auto & slot : slots_) {
        if (slot.backend_sampler && ctx_) llama_set_sampler(ctx_, slot.id, nullptr);  // its chain goes with the task
        slot.backend_sampler = false;
        slot.task.reset();
    }
    waiting_.clear();
    if (batch_.token) {
        llama_batch_free(batch_);
        batch_ = {};
    }
    spec_.reset();  // its draft context reads ctx_
    if (ctx_) {
        llama_detach_threadpool(ctx_);
        llama_free(ctx_);
        ctx_ = nullptr;
    }
    threadpools_.reset();
}

// ---------------------------------------------------------------------------------------------
// Submission

TaskLimits Engine::task_limits() const {
    TaskLimits limits;
    limits.model = model_->get();
    limits.vocab = vocab_;
    limits.eog_tokens = &model_->eog_tokens();
    limits.vision = vision_ ? vision_->get() : nullptr;
    limits.n_ctx_seq = n_ctx_seq_;
    limits.n_batch = params_.n_batch;
    limits.n_parallel = params_.n_parallel;
    limits.n_loras = loras_.size();
    limits.embeddings = embeddings_;
    return limits;
}

// Prepares the tasks of one submit() that hold images or a grammar off the JS thread
// (prepare_task: image decoding, grammar parsing, sampler chains), then queues all of them on the
// engine, or none (the others are prepared and queued at once: Engine::submit_now).
// Ownership: keeps the Engine's JS object alive and counts as a user of the model and the
// projector until it settles, so neither can be freed while Execute() reads them.
// Ordering: OnOK queues the tasks and resolves the promise in the same callback. Node drains the
// microtask queue when that callback returns, and the tasks' events can only reach JS later,
// through the ThreadSafeFunction's own libuv handle; so whatever awaits the promise runs (up to
// its next real wait) before the first event of these tasks is delivered.
class TaskSubmitWorker : public Napi::AsyncWorker {
public:
    // COUNT: the one task is only tokenized (images included) and the promise resolves with its
    // prompt's token count; nothing is queued.
    enum class Mode { SUBMIT, COUNT };

    // `announced`: the tasks are an announced request's (Engine::announce), which stops counting
    // when they are queued or refused.
    TaskSubmitWorker(Napi::Env env, Engine * engine, std::vector<TaskRequest> requests, std::vector<std::shared_ptr<std::atomic<bool>>> cancelled,
                     Mode mode = Mode::SUBMIT, bool announced = false)
        : Napi::AsyncWorker(env), deferred_(Napi::Promise::Deferred::New(env)), engine_(engine), limits_(engine->task_limits()),
          requests_(std::move(requests)), cancelled_(std::move(cancelled)), mode_(mode), announced_(announced) {
        engine_ref_ = Napi::Persistent(engine->Value());
        engine_->model_->retain();
        if (engine_->vision_) engine_->vision_->retain();
    }

    Napi::Promise promise() { return deferred_.Promise(); }

    void Execute() override {
        try {
            for (size_t i = 0; i < requests_.size(); i++) {
                if (mode_ == Mode::COUNT) counts_.push_back(count_prompt_tokens(requests_[i], limits_));
                else if (!cancelled_[i]->load()) prepare_task(requests_[i], limits_);
            }
        } catch (const Refusal & r) {
            refusal_ = std::make_unique<Refusal>(r);
            SetError(r.message);
        } catch (const std::exception & e) {
            refusal_ = std::make_unique<Refusal>(ErrorCode::LOAD_FAILED, std::string("the task could not be prepared: ") + e.what());
            SetError(refusal_->message);
        }
    }

    void OnOK() override {
        settle_users();
        if (engine_->disposed_) {
            if (announced_) engine_->settle_announcement();
            deferred_.Reject(coded_error(Env(), ErrorCode::DISPOSED, "engine is disposed").Value());
            return;
        }
        if (mode_ == Mode::COUNT) {
            deferred_.Resolve(Napi::Number::New(Env(), static_cast<double>(counts_.at(0))));
            return;
        }
        std::vector<std::unique_ptr<CompletionTask>> tasks;
        for (size_t i = 0; i < requests_.size(); i++) {
            if (!cancelled_[i]->load()) tasks.push_back(std::move(requests_[i].task));
        }
        engine_->enqueue(std::move(tasks), announced_);
        announced_ = false;
        deferred_.Resolve(Env().Undefined());
    }

    void OnError(const Napi::Error &) override {
        settle_users();
        if (announced_) engine_->settle_announcement();
        deferred_.Reject(refusal_->to_js(Env()).Value());
    }

private:
    // The tasks leave the engine's preparing_ map; the model and the projector are free again.
    void settle_users() {
        for (const auto & r : requests_) engine_->preparing_.erase(r.task->id);
        engine_->model_->release();
        if (engine_->vision_) engine_->vision_->release();
    }

    Napi::Promise::Deferred deferred_;
    Engine * engine_;
    Napi::ObjectReference engine_ref_;
    TaskLimits limits_;
    std::vector<TaskRequest> requests_;
    std::vector<std::shared_ptr<std::atomic<bool>>> cancelled_;
    Mode mode_;
    std::vector<size_t> counts_;
    std::unique_ptr<Refusal> refusal_;
    bool announced_;
};

// A submission's hold on its request's announcement (Engine::js_announce): it stops counting on
// every way out of submit(), when its tasks are queued (take(), then enqueue) or refused, or when
// submit() throws; a submission prepared on the pool takes it along (TaskSubmitWorker).
class Announcement {
public:
    Announcement(Engine * engine, bool held) : engine_(engine), held_(held) {}
    ~Announcement() {
        if (held_) engine_->settle_announcement();
    }
    Announcement(const Announcement &) = delete;
    Announcement & operator=(const Announcement &) = delete;
    // The hold, passed on to whoever queues the tasks.
    bool take() {
        const bool held = held_;
        held_ = false;
        return held;
    }

private:
    Engine * engine_;
    bool held_;
};

// Whether a task's preparation can take long enough to leave the JS thread: images or audio to
// decode and tokenize, a grammar to parse. The rest (token ids checked against the vocabulary, a
// sampler chain without a grammar) takes microseconds.
static bool prepared_off_thread(const TaskRequest & r) {
    return r.has_media || !common_grammar_value(r.task->sampling.grammar).empty();
}

// Tasks that prepare in microseconds are prepared and queued here, on the JS thread, and `queued`
// is settled before submit() returns. Sent to libuv's pool they were queued only once the JS
// thread came back to the worker's completion: in a burst of 32 streamed requests (2-core VM,
// tiny model, no burst wait) 2-6 ms after they were ready at the median and up to 23 ms, behind
// the burst's other requests being read. The order of events is kept: they reach JS through the
// ThreadSafeFunction, never before the current callback and its microtasks are done.
Napi::Promise Engine::submit_now(Napi::Env env, std::vector<TaskRequest> & requests, const TaskLimits & limits, Announcement & announcement) {
    auto queued = Napi::Promise::Deferred::New(env);
    std::vector<std::unique_ptr<CompletionTask>> tasks;
    try {
        for (auto & r : requests) {
            prepare_task(r, limits);
            tasks.push_back(std::move(r.task));
        }
    } catch (const Refusal & r) {
        queued.Reject(r.to_js(env).Value());
        return queued.Promise();
    } catch (const std::exception & e) {
        queued.Reject(Refusal(ErrorCode::LOAD_FAILED, std::string("the task could not be prepared: ") + e.what()).to_js(env).Value());
        return queued.Promise();
    }
    enqueue(std::move(tasks), announcement.take());
    queued.Resolve(env.Undefined());
    return queued.Promise();
}

// submit(tasks) -> { ids, queued }: the ids are allocated at once. `queued` resolves when every
// task is on the engine's queue (they enter it together, so they can share their first batch),
// or rejects with a coded Error when any task is refused; then none is queued and none emits an
// event. Wrong argument types and a disposed engine throw synchronously. `announced` (optional,
// boolean): the tasks are those of a request announced by announce(1), which stops counting
// once they are queued or refused (or submit throws).
Napi::Value Engine::js_submit(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    Announcement announcement(this, info.Length() > 1 && info[1].IsBoolean() && info[1].As<Napi::Boolean>().Value());
    if (disposed_) throw_coded(env, ErrorCode::DISPOSED, "engine is disposed");
    if (info.Length() < 1 || !info[0].IsArray()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, "submit(tasks): tasks must be an array");
    Napi::Array arr = info[0].As<Napi::Array>();
    const TaskLimits limits = task_limits();
    std::vector<TaskRequest> requests;
    std::unique_ptr<Refusal> refusal;
    for (uint32_t i = 0; i < arr.Length(); i++) {
        if (!arr.Get(i).IsObject()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, "submit(tasks): each task must be an object");
        try {
            requests.push_back(parse_task(env, arr.Get(i).As<Napi::Object>(), limits));
        } catch (const Refusal & r) {
            if (!refusal) refusal = std::make_unique<Refusal>(r);
        }
    }
    Napi::Object out = Napi::Object::New(env);
    Napi::Array ids = Napi::Array::New(env, arr.Length());
    const int64_t first_id = next_task_id_;
    next_task_id_ += arr.Length();
    for (uint32_t i = 0; i < arr.Length(); i++) ids.Set(i, Napi::Number::New(env, static_cast<double>(first_id + i)));
    out.Set("ids", ids);
    if (refusal) {
        auto rejected = Napi::Promise::Deferred::New(env);
        rejected.Reject(refusal->to_js(env).Value());
        out.Set("queued", rejected.Promise());
        return out;
    }
    for (size_t i = 0; i < requests.size(); i++) requests[i].task->id = first_id + static_cast<int64_t>(i);
    if (std::none_of(requests.begin(), requests.end(), prepared_off_thread)) {
        out.Set("queued", submit_now(env, requests, limits, announcement));
        return out;
    }
    std::vector<std::shared_ptr<std::atomic<bool>>> cancelled;
    for (size_t i = 0; i < requests.size(); i++) {
        cancelled.push_back(std::make_shared<std::atomic<bool>>(false));
        preparing_[requests[i].task->id] = cancelled.back();
    }
    auto * worker = new TaskSubmitWorker(env, this, std::move(requests), std::move(cancelled), TaskSubmitWorker::Mode::SUBMIT, announcement.take());
    out.Set("queued", worker->promise());
    worker->Queue();
    return out;
}

// countTokens(task) -> Promise<number>: the tokens of the task's prompt, images tokenized by the
// projector (each counted as its tokens), on a worker; rejects with a coded Error for bad images
// or token ids. Nothing is queued.
Napi::Value Engine::js_count_tokens(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    if (disposed_) throw_coded(env, ErrorCode::DISPOSED, "engine is disposed");
    if (info.Length() < 1 || !info[0].IsObject()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, "countTokens(task): task must be an object");
    std::vector<TaskRequest> requests;
    try {
        requests.push_back(parse_task(env, info[0].As<Napi::Object>(), task_limits()));
    } catch (const Refusal & r) {
        auto rejected = Napi::Promise::Deferred::New(env);
        rejected.Reject(r.to_js(env).Value());
        return rejected.Promise();
    }
    requests[0].task->id = -1;
    std::vector<std::shared_ptr<std::atomic<bool>>> cancelled{std::make_shared<std::atomic<bool>>(false)};
    auto * worker = new TaskSubmitWorker(env, this, std::move(requests), std::move(cancelled), TaskSubmitWorker::Mode::COUNT);
    Napi::Promise promise = worker->promise();
    worker->Queue();
    return promise;
}

// Prepared tasks enter the engine thread's inbox together.
void Engine::enqueue(std::vector<std::unique_ptr<CompletionTask>> tasks, bool announced) {
    for (const auto & t : tasks) {
        track_active(t->id, true);
        counters_.queued++;
    }
    {
        std::lock_guard<std::mutex> lock(inbox_mutex_);
        const int64_t now = ggml_time_us();
        for (auto & t : tasks) {
            t->t_queued_us = now;
            inbox_.push_back(std::move(t));
        }
        if (announced && announced_ > 0) announced_--;
    }
    inbox_cv_.notify_one();
}

void Engine::settle_announcement() {
    {
        std::lock_guard<std::mutex> lock(inbox_mutex_);
        if (announced_ > 0) announced_--;
    }
    inbox_cv_.notify_one();
}

// announce(delta): +1 when the server has received a generating request and begins preparing it
// (rendering its chat template, tokenizing its prompt), -1 when such a request is withdrawn
// before its tasks were submitted (an error, the client gone); submit(tasks, true) settles one
// itself. An idle engine that gathers a burst waits for the announced requests too (gather_burst).
Napi::Value Engine::js_announce(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    if (info.Length() < 1 || !info[0].IsNumber()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, "announce(delta): delta must be 1 or -1");
    const int32_t delta = info[0].As<Napi::Number>().Int32Value();
    if (delta != 1 && delta != -1) throw_coded(env, ErrorCode::INVALID_ARGUMENT, "announce(delta): delta must be 1 or -1");
    if (delta < 0) {
        settle_announcement();
        return env.Undefined();
    }
    std::lock_guard<std::mutex> lock(inbox_mutex_);
    announced_++;
    return env.Undefined();
}

// cancel(taskId): the task stops at the next step and emits no further events. A task still
// being prepared is never queued (its submission still resolves, for the other tasks).
Napi::Value Engine::js_cancel(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    if (info.Length() < 1 || !info[0].IsNumber()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, "cancel(taskId)");
    int64_t id = info[0].As<Napi::Number>().Int64Value();
    auto preparing = preparing_.find(id);
    if (preparing != preparing_.end()) {
        preparing->second->store(true);
        preparing_.erase(preparing);
        return env.Undefined();
    }
    if (disposed_ || !js_active_.count(id)) return env.Undefined();
    track_active(id, false);
    {
        std::lock_guard<std::mutex> lock(inbox_mutex_);
        cancel_inbox_.push_back(id);
    }
    inbox_cv_.notify_one();
    return env.Undefined();
}

void Engine::track_active(int64_t id, bool active) {
    if (!tsfn_live_) return;
    if (active) js_active_.insert(id); else js_active_.erase(id);
    bool want_ref = !js_active_.empty();
    if (want_ref != tsfn_referenced_) {
        if (want_ref) tsfn_.Ref(Env()); else tsfn_.Unref(Env());
        tsfn_referenced_ = want_ref;
    }
}

// ---------------------------------------------------------------------------------------------
// Introspection, disposal, event delivery

static const char * slot_state_name(SlotState s) {
    switch (s) {
        case SlotState::IDLE: return "idle";
        case SlotState::PROMPT: return "prompt";
        case SlotState::GENERATING: return "generating";
    }
    return "idle";
}

Napi::Value Engine::js_slots(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    std::vector<SlotSummary> copy;
    {
        std::lock_guard<std::mutex> lock(summary_mutex_);
        copy = summaries_;
    }
    Napi::Array out = Napi::Array::New(env, copy.size());
    for (size_t i = 0; i < copy.size(); i++) {
        Napi::Object s = Napi::Object::New(env);
        s.Set("id", copy[i].id);
        s.Set("nCtx", n_ctx_seq_);
        s.Set("state", slot_state_name(copy[i].state));
        s.Set("taskId", copy[i].task_id < 0 ? env.Null() : Napi::Number::New(env, static_cast<double>(copy[i].task_id)));
        s.Set("nPrompt", copy[i].n_prompt);
        s.Set("nDecoded", copy[i].n_decoded);
        s.Set("nCache", copy[i].n_cache);
        out.Set(static_cast<uint32_t>(i), s);
    }
    return out;
}

// Split steps, early outputs and buffers written ahead (engine.h says when each applies).
// LLAMA_ADDON_NO_SPLIT_STEPS and LLAMA_ADDON_NO_EARLY_OUTPUTS in the environment turn the first two
// off, for comparisons (docs/options.md).
void Engine::choose_step_modes() {
    const bool cpu_completions = !embeddings_ && !spec_ && !gpu_build();
    split_steps_ = cpu_completions && std::getenv("LLAMA_ADDON_NO_SPLIT_STEPS") == nullptr;
    const llama_model * m = model_->get();
    const bool plain_kv = !llama_model_is_recurrent(m) && !llama_model_is_hybrid(m);
    early_outputs_ = cpu_completions && params_.kv_unified && plain_kv && std::getenv("LLAMA_ADDON_NO_EARLY_OUTPUTS") == nullptr;
    prepare_saves_ = (gpu_build() || std::thread::hardware_concurrency() > static_cast<unsigned>(std::max(llama_n_threads(ctx_), llama_n_threads_batch(ctx_)))) &&
                     std::getenv("LLAMA_ADDON_NO_PREPARE_SAVES") == nullptr;
}

Napi::Value Engine::js_metrics(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    Napi::Object m = Napi::Object::New(env);
    m.Set("cachedTokens", static_cast<double>(counters_.cached_tokens.load()));
    m.Set("sharedTokens", static_cast<double>(counters_.shared_tokens.load()));
    m.Set("sharedJoins", static_cast<double>(counters_.shared_joins.load()));
    m.Set("busySlotDecodes", static_cast<double>(counters_.busy_slot_decodes.load()));
    m.Set("nTokensMax", static_cast<double>(counters_.n_tokens_max.load()));
    m.Set("promptTokens", static_cast<double>(counters_.prompt_tokens.load()));
    m.Set("promptMs", counters_.prompt_us.load() / 1000.0);
    m.Set("predictedTokens", static_cast<double>(counters_.predicted_tokens.load()));
    m.Set("predictedMs", counters_.predicted_us.load() / 1000.0);
    m.Set("decodeCalls", static_cast<double>(counters_.decode_calls.load()));
    m.Set("splitSteps", static_cast<double>(counters_.split_steps.load()));
    m.Set("earlyOutputCalls", static_cast<double>(counters_.early_output_calls.load()));
    m.Set("contextShifts", static_cast<double>(counters_.context_shifts.load()));
    m.Set("promptCacheSaves", static_cast<double>(counters_.prompt_cache_saves.load()));
    m.Set("promptCacheReuses", prompt_cache_ ? static_cast<double>(prompt_cache_->reused_buffers()) : 0.0);
    m.Set("promptCacheBytes", prompt_cache_ ? static_cast<double>(prompt_cache_->published_bytes()) : 0.0);
    m.Set("tasksDone", static_cast<double>(counters_.tasks_done.load()));
    m.Set("queued", counters_.queued.load());
    int32_t announced = 0;
    {
        std::lock_guard<std::mutex> lock(inbox_mutex_);
        announced = announced_;
    }
    m.Set("announced", announced);
    m.Set("busySlots", counters_.busy_slots.load());
    if (spec_) {
        SpeculationCounters & c = spec_->counters();
        m.Set("draftTokens", static_cast<double>(c.draft_tokens.load()));
        m.Set("draftAccepted", static_cast<double>(c.accepted.load()));
        m.Set("draftSteps", static_cast<double>(c.verif_steps.load()));
        Napi::Array per_pos = Napi::Array::New(env, c.accepted_per_pos.size());
        for (size_t i = 0; i < c.accepted_per_pos.size(); i++) per_pos.Set(static_cast<uint32_t>(i), static_cast<double>(c.accepted_per_pos[i].load()));
        m.Set("acceptedPerPos", per_pos);
    }
    return m;
}

Napi::Value Engine::js_info(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    Napi::Object m = Napi::Object::New(env);
    m.Set("nCtx", ctx_ ? llama_n_ctx(ctx_) : 0);
    m.Set("nCtxSlot", n_ctx_seq_);
    m.Set("nParallel", params_.n_parallel);
    m.Set("nBatch", params_.n_batch);
    m.Set("nUbatch", ctx_ ? llama_n_ubatch(ctx_) : 0);
    m.Set("prefillBudget", params_.prefill_budget);
    m.Set("prefillBudgetMs", params_.prefill_budget_ms);
    m.Set("splitSteps", split_steps_);
    m.Set("earlyOutputs", early_outputs_);
    m.Set("prepareSaves", prepare_saves_);
    m.Set("overloadLifoMs", params_.overload_lifo_ms);
    m.Set("burstWaitMs", params_.burst_wait_ms);
    m.Set("slotPromptSimilarity", params_.slot_prompt_similarity);
    m.Set("prefixSharing", sharing_);
    m.Set("nThreads", ctx_ ? llama_n_threads(ctx_) : 0);
    m.Set("nThreadsBatch", ctx_ ? llama_n_threads_batch(ctx_) : 0);
    m.Set("embeddings", embeddings_);
    m.Set("pooling", static_cast<int32_t>(pooling_));
    m.Set("nEmbdOut", n_embd_out_);
    m.Set("speculative", spec_ != nullptr);
    if (spec_) m.Set("specTypes", spec_->types());
    return m;
}

class EngineDisposeWorker : public Napi::AsyncWorker {
public:
    EngineDisposeWorker(Napi::Env env, std::function<void()> work, std::function<void()> done)
        : Napi::AsyncWorker(env), deferred_(Napi::Promise::Deferred::New(env)), work_(std::move(work)), done_(std::move(done)) {}
    Napi::Promise promise() { return deferred_.Promise(); }
    void Execute() override { work_(); }
    void OnOK() override {
        done_();
        deferred_.Resolve(Env().Undefined());
    }

private:
    Napi::Promise::Deferred deferred_;
    std::function<void()> work_;
    std::function<void()> done_;
};

// dispose() -> Promise<void>: stops the thread, frees the context, releases the model. Idempotent.
Napi::Value Engine::js_dispose(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    if (disposed_) {
        auto d = Napi::Promise::Deferred::New(env);
        d.Resolve(env.Undefined());
        return d.Promise();
    }
    disposed_ = true;
    js_active_.clear();
    for (auto & [id, cancelled] : preparing_) cancelled->store(true);
    preparing_.clear();
    Napi::Object self = Value();
    auto self_ref = std::make_shared<Napi::ObjectReference>(Napi::Persistent(self));
    auto * worker = new EngineDisposeWorker(
        env, [this] { stop_thread(); free_context(); },
        [this, self_ref, env] {
            reject_slot_actions(env);
            if (tsfn_live_) {
                tsfn_.Release();
                tsfn_live_ = false;
            }
            model_->release();
            model_ref_.Reset();
            for (LoraAdapter * a : loras_) a->release();
            if (vision_) vision_->release();
            vision_ref_.Reset();
            for (auto & r : lora_refs_) r.Reset();
            self_ref->Reset();
        });
    worker->Queue();
    return worker->promise();
}

static Napi::Value stop_name(Napi::Env env, StopType stop) {
    switch (stop) {
        case StopType::EOS: return Napi::String::New(env, "eos");
        case StopType::LIMIT: return Napi::String::New(env, "limit");
        case StopType::WORD: return Napi::String::New(env, "word");
        default: return Napi::String::New(env, "none");
    }
}

// One event as the plain object src/native/binding.ts declares (EngineEvent): a flat mapping.
static Napi::Object event_to_js(Napi::Env env, const EngineEvent & e) {
    Napi::Object o = Napi::Object::New(env);
    o.Set("task", static_cast<double>(e.task_id));
    switch (e.kind) {
        case EngineEvent::Kind::TOKEN: {
            o.Set("kind", "token");
            o.Set("token", e.token);
            o.Set("text", e.text);
            if (e.n_prompt > 0) o.Set("nPrompt", e.n_prompt);
            if (!e.probs.empty()) {
                o.Set("prob", e.prob);
                Napi::Array probs = Napi::Array::New(env, e.probs.size());
                for (size_t j = 0; j < e.probs.size(); j++) {
                    Napi::Object p = Napi::Object::New(env);
                    p.Set("id", e.probs[j].id);
                    p.Set("piece", Napi::Buffer<uint8_t>::Copy(env, reinterpret_cast<const uint8_t *>(e.probs[j].piece.data()), e.probs[j].piece.size()));
                    p.Set("p", e.probs[j].p);
                    probs.Set(static_cast<uint32_t>(j), p);
                }
                o.Set("probs", probs);
            }
            break;
        }
        case EngineEvent::Kind::DONE:
            o.Set("kind", "done");
            o.Set("text", e.text);
            o.Set("stop", stop_name(env, e.stop));
            o.Set("stoppingWord", e.stopping_word);
            o.Set("truncated", e.truncated);
            o.Set("nPrompt", e.n_prompt);
            o.Set("nCached", e.n_cached);
            o.Set("nPredicted", e.n_predicted);
            o.Set("tPromptMs", e.t_prompt_ms);
            o.Set("tPredictMs", e.t_predict_ms);
            o.Set("slot", e.slot_id);
            o.Set("nDraft", e.n_draft);
            o.Set("nDraftAccepted", e.n_draft_accepted);
            break;
        case EngineEvent::Kind::ERROR:
            o.Set("kind", "error");
            o.Set("message", e.message);
            break;
        case EngineEvent::Kind::PROGRESS:
            o.Set("kind", "progress");
            o.Set("total", e.n_prompt);
            o.Set("cache", e.n_cached);
            o.Set("processed", e.n_processed);
            o.Set("timeMs", e.t_elapsed_ms);
            break;
        case EngineEvent::Kind::EMBEDDING: {
            o.Set("kind", "embedding");
            Napi::Float32Array vec = Napi::Float32Array::New(env, e.embedding.size());
            if (!e.embedding.empty()) std::memcpy(vec.Data(), e.embedding.data(), e.embedding.size() * sizeof(float));
            o.Set("embedding", vec);
            o.Set("nVectors", e.n_vectors);
            o.Set("nPrompt", e.n_prompt);
            break;
        }
    }
    return o;
}

// The ThreadSafeFunction's callback (JS thread): hands every event queued since the last call
// to onEvents in one array.
void Engine::deliver(Napi::Env env, Napi::Function callback) {
    std::vector<EngineEvent> batch;
    std::vector<SlotActionResult> actions;
    {
        std::lock_guard<std::mutex> lock(events_mutex_);
        batch.swap(events_);
        actions.swap(action_results_);
        delivery_pending_ = false;
    }
    if (!actions.empty()) settle_slot_actions(env, actions);
    if (batch.empty()) return;
    Napi::Array out = Napi::Array::New(env, batch.size());
    for (size_t i = 0; i < batch.size(); i++) out.Set(static_cast<uint32_t>(i), event_to_js(env, batch[i]));
    // Tasks that ended are no longer active (cancelled ones were removed by cancel()). A token or
    // a progress report does not end its task: it stays cancellable and keeps the event loop alive.
    for (const auto & e : batch) {
        const bool ends = e.kind == EngineEvent::Kind::DONE || e.kind == EngineEvent::Kind::ERROR || e.kind == EngineEvent::Kind::EMBEDDING;
        if (ends && js_active_.count(e.task_id)) track_active(e.task_id, false);
    }
    callback.Call({out});
}

}  // namespace addon
