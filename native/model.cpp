#include "model.h"
#include "server-params.h"

#include <sys/stat.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>

#include "chat-template.h"
#include "common.h"
#include "errors-js.h"
#include "log.h"
#include "model-worker.h"

namespace addon {

Napi::FunctionReference Model::constructor;

// ---------------------------------------------------------------------------------------------
// Loading (worker thread)

// Checks that `path` names a readable GGUF file; returns an empty string or the reason.
static std::string check_gguf_file(const std::string & path) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) return "model file not found: " + path;
    if (S_ISDIR(st.st_mode)) return "model path is a directory, not a GGUF file: " + path;
    std::ifstream in(path, std::ios::binary);
    if (!in) return "model file is not readable: " + path;
    char magic[4] = {0};
    in.read(magic, 4);
    if (in.gcount() < 4 || std::memcmp(magic, "GGUF", 4) != 0) {
        return "not a GGUF file (bad magic): " + path;
    }
    return "";
}

struct LoadState {
    std::atomic<bool> cancelled{false};
    Napi::ThreadSafeFunction progress;  // may be empty
    bool has_progress = false;
};

class ModelLoadWorker : public Napi::AsyncWorker {
public:
    ModelLoadWorker(Napi::Env env, std::string path, int32_t n_gpu_layers, bool use_mmap, std::shared_ptr<common_params> server,
                    std::shared_ptr<LoadState> state)
        : Napi::AsyncWorker(env), deferred_(Napi::Promise::Deferred::New(env)), path_(std::move(path)),
          n_gpu_layers_(n_gpu_layers), use_mmap_(use_mmap), server_(std::move(server)), state_(std::move(state)) {}

    Napi::Promise promise() { return deferred_.Promise(); }

    void Execute() override {
        std::string problem = check_gguf_file(path_);
        if (!problem.empty()) {
            SetError(problem);
            return;
        }
        // With llama-server's parsed command line, its model flags apply as there (devices,
        // split, offload, load mode, tensor overrides, MoE placement, KV overrides); otherwise
        // the two options given.
        llama_model_params params = llama_model_default_params();
        if (server_) {
            params = common_model_params_to_llama(*server_);
        } else {
            params.n_gpu_layers = n_gpu_layers_;
            if (!use_mmap_) params.load_mode = LLAMA_LOAD_MODE_NONE;
        }
        params.progress_callback = [](float progress, void * data) -> bool {
            auto * state = static_cast<LoadState *>(data);
            if (state->has_progress) {
                state->progress.NonBlockingCall([progress](Napi::Env, Napi::Function cb) {
                    cb.Call({Napi::Number::New(cb.Env(), progress)});
                });
            }
            return !state->cancelled.load();
        };
        params.progress_callback_user_data = state_.get();
        log_capture_begin();
        model_ = llama_model_load_from_file(path_.c_str(), params);
        std::string errors = log_capture_end();
        if (!model_) {
            if (state_->cancelled.load()) {
                SetError("model loading was cancelled");
            } else {
                SetError("failed to load model " + path_ + (errors.empty() ? "" : ": " + errors));
            }
        }
    }

    void OnOK() override {
        Napi::Env env = Env();
        Napi::Object obj = Model::constructor.New({Napi::External<llama_model>::New(env, model_), Napi::String::New(env, path_)});
        model_ = nullptr;
        settle(obj, true);
    }

    void OnError(const Napi::Error & error) override {
        Napi::Error coded = error;
        coded.Set("code", error_code_name(ErrorCode::LOAD_FAILED));
        settle(coded.Value(), false);
    }

