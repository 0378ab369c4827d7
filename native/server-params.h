#pragma once
// ServerParams: llama-server's command line, parsed by llama.cpp's own parser (common/arg.cpp,
// LLAMA_EXAMPLE_SERVER), so every flag, short form, LLAMA_ARG_* variable, default and error
// message is llama-server's. The parsed common_params stay here; TypeScript reads the values it
// serves with (values()) and which options were given (given()), to refuse what it cannot do.
// Threads: JS thread only; parsing is cheap.
// Note: parse() follows llama-server exactly, so --help, --version and --list-devices print and
// exit the process, a bad value prints llama-server's message to stderr (parse then throws),
// and --numa is applied to the process.
#include <napi.h>

#include "common.h"

namespace addon {

class ServerParams : public Napi::ObjectWrap<ServerParams> {
public:
    static Napi::Function define(Napi::Env env);
    static Napi::FunctionReference constructor;

    explicit ServerParams(const Napi::CallbackInfo & info);

    const common_params & params() const { return params_; }

    // The ServerParams behind a JS value; throws a TypeError for anything else.
    static ServerParams & from_js(Napi::Env env, Napi::Value value);

private:
    static Napi::Value parse(const Napi::CallbackInfo & info);
    static Napi::Value options(const Napi::CallbackInfo & info);
    static Napi::Value build_info(const Napi::CallbackInfo & info);
    Napi::Value js_values(const Napi::CallbackInfo & info);
    Napi::Value js_given(const Napi::CallbackInfo & info);
    Napi::Value js_router_models(const Napi::CallbackInfo & info);

    common_params params_;
    std::vector<std::string> argv_;
};

}  // namespace addon
