#include "lora.h"

#include <sys/stat.h>

#include "errors-js.h"
#include "log.h"
#include "model-worker.h"
#include "model.h"

namespace addon {

Napi::FunctionReference LoraAdapter::constructor;

class LoraLoadWorker : public ModelWorker {
public:
    LoraLoadWorker(Napi::Env env, Model * model, Napi::Object model_obj, std::string path)
        : ModelWorker(env, model, model_obj), path_(std::move(path)) {}

    void Execute() override {
        struct stat st;
        if (stat(path_.c_str(), &st) != 0) {
            fail(ErrorCode::LOAD_FAILED, "LoRA adapter file not found: " + path_);
            return;
        }
        log_capture_begin();
        adapter_ = llama_adapter_lora_init(model_->get(), path_.c_str());
        std::string errors = log_capture_end();
        if (!adapter_) SetError("failed to load LoRA adapter " + path_ + (errors.empty() ? "" : ": " + errors));
    }

    Napi::Value result(Napi::Env env) override {
        return LoraAdapter::constructor.New({Napi::External<llama_adapter_lora>::New(env, adapter_), model_ref_.Value(), Napi::String::New(env, path_)});
    }

private:
    std::string path_;
    llama_adapter_lora * adapter_ = nullptr;
};

// LoraAdapter.load(model, path) -> Promise<LoraAdapter>
Napi::Value LoraAdapter::load(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    if (info.Length() < 2 || !info[0].IsObject() || !info[1].IsString()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, "LoraAdapter.load(model, path)");
    Napi::Object model_obj = info[0].As<Napi::Object>();
    Model * model = Model::from_js(env, model_obj);
    auto * worker = new LoraLoadWorker(env, model, model_obj, info[1].As<Napi::String>());
    worker->Queue();
    return worker->promise();
}

Napi::Function LoraAdapter::define(Napi::Env env) {
    Napi::Function fn = DefineClass(env, "LoraAdapter", {
        StaticMethod<&LoraAdapter::load>("load"),
        InstanceAccessor<&LoraAdapter::js_path>("path"),
        InstanceMethod<&LoraAdapter::js_metadata>("metadata"),
        InstanceMethod<&LoraAdapter::js_dispose>("dispose"),
    });
    constructor = Napi::Persistent(fn);
    constructor.SuppressDestruct();
    return fn;
}

LoraAdapter::LoraAdapter(const Napi::CallbackInfo & info) : Napi::ObjectWrap<LoraAdapter>(info) {
    if (info.Length() < 3 || !info[0].IsExternal()) throw_coded(info.Env(), ErrorCode::INVALID_ARGUMENT, "use LoraAdapter.load(model, path)");
    adapter_ = info[0].As<Napi::External<llama_adapter_lora>>().Data();
    Napi::Object model_obj = info[1].As<Napi::Object>();
    model_ = Model::Unwrap(model_obj);
    model_ref_ = Napi::Persistent(model_obj);
    path_ = info[2].As<Napi::String>();
}

Napi::Value LoraAdapter::js_path(const Napi::CallbackInfo & info) { return Napi::String::New(info.Env(), path_); }

Napi::Value LoraAdapter::js_metadata(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    Napi::Object kv = Napi::Object::New(env);
    if (!adapter_) return kv;
    int32_t n = llama_adapter_meta_count(adapter_);
    for (int32_t i = 0; i < n; i++) {
        char key[256];
        char val[512];
        if (llama_adapter_meta_key_by_index(adapter_, i, key, sizeof key) < 0) continue;
        if (llama_adapter_meta_val_str_by_index(adapter_, i, val, sizeof val) < 0) continue;
        kv.Set(key, val);
    }
    return kv;
}

Napi::Value LoraAdapter::js_dispose(const Napi::CallbackInfo & info) {
    if (!adapter_) return info.Env().Undefined();
    if (users_.load() > 0) throw_coded(info.Env(), ErrorCode::IN_USE, "adapter is still used by an engine; dispose the engine first");
    if (model_->get()) llama_adapter_lora_free(adapter_);  // with the model gone, llama.cpp already freed it
    adapter_ = nullptr;
    model_ref_.Reset();
    return info.Env().Undefined();
}

}  // namespace addon