    ~ModelLoadWorker() override {
        if (model_) llama_model_free(model_);
    }

private:
    // Progress calls travel through the ThreadSafeFunction's queue, the worker's completion through
    // its own uv handle, and libuv does not order the two. With a progress callback the promise is
    // therefore settled through the same queue, after every progress call made before it.
    void settle(Napi::Value value, bool ok) {
        if (!state_->has_progress) {
            ok ? deferred_.Resolve(value) : deferred_.Reject(value);
            return;
        }
        struct Settlement {
            Napi::Promise::Deferred deferred;
            Napi::Reference<Napi::Value> value;
            bool ok;
        };
        auto * settlement = new Settlement{deferred_, Napi::Persistent(value), ok};
        state_->has_progress = false;
        napi_status status = state_->progress.NonBlockingCall([settlement](Napi::Env, Napi::Function) {
            Napi::Value v = settlement->value.Value();
            settlement->ok ? settlement->deferred.Resolve(v) : settlement->deferred.Reject(v);
            delete settlement;
        });
        if (status != napi_ok) {  // the queue is closing: settle here rather than never
            Napi::Value v = settlement->value.Value();
            ok ? deferred_.Resolve(v) : deferred_.Reject(v);
            delete settlement;
        }
        state_->progress.Release();
    }

    Napi::Promise::Deferred deferred_;
    std::string path_;
    int32_t n_gpu_layers_;
    bool use_mmap_;
    std::shared_ptr<common_params> server_;  // null without ServerParams
    std::shared_ptr<LoadState> state_;
    llama_model * model_ = nullptr;
};

// Model.load(path, { nGpuLayers, useMmap }, onProgress?) -> { promise, cancel() }
Napi::Value Model::load(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    if (info.Length() < 1 || !info[0].IsString()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, "load(path, options, onProgress?): path must be a string");
    std::string path = info[0].As<Napi::String>();
    int32_t n_gpu_layers = -1;
    bool use_mmap = true;
    std::shared_ptr<common_params> server;
    if (info.Length() > 1 && info[1].IsObject()) {
        Napi::Object opts = info[1].As<Napi::Object>();
        if (opts.Has("nGpuLayers") && opts.Get("nGpuLayers").IsNumber()) n_gpu_layers = opts.Get("nGpuLayers").As<Napi::Number>().Int32Value();
        if (opts.Has("useMmap") && opts.Get("useMmap").IsBoolean()) use_mmap = opts.Get("useMmap").As<Napi::Boolean>();
        if (opts.Has("serverParams") && opts.Get("serverParams").IsObject()) {
            server = std::make_shared<common_params>(ServerParams::from_js(env, opts.Get("serverParams")).params());
        }
    }
    auto state = std::make_shared<LoadState>();
    if (info.Length() > 2 && info[2].IsFunction()) {
        state->progress = Napi::ThreadSafeFunction::New(env, info[2].As<Napi::Function>(), "model-load-progress", 0, 1);
        state->has_progress = true;
    }
    auto * worker = new ModelLoadWorker(env, path, n_gpu_layers, use_mmap, std::move(server), state);
    Napi::Object handle = Napi::Object::New(env);
    handle.Set("promise", worker->promise());
    handle.Set("cancel", Napi::Function::New(env, [state](const Napi::CallbackInfo &) { state->cancelled.store(true); }));
    worker->Queue();
    return handle;
}

// ---------------------------------------------------------------------------------------------
// The wrapped object

Napi::Function Model::define(Napi::Env env) {
    Napi::Function fn = DefineClass(env, "Model", {
        StaticMethod<&Model::load>("load"),
        InstanceMethod<&Model::metadata>("metadata"),
        InstanceMethod<&Model::js_tokenize>("tokenize"),
        InstanceMethod<&Model::js_tokenize_async>("tokenizeAsync"),
        InstanceMethod<&Model::js_detokenize>("detokenize"),
        InstanceMethod<&Model::js_token_piece>("tokenPiece"),
        InstanceMethod<&Model::js_apply_chat_template>("applyChatTemplate"),
        InstanceMethod<&Model::js_apply_chat>("applyChat"),
        InstanceMethod<&Model::js_apply_chat_async>("applyChatAsync"),
        InstanceMethod<&Model::js_chat_template_info>("chatTemplateInfo"),
        InstanceMethod<&Model::js_dispose>("dispose"),
        InstanceAccessor<&Model::js_disposed>("disposed"),
    });
    constructor = Napi::Persistent(fn);
    constructor.SuppressDestruct();
    return fn;
}

