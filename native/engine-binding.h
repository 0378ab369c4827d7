#pragma once
// EngineBinding: the JS object `Engine` (src/native/binding.ts NativeEngine) over one engine core
// (engine.h). The binding layer: the only ObjectWrap of the engine, and with the other handles'
// wrappers the only code that includes napi.h. It holds what belongs to JS: the references that
// keep the model, adapters and projector alive, the ThreadSafeFunction that delivers events,
// slot actions' promises, the tasks being prepared, and which tasks keep the event loop alive.
// Every method runs on the JS thread.
//
// Files: engine-binding.cpp (creation, the methods, delivery), engine-submission.cpp (submit,
// countTokens, the preparation workers), engine-binding-slots.cpp (slotAction),
// engine-params-js.cpp (the settings object read into EngineParams).
#include <napi.h>

#include <atomic>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine.h"
#include "task-parse.h"

namespace addon {

class Model;
class LoraAdapter;
class Vision;
class Preparation;

// The JS settings object (binding.ts EngineParams) read into EngineParams, once: wrong types are
// INVALID_ARGUMENT TypeErrors, values out of range INVALID_ARGUMENT Errors (engine-params.cpp).
EngineParams read_engine_params(Napi::Env env, Napi::Object o);

class EngineBinding : public Napi::ObjectWrap<EngineBinding> {
public:
    static Napi::Function define(Napi::Env env);
    static Napi::FunctionReference constructor;

    // Called by the create worker only: (External<Engine>, model, onEvents, loras[], vision?).
    explicit EngineBinding(const Napi::CallbackInfo & info);
    ~EngineBinding() override;

private:
    friend class TaskSubmitWorker;
    friend class Preparation;

    static Napi::Value create(const Napi::CallbackInfo & info);
    static Napi::Value check_params(const Napi::CallbackInfo & info);
    Napi::Value js_submit(const Napi::CallbackInfo & info);
    Napi::Value js_count_tokens(const Napi::CallbackInfo & info);
    Napi::Value js_begin_preparing(const Napi::CallbackInfo & info);
    Napi::Value js_end_preparing(const Napi::CallbackInfo & info);
    Napi::Value js_cancel(const Napi::CallbackInfo & info);
    Napi::Value js_charge_tenants(const Napi::CallbackInfo & info);
    Napi::Value js_slots(const Napi::CallbackInfo & info);
    Napi::Value js_metrics(const Napi::CallbackInfo & info);
    Napi::Value js_info(const Napi::CallbackInfo & info);
    Napi::Value js_dispose(const Napi::CallbackInfo & info);
    Napi::Value js_slot_action(const Napi::CallbackInfo & info);
    Napi::Value js_enable_cache_events(const Napi::CallbackInfo & info);
    Napi::Value js_cache_changes(const Napi::CallbackInfo & info);
    Napi::Promise submit_now(Napi::Env env, std::vector<TaskRequest> & requests, const TaskLimits & limits, Preparation & preparation);
    void settle_slot_actions(Napi::Env env, std::vector<SlotActionResult> & results);
    void reject_slot_actions(Napi::Env env);
    TaskLimits task_limits() const;
    // Puts prepared tasks on the queue; `prepared`: they end a counted preparation.
    void enqueue(std::vector<std::unique_ptr<CompletionTask>> tasks, bool prepared);
    void deliver(Napi::Env env, Napi::Function callback);
    void track_active(int64_t id, bool active);

    std::unique_ptr<Engine> engine_;
    Model * model_ = nullptr;
    Napi::ObjectReference model_ref_;
    std::vector<LoraAdapter *> loras_;
    std::vector<Napi::ObjectReference> lora_refs_;
    Vision * vision_ = nullptr;
    Napi::ObjectReference vision_ref_;
    Napi::ThreadSafeFunction tsfn_;
    bool tsfn_live_ = false;
    bool tsfn_referenced_ = false;
    std::unordered_set<int64_t> active_;  // queued tasks (and slot actions) that have not ended
    std::unordered_map<int64_t, Napi::Promise::Deferred> action_promises_;
    // Tasks being prepared by a TaskSubmitWorker; cancel() sets the flag, and the task is then
    // never queued.
    std::unordered_map<int64_t, std::shared_ptr<std::atomic<bool>>> preparing_;
    int64_t next_task_id_ = 1;
    bool disposed_ = false;
};

}  // namespace addon
