#pragma once
// ModelWorker: a promise-returning AsyncWorker that uses a Model. From construction until it
// settles it keeps the model's JS object alive and counts as a user of the model, so
// Model.dispose() refuses while it runs. Subclasses do their work in Execute() (worker thread,
// C++ data only) and build the resolved value in result() (JS thread). A failure rejects with an
// Error coded LOAD_FAILED unless Execute() chose another code with fail().
#include <napi.h>

#include "errors-js.h"
#include "model.h"

namespace addon {

class ModelWorker : public Napi::AsyncWorker {
public:
    Napi::Promise promise() { return deferred_.Promise(); }

protected:
    ModelWorker(Napi::Env env, Model * model, Napi::Object model_obj)
        : Napi::AsyncWorker(env), deferred_(Napi::Promise::Deferred::New(env)), model_(model) {
        model_ref_ = Napi::Persistent(model_obj);
        model_->retain();
    }

    virtual Napi::Value result(Napi::Env env) = 0;

    // Execute() only: the work failed with this code and message.
    void fail(ErrorCode code, const std::string & message) {
        code_ = code;
        SetError(message);
    }

    void OnOK() override {
        model_->release();
        deferred_.Resolve(result(Env()));
    }

    void OnError(const Napi::Error & error) override {
        model_->release();
        Napi::Error coded = error;
        coded.Set("code", error_code_name(code_));
        deferred_.Reject(coded.Value());
    }

    Model * model_;
    Napi::ObjectReference model_ref_;

private:
    Napi::Promise::Deferred deferred_;
    ErrorCode code_ = ErrorCode::LOAD_FAILED;
};

}  // namespace addon