Model::Model(const Napi::CallbackInfo & info) : Napi::ObjectWrap<Model>(info) {
    if (info.Length() < 2 || !info[0].IsExternal()) {
        throw_coded(info.Env(), ErrorCode::INVALID_ARGUMENT, "Model cannot be constructed directly; use Model.load(path)");
    }
    model_ = info[0].As<Napi::External<llama_model>>().Data();
    path_ = info[1].As<Napi::String>();
    vocab_ = llama_model_get_vocab(model_);
    for (llama_token t = 0, n = llama_vocab_n_tokens(vocab_); t < n; t++) {
        if (llama_vocab_is_eog(vocab_, t)) eog_tokens_.push_back(t);
    }
}

Model::~Model() {
    if (model_) llama_model_free(model_);
}

Model * Model::from_js(Napi::Env env, Napi::Value value) {
    if (!value.IsObject() || !value.As<Napi::Object>().InstanceOf(constructor.Value())) throw_coded(env, ErrorCode::INVALID_ARGUMENT, "expected a Model");
    Model * model = Model::Unwrap(value.As<Napi::Object>());
    if (!model->get()) throw_coded(env, ErrorCode::DISPOSED, "model is disposed");
    return model;
}

void Model::check_alive(Napi::Env env) const {
    if (!model_) throw_coded(env, ErrorCode::DISPOSED, "model is disposed");
}

Napi::Value Model::js_dispose(const Napi::CallbackInfo & info) {
    if (!model_) return info.Env().Undefined();
    if (users_.load() > 0) throw_coded(info.Env(), ErrorCode::IN_USE, "model is still used by an engine; dispose the engine first");
    chat_templates_.reset();
    llama_model_free(model_);
    model_ = nullptr;
    vocab_ = nullptr;
#if defined(__GLIBC__)
    // Give the freed weights and vocabulary back to the OS now rather than keeping them in
    // malloc's arenas, so that unloading a model visibly lowers the process's memory.
    malloc_trim(0);
#endif
    return info.Env().Undefined();
}

Napi::Value Model::js_disposed(const Napi::CallbackInfo & info) { return Napi::Boolean::New(info.Env(), model_ == nullptr); }

static std::string meta_string(const llama_model * model, const char * key) {
    char buf[512];
    int32_t n = llama_model_meta_val_str(model, key, buf, sizeof buf);
    if (n < 0) return "";
    if ((size_t) n >= sizeof buf) {
        std::string big(n + 1, '\0');
        llama_model_meta_val_str(model, key, big.data(), big.size());
        big.resize(n);
        return big;
    }
    return std::string(buf, n);
}

static const char * vocab_type_name(enum llama_vocab_type t) {
    switch (t) {
        case LLAMA_VOCAB_TYPE_NONE: return "none";
        case LLAMA_VOCAB_TYPE_SPM: return "spm";
        case LLAMA_VOCAB_TYPE_BPE: return "bpe";
        case LLAMA_VOCAB_TYPE_WPM: return "wpm";
        case LLAMA_VOCAB_TYPE_UGM: return "ugm";
        case LLAMA_VOCAB_TYPE_RWKV: return "rwkv";
        default: return "other";
    }
}

static Napi::Value token_or_null(Napi::Env env, llama_token t) {
    return t == LLAMA_TOKEN_NULL ? env.Null() : Napi::Number::New(env, t);
}

