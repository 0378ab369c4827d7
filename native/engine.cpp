#include "engine.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "common.h"
#include "log.h"
#include "lora.h"
#include "model-worker.h"
#include "model.h"
#include "mtmd-helper.h"
#include "vision.h"
#include "sampler.h"

namespace addon {

Napi::FunctionReference Engine::constructor;

static int64_t now_us() { return ggml_time_us(); }

// ---------------------------------------------------------------------------------------------
// Creation: the context is allocated on a worker thread.

class EngineCreateWorker : public ModelWorker {
public:
    EngineCreateWorker(Napi::Env env, Model * model, Napi::Object model_obj, Napi::Function on_events, EngineParams params)
        : ModelWorker(env, model, model_obj), params_(params) {
        on_events_ = Napi::Persistent(on_events);
    }
    void set_loras(Napi::Array loras) { loras_ = Napi::Persistent(loras); }
    void set_vision(Napi::Object vision) { vision_ = Napi::Persistent(vision); }
    ~EngineCreateWorker() override {
        if (ctx_) llama_free(ctx_);
    }

    void Execute() override {
        llama_context_params cp = llama_context_default_params();
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
        cp.n_outputs_max = params_.embeddings ? cp.n_batch : cp.n_seq_max;
        cp.n_outputs_max_per_seq = 1;
        log_capture_begin();
        ctx_ = llama_init_from_model(model_->get(), cp);
        std::string errors = log_capture_end();
        if (!ctx_) {
            SetError("failed to create the inference context" + (errors.empty() ? std::string() : ": " + errors));
        } else if (params_.ctx_shift && !params_.embeddings && !llama_memory_can_shift(llama_get_memory(ctx_))) {
            SetError("context shift is not supported by this model's memory (drop --context-shift)");
        }
    }

