// EngineBinding: creation (the context on a worker), the methods JS calls, and event delivery.
// Submission is in engine-submission.cpp, slot actions in engine-binding-slots.cpp.
#include "engine-binding.h"

#include <cstring>

#include "errors-js.h"
#include "lora.h"
#include "model-worker.h"
#include "model.h"
#include "vision.h"

namespace addon {

Napi::FunctionReference EngineBinding::constructor;

// Creates the engine core on a worker: the context (engine_context_create), then the Engine with
// its slots and scheduler; result() hands it to a new EngineBinding, which starts its thread.
class EngineCreateWorker : public ModelWorker {
public:
    EngineCreateWorker(Napi::Env env, Model * model, Napi::Object model_obj, Napi::Function on_events, EngineParams params, Napi::Array loras,
                       Napi::Value vision)
        : ModelWorker(env, model, model_obj), params_(std::move(params)) {
        on_events_ = Napi::Persistent(on_events);
        loras_ = Napi::Persistent(loras);
        for (uint32_t i = 0; i < loras.Length(); i++) lora_handles_.push_back(LoraAdapter::Unwrap(loras.Get(i).As<Napi::Object>())->get());
        if (vision.IsObject()) {
            vision_ = Napi::Persistent(vision.As<Napi::Object>());
            mtmd_ = Vision::Unwrap(vision.As<Napi::Object>())->get();
        }
    }

    void Execute() override {
        try {
            EngineContext context = engine_context_create(params_, model_->get());
            engine_ = std::make_unique<Engine>(std::move(params_), model_->get(), std::move(context), lora_handles_, mtmd_);
        } catch (const Refusal & r) {
            fail(r.code, r.message);
        }
    }

