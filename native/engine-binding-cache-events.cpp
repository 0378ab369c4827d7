// The KV-cache events' JS-thread half (cache-events.h): turning the slots' change reports on and
// taking what they recorded. src/inference/kv-events turns the changes into vLLM's events.
//
// enableCacheEvents(blockSize): 0 stops; a block size starts (every slot reported anew).
// cacheChanges() -> Array<{ tier, slot, keep, tokens: Int32Array, lora: number[] }>, oldest first;
// tier 0: a slot's cells (slot: its id), 1: a host-memory cache entry, 2: a disk tier file (slot:
// the entry's id; stored once with keep 0, removed with keep 0 and no tokens).
#include <algorithm>

#include "engine-binding.h"
#include "errors-js.h"

namespace addon {

Napi::Value EngineBinding::js_enable_cache_events(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    if (info.Length() < 1 || !info[0].IsNumber()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, "enableCacheEvents(blockSize): blockSize must be a number");
    const int32_t block = info[0].As<Napi::Number>().Int32Value();
    if (block < 0 || block > 4096) throw_coded(env, ErrorCode::INVALID_ARGUMENT, "enableCacheEvents(blockSize): blockSize must be 0 to 4096");
    if (!disposed_) engine_->queue().cache_events().enable(block);
    return env.Undefined();
}

Napi::Value EngineBinding::js_cache_changes(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    const std::vector<CacheChange> changes = disposed_ ? std::vector<CacheChange>{} : engine_->queue().cache_events().take();
    Napi::Array out = Napi::Array::New(env, changes.size());
    for (size_t i = 0; i < changes.size(); i++) {
        const CacheChange & c = changes[i];
        Napi::Object o = Napi::Object::New(env);
        o.Set("tier", static_cast<int32_t>(c.tier));
        o.Set("slot", static_cast<double>(c.slot));
        o.Set("keep", c.keep);
        Napi::Int32Array tokens = Napi::Int32Array::New(env, c.tokens.size());
        std::copy(c.tokens.begin(), c.tokens.end(), tokens.Data());
        o.Set("tokens", tokens);
        Napi::Array lora = Napi::Array::New(env, c.lora.size());
        for (size_t j = 0; j < c.lora.size(); j++) lora.Set(static_cast<uint32_t>(j), c.lora[j]);
        o.Set("lora", lora);
        out.Set(static_cast<uint32_t>(i), o);
    }
    return out;
}

}  // namespace addon
