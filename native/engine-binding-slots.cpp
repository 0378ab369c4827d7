// Slot actions (llama-server's POST /slots/{id}?action=save|restore|erase), the JS-thread half:
// queueing one and settling its promise. The engine thread runs it (slot-action.cpp).
//
// slotAction({ action, slot, dir?, filename? }) -> Promise<{ nTokens, nBytes, ms }>.
// The action waits while its slot is busy (as llama-server defers it) and then runs between two
// steps, so it never sees a half-built batch. Its result travels with the events (one
// ThreadSafeFunction call), and `deliver` settles the promise.
#include <algorithm>
#include <cstdlib>

#include "engine-binding.h"
#include "errors-js.h"

namespace addon {

static SlotAction::Kind action_kind(Napi::Env env, const std::string & name) {
    if (name == "save") return SlotAction::Kind::SAVE;
    if (name == "restore") return SlotAction::Kind::RESTORE;
    if (name == "erase") return SlotAction::Kind::ERASE;
    throw_coded(env, ErrorCode::INVALID_ARGUMENT, "slotAction: action must be save, restore or erase");
}

// Throws INVALID_ARGUMENT (wrong shapes, a slot out of range) or DISPOSED synchronously.
Napi::Value EngineBinding::js_slot_action(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    if (disposed_) throw_coded(env, ErrorCode::DISPOSED, "the engine is disposed");
    if (info.Length() < 1 || !info[0].IsObject()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, "slotAction({ action, slot, dir, filename })");
    Napi::Object spec = info[0].As<Napi::Object>();
    if (!spec.Get("action").IsString() || !spec.Get("slot").IsNumber()) {
        throw_coded(env, ErrorCode::INVALID_ARGUMENT, "slotAction: action (string) and slot (number) are required");
    }
    SlotAction action;
    action.kind = action_kind(env, spec.Get("action").As<Napi::String>().Utf8Value());
    const double slot = spec.Get("slot").As<Napi::Number>().DoubleValue();
    if (slot != static_cast<int32_t>(slot) || slot < 0 || slot >= engine_->params().n_parallel) {
        throw_coded(env, ErrorCode::INVALID_ARGUMENT, "slotAction: no slot " + spec.Get("slot").ToString().Utf8Value());
    }
    action.id_slot = static_cast<int32_t>(slot);
    if (action.kind != SlotAction::Kind::ERASE) {
        if (!spec.Get("dir").IsString() || !spec.Get("filename").IsString()) {
            throw_coded(env, ErrorCode::INVALID_ARGUMENT, "slotAction: save and restore need dir and filename (strings)");
        }
        action.dir = spec.Get("dir").As<Napi::String>().Utf8Value();
        action.filename = spec.Get("filename").As<Napi::String>().Utf8Value();
    }
    action.id = next_task_id_++;
    auto deferred = Napi::Promise::Deferred::New(env);
    action_promises_.emplace(action.id, deferred);
    track_active(action.id, true);  // keeps the event loop alive until it is answered
    engine_->queue().push_action(std::move(action));
    return deferred.Promise();
}

// Called by deliver with the results taken from the engine thread.
void EngineBinding::settle_slot_actions(Napi::Env env, std::vector<SlotActionResult> & results) {
    for (auto & r : results) {
        auto it = action_promises_.find(r.id);
        if (it == action_promises_.end()) continue;
        Napi::Promise::Deferred deferred = it->second;
        action_promises_.erase(it);
        track_active(r.id, false);
        if (r.error) {
            deferred.Reject(refusal_to_js(env, *r.error).Value());
            continue;
        }
        Napi::Object o = Napi::Object::New(env);
        o.Set("nTokens", r.n_tokens);
        o.Set("nBytes", static_cast<double>(r.n_bytes));
        o.Set("ms", r.t_ms);
        deferred.Resolve(o);
    }
    results.clear();
}

// dispose(): actions never answered reject with DISPOSED.
void EngineBinding::reject_slot_actions(Napi::Env env) {
    for (auto & [id, deferred] : action_promises_) {
        deferred.Reject(coded_error(env, ErrorCode::DISPOSED, "the engine was disposed before the slot action ran").Value());
    }
    action_promises_.clear();
}

// ---------------------------------------------------------------------------------------------
// Engine thread

}  // namespace addon
