#include "vision.h"

#include <sys/stat.h>

#include "errors-js.h"
#include "log.h"
#include "model-worker.h"
#include "model.h"
#include "server-params.h"

namespace addon {

Napi::FunctionReference Vision::constructor;

class VisionLoadWorker : public ModelWorker {
public:
    VisionLoadWorker(Napi::Env env, Model * model, Napi::Object model_obj, std::string path, int32_t n_threads, bool use_gpu,
                     std::shared_ptr<common_params> server)
        : ModelWorker(env, model, model_obj), path_(std::move(path)), n_threads_(n_threads), use_gpu_(use_gpu), server_(std::move(server)) {}
    ~VisionLoadWorker() override {
        if (ctx_) mtmd_free(ctx_);
    }

    void Execute() override {
        struct stat st;
        if (stat(path_.c_str(), &st) != 0) {
            SetError("multimodal projector file not found: " + path_);
            return;
        }
        mtmd_context_params params = mtmd_context_params_default();
        params.use_gpu = use_gpu_;
        params.print_timings = false;
        params.warmup = false;
        if (n_threads_ > 0) params.n_threads = n_threads_;
        if (server_) {
            // As llama-server: -mmdev, --image-min/max-tokens, --mtmd-batch-max-tokens, -fa.
            params.device = server_->mmproj_device;
            params.image_min_tokens = server_->image_min_tokens;
            params.image_max_tokens = server_->image_max_tokens;
            params.batch_max_tokens = server_->mtmd_batch_max_tokens;
            params.flash_attn_type = server_->flash_attn_type;
        }
        log_capture_begin();
        ctx_ = mtmd_init_from_file(path_.c_str(), model_->get(), params);
        std::string errors = log_capture_end();
        if (!ctx_) SetError("failed to load multimodal projector " + path_ + (errors.empty() ? "" : ": " + errors));
    }

    Napi::Value result(Napi::Env env) override {
        mtmd_context * ctx = ctx_;
        ctx_ = nullptr;
        return Vision::constructor.New({Napi::External<mtmd_context>::New(env, ctx), model_ref_.Value()});
    }

private:
    std::string path_;
    int32_t n_threads_;
    bool use_gpu_;
    std::shared_ptr<common_params> server_;
    mtmd_context * ctx_ = nullptr;
};

// Vision.load(model, path, { nThreads, useGpu, serverParams }) -> Promise<Vision>
Napi::Value Vision::load(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    if (info.Length() < 2 || !info[0].IsObject() || !info[1].IsString()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, "Vision.load(model, path, options)");
    Napi::Object model_obj = info[0].As<Napi::Object>();
    Model * model = Model::from_js(env, model_obj);
    int32_t n_threads = 0;
    bool use_gpu = true;
    std::shared_ptr<common_params> server;
    if (info.Length() > 2 && info[2].IsObject()) {
        Napi::Object o = info[2].As<Napi::Object>();
        if (o.Get("nThreads").IsNumber()) n_threads = o.Get("nThreads").As<Napi::Number>().Int32Value();
        if (o.Get("useGpu").IsBoolean()) use_gpu = o.Get("useGpu").As<Napi::Boolean>();
        if (o.Get("serverParams").IsObject()) server = std::make_shared<common_params>(ServerParams::from_js(env, o.Get("serverParams")).params());
    }
    auto * worker = new VisionLoadWorker(env, model, model_obj, info[1].As<Napi::String>(), n_threads, use_gpu, std::move(server));
    worker->Queue();
    return worker->promise();
}

Napi::Function Vision::define(Napi::Env env) {
    Napi::Function fn = DefineClass(env, "Vision", {
        StaticMethod<&Vision::load>("load"),
        StaticMethod<&Vision::capabilities>("capabilities"),
        InstanceAccessor<&Vision::js_marker>("marker"),
        InstanceAccessor<&Vision::js_supports_vision>("supportsVision"),
        InstanceAccessor<&Vision::js_supports_audio>("supportsAudio"),
        InstanceMethod<&Vision::js_dispose>("dispose"),
    });
    constructor = Napi::Persistent(fn);
    constructor.SuppressDestruct();
    return fn;
}

Vision::Vision(const Napi::CallbackInfo & info) : Napi::ObjectWrap<Vision>(info) {
    if (info.Length() < 2 || !info[0].IsExternal()) throw_coded(info.Env(), ErrorCode::INVALID_ARGUMENT, "use Vision.load(model, path)");
    ctx_ = info[0].As<Napi::External<mtmd_context>>().Data();
    Napi::Object model_obj = info[1].As<Napi::Object>();
    model_ = Model::Unwrap(model_obj);
    model_ref_ = Napi::Persistent(model_obj);
}

Vision::~Vision() {
    if (ctx_) mtmd_free(ctx_);
}

// What a projector file reads, from its GGUF header alone (no weights loaded): the router lists
// its models' input modalities with it, as llama-server's does.
Napi::Value Vision::capabilities(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    if (info.Length() < 1 || !info[0].IsString()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, "Vision.capabilities(path): path must be a string");
    const mtmd_caps caps = mtmd_get_cap_from_file(info[0].As<Napi::String>().Utf8Value().c_str());
    Napi::Object out = Napi::Object::New(env);
    out.Set("vision", Napi::Boolean::New(env, caps.inp_vision));
    out.Set("audio", Napi::Boolean::New(env, caps.inp_audio));
    return out;
}

Napi::Value Vision::js_marker(const Napi::CallbackInfo & info) {
    return Napi::String::New(info.Env(), ctx_ ? mtmd_get_marker(ctx_) : mtmd_default_marker());
}

Napi::Value Vision::js_supports_vision(const Napi::CallbackInfo & info) {
    return Napi::Boolean::New(info.Env(), ctx_ && mtmd_support_vision(ctx_));
}

Napi::Value Vision::js_supports_audio(const Napi::CallbackInfo & info) {
    return Napi::Boolean::New(info.Env(), ctx_ && mtmd_support_audio(ctx_));
}

Napi::Value Vision::js_dispose(const Napi::CallbackInfo & info) {
    if (!ctx_) return info.Env().Undefined();
    if (users_.load() > 0) throw_coded(info.Env(), ErrorCode::IN_USE, "projector is still used by an engine; dispose the engine first");
    mtmd_free(ctx_);
    ctx_ = nullptr;
    model_ref_.Reset();
    return info.Env().Undefined();
}

}  // namespace addon
