// The JS settings object (src/native/binding.ts EngineParams) read into EngineParams: a flat
// field mapping. Defaults and ranges are engine-params.cpp's.
#include <cmath>

#include "engine-binding.h"
#include "errors-js.h"
#include "js-values.h"
#include "server-params.h"

namespace addon {

// An optional boolean field: unset when absent; another type is INVALID_ARGUMENT.
static std::optional<bool> read_optional_bool(Napi::Env env, Napi::Object o, const char * key) {
    Napi::Value v = o.Get(key);
    if (v.IsUndefined()) return std::nullopt;
    if (!v.IsBoolean()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, std::string("params.") + key + " must be a boolean");
    return v.As<Napi::Boolean>().Value();
}

static void read_bool(Napi::Object o, const char * key, bool & out) {
    if (o.Get(key).IsBoolean()) out = o.Get(key).As<Napi::Boolean>();
}

// A ranged number field, when given (engine_param_in_range checks it; a non-number is out of range).
template <typename T>
static void read_ranged(Napi::Object o, const char * key, T & out) {
    Napi::Value v = o.Get(key);
    if (v.IsUndefined()) return;
    out = static_cast<T>(engine_param_in_range(key, v.IsNumber() ? v.As<Napi::Number>().DoubleValue() : NAN));
}

// A flat field mapping (exempt from the function-length rule).
EngineParams read_engine_params(Napi::Env env, Napi::Object o) {
    std::shared_ptr<common_params> server;
    if (o.Get("serverParams").IsObject()) server = std::make_shared<common_params>(ServerParams::from_js(env, o.Get("serverParams")).params());
    EngineParams p = engine_params_defaults(engine_gpu_build(), server);
    try {
        p.n_parallel = read_i32(o, "nParallel", p.n_parallel);
        p.n_ctx = read_u32(o, "nCtx", p.n_ctx);
        p.n_batch = read_u32(o, "nBatch", p.n_batch);
        p.n_ubatch = read_u32(o, "nUbatch", p.n_ubatch);
        p.n_threads = read_i32(o, "nThreads", p.n_threads);
        p.n_threads_batch = read_i32(o, "nThreadsBatch", p.n_threads_batch);
        read_bool(o, "kvUnified", p.kv_unified);
        p.flash_attn = read_i32(o, "flashAttn", p.flash_attn);
        read_bool(o, "embeddings", p.embeddings);
        p.pooling = read_i32(o, "pooling", p.pooling);
        read_bool(o, "contextShift", p.ctx_shift);
        p.prompt_cache_mib = read_i32(o, "promptCacheMib", p.prompt_cache_mib);
        read_bool(o, "cacheIdleSlots", p.cache_idle_slots);
        read_bool(o, "cacheEvents", p.cache_events);
        p.cache_disk_dir = read_string(o, "cacheDisk", p.cache_disk_dir);
        p.cache_disk_bytes = static_cast<uint64_t>(read_f64(o, "cacheDiskMib", 0) * 1024 * 1024);
        p.cache_disk_identity = read_string(o, "cacheDiskIdentity", p.cache_disk_identity);
        read_ranged(o, "cacheDiskTestWriteDelayMs", p.cache_disk_test_write_delay_ms);
        read_ranged(o, "cacheDiskTestReadDelayMs", p.cache_disk_test_read_delay_ms);
        p.special = o.Get("special").ToBoolean();
        p.n_ctx_slot_max = read_i32(o, "nCtxSlotMax", p.n_ctx_slot_max);
        p.backend_sampling = o.Get("backendSampling").ToBoolean();
        read_ranged(o, "prefillBudget", p.prefill_budget);
        read_ranged(o, "prefillBudgetMs", p.prefill_budget_ms);
        read_ranged(o, "burstWaitMs", p.burst_wait_ms);
        read_ranged(o, "overloadLifoMs", p.overload_lifo_ms);
        read_bool(o, "fairShare", p.fair_share);
        read_ranged(o, "slotPromptSimilarity", p.slot_prompt_similarity);
        p.prefix_sharing = read_optional_bool(env, o, "prefixSharing");
        p.split_steps = read_optional_bool(env, o, "splitSteps");
        p.early_outputs = read_optional_bool(env, o, "earlyOutputs");
        p.prepare_saves = read_optional_bool(env, o, "prepareSaves");
    } catch (const Refusal & r) {
        throw refusal_to_js(env, r);
    }
    engine_params_settle(p);
    return p;
}

}  // namespace addon