Napi::Value Model::metadata(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    check_alive(env);
    Napi::Object m = Napi::Object::New(env);
    std::string arch = meta_string(model_, "general.architecture");
    m.Set("architecture", arch);
    m.Set("name", meta_string(model_, "general.name"));
    char desc[256];
    llama_model_desc(model_, desc, sizeof desc);
    m.Set("description", std::string(desc));
    m.Set("nParams", Napi::Number::New(env, (double) llama_model_n_params(model_)));
    m.Set("sizeBytes", Napi::Number::New(env, (double) llama_model_size(model_)));
    m.Set("nCtxTrain", llama_model_n_ctx_train(model_));
    m.Set("nEmbd", llama_model_n_embd(model_));
    m.Set("nLayer", llama_model_n_layer(model_));
    m.Set("nHead", llama_model_n_head(model_));
    m.Set("nHeadKv", llama_model_n_head_kv(model_));
    m.Set("vocabSize", llama_vocab_n_tokens(vocab_));
    m.Set("vocabType", vocab_type_name(llama_vocab_type(vocab_)));
    m.Set("hasEncoder", llama_model_has_encoder(model_));
    m.Set("hasDecoder", llama_model_has_decoder(model_));
    m.Set("nClsOut", llama_model_n_cls_out(model_));
    std::string pooling = meta_string(model_, (arch + ".pooling_type").c_str());
    m.Set("poolingType", pooling.empty() ? env.Null() : Napi::Number::New(env, std::atoi(pooling.c_str())));

    Napi::Object tokens = Napi::Object::New(env);
    tokens.Set("bos", token_or_null(env, llama_vocab_bos(vocab_)));
    tokens.Set("eos", token_or_null(env, llama_vocab_eos(vocab_)));
    tokens.Set("eot", token_or_null(env, llama_vocab_eot(vocab_)));
    tokens.Set("sep", token_or_null(env, llama_vocab_sep(vocab_)));
    tokens.Set("nl", token_or_null(env, llama_vocab_nl(vocab_)));
    tokens.Set("pad", token_or_null(env, llama_vocab_pad(vocab_)));
    tokens.Set("fimPre", token_or_null(env, llama_vocab_fim_pre(vocab_)));
    tokens.Set("fimSuf", token_or_null(env, llama_vocab_fim_suf(vocab_)));
    tokens.Set("fimMid", token_or_null(env, llama_vocab_fim_mid(vocab_)));
    tokens.Set("fimPad", token_or_null(env, llama_vocab_fim_pad(vocab_)));
    tokens.Set("fimRep", token_or_null(env, llama_vocab_fim_rep(vocab_)));
    tokens.Set("fimSep", token_or_null(env, llama_vocab_fim_sep(vocab_)));
    m.Set("tokens", tokens);
    // Every end-of-generation token (llama_vocab_is_eog), as llama-server's logit_bias_eog.
    Napi::Array eog = Napi::Array::New(env, eog_tokens_.size());
    for (size_t i = 0; i < eog_tokens_.size(); i++) eog.Set(static_cast<uint32_t>(i), eog_tokens_[i]);
    m.Set("eogTokens", eog);
    m.Set("addBos", llama_vocab_get_add_bos(vocab_));
    m.Set("addEos", llama_vocab_get_add_eos(vocab_));
    m.Set("addSep", llama_vocab_get_add_sep(vocab_));

    const char * tmpl = llama_model_chat_template(model_, nullptr);
    m.Set("chatTemplate", tmpl ? Napi::String::New(env, tmpl) : env.Null());

    Napi::Object kv = Napi::Object::New(env);
    int32_t count = llama_model_meta_count(model_);
    for (int32_t i = 0; i < count; i++) {
        char key[256];
        if (llama_model_meta_key_by_index(model_, i, key, sizeof key) < 0) continue;
        char val[512];
        int32_t n = llama_model_meta_val_str_by_index(model_, i, val, sizeof val);
        std::string value;
        if (n >= (int32_t) sizeof val) {
            value.assign(n + 1, '\0');
            llama_model_meta_val_str_by_index(model_, i, value.data(), value.size());
            value.resize(n);
        } else if (n >= 0) {
            value.assign(val, n);
        }
        kv.Set(key, value);
    }
    m.Set("kv", kv);
    return m;
}

std::vector<llama_token> Model::tokenize(const std::string & text, bool add_special, bool parse_special) const {
    return common_tokenize(vocab_, text, add_special, parse_special);
}

std::string Model::piece(llama_token token, bool special) const {
    return common_token_to_piece(vocab_, token, special);
}

