#pragma once
// Vision: a multimodal projector (mtmd_context) for one Model, loaded from an mmproj GGUF; it
// reads images, audio, or both (supportsVision, supportsAudio).
// Ownership: keeps its Model's JS object alive; freed by dispose() (refused while an engine uses
// it) or the destructor. Loading runs on a worker thread; decoding and tokenizing a task's images
// on the worker that prepares the task (task-parse.cpp); encoding them on the engine thread.
#include <napi.h>

#include <atomic>
#include <string>
#include <vector>

#include "llama.h"
#include "mtmd.h"

namespace addon {

class Model;

class Vision : public Napi::ObjectWrap<Vision> {
public:
    static Napi::Function define(Napi::Env env);
    static Napi::FunctionReference constructor;

    explicit Vision(const Napi::CallbackInfo & info);
    ~Vision() override;

    mtmd_context * get() const { return ctx_; }
    Model * model() const { return model_; }
    void retain() { users_++; }
    void release() { users_--; }

private:
    static Napi::Value load(const Napi::CallbackInfo & info);
    static Napi::Value capabilities(const Napi::CallbackInfo & info);
    Napi::Value js_marker(const Napi::CallbackInfo & info);
    Napi::Value js_supports_vision(const Napi::CallbackInfo & info);
    Napi::Value js_supports_audio(const Napi::CallbackInfo & info);
    Napi::Value js_dispose(const Napi::CallbackInfo & info);

    mtmd_context * ctx_ = nullptr;
    Model * model_ = nullptr;
    Napi::ObjectReference model_ref_;
    std::atomic<int> users_{0};
};

}  // namespace addon
