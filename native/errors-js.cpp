#include "errors-js.h"

namespace addon {

Napi::Error coded_error(Napi::Env env, ErrorCode code, const std::string & message) {
    Napi::Error err = code == ErrorCode::INVALID_ARGUMENT ? Napi::TypeError::New(env, message) : Napi::Error::New(env, message);
    err.Set("code", error_code_name(code));
    return err;
}

void throw_coded(Napi::Env env, ErrorCode code, const std::string & message) { throw coded_error(env, code, message); }

Napi::Error refusal_to_js(Napi::Env env, const Refusal & r) {
    Napi::Error err = coded_error(env, r.code, r.message);
    for (const auto & [key, value] : r.details) err.Set(key, Napi::Number::New(env, value));
    return err;
}

}  // namespace addon
