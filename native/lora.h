#pragma once
// LoraAdapter: a LoRA adapter (llama_adapter_lora) loaded for one Model.
// Ownership: keeps its Model's JS object alive; llama.cpp frees adapters with their model, and
// dispose() frees one earlier unless an engine still uses it. Loading runs on a worker thread.
#include <napi.h>

#include <atomic>
#include <string>

#include "llama.h"

namespace addon {

class Model;

class LoraAdapter : public Napi::ObjectWrap<LoraAdapter> {
public:
    static Napi::Function define(Napi::Env env);
    static Napi::FunctionReference constructor;

    explicit LoraAdapter(const Napi::CallbackInfo & info);

    llama_adapter_lora * get() const { return adapter_; }
    Model * model() const { return model_; }
    void retain() { users_++; }
    void release() { users_--; }

private:
    static Napi::Value load(const Napi::CallbackInfo & info);
    Napi::Value js_path(const Napi::CallbackInfo & info);
    Napi::Value js_metadata(const Napi::CallbackInfo & info);
    Napi::Value js_dispose(const Napi::CallbackInfo & info);

    llama_adapter_lora * adapter_ = nullptr;
    Model * model_ = nullptr;
    Napi::ObjectReference model_ref_;
    std::string path_;
    std::atomic<int> users_{0};
};

}  // namespace addon