static std::vector<llama_token> tokens_from_js(Napi::Env env, Napi::Value value, const llama_vocab * vocab) {
    std::vector<llama_token> tokens;
    const int32_t n_vocab = llama_vocab_n_tokens(vocab);
    auto check = [&](double t) {
        if (!std::isfinite(t) || t != std::floor(t) || t < 0 || t >= n_vocab) {
            throw_coded(env, ErrorCode::TOKEN_OUT_OF_RANGE, "token id out of range: " + std::to_string(t));
        }
        tokens.push_back((llama_token) t);
    };
    if (value.IsTypedArray() && value.As<Napi::TypedArray>().TypedArrayType() == napi_int32_array) {
        Napi::Int32Array arr = value.As<Napi::Int32Array>();
        tokens.reserve(arr.ElementLength());
        for (size_t i = 0; i < arr.ElementLength(); i++) check(arr[i]);
    } else if (value.IsArray()) {
        Napi::Array arr = value.As<Napi::Array>();
        tokens.reserve(arr.Length());
        for (uint32_t i = 0; i < arr.Length(); i++) {
            Napi::Value v = arr.Get(i);
            if (!v.IsNumber()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, "tokens must be integers");
            check(v.As<Napi::Number>().DoubleValue());
        }
    } else {
        throw_coded(env, ErrorCode::INVALID_ARGUMENT, "tokens must be an Int32Array or an array of integers");
    }
    return tokens;
}

// tokenize(text, addSpecial, parseSpecial) -> Int32Array
Napi::Value Model::js_tokenize(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    check_alive(env);
    if (info.Length() < 1 || !info[0].IsString()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, "tokenize(text, addSpecial, parseSpecial): text must be a string");
    std::string text = info[0].As<Napi::String>();
    bool add_special = info.Length() > 1 && info[1].ToBoolean();
    bool parse_special = info.Length() > 2 && info[2].ToBoolean();
    std::vector<llama_token> tokens = tokenize(text, add_special, parse_special);
    Napi::Int32Array out = Napi::Int32Array::New(env, tokens.size());
    if (!tokens.empty()) std::memcpy(out.Data(), tokens.data(), tokens.size() * sizeof(llama_token));
    return out;
}

class TokenizeWorker : public ModelWorker {
public:
    TokenizeWorker(Napi::Env env, Model * model, Napi::Object self, std::string text, bool add_special, bool parse_special)
        : ModelWorker(env, model, self), text_(std::move(text)), add_special_(add_special), parse_special_(parse_special) {}
    void Execute() override { tokens_ = model_->tokenize(text_, add_special_, parse_special_); }
    Napi::Value result(Napi::Env env) override {
        Napi::Int32Array out = Napi::Int32Array::New(env, tokens_.size());
        if (!tokens_.empty()) std::memcpy(out.Data(), tokens_.data(), tokens_.size() * sizeof(llama_token));
        return out;
    }

private:
    std::string text_;
    bool add_special_;
    bool parse_special_;
    std::vector<llama_token> tokens_;
};

// tokenizeAsync(text, addSpecial, parseSpecial) -> Promise<Int32Array>: on a worker thread, so
// long texts and many concurrent requests do not hold the JS thread.
Napi::Value Model::js_tokenize_async(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    check_alive(env);
    if (info.Length() < 1 || !info[0].IsString()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, "tokenizeAsync(text, addSpecial, parseSpecial): text must be a string");
    auto * worker = new TokenizeWorker(env, this, Value(), info[0].As<Napi::String>(), info.Length() > 1 && info[1].ToBoolean(),
                                       info.Length() > 2 && info[2].ToBoolean());
    worker->Queue();
    return worker->promise();
}

// detokenize(tokens, removeSpecial = false, unparseSpecial = true) -> string
Napi::Value Model::js_detokenize(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    check_alive(env);
    std::vector<llama_token> tokens = tokens_from_js(env, info[0], vocab_);
    bool remove_special = info.Length() > 1 && info[1].ToBoolean();
    bool unparse_special = info.Length() > 2 ? info[2].ToBoolean().Value() : true;
    std::string text;
    text.resize(std::max<size_t>(tokens.size() * 8, 16));
    int32_t n = llama_detokenize(vocab_, tokens.data(), tokens.size(), text.data(), text.size(), remove_special, unparse_special);
    if (n < 0) {
        text.resize(-n);
        n = llama_detokenize(vocab_, tokens.data(), tokens.size(), text.data(), text.size(), remove_special, unparse_special);
    }
    text.resize(std::max(n, 0));
    // Invalid UTF-8 (a token sequence that splits a character) is replaced by N-API with U+FFFD.
    return Napi::String::New(env, text);
}

