// Registration only: the native surface is declared in src/native/binding.ts.
#include <napi.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "chat-parser.h"
#include "engine-binding.h"
#include "errors-js.h"
#include "common.h"
#include "ggml-backend.h"
#include "llama.h"
#include "log.h"
#include "lora.h"
#include "model.h"
#include "vision.h"
#include "sampler.h"
#include "server-params.h"

#ifndef ADDON_BACKEND
#define ADDON_BACKEND "CPU"
#endif

namespace addon {

static Napi::Value system_info(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    Napi::Object o = Napi::Object::New(env);
    o.Set("backend", ADDON_BACKEND);
    o.Set("llamaSystemInfo", llama_print_system_info());
    o.Set("supportsGpuOffload", llama_supports_gpu_offload());
    o.Set("supportsMmap", llama_supports_mmap());
    o.Set("maxDevices", static_cast<double>(llama_max_devices()));
    return o;
}

// setLogLevel(name): the lowest level of llama.cpp's log lines printed to stderr.
static Napi::Value set_log_level(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    if (info.Length() < 1 || !info[0].IsString() || !log_set_level(info[0].As<Napi::String>().Utf8Value())) {
        throw_coded(env, ErrorCode::INVALID_ARGUMENT, "setLogLevel(level): level must be debug, info, warn, error or none");
    }
    return env.Undefined();
}

// addRpcServers("host:port,..."): registers each rpc-server as a device (llama.cpp's --rpc), so
// that models loaded afterwards offload layers to them (with n_gpu_layers). ggml aborts the process
// when a server cannot be reached: callers check reachability first.
static Napi::Value add_rpc_servers(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    if (info.Length() < 1 || !info[0].IsString()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, "addRpcServers(servers): a comma-separated host:port list");
    const auto servers = string_split<std::string>(info[0].As<Napi::String>().Utf8Value(), ',');
    ggml_backend_reg_t reg = ggml_backend_reg_by_name("RPC");
    using add_server_fn = ggml_backend_reg_t (*)(const char * endpoint);
    auto add_server = reg ? reinterpret_cast<add_server_fn>(ggml_backend_reg_get_proc_address(reg, "ggml_backend_rpc_add_server")) : nullptr;
    if (!add_server) throw_coded(env, ErrorCode::NOT_SUPPORTED, "this build has no RPC backend (GGML_RPC=OFF)");
    for (const auto & server : servers) {
        if (server.empty()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, "addRpcServers: an empty server name");
        ggml_backend_register(add_server(server.c_str()));
    }
    return env.Undefined();
}

// useCommonLog(): every log line goes through common's log, where --log-file, --log-jsonl,
// --log-prefix, --log-timestamps and --log-colors (set by ServerParams.parse) apply.
static Napi::Value use_common_log(const Napi::CallbackInfo & info) {
    log_use_common();
    return info.Env().Undefined();
}

// logWrite(level, text): a line of the host program, routed and filtered as llama.cpp's lines.
static Napi::Value log_write_js(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    if (info.Length() < 2 || !info[0].IsString() || !info[1].IsString() ||
        !log_write(info[0].As<Napi::String>().Utf8Value(), info[1].As<Napi::String>().Utf8Value())) {
        throw_coded(env, ErrorCode::INVALID_ARGUMENT, "logWrite(level, text): level must be debug, info, warn or error; text a string");
    }
    return env.Undefined();
}

static Napi::Object init(Napi::Env env, Napi::Object exports) {
#if defined(__GLIBC__)
    // Weights, KV caches and batches are large: a fixed mmap threshold keeps glibc from raising
    // it dynamically after the first free, so every such buffer is returned to the OS on free
    // (unloading a model or an engine lowers RSS instead of leaving it cached in an arena).
    mallopt(M_MMAP_THRESHOLD, 4 * 1024 * 1024);
#endif
    log_install();
    llama_backend_init();
    exports.Set("Model", Model::define(env));
    exports.Set("Engine", EngineBinding::define(env));
    exports.Set("LoraAdapter", LoraAdapter::define(env));
    exports.Set("Vision", Vision::define(env));
    exports.Set("ChatParser", ChatParser::define(env));
    exports.Set("ServerParams", ServerParams::define(env));
    exports.Set("systemInfo", Napi::Function::New(env, system_info));
    exports.Set("setLogLevel", Napi::Function::New(env, set_log_level));
    exports.Set("addRpcServers", Napi::Function::New(env, add_rpc_servers));
    exports.Set("useCommonLog", Napi::Function::New(env, use_common_log));
    exports.Set("logWrite", Napi::Function::New(env, log_write_js));
    exports.Set("jsonSchemaToGrammar", Napi::Function::New(env, json_schema_to_grammar_js));
    return exports;
}

}  // namespace addon

static Napi::Object register_addon(Napi::Env env, Napi::Object exports) { return addon::init(env, exports); }

NODE_API_MODULE(llama_addon, register_addon)