    Napi::Value result(Napi::Env env) override {
        llama_context * ctx = ctx_;
        ctx_ = nullptr;
        Napi::Object p = Napi::Object::New(env);
        p.Set("nParallel", params_.n_parallel);
        p.Set("nBatch", params_.n_batch);
        p.Set("embeddings", params_.embeddings);
        p.Set("contextShift", params_.ctx_shift);
        p.Set("loras", loras_.IsEmpty() ? Napi::Array::New(env) : loras_.Value());
        if (!vision_.IsEmpty()) p.Set("vision", vision_.Value());
        return Engine::constructor.New({Napi::External<llama_context>::New(env, ctx), model_ref_.Value(), on_events_.Value(), p});
    }

private:
    Napi::FunctionReference on_events_;
    Napi::Reference<Napi::Array> loras_;
    Napi::ObjectReference vision_;
    EngineParams params_;
    llama_context * ctx_ = nullptr;
};

static uint32_t read_u32(Napi::Object o, const char * key, uint32_t fallback) {
    Napi::Value v = o.Get(key);
    return v.IsNumber() ? v.As<Napi::Number>().Uint32Value() : fallback;
}

static int32_t read_i32(Napi::Object o, const char * key, int32_t fallback) {
    Napi::Value v = o.Get(key);
    return v.IsNumber() ? v.As<Napi::Number>().Int32Value() : fallback;
}

// Engine.create(model, params, onEvents) -> Promise<Engine>
Napi::Value Engine::create(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    if (info.Length() < 3 || !info[0].IsObject() || !info[1].IsObject() || !info[2].IsFunction()) {
        throw Napi::TypeError::New(env, "Engine.create(model, params, onEvents)");
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
    auto * worker = new EngineCreateWorker(env, model, model_obj, info[2].As<Napi::Function>(), p);
    if (o.Get("loras").IsArray()) {
        Napi::Array loras = o.Get("loras").As<Napi::Array>();
        for (uint32_t i = 0; i < loras.Length(); i++) {
            Napi::Value v = loras.Get(i);
            if (!v.IsObject() || !v.As<Napi::Object>().InstanceOf(LoraAdapter::constructor.Value())) {
                delete worker;
                throw Napi::TypeError::New(env, "params.loras must be LoraAdapter objects");
            }
            LoraAdapter * a = LoraAdapter::Unwrap(v.As<Napi::Object>());
            if (a->model() != model || !a->get()) {
                delete worker;
                throw Napi::Error::New(env, "a LoRA adapter belongs to another model or is disposed");
            }
        }
        worker->set_loras(loras);
    }
    if (o.Get("vision").IsObject()) {
        Napi::Object v = o.Get("vision").As<Napi::Object>();
        if (!v.InstanceOf(Vision::constructor.Value()) || Vision::Unwrap(v)->model() != model || !Vision::Unwrap(v)->get()) {
            delete worker;
            throw Napi::TypeError::New(env, "params.vision must be a Vision loaded for this model");
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
        InstanceMethod<&Engine::js_cancel>("cancel"),
        InstanceMethod<&Engine::js_slots>("slots"),
        InstanceMethod<&Engine::js_metrics>("metrics"),
        InstanceMethod<&Engine::js_info>("info"),
        InstanceMethod<&Engine::js_dispose>("dispose"),
    });
    constructor = Napi::Persistent(fn);
    constructor.SuppressDestruct();
    return fn;
}

Engine::Engine(const Napi::CallbackInfo & info) : Napi::ObjectWrap<Engine>(info) {
    Napi::Env env = info.Env();
    if (info.Length() < 4 || !info[0].IsExternal()) throw Napi::TypeError::New(env, "Engine cannot be constructed directly; use Engine.create()");
    ctx_ = info[0].As<Napi::External<llama_context>>().Data();
    Napi::Object model_obj = info[1].As<Napi::Object>();
    model_ = Model::Unwrap(model_obj);
    model_ref_ = Napi::Persistent(model_obj);
    model_->retain();
    vocab_ = model_->vocab();
    Napi::Object p = info[3].As<Napi::Object>();
    params_.n_parallel = read_i32(p, "nParallel", 1);
    params_.n_batch = llama_n_batch(ctx_);
    params_.ctx_shift = p.Get("contextShift").ToBoolean();
    n_ctx_seq_ = static_cast<int32_t>(llama_n_ctx_seq(ctx_));
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
    embeddings_ = p.Get("embeddings").ToBoolean();
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
    for (auto & slot : slots_) slot.task.reset();
    waiting_.clear();
    if (batch_.token) {
        llama_batch_free(batch_);
        batch_ = {};
    }
    if (ctx_) {
        llama_detach_threadpool(ctx_);
        llama_free(ctx_);
        ctx_ = nullptr;
    }
    threadpools_.reset();
}

// ---------------------------------------------------------------------------------------------
// JS thread

static std::vector<std::string> strings_from(Napi::Env env, Napi::Value v, const char * what) {
    std::vector<std::string> out;
    if (v.IsUndefined() || v.IsNull()) return out;
    if (!v.IsArray()) throw Napi::TypeError::New(env, std::string(what) + " must be an array of strings");
    Napi::Array arr = v.As<Napi::Array>();
    for (uint32_t i = 0; i < arr.Length(); i++) {
        if (!arr.Get(i).IsString()) throw Napi::TypeError::New(env, std::string(what) + " must be an array of strings");
        out.push_back(arr.Get(i).As<Napi::String>());
    }
    return out;
}

// Converts one JS task object (see CompletionTaskSpec in src/native/binding.ts). Throws on
// invalid input, so nothing is queued when any task of a submission is refused.
std::unique_ptr<CompletionTask> Engine::parse_task(Napi::Env env, Napi::Object o) {
    auto task = std::make_unique<CompletionTask>();

    if (o.Get("media").IsArray()) {
        tokenize_media(env, o, *task);
    } else {
        Napi::Value prompt = o.Get("prompt");
        if (!prompt.IsTypedArray() || prompt.As<Napi::TypedArray>().TypedArrayType() != napi_int32_array) {
            throw Napi::TypeError::New(env, "task.prompt must be an Int32Array of tokens");
        }
        Napi::Int32Array tokens = prompt.As<Napi::Int32Array>();
        const int32_t n_vocab = llama_vocab_n_tokens(vocab_);
        task->prompt.assign(tokens.Data(), tokens.Data() + tokens.ElementLength());
        for (llama_token t : task->prompt) {
            if (t < 0 || t >= n_vocab) throw Napi::RangeError::New(env, "prompt token out of range: " + std::to_string(t));
        }
    }
    if (task->prompt.empty()) throw Napi::Error::New(env, "the prompt is empty");
    if (static_cast<int32_t>(task->prompt.size()) >= n_ctx_seq_) {
        Napi::Error err = Napi::Error::New(env, "the prompt (" + std::to_string(task->prompt.size()) +
                                                    " tokens) does not fit the context of " + std::to_string(n_ctx_seq_) + " tokens");
        err.Set("code", "EXCEEDS_CONTEXT");
        throw err;
    }
    const bool embed = o.Get("kind").IsString() && o.Get("kind").As<Napi::String>().Utf8Value() == "embedding";
    if (embed != embeddings_) {
        throw Napi::Error::New(env, embeddings_ ? "this engine embeds inputs (embedding mode); it does not generate"
                                                : "this engine generates text; embeddings need an engine created with embeddings: true");
    }
    if (embed) {
        task->kind = TaskKind::EMBEDDING;
        if (task->prompt.size() > params_.n_batch) {
            Napi::Error err = Napi::Error::New(env, "the input (" + std::to_string(task->prompt.size()) +
                                                        " tokens) is larger than the batch size of " + std::to_string(params_.n_batch) + " tokens");
            err.Set("code", "EXCEEDS_BATCH");
            throw err;
        }
        task->cache_prompt = false;
        return task;
    }
    task->n_predict = read_i32(o, "nPredict", -1);
    task->id_slot = read_i32(o, "idSlot", -1);
    if (task->id_slot >= params_.n_parallel) throw Napi::RangeError::New(env, "idSlot out of range");
    if (o.Get("cachePrompt").IsBoolean()) task->cache_prompt = o.Get("cachePrompt").As<Napi::Boolean>();
    task->n_probs = std::max(0, read_i32(o, "nProbs", 0));
    if (o.Get("postSamplingProbs").IsBoolean()) task->post_sampling_probs = o.Get("postSamplingProbs").As<Napi::Boolean>();
    if (o.Get("tMaxPredictMs").IsNumber()) task->t_max_predict_ms = o.Get("tMaxPredictMs").As<Napi::Number>().Int64Value();
    task->n_indent = std::max(0, read_i32(o, "nIndent", 0));
    task->n_keep = std::max(-1, read_i32(o, "nKeep", 0));
    task->n_discard = std::max(0, read_i32(o, "nDiscard", 0));
    task->stop = strings_from(env, o.Get("stop"), "task.stop");
    task->lora_scales.assign(loras_.size(), 0.0f);
    if (o.Get("loraScales").IsArray()) {
        Napi::Array scales = o.Get("loraScales").As<Napi::Array>();
        if (scales.Length() > loras_.size()) throw Napi::RangeError::New(env, "task.loraScales has more entries than the engine has adapters");
        for (uint32_t i = 0; i < scales.Length(); i++) {
            Napi::Value v = scales.Get(i);
            double x = v.IsNumber() ? v.As<Napi::Number>().DoubleValue() : NAN;
            if (!std::isfinite(x)) throw Napi::RangeError::New(env, "task.loraScales must be finite numbers");
            task->lora_scales[i] = static_cast<float>(x);
        }
    }
    Napi::Value sampling = o.Get("sampling");
    sampling_params_from_js(env, sampling.IsObject() ? sampling.As<Napi::Object>() : Napi::Object::New(env), model_->get(), n_ctx_seq_,
                            task->sampling);
    task->sampler.reset(sampler_create(env, model_->get(), task->sampling));
    return task;
}

// True when `bytes` start like a format stb_image decodes. Anything else is refused before mtmd,
// which would otherwise try it as audio or video (spawning ffprobe).
static bool looks_like_image(const uint8_t * b, size_t n) {
    auto starts = [&](const char * magic, size_t len) { return n >= len && std::memcmp(b, magic, len) == 0; };
    return starts("\x89PNG", 4) || starts("\xFF\xD8\xFF", 3) || starts("GIF8", 4) || starts("BM", 2) || starts("8BPS", 4) ||
           starts("#?RADIANCE", 10) || starts("#?RGBE", 6) || (n >= 2 && b[0] == 'P' && b[1] >= '1' && b[1] <= '7');
}

// Images in a prompt: `promptText` holds the projector's media marker once per entry of `media`
// (encoded image files). Decoding and tokenizing happen here; encoding waits for the engine thread.
void Engine::tokenize_media(Napi::Env env, Napi::Object o, CompletionTask & task) {
    if (!vision_ || !vision_->get()) throw Napi::Error::New(env, "this engine has no multimodal projector (-mm)");
    if (!o.Get("promptText").IsString()) throw Napi::TypeError::New(env, "task.promptText must be a string when task.media is given");
    const std::string text = o.Get("promptText").As<Napi::String>();
    Napi::Array media = o.Get("media").As<Napi::Array>();
    const std::string marker = mtmd_get_marker(vision_->get());
    size_t n_markers = 0;
    for (size_t pos = text.find(marker); pos != std::string::npos; pos = text.find(marker, pos + marker.size())) n_markers++;
    if (n_markers != media.Length()) {
        Napi::Error err = Napi::Error::New(env, "the number of images (" + std::to_string(media.Length()) + ") does not match the number of media markers \"" +
                                                    marker + "\" in the prompt (" + std::to_string(n_markers) + ")");
        err.Set("code", "BAD_MEDIA");
        throw err;
    }
    std::vector<mtmd_bitmap *> bitmaps;
    std::vector<uint64_t> hashes;  // FNV-1a of each image file, in marker order
    auto free_bitmaps = [&] { for (auto * b : bitmaps) mtmd_bitmap_free(b); bitmaps.clear(); };
    constexpr uint64_t max_pixels = 64ull * 1024 * 1024;
    for (uint32_t i = 0; i < media.Length(); i++) {
        Napi::Value v = media.Get(i);
        if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array) {
            free_bitmaps();
            throw Napi::TypeError::New(env, "task.media entries must be Uint8Arrays");
        }
        Napi::Uint8Array bytes = v.As<Napi::Uint8Array>();
        uint64_t hash = 1469598103934665603ull;
        for (size_t k = 0; k < bytes.ElementLength(); k++) hash = (hash ^ bytes[k]) * 1099511628211ull;
        hashes.push_back(hash);
        if (!looks_like_image(bytes.Data(), bytes.ElementLength())) {
            free_bitmaps();
            Napi::Error err = Napi::Error::New(env, "image " + std::to_string(i) + " is not in a supported format (PNG, JPEG, GIF, BMP, PSD, HDR or PNM)");
            err.Set("code", "BAD_MEDIA");
            throw err;
        }
        mtmd_helper_bitmap_wrapper w = mtmd_helper_bitmap_init_from_buf(vision_->get(), bytes.Data(), bytes.ElementLength(), false, mtmd_helper_init_opt_default());
        if (!w.bitmap || mtmd_bitmap_is_audio(w.bitmap)) {
            if (w.bitmap) mtmd_bitmap_free(w.bitmap);
            free_bitmaps();
            Napi::Error err = Napi::Error::New(env, "image " + std::to_string(i) + " could not be decoded (corrupt or truncated)");
            err.Set("code", "BAD_MEDIA");
            throw err;
        }
        bitmaps.push_back(w.bitmap);
        if (static_cast<uint64_t>(mtmd_bitmap_get_nx(w.bitmap)) * mtmd_bitmap_get_ny(w.bitmap) > max_pixels) {
            free_bitmaps();
            Napi::Error err = Napi::Error::New(env, "image " + std::to_string(i) + " is too large (more than 64 megapixels)");
            err.Set("code", "BAD_MEDIA");
            throw err;
        }
    }
    mtmd_input_chunks * chunks = mtmd_input_chunks_init();
    mtmd_input_text input{text.c_str(), text.size(), true, true};
    const int32_t ret = mtmd_tokenize(vision_->get(), chunks, &input, const_cast<const mtmd_bitmap **>(bitmaps.data()), bitmaps.size());
    free_bitmaps();
    if (ret != 0) {
        mtmd_input_chunks_free(chunks);
        Napi::Error err = Napi::Error::New(env, ret == 1 ? "the number of images does not match the number of media markers in the prompt"
                                                        : "an image could not be preprocessed");
        err.Set("code", "BAD_MEDIA");
        throw err;
    }
    const size_t n = mtmd_input_chunks_size(chunks);
    for (size_t i = 0; i < n; i++) {
        const mtmd_input_chunk * chunk = mtmd_input_chunks_get(chunks, i);
        const auto type = mtmd_input_chunk_get_type(chunk);
        if (type == MTMD_INPUT_CHUNK_TYPE_TEXT) {
            size_t n_tokens = 0;
            const llama_token * tokens = mtmd_input_chunk_get_tokens_text(chunk, &n_tokens);
            task.prompt.insert(task.prompt.end(), tokens, tokens + n_tokens);
        } else if (type == MTMD_INPUT_CHUNK_TYPE_IMAGE) {
            MediaSpan span;
            span.start = task.prompt.size();
            span.n_pos = static_cast<size_t>(mtmd_input_chunk_get_n_pos(chunk));
            span.hash = hashes.at(task.media.size());
            span.chunk.reset(mtmd_input_chunk_copy(chunk));
            task.prompt.insert(task.prompt.end(), span.n_pos, LLAMA_TOKEN_NULL);
            task.media.push_back(std::move(span));
        } else {
            mtmd_input_chunks_free(chunks);
            throw Napi::Error::New(env, "audio input is not supported");
        }
    }
    mtmd_input_chunks_free(chunks);
    if (!task.media.empty() && task.media.back().start + task.media.back().n_pos == task.prompt.size()) {
        Napi::Error err = Napi::Error::New(env, "the prompt must continue with text after its last image");
        err.Set("code", "BAD_MEDIA");
        throw err;
    }
}

// submit(task) -> id, or submit([task, ...]) -> ids: the tasks of one call enter the queue
// together, so that they can share their first batch (deterministic batch composition).
Napi::Value Engine::js_submit(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    if (disposed_) throw Napi::Error::New(env, "engine is disposed");
    if (info.Length() < 1 || !info[0].IsObject()) throw Napi::TypeError::New(env, "submit(task | tasks)");
    const bool many = info[0].IsArray();
    std::vector<std::unique_ptr<CompletionTask>> tasks;
    if (many) {
        Napi::Array arr = info[0].As<Napi::Array>();
        for (uint32_t i = 0; i < arr.Length(); i++) {
            if (!arr.Get(i).IsObject()) throw Napi::TypeError::New(env, "submit([task, ...]): each task must be an object");
            tasks.push_back(parse_task(env, arr.Get(i).As<Napi::Object>()));
        }
    } else {
        tasks.push_back(parse_task(env, info[0].As<Napi::Object>()));
    }
    Napi::Array ids = Napi::Array::New(env, tasks.size());
    for (size_t i = 0; i < tasks.size(); i++) {
        tasks[i]->id = next_task_id_++;
        ids.Set(static_cast<uint32_t>(i), Napi::Number::New(env, static_cast<double>(tasks[i]->id)));
        track_active(tasks[i]->id, true);
        counters_.queued++;
    }
    {
        std::lock_guard<std::mutex> lock(inbox_mutex_);
        for (auto & t : tasks) inbox_.push_back(std::move(t));
    }
    inbox_cv_.notify_one();
    return many ? static_cast<Napi::Value>(ids) : ids.Get(0u);
}

// cancel(taskId): the task stops at the next step and emits no further events.
Napi::Value Engine::js_cancel(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    if (info.Length() < 1 || !info[0].IsNumber()) throw Napi::TypeError::New(env, "cancel(taskId)");
    int64_t id = info[0].As<Napi::Number>().Int64Value();
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

Napi::Value Engine::js_metrics(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    Napi::Object m = Napi::Object::New(env);
    m.Set("promptTokens", static_cast<double>(counters_.prompt_tokens.load()));
    m.Set("promptMs", counters_.prompt_us.load() / 1000.0);
    m.Set("predictedTokens", static_cast<double>(counters_.predicted_tokens.load()));
    m.Set("predictedMs", counters_.predicted_us.load() / 1000.0);
    m.Set("decodeCalls", static_cast<double>(counters_.decode_calls.load()));
    m.Set("contextShifts", static_cast<double>(counters_.context_shifts.load()));
    m.Set("tasksDone", static_cast<double>(counters_.tasks_done.load()));
    m.Set("queued", counters_.queued.load());
    m.Set("busySlots", counters_.busy_slots.load());
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
    m.Set("nThreads", ctx_ ? llama_n_threads(ctx_) : 0);
    m.Set("nThreadsBatch", ctx_ ? llama_n_threads_batch(ctx_) : 0);
    m.Set("embeddings", embeddings_);
    m.Set("pooling", static_cast<int32_t>(pooling_));
    m.Set("nEmbdOut", n_embd_out_);
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
    Napi::Object self = Value();
    auto self_ref = std::make_shared<Napi::ObjectReference>(Napi::Persistent(self));
    auto * worker = new EngineDisposeWorker(
        env, [this] { stop_thread(); free_context(); },
        [this, self_ref] {
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

void Engine::deliver(Napi::Env env, Napi::Function callback) {
    std::vector<EngineEvent> batch;
    {
        std::lock_guard<std::mutex> lock(events_mutex_);
        batch.swap(events_);
        delivery_pending_ = false;
    }
    if (batch.empty()) return;
    Napi::Array out = Napi::Array::New(env, batch.size());
    for (size_t i = 0; i < batch.size(); i++) {
        EngineEvent & e = batch[i];
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
                break;
            case EngineEvent::Kind::ERROR:
                o.Set("kind", "error");
                o.Set("message", e.message);
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
        out.Set(static_cast<uint32_t>(i), o);
    }
    // Tasks that ended are no longer active (cancelled ones were removed by cancel()).
    for (const auto & e : batch) {
        if (e.kind != EngineEvent::Kind::TOKEN && js_active_.count(e.task_id)) track_active(e.task_id, false);
    }
    callback.Call({out});
}

// ---------------------------------------------------------------------------------------------
// Engine thread

void Engine::emit(EngineEvent && event) {
    std::lock_guard<std::mutex> lock(events_mutex_);
    events_.push_back(std::move(event));
}

void Engine::flush_events() {
    std::lock_guard<std::mutex> lock(events_mutex_);
    if (events_.empty() || delivery_pending_ || !tsfn_live_) return;
    delivery_pending_ = true;
    tsfn_.NonBlockingCall([this](Napi::Env env, Napi::Function cb) { deliver(env, cb); });
}

void Engine::publish_summaries() {
    int32_t busy = 0;
    std::lock_guard<std::mutex> lock(summary_mutex_);
    for (size_t i = 0; i < slots_.size(); i++) {
        const Slot & s = slots_[i];
        SlotSummary & out = summaries_[i];
        out.state = s.state;
        out.task_id = s.task ? s.task->id : -1;
        out.n_prompt = s.task ? static_cast<int32_t>(s.task->prompt.size()) : 0;
        out.n_decoded = s.n_decoded;
        out.n_cache = static_cast<int32_t>(s.cache.size());
        if (s.busy()) busy++;
    }
    counters_.busy_slots = busy;
}

void Engine::run() {
    std::vector<std::unique_ptr<CompletionTask>> incoming;
    std::vector<int64_t> cancels;
    while (true) {
        // Tasks left waiting by an earlier iteration take the slots freed since.
        admit_waiting(now_us());
        bool any_busy = std::any_of(slots_.begin(), slots_.end(), [](const Slot & s) { return s.busy(); });
        {
            std::unique_lock<std::mutex> lock(inbox_mutex_);
            if (!any_busy) {
                inbox_cv_.wait(lock, [&] { return stopping_ || !inbox_.empty() || !cancel_inbox_.empty(); });
            }
            if (stopping_) break;
            incoming.swap(inbox_);
            cancels.swap(cancel_inbox_);
        }
        for (auto & t : incoming) waiting_.push_back(std::move(t));
        incoming.clear();
        if (!cancels.empty()) apply_cancels(cancels);
        admit_waiting(now_us());
        step();
        publish_summaries();
        flush_events();
    }
}

void Engine::apply_cancels(std::vector<int64_t> & cancels) {
    for (int64_t id : cancels) {
        auto it = std::find_if(waiting_.begin(), waiting_.end(), [id](const auto & t) { return t->id == id; });
        if (it != waiting_.end()) {
            waiting_.erase(it);
            counters_.queued--;
            continue;
        }
        for (auto & slot : slots_) {
            if (slot.task && slot.task->id == id) {
                // The KV cache keeps what was decoded, so a retry of the same prompt reuses it.
                slot.release(now_us());
                counters_.tasks_done++;
            }
        }
    }
    cancels.clear();
}

Slot * Engine::choose_slot(const CompletionTask & task) {
    if (task.id_slot >= 0) {
        Slot & s = slots_[task.id_slot];
        return s.busy() ? nullptr : &s;
    }
    Slot * best = nullptr;
    size_t best_prefix = 0;
    Slot * lru = nullptr;
    for (auto & s : slots_) {
        if (s.busy()) continue;
        if (task.cache_prompt && s.cache_lora == task.lora_scales) {
            const size_t n = s.common_prefix(task);
            if (n > best_prefix) {
                best_prefix = n;
                best = &s;
            }
        }
        if (!lru || s.t_last_used_us < lru->t_last_used_us) lru = &s;
    }
    return best ? best : lru;
}

void Engine::admit_waiting(int64_t now) {
    for (auto it = waiting_.begin(); it != waiting_.end();) {
        Slot * slot = choose_slot(**it);
        if (!slot) {
            ++it;
            continue;
        }
        std::unique_ptr<CompletionTask> task = std::move(*it);
        it = waiting_.erase(it);
        counters_.queued--;
        start_task(*slot, std::move(task), now);
    }
}

void Engine::start_task(Slot & slot, std::unique_ptr<CompletionTask> task, int64_t now) {
    llama_memory_t mem = llama_get_memory(ctx_);
    // K/V computed under other adapter scales cannot be reused.
    if (slot.cache_lora != task->lora_scales) {
        slot.cache.clear();
        slot.cache_lora = task->lora_scales;
    }
    size_t keep = slot.assign(std::move(task), now);
    if (!llama_memory_seq_rm(mem, slot.id, static_cast<llama_pos>(keep), -1)) {
        // Memory that cannot drop a suffix (recurrent models): start the sequence afresh.
        llama_memory_seq_rm(mem, slot.id, -1, -1);
        slot.cache.clear();
        slot.n_prompt_done = 0;
        slot.n_cached = 0;
    }
    // Penalty samplers see the prompt, as in llama-server.
    if (slot.task->sampler) {
        for (llama_token t : slot.task->prompt) common_sampler_accept(slot.task->sampler.get(), t, false);
    }
}

// Builds one batch from all busy slots and decodes it. On KV-cache pressure, idle slots' caches
// are dropped first, then the prompt share of the batch is halved; a slot that still cannot
// proceed ends (truncated when generating, an error while still in its prompt).
bool Engine::decode_batch() {
    int32_t prompt_budget = static_cast<int32_t>(params_.n_batch);
    struct Undo { size_t cache; size_t prompt_done; };
    std::vector<Undo> undo(slots_.size());
    while (true) {
        // Slots decoded together must share adapter scales: a step serves the group of the busy
        // slot served least recently, so groups alternate and none starves.
        std::vector<float> group;
        bool grouped = false;
        if (!loras_.empty()) {
            const Slot * first = nullptr;
            for (const auto & s : slots_) if (s.busy() && (!first || s.last_step < first->last_step)) first = &s;
            if (first) {
                group = first->task->lora_scales;
                grouped = true;
            }
        }
        auto in_group = [&](const Slot & s) { return !grouped || s.task->lora_scales == group; };
        common_batch_clear(batch_);
        for (size_t i = 0; i < slots_.size(); i++) undo[i] = {slots_[i].cache.size(), slots_[i].n_prompt_done};
        for (auto & s : slots_) {
            s.i_batch = -1;
            if (s.state != SlotState::GENERATING || !in_group(s)) continue;
            s.i_batch = batch_.n_tokens;
            common_batch_add(batch_, s.sampled, static_cast<llama_pos>(s.cache.size()), {s.id}, true);
            s.cache.push_back(s.sampled);
        }
        const int32_t n_generating = batch_.n_tokens;
        int32_t budget = std::min<int32_t>(prompt_budget, static_cast<int32_t>(params_.n_batch) - n_generating);
        // Prompts in arrival order, so an early long prompt is not starved by later ones.
        std::vector<Slot *> prompting;
        for (auto & s : slots_) if (s.state == SlotState::PROMPT && in_group(s)) prompting.push_back(&s);
        std::sort(prompting.begin(), prompting.end(), [](Slot * a, Slot * b) { return a->t_start_us < b->t_start_us; });
        for (Slot * s : prompting) {
            const auto & prompt = s->task->prompt;
            if (s->task->kind == TaskKind::EMBEDDING) {
                // Embedded whole in one pass; i_batch marks its first token. Waits if it does not fit.
                if (static_cast<int32_t>(prompt.size()) > budget) continue;
                s->i_batch = batch_.n_tokens;
                for (llama_token t : prompt) {
                    common_batch_add(batch_, t, static_cast<llama_pos>(s->cache.size()), {s->id}, true);
                    s->cache.push_back(t);
                }
                s->n_prompt_done = prompt.size();
                budget -= static_cast<int32_t>(prompt.size());
                continue;
            }
            size_t stop_at = prompt.size();  // an image is evaluated on its own (eval_media)
            for (const auto & span : s->task->media) {
                if (span.start >= s->n_prompt_done) {
                    stop_at = span.start;
                    break;
                }
            }
            while (budget > 0 && s->n_prompt_done < stop_at) {
                common_batch_add(batch_, prompt[s->n_prompt_done], static_cast<llama_pos>(s->cache.size()), {s->id}, false);
                s->cache.push_back(prompt[s->n_prompt_done]);
                s->n_prompt_done++;
                budget--;
            }
            if (s->n_prompt_done == prompt.size()) {
                s->i_batch = batch_.n_tokens - 1;
                batch_.logits[s->i_batch] = true;
            }
        }
        if (batch_.n_tokens == 0) return false;

        if (grouped && applied_lora_ != group) {
            llama_set_adapters_lora(ctx_, lora_handles_.data(), lora_handles_.size(), group.data());
            applied_lora_ = group;
        }
        const int32_t ret = llama_decode(ctx_, batch_);
        counters_.decode_calls++;
        if (ret == 0) {
            step_counter_++;
            for (auto & s : slots_) if (s.busy() && in_group(s)) s.last_step = step_counter_;
            return true;
        }

        for (size_t i = 0; i < slots_.size(); i++) {
            slots_[i].cache.resize(undo[i].cache);
            slots_[i].n_prompt_done = undo[i].prompt_done;
            slots_[i].i_batch = -1;
        }
        if (ret == 1) {
            llama_memory_t mem = llama_get_memory(ctx_);
            bool freed = false;
            for (auto & s : slots_) {
                if (!s.busy() && !s.cache.empty()) {
                    llama_memory_seq_rm(mem, s.id, -1, -1);
                    s.cache.clear();
                    freed = true;
                }
            }
            if (freed) continue;
            if (batch_.n_tokens > n_generating && prompt_budget > 1) {
                prompt_budget /= 2;
                continue;
            }
            // Nothing else to give: end the slot holding the most tokens and retry without it.
            Slot * largest = nullptr;
            for (auto & s : slots_) if (s.busy() && (!largest || s.cache.size() > largest->cache.size())) largest = &s;
            if (!largest) return false;
            if (largest->state == SlotState::GENERATING) {
                largest->stop = StopType::LIMIT;
                largest->truncated = true;
                finish(*largest);
            } else {
                fail(*largest, "Context size has been exceeded.");
            }
            llama_memory_seq_rm(mem, largest->id, -1, -1);
            largest->cache.clear();
            continue;
        }
        std::string message = ret == -1 ? "Invalid input batch." : ret == 2 ? "Decoding was aborted." : "Compute error.";
        llama_memory_t mem = llama_get_memory(ctx_);
        for (auto & s : slots_) {
            if (!s.busy()) continue;
            fail(s, message);
            llama_memory_seq_rm(mem, s.id, -1, -1);
            s.cache.clear();
        }
        return false;
    }
}

// Encodes and decodes the images that slots have reached, one image per slot and step; text
// around them goes through the shared batch.
void Engine::eval_media() {
    for (auto & s : slots_) {
        if (s.state != SlotState::PROMPT || s.task->media.empty()) continue;
        for (const auto & span : s.task->media) {
            if (span.start != s.n_prompt_done) continue;
            llama_pos new_n_past = 0;
            const int32_t ret = mtmd_helper_eval_chunk_single(vision_->get(), ctx_, span.chunk.get(), static_cast<llama_pos>(s.cache.size()),
                                                              s.id, static_cast<int32_t>(params_.n_batch), false, &new_n_past);
            counters_.decode_calls++;
            if (ret != 0) {
                llama_memory_seq_rm(llama_get_memory(ctx_), s.id, -1, -1);
                s.cache.clear();
                fail(s, "failed to evaluate an image");
                break;
            }
            s.cache.insert(s.cache.end(), span.n_pos, LLAMA_TOKEN_NULL);
            s.media_cached(span);
            s.n_prompt_done += span.n_pos;
            break;
        }
    }
}

void Engine::step() {
    if (!std::any_of(slots_.begin(), slots_.end(), [](const Slot & s) { return s.busy(); })) return;
    if (vision_) eval_media();
    if (!decode_batch()) return;
    for (auto & s : slots_) {
        if (!s.busy() || s.i_batch < 0) continue;
        if (s.task->kind == TaskKind::EMBEDDING) {
            finish_embedding(s, s.i_batch);
            continue;
        }
        if (s.state == SlotState::PROMPT) {
            const int64_t t = now_us();
            s.t_prompt_done_us = t;
            s.state = SlotState::GENERATING;
            counters_.prompt_tokens += s.task->prompt.size() - s.n_cached;
            counters_.prompt_us += t - s.t_start_us;
            if (s.task->n_predict == 0) {
                s.stop = StopType::LIMIT;
                finish(s);
                continue;
            }
        }
        const llama_token token = common_sampler_sample(s.task->sampler.get(), ctx_, s.i_batch);
        common_sampler_accept(s.task->sampler.get(), token, true);
        s.n_decoded++;
        handle_sampled(s, token);
    }
}

static void top_probabilities(llama_context * ctx, int32_t idx, int32_t n_vocab, int32_t n, llama_token sampled,
                              float & sampled_p, std::vector<std::pair<llama_token, float>> & out) {
    const float * logits = llama_get_logits_ith(ctx, idx);
    float max_logit = -INFINITY;
    for (int32_t i = 0; i < n_vocab; i++) max_logit = std::max(max_logit, logits[i]);
    double sum = 0;
    for (int32_t i = 0; i < n_vocab; i++) sum += std::exp(static_cast<double>(logits[i] - max_logit));
    std::vector<llama_token> ids(n_vocab);
    std::iota(ids.begin(), ids.end(), 0);
    const int32_t k = std::min(n, n_vocab);
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](llama_token a, llama_token b) { return logits[a] > logits[b]; });
    out.clear();
    for (int32_t i = 0; i < k; i++) {
        out.emplace_back(ids[i], static_cast<float>(std::exp(static_cast<double>(logits[ids[i]] - max_logit)) / sum));
    }
    sampled_p = static_cast<float>(std::exp(static_cast<double>(logits[sampled] - max_logit)) / sum);
}

// The candidates the sampler chain left for the token it just sampled, most probable first (as
// llama-server's post_sampling_probs: candidates with probability 0 are left out).
static void post_sampling_probabilities(common_sampler * sampler, int32_t n, llama_token sampled, float & sampled_p,
                                        std::vector<std::pair<llama_token, float>> & out) {
    const llama_token_data_array * cur = common_sampler_get_candidates(sampler, true);
    sampled_p = 0.0f;
    for (size_t i = 0; i < cur->size; i++) {
        if (cur->data[i].id == sampled) {
            sampled_p = cur->data[i].p;
            break;
        }
    }
    out.clear();
    for (size_t i = 0; i < cur->size && static_cast<int32_t>(i) < n && cur->data[i].p != 0.0f; i++) {
        out.emplace_back(cur->data[i].id, cur->data[i].p);
    }
}

void Engine::handle_sampled(Slot & s, llama_token token) {
    const CompletionTask & task = *s.task;
    const bool eog = llama_vocab_is_eog(vocab_, token);
    EngineEvent ev;
    ev.kind = EngineEvent::Kind::TOKEN;
    ev.task_id = task.id;
    ev.token = token;
    if (s.n_decoded == 1) ev.n_prompt = static_cast<int32_t>(task.prompt.size());
    if (task.n_probs > 0) {
        std::vector<std::pair<llama_token, float>> top;
        if (task.post_sampling_probs) {
            post_sampling_probabilities(task.sampler.get(), task.n_probs, token, ev.prob, top);
        } else {
            top_probabilities(ctx_, s.i_batch, llama_vocab_n_tokens(vocab_), task.n_probs, token, ev.prob, top);
        }
        for (auto & [id, p] : top) ev.probs.push_back({id, common_token_to_piece(vocab_, id, false), p});
    }
    // A preserved token (a tool-call or thinking marker of the chat format) keeps its text, as
    // llama-server's accept_special_token, so that the chat parser sees it.
    const bool special = task.sampling.preserved_tokens.count(token) > 0;
    const std::string piece = common_token_to_piece(vocab_, token, special);
    ev.text = s.accept_piece(piece, eog);
    s.sampled = token;

    if (s.stop == StopType::NONE) {  // not already ended by a stop string or n_indent
        if (eog) {
            s.stop = StopType::EOS;
        } else if (task.n_predict >= 0 && s.n_decoded >= task.n_predict) {
            s.stop = StopType::LIMIT;
        } else if (static_cast<int32_t>(s.cache.size()) + 1 >= s.n_ctx && !shift_context(s)) {
            s.stop = StopType::LIMIT;
            s.truncated = true;
        } else if (task.t_max_predict_ms > 0 && s.generated.find('\n') != std::string::npos &&
                   (now_us() - s.t_prompt_done_us) / 1000 > task.t_max_predict_ms) {
            s.stop = StopType::LIMIT;
        }
    }
    emit(std::move(ev));
    if (s.stop != StopType::NONE) finish(s);
}

// llama-server's context shift: keep the first n_keep tokens (+ BOS), drop n_discard after them
// (default half of the rest) and move the remainder down. Not for prompts with images (their
// positions are not one per cache entry). False when the slot cannot be shifted.
bool Engine::shift_context(Slot & s) {
    const CompletionTask & task = *s.task;
    if (!params_.ctx_shift || !task.media.empty()) return false;
    const int32_t n_past = static_cast<int32_t>(s.cache.size());
    int32_t n_keep = task.n_keep < 0 ? static_cast<int32_t>(task.prompt.size()) : task.n_keep;
    if (llama_vocab_get_add_bos(vocab_)) n_keep += 1;
    n_keep = std::max(0, std::min(s.n_ctx - 4, n_keep));
    const int32_t n_left = n_past - n_keep;
    const int32_t n_discard = std::clamp(task.n_discard > 0 ? task.n_discard : n_left / 2, 0, std::max(0, n_left - 1));
    if (n_discard == 0) return false;
    llama_memory_t mem = llama_get_memory(ctx_);
    if (!llama_memory_seq_rm(mem, s.id, n_keep, n_keep + n_discard)) return false;
    llama_memory_seq_add(mem, s.id, n_keep + n_discard, n_past, -n_discard);
    s.cache.erase(s.cache.begin() + n_keep, s.cache.begin() + n_keep + n_discard);
    s.truncated = true;
    counters_.context_shifts++;
    return true;
}

void Engine::finish_embedding(Slot & s, int32_t first) {
    const int64_t t = now_us();
    EngineEvent ev;
    ev.kind = EngineEvent::Kind::EMBEDDING;
    ev.task_id = s.task->id;
    ev.n_prompt = static_cast<int32_t>(s.task->prompt.size());
    const int32_t n = static_cast<int32_t>(s.task->prompt.size());
    if (pooling_ == LLAMA_POOLING_TYPE_NONE) {
        ev.embedding.reserve(static_cast<size_t>(n) * n_embd_out_);
        for (int32_t i = 0; i < n; i++) {
            const float * e = llama_get_embeddings_ith(ctx_, first + i);
            if (e) ev.embedding.insert(ev.embedding.end(), e, e + n_embd_out_);
            else ev.embedding.insert(ev.embedding.end(), n_embd_out_, 0.0f);
        }
        ev.n_vectors = n;
    } else {
        const float * e = llama_get_embeddings_seq(ctx_, s.id);
        if (!e) e = llama_get_embeddings_ith(ctx_, first + n - 1);
        if (e) ev.embedding.assign(e, e + n_embd_out_);
        else ev.embedding.assign(n_embd_out_, 0.0f);
        ev.n_vectors = 1;
    }
    counters_.prompt_tokens += n;
    counters_.prompt_us += t - s.t_start_us;
    counters_.tasks_done++;
    emit(std::move(ev));
    // Nothing of an embedded input is reused: free its cells for the next batch.
    llama_memory_seq_rm(llama_get_memory(ctx_), s.id, -1, -1);
    s.cache.clear();
    s.release(t);
}

void Engine::finish(Slot & s) {
    const int64_t t = now_us();
    EngineEvent ev;
    ev.kind = EngineEvent::Kind::DONE;
    ev.task_id = s.task->id;
    ev.text = s.unsent();
    ev.stop = s.stop;
    ev.stopping_word = s.stopping_word;
    ev.truncated = s.truncated;
    ev.n_prompt = static_cast<int32_t>(s.task->prompt.size());
    ev.n_cached = s.n_cached;
    ev.n_predicted = s.n_decoded;
    ev.t_prompt_ms = s.t_prompt_done_us ? (s.t_prompt_done_us - s.t_start_us) / 1000.0 : (t - s.t_start_us) / 1000.0;
    ev.t_predict_ms = s.t_prompt_done_us ? (t - s.t_prompt_done_us) / 1000.0 : 0.0;
    ev.slot_id = s.id;
    counters_.predicted_tokens += s.n_decoded;
    counters_.predicted_us += s.t_prompt_done_us ? t - s.t_prompt_done_us : 0;
    counters_.tasks_done++;
    emit(std::move(ev));
    s.release(t);
}

void Engine::fail(Slot & s, const std::string & message) {
    EngineEvent ev;
    ev.kind = EngineEvent::Kind::ERROR;
    ev.task_id = s.task->id;
    ev.message = message;
    counters_.tasks_done++;
    emit(std::move(ev));
    s.release(now_us());
}

}  // namespace addon