// tokenPiece(token, special = true) -> Uint8Array (the raw bytes; may be partial UTF-8)
Napi::Value Model::js_token_piece(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    check_alive(env);
    if (info.Length() < 1 || !info[0].IsNumber()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, "tokenPiece(token): token must be a number");
    std::vector<llama_token> token = tokens_from_js(env, [&] {
        Napi::Array a = Napi::Array::New(env, 1);
        a.Set(0u, info[0]);
        return a;
    }(), vocab_);
    bool special = info.Length() > 1 ? info[1].ToBoolean().Value() : true;
    std::string bytes = piece(token[0], special);
    return Napi::Buffer<uint8_t>::Copy(env, reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size());
}

// applyChatTemplate(messages: {role, content}[], { addGenerationPrompt = true, template?, kwargs? }) -> string
Napi::Value Model::js_apply_chat_template(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    check_alive(env);
    if (info.Length() < 1 || !info[0].IsArray()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, "applyChatTemplate(messages, options): messages must be an array");
    Napi::Array arr = info[0].As<Napi::Array>();
    std::vector<ChatMessage> messages;
    for (uint32_t i = 0; i < arr.Length(); i++) {
        Napi::Value v = arr.Get(i);
        if (!v.IsObject()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, "each message must be an object");
        Napi::Object o = v.As<Napi::Object>();
        if (!o.Get("role").IsString() || !o.Get("content").IsString()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, "each message needs string role and content");
        messages.push_back({o.Get("role").As<Napi::String>(), o.Get("content").As<Napi::String>()});
    }
    ChatTemplateOptions options;
    std::string override_source;
    if (info.Length() > 1 && info[1].IsObject()) {
        Napi::Object o = info[1].As<Napi::Object>();
        if (o.Get("addGenerationPrompt").IsBoolean()) options.add_generation_prompt = o.Get("addGenerationPrompt").As<Napi::Boolean>();
        if (o.Get("template").IsString()) override_source = o.Get("template").As<Napi::String>();
        if (o.Get("kwargs").IsObject()) {
            Napi::Object kw = o.Get("kwargs").As<Napi::Object>();
            Napi::Array keys = kw.GetPropertyNames();
            for (uint32_t i = 0; i < keys.Length(); i++) {
                std::string key = keys.Get(i).As<Napi::String>();
                Napi::Value val = kw.Get(key);
                if (val.IsString()) options.kwargs[key] = val.As<Napi::String>();
            }
        }
    }
    try {
        ChatTemplates templates(model_, override_source);
        return Napi::String::New(env, templates.apply(messages, options));
    } catch (const std::exception & e) {
        throw_coded(env, ErrorCode::TEMPLATE_FAILED, std::string("chat template failed: ") + e.what());
    }
}

// applyChat(inputs: ChatInputs) -> ChatParams: the chat layer of llama-server (tools, tool
// history, reasoning, grammar and parser); see chat-template.h for its errors.
Napi::Value Model::js_apply_chat(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    check_alive(env);
    if (!chat_templates_) chat_templates_ = std::make_unique<ChatTemplateCache>();
    return apply_chat_js(env, model_, *chat_templates_, info.Length() > 0 ? info[0] : env.Undefined());
}

// applyChatAsync(inputs: ChatInputs) -> Promise<ChatParams>: applyChat rendered on a worker thread.
Napi::Value Model::js_apply_chat_async(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    check_alive(env);
    if (!chat_templates_) chat_templates_ = std::make_unique<ChatTemplateCache>();
    return apply_chat_async_js(env, this, Value(), *chat_templates_, info.Length() > 0 ? info[0] : env.Undefined());
}

// chatTemplateInfo(template?) -> { source, hasModelTemplate, caps, supportsEnableThinking }.
Napi::Value Model::js_chat_template_info(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    check_alive(env);
    if (!chat_templates_) chat_templates_ = std::make_unique<ChatTemplateCache>();
    return chat_template_info_js(env, model_, *chat_templates_, info.Length() > 0 ? info[0] : env.Undefined());
}

}  // namespace addon