    Napi::Value result(Napi::Env env) override {
        return EngineBinding::constructor.New({Napi::External<Engine>::New(env, engine_.release()), model_ref_.Value(), on_events_.Value(), loras_.Value(),
                                               vision_.IsEmpty() ? env.Undefined() : vision_.Value()});
    }

private:
    EngineParams params_;
    Napi::FunctionReference on_events_;
    Napi::Reference<Napi::Array> loras_;
    Napi::ObjectReference vision_;
    std::vector<llama_adapter_lora *> lora_handles_;
    mtmd_context * mtmd_ = nullptr;
    std::unique_ptr<Engine> engine_;
};

// Engine.create(model, params, onEvents) -> Promise<Engine>. Throws INVALID_ARGUMENT for wrong
// shapes or values (read_engine_params), adapters of another model, a projector of another model.
Napi::Value EngineBinding::create(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    if (info.Length() < 3 || !info[0].IsObject() || !info[1].IsObject() || !info[2].IsFunction()) {
        throw_coded(env, ErrorCode::INVALID_ARGUMENT, "Engine.create(model, params, onEvents)");
    }
    Napi::Object model_obj = info[0].As<Napi::Object>();
    Model * model = Model::from_js(env, model_obj);
    Napi::Object o = info[1].As<Napi::Object>();
    EngineParams params = read_engine_params(env, o);
    Napi::Array loras = o.Get("loras").IsArray() ? o.Get("loras").As<Napi::Array>() : Napi::Array::New(env);
    for (uint32_t i = 0; i < loras.Length(); i++) {
        Napi::Value v = loras.Get(i);
        if (!v.IsObject() || !v.As<Napi::Object>().InstanceOf(LoraAdapter::constructor.Value())) {
            throw_coded(env, ErrorCode::INVALID_ARGUMENT, "params.loras must be LoraAdapter objects");
        }
        LoraAdapter * a = LoraAdapter::Unwrap(v.As<Napi::Object>());
        if (a->model() != model || !a->get()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, "a LoRA adapter belongs to another model or is disposed");
    }
    Napi::Value vision = o.Get("vision");
    if (vision.IsObject()) {
        Napi::Object v = vision.As<Napi::Object>();
        if (!v.InstanceOf(Vision::constructor.Value()) || Vision::Unwrap(v)->model() != model || !Vision::Unwrap(v)->get()) {
            throw_coded(env, ErrorCode::INVALID_ARGUMENT, "params.vision must be a Vision loaded for this model");
        }
    }
    auto * worker = new EngineCreateWorker(env, model, model_obj, info[2].As<Napi::Function>(), std::move(params), loras, vision);
    worker->Queue();
    return worker->promise();
}

// Engine.checkParams(params): reads the settings as create() does and throws as it would.
Napi::Value EngineBinding::check_params(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    if (info.Length() < 1 || !info[0].IsObject()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, "Engine.checkParams(params)");
    read_engine_params(env, info[0].As<Napi::Object>());
    return env.Undefined();
}

Napi::Function EngineBinding::define(Napi::Env env) {
    Napi::Function fn = DefineClass(env, "Engine", {
        StaticMethod<&EngineBinding::create>("create"),
        StaticMethod<&EngineBinding::check_params>("checkParams"),
        InstanceMethod<&EngineBinding::js_submit>("submit"),
        InstanceMethod<&EngineBinding::js_begin_preparing>("beginPreparing"),
        InstanceMethod<&EngineBinding::js_end_preparing>("endPreparing"),
        InstanceMethod<&EngineBinding::js_cancel>("cancel"),
        InstanceMethod<&EngineBinding::js_charge_tenants>("chargeTenants"),
        InstanceMethod<&EngineBinding::js_slots>("slots"),
        InstanceMethod<&EngineBinding::js_metrics>("metrics"),
        InstanceMethod<&EngineBinding::js_info>("info"),
        InstanceMethod<&EngineBinding::js_dispose>("dispose"),
        InstanceMethod<&EngineBinding::js_slot_action>("slotAction"),
        InstanceMethod<&EngineBinding::js_count_tokens>("countTokens"),
        InstanceMethod<&EngineBinding::js_enable_cache_events>("enableCacheEvents"),
        InstanceMethod<&EngineBinding::js_cache_changes>("cacheChanges"),
    });
    constructor = Napi::Persistent(fn);
    constructor.SuppressDestruct();
    return fn;
}

EngineBinding::EngineBinding(const Napi::CallbackInfo & info) : Napi::ObjectWrap<EngineBinding>(info) {
    Napi::Env env = info.Env();
    if (info.Length() < 4 || !info[0].IsExternal()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, "Engine cannot be constructed directly; use Engine.create()");
    engine_.reset(info[0].As<Napi::External<Engine>>().Data());
    Napi::Object model_obj = info[1].As<Napi::Object>();
    model_ = Model::Unwrap(model_obj);
    model_ref_ = Napi::Persistent(model_obj);
    model_->retain();
    Napi::Array loras = info[3].As<Napi::Array>();
    for (uint32_t i = 0; i < loras.Length(); i++) {
        Napi::Object obj = loras.Get(i).As<Napi::Object>();
        LoraAdapter * a = LoraAdapter::Unwrap(obj);
        a->retain();
        loras_.push_back(a);
        lora_refs_.push_back(Napi::Persistent(obj));
    }
    if (info.Length() > 4 && info[4].IsObject()) {
        Napi::Object v = info[4].As<Napi::Object>();
        vision_ = Vision::Unwrap(v);
        vision_->retain();
        vision_ref_ = Napi::Persistent(v);
    }
    tsfn_ = Napi::ThreadSafeFunction::New(env, info[2].As<Napi::Function>(), "engine-events", 0, 1);
    tsfn_live_ = true;
    tsfn_.Unref(env);  // referenced only while tasks are active (see track_active)
    // The engine thread schedules a delivery through the ThreadSafeFunction (one pending at a time).
    engine_->queue().set_delivery([this] { tsfn_.NonBlockingCall([this](Napi::Env e, Napi::Function cb) { deliver(e, cb); }); });
    engine_->start();
}

EngineBinding::~EngineBinding() {
    if (engine_) {
        engine_->stop();
        engine_->queue().set_delivery(nullptr);
    }
    if (tsfn_live_) {
        tsfn_.Abort();
        tsfn_live_ = false;
    }
}

TaskLimits EngineBinding::task_limits() const {
    TaskLimits limits;
    limits.model = model_->get();
    limits.vocab = model_->vocab();
    limits.eog_tokens = &model_->eog_tokens();
    limits.vision = vision_ ? vision_->get() : nullptr;
    limits.n_ctx_seq = engine_->info().n_ctx_slot;
    limits.n_batch = engine_->params().n_batch;
    limits.n_parallel = engine_->params().n_parallel;
    limits.n_loras = loras_.size();
    limits.embeddings = engine_->params().embeddings;
    return limits;
}

void EngineBinding::enqueue(std::vector<std::unique_ptr<CompletionTask>> tasks, bool prepared) {
    for (const auto & t : tasks) track_active(t->id, true);
    engine_->queue().push_tasks(std::move(tasks), prepared);
}

// beginPreparing(): the server has received a generating request and begins preparing it
// (rendering its chat template, tokenizing its prompt); an idle engine gathering a burst waits
// for it (Scheduler::gather_burst). submit(tasks, true) ends it; endPreparing() ends one
// withdrawn before its tasks were submitted (an error, the client gone).
Napi::Value EngineBinding::js_begin_preparing(const Napi::CallbackInfo & info) {
    if (!disposed_) engine_->queue().begin_preparing();
    return info.Env().Undefined();
}

Napi::Value EngineBinding::js_end_preparing(const Napi::CallbackInfo & info) {
    if (!disposed_) engine_->queue().end_preparing();
    return info.Env().Undefined();
}

// cancel(taskId): the task stops at the next step and emits no further events. A task still
// being prepared is never queued (its submission still resolves, for the other tasks).
Napi::Value EngineBinding::js_cancel(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    if (info.Length() < 1 || !info[0].IsNumber()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, "cancel(taskId)");
    int64_t id = info[0].As<Napi::Number>().Int64Value();
    auto preparing = preparing_.find(id);
    if (preparing != preparing_.end()) {
        preparing->second->store(true);
        preparing_.erase(preparing);
        return env.Undefined();
    }
    if (disposed_ || !active_.count(id)) return env.Undefined();
    track_active(id, false);
    engine_->queue().push_cancel(id);
    return env.Undefined();
}

// chargeTenants([[tenant, tokens], ...]): router mode, what tenants used on the router's other
// model processes; fair share charges the active ones (TenantClocks::charge_elsewhere).
Napi::Value EngineBinding::js_charge_tenants(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    if (info.Length() < 1 || !info[0].IsArray()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, "chargeTenants([[tenant, tokens], ...])");
    Napi::Array entries = info[0].As<Napi::Array>();
    std::vector<TenantCharge> charges;
    for (uint32_t i = 0; i < entries.Length(); i++) {
        Napi::Value entry = entries.Get(i);
        Napi::Array pair = entry.IsArray() ? entry.As<Napi::Array>() : Napi::Array::New(env);
        if (pair.Length() != 2 || !pair.Get(0u).IsString() || !pair.Get(1u).IsNumber()) {
            throw_coded(env, ErrorCode::INVALID_ARGUMENT, "chargeTenants: each entry is [tenant, tokens]");
        }
        charges.push_back(TenantCharge{pair.Get(0u).As<Napi::String>().Utf8Value(), pair.Get(1u).As<Napi::Number>().Int64Value()});
    }
    if (!disposed_ && !charges.empty()) engine_->queue().push_charges(std::move(charges));
    return env.Undefined();
}

// The ThreadSafeFunction is referenced (keeps Node's event loop alive) while any task or slot
// action is active.
void EngineBinding::track_active(int64_t id, bool active) {
    if (!tsfn_live_) return;
    if (active) active_.insert(id); else active_.erase(id);
    const bool want_ref = !active_.empty();
    if (want_ref != tsfn_referenced_) {
        if (want_ref) tsfn_.Ref(Env()); else tsfn_.Unref(Env());
        tsfn_referenced_ = want_ref;
    }
}

static const char * slot_state_name(SlotState s) {
    switch (s) {
        case SlotState::IDLE: return "idle";
        case SlotState::PROMPT: return "prompt";
        case SlotState::GENERATING: return "generating";
    }
    return "idle";
}

Napi::Value EngineBinding::js_slots(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    const std::vector<SlotSummary> copy = engine_->queue().summaries();
    Napi::Array out = Napi::Array::New(env, copy.size());
    for (size_t i = 0; i < copy.size(); i++) {
        Napi::Object s = Napi::Object::New(env);
        s.Set("id", copy[i].id);
        s.Set("nCtx", engine_->info().n_ctx_slot);
        s.Set("state", slot_state_name(copy[i].state));
        s.Set("taskId", copy[i].task_id < 0 ? env.Null() : Napi::Number::New(env, static_cast<double>(copy[i].task_id)));
        s.Set("nPrompt", copy[i].n_prompt);
        s.Set("nDecoded", copy[i].n_decoded);
        s.Set("nCache", copy[i].n_cache);
        out.Set(static_cast<uint32_t>(i), s);
    }
    return out;
}

// A flat field mapping (exempt from the function-length rule).
Napi::Value EngineBinding::js_metrics(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    const EngineCounters & c = engine_->counters();
    const auto n = [](const std::atomic<uint64_t> & v) { return static_cast<double>(v.load()); };
    Napi::Object m = Napi::Object::New(env);
    m.Set("cachedTokens", n(c.cached_tokens));
    m.Set("sharedTokens", n(c.shared_tokens));
    m.Set("sharedJoins", n(c.shared_joins));
    m.Set("busySlotDecodes", n(c.busy_slot_decodes));
    m.Set("nTokensMax", n(c.n_tokens_max));
    m.Set("promptTokens", n(c.prompt_tokens));
    m.Set("promptMs", c.prompt_us.load() / 1000.0);
    m.Set("predictedTokens", n(c.predicted_tokens));
    m.Set("predictedMs", c.predicted_us.load() / 1000.0);
    m.Set("decodeCalls", n(c.decode_calls));
    m.Set("splitSteps", n(c.split_steps));
    m.Set("earlyOutputCalls", n(c.early_output_calls));
    m.Set("contextShifts", n(c.context_shifts));
    m.Set("tokensElsewhere", n(c.tokens_elsewhere));
    m.Set("promptCacheSaves", n(c.prompt_cache_saves));
    m.Set("promptCacheReuses", disposed_ ? 0.0 : static_cast<double>(engine_->prompt_cache_reuses()));
    m.Set("promptCacheBytes", disposed_ ? 0.0 : static_cast<double>(engine_->prompt_cache_bytes()));
    m.Set("tasksDone", n(c.tasks_done));
    const DiskCacheCounters & d = engine_->disk_counters();
    m.Set("diskHits", n(d.hits));
    m.Set("diskMisses", n(d.misses));
    m.Set("diskBytesWritten", n(d.bytes_written));
    m.Set("diskBytesRead", n(d.bytes_read));
    m.Set("diskFilesWritten", n(d.files_written));
    m.Set("diskEvictions", n(d.evictions));
    m.Set("diskRejected", n(d.rejected));
    m.Set("diskDropped", n(d.dropped));
    m.Set("diskAdopted", n(d.adopted));
    m.Set("diskPending", d.pending.load());
    m.Set("diskBytes", n(d.bytes));
    m.Set("queued", c.queued.load());
    m.Set("preparing", engine_->queue().n_preparing());
    m.Set("busySlots", c.busy_slots.load());
    if (SpeculationCounters * s = engine_->speculation_counters()) {
        m.Set("draftTokens", n(s->draft_tokens));
        m.Set("draftAccepted", n(s->accepted));
        m.Set("draftSteps", n(s->verif_steps));
        Napi::Array per_pos = Napi::Array::New(env, s->accepted_per_pos.size());
        for (size_t i = 0; i < s->accepted_per_pos.size(); i++) per_pos.Set(static_cast<uint32_t>(i), n(s->accepted_per_pos[i]));
        m.Set("acceptedPerPos", per_pos);
    }
    return m;
}

// A flat field mapping (exempt from the function-length rule).
Napi::Value EngineBinding::js_info(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    const EngineParams & p = engine_->params();
    const EngineInfo & e = engine_->info();
    Napi::Object m = Napi::Object::New(env);
    m.Set("nCtx", e.n_ctx);
    m.Set("nCtxSlot", e.n_ctx_slot);
    m.Set("nParallel", p.n_parallel);
    m.Set("nBatch", p.n_batch);
    m.Set("nUbatch", e.n_ubatch);
    m.Set("prefillBudget", p.prefill_budget);
    m.Set("prefillBudgetMs", p.prefill_budget_ms);
    m.Set("splitSteps", e.modes.split_steps);
    m.Set("earlyOutputs", e.modes.early_outputs);
    m.Set("prepareSaves", e.modes.prepare_saves);
    m.Set("overloadLifoMs", p.overload_lifo_ms);
    m.Set("fairShare", p.fair_share);
    m.Set("burstWaitMs", p.burst_wait_ms);
    m.Set("slotPromptSimilarity", p.slot_prompt_similarity);
    m.Set("prefixSharing", e.modes.sharing);
    m.Set("nThreads", e.n_threads);
    m.Set("nThreadsBatch", e.n_threads_batch);
    m.Set("embeddings", p.embeddings);
    m.Set("pooling", e.pooling);
    m.Set("nEmbdOut", e.n_embd_out);
    m.Set("speculative", engine_->speculation_counters() != nullptr);
    if (engine_->speculation_counters()) m.Set("specTypes", engine_->speculation_types());
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
Napi::Value EngineBinding::js_dispose(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    if (disposed_) {
        auto d = Napi::Promise::Deferred::New(env);
        d.Resolve(env.Undefined());
        return d.Promise();
    }
    disposed_ = true;
    active_.clear();
    for (auto & [id, cancelled] : preparing_) cancelled->store(true);
    preparing_.clear();
    auto self_ref = std::make_shared<Napi::ObjectReference>(Napi::Persistent(Value()));
    auto * worker = new EngineDisposeWorker(
        env, [this] { engine_->stop(); },
        [this, self_ref, env] {
            reject_slot_actions(env);
            engine_->queue().set_delivery(nullptr);
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

static Napi::Array probs_to_js(Napi::Env env, const std::vector<TokenProb> & probs) {
    Napi::Array out = Napi::Array::New(env, probs.size());
    for (size_t j = 0; j < probs.size(); j++) {
        Napi::Object p = Napi::Object::New(env);
        p.Set("id", probs[j].id);
        p.Set("piece", Napi::Buffer<uint8_t>::Copy(env, reinterpret_cast<const uint8_t *>(probs[j].piece.data()), probs[j].piece.size()));
        p.Set("p", probs[j].p);
        out.Set(static_cast<uint32_t>(j), p);
    }
    return out;
}

// One event as the plain object src/native/binding.ts declares (EngineEvent): a flat mapping
// (exempt from the function-length rule).
static Napi::Object event_to_js(Napi::Env env, const EngineEvent & e) {
    Napi::Object o = Napi::Object::New(env);
    o.Set("task", static_cast<double>(e.task_id));
    switch (e.kind) {
        case EngineEvent::Kind::TOKEN:
            o.Set("kind", "token");
            o.Set("token", e.token);
            o.Set("text", e.text);
            if (e.n_prompt > 0) o.Set("nPrompt", e.n_prompt);
            if (!e.probs.empty()) {
                o.Set("prob", e.prob);
                o.Set("probs", probs_to_js(env, e.probs));
            }
            break;
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
            o.Set("tPromptMs", e.t_prompt_ms);
            o.Set("slot", e.slot_id);
            break;
        }
    }
    return o;
}

// The ThreadSafeFunction's callback: hands every event queued since the last call to onEvents
// in one array, and settles the slot actions that ran.
void EngineBinding::deliver(Napi::Env env, Napi::Function callback) {
    std::vector<EngineEvent> batch;
    std::vector<SlotActionResult> actions;
    engine_->queue().take_results(batch, actions);
    if (!actions.empty()) settle_slot_actions(env, actions);
    if (batch.empty()) return;
    Napi::Array out = Napi::Array::New(env, batch.size());
    for (size_t i = 0; i < batch.size(); i++) out.Set(static_cast<uint32_t>(i), event_to_js(env, batch[i]));
    // Tasks that ended are no longer active (cancelled ones were removed by cancel()). A token or
    // a progress report does not end its task: it stays cancellable and keeps the event loop alive.
    for (const auto & e : batch) {
        const bool ends = e.kind == EngineEvent::Kind::DONE || e.kind == EngineEvent::Kind::ERROR || e.kind == EngineEvent::Kind::EMBEDDING;
        if (ends && active_.count(e.task_id)) track_active(e.task_id, false);
    }
    callback.Call({out});
}

}  // namespace addon
