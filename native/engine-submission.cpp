// Submission (JS thread, and libuv's pool for what takes long): submit(tasks) reads each task
// (parse_task), prepares it (prepare_task: images, prompt checks, the sampler chain) and queues
// them together on the engine's TaskQueue; countTokens(task) only counts a prompt's tokens.
#include <algorithm>

#include "engine-binding.h"
#include "errors-js.h"
#include "model.h"
#include "vision.h"

namespace addon {

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

    // `prepared`: the tasks are those of a request counted as being prepared
    // (beginPreparing), which stops counting when they are queued or refused.
    TaskSubmitWorker(Napi::Env env, EngineBinding * engine, std::vector<TaskRequest> requests, std::vector<std::shared_ptr<std::atomic<bool>>> cancelled,
                     Mode mode = Mode::SUBMIT, bool prepared = false)
        : Napi::AsyncWorker(env), deferred_(Napi::Promise::Deferred::New(env)), engine_(engine), limits_(engine->task_limits()),
          requests_(std::move(requests)), cancelled_(std::move(cancelled)), mode_(mode), prepared_(prepared) {
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
            prepared_ = false;
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
        engine_->enqueue(std::move(tasks), prepared_);
        prepared_ = false;
        deferred_.Resolve(Env().Undefined());
    }

    void OnError(const Napi::Error &) override {
        settle_users();
        if (prepared_) engine_->engine_->queue().end_preparing();
        deferred_.Reject(refusal_to_js(Env(), *refusal_).Value());
    }

private:
    // The tasks leave the engine's preparing_ map; the model and the projector are free again.
    void settle_users() {
        for (const auto & r : requests_) engine_->preparing_.erase(r.task->id);
        engine_->model_->release();
        if (engine_->vision_) engine_->vision_->release();
    }

    Napi::Promise::Deferred deferred_;
    EngineBinding * engine_;
    Napi::ObjectReference engine_ref_;
    TaskLimits limits_;
    std::vector<TaskRequest> requests_;
    std::vector<std::shared_ptr<std::atomic<bool>>> cancelled_;
    Mode mode_;
    std::vector<size_t> counts_;
    std::unique_ptr<Refusal> refusal_;
    bool prepared_;
};

// A submission's hold on its request's count of requests being prepared (beginPreparing): the
// request stops counting on every way out of submit(), when its tasks are queued (take(), then
// enqueue) or refused, or when submit() throws; a submission prepared on the pool takes it along
// (TaskSubmitWorker).
class Preparation {
public:
    Preparation(EngineBinding * engine, bool held) : engine_(engine), held_(held) {}
    ~Preparation() {
        if (held_ && !engine_->disposed_) engine_->engine_->queue().end_preparing();
    }
    Preparation(const Preparation &) = delete;
    Preparation & operator=(const Preparation &) = delete;
    // The hold, passed on to whoever queues the tasks.
    bool take() {
        const bool held = held_;
        held_ = false;
        return held;
    }

private:
    EngineBinding * engine_;
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
// thread came back to the worker's completion, behind a burst's other requests being read
// (docs/benchmarks.md, "Figures moved from code comments"). The order of events is kept: they reach JS through the
// ThreadSafeFunction, never before the current callback and its microtasks are done.
Napi::Promise EngineBinding::submit_now(Napi::Env env, std::vector<TaskRequest> & requests, const TaskLimits & limits, Preparation & preparation) {
    auto queued = Napi::Promise::Deferred::New(env);
    std::vector<std::unique_ptr<CompletionTask>> tasks;
    try {
        for (auto & r : requests) {
            prepare_task(r, limits);
            tasks.push_back(std::move(r.task));
        }
    } catch (const Refusal & r) {
        queued.Reject(refusal_to_js(env, r).Value());
        return queued.Promise();
    } catch (const std::exception & e) {
        queued.Reject(refusal_to_js(env, Refusal(ErrorCode::LOAD_FAILED, std::string("the task could not be prepared: ") + e.what())).Value());
        return queued.Promise();
    }
    enqueue(std::move(tasks), preparation.take());
    queued.Resolve(env.Undefined());
    return queued.Promise();
}

// submit(tasks) -> { ids, queued }: the ids are allocated at once. `queued` resolves when every
// task is on the engine's queue (they enter it together, so they can share their first batch),
// or rejects with a coded Error when any task is refused; then none is queued and none emits an
// event. Wrong argument types and a disposed engine throw synchronously. `prepared` (optional,
// boolean): the tasks are those of a request counted by beginPreparing(), which stops counting
// once they are queued or refused (or submit throws).
Napi::Value EngineBinding::js_submit(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    Preparation preparation(this, info.Length() > 1 && info[1].IsBoolean() && info[1].As<Napi::Boolean>().Value());
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
        rejected.Reject(refusal_to_js(env, *refusal).Value());
        out.Set("queued", rejected.Promise());
        return out;
    }
    for (size_t i = 0; i < requests.size(); i++) requests[i].task->id = first_id + static_cast<int64_t>(i);
    if (std::none_of(requests.begin(), requests.end(), prepared_off_thread)) {
        out.Set("queued", submit_now(env, requests, limits, preparation));
        return out;
    }
    std::vector<std::shared_ptr<std::atomic<bool>>> cancelled;
    for (size_t i = 0; i < requests.size(); i++) {
        cancelled.push_back(std::make_shared<std::atomic<bool>>(false));
        preparing_[requests[i].task->id] = cancelled.back();
    }
    auto * worker = new TaskSubmitWorker(env, this, std::move(requests), std::move(cancelled), TaskSubmitWorker::Mode::SUBMIT, preparation.take());
    out.Set("queued", worker->promise());
    worker->Queue();
    return out;
}

// countTokens(task) -> Promise<number>: the tokens of the task's prompt, images tokenized by the
// projector (each counted as its tokens), on a worker; rejects with a coded Error for bad images
// or token ids. Nothing is queued.
Napi::Value EngineBinding::js_count_tokens(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    if (disposed_) throw_coded(env, ErrorCode::DISPOSED, "engine is disposed");
    if (info.Length() < 1 || !info[0].IsObject()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, "countTokens(task): task must be an object");
    std::vector<TaskRequest> requests;
    try {
        requests.push_back(parse_task(env, info[0].As<Napi::Object>(), task_limits()));
    } catch (const Refusal & r) {
        auto rejected = Napi::Promise::Deferred::New(env);
        rejected.Reject(refusal_to_js(env, r).Value());
        return rejected.Promise();
    }
    requests[0].task->id = -1;
    std::vector<std::shared_ptr<std::atomic<bool>>> cancelled{std::make_shared<std::atomic<bool>>(false)};
    auto * worker = new TaskSubmitWorker(env, this, std::move(requests), std::move(cancelled), TaskSubmitWorker::Mode::COUNT);
    Napi::Promise promise = worker->promise();
    worker->Queue();
    return promise;
}

}  // namespace addon
