#include "engine-params.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>

#include "errors.h"

namespace addon {

bool engine_gpu_build() {
    return ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_GPU) != nullptr ||
           ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_IGPU) != nullptr;
}

EngineParams engine_params_defaults(bool gpu, std::shared_ptr<common_params> server) {
    EngineParams p;
    // Without a GPU device the 512-token budget keeps the generating slots' gaps short; with one
    // its extra steps only delayed newcomers, and a step of n_batch prompt tokens takes
    // milliseconds: the time target alone (docs/benchmarks.md, "prefill budget on a GPU").
    if (gpu) p.prefill_budget = 0;
    // The first step of a CPU build takes tens of milliseconds at least, and a burst's late
    // arrivals wait for it; on a GPU a step takes a few milliseconds: no wait there.
    if (gpu) p.burst_wait_ms = 0;
    if (server) p.slot_prompt_similarity = server->slot_prompt_similarity;
    p.server = std::move(server);
    return p;
}

static constexpr double HOUR_MS = 3600000;

struct NumberRange {
    const char * key;  // the JS settings object's field
    double max;
    bool integer;
    const char * message;
};

// The fields whose values are refused outside a range (0 to max); the others are clamped or
// take their default (engine_params_check).
static const NumberRange kRanges[] = {
    {"prefillBudget", INT32_MAX, true, "params.prefillBudget must be an integer >= 0 (0: no budget)"},
    {"prefillBudgetMs", HOUR_MS, false, "params.prefillBudgetMs must be a number of milliseconds from 0 (no time target) to 3600000"},
    {"burstWaitMs", 1000, false, "params.burstWaitMs must be a number of milliseconds from 0 (no wait) to 1000"},
    {"overloadLifoMs", HOUR_MS, false, "params.overloadLifoMs must be a number of milliseconds from 0 (always oldest first) to 3600000"},
    {"slotPromptSimilarity", 1, false, "params.slotPromptSimilarity must be a number from 0 (always the least recently used slot) to 1"},
    {"cacheDiskTestWriteDelayMs", HOUR_MS, false, "params.cacheDiskTestWriteDelayMs must be a number of milliseconds from 0 (no wait) to 3600000"},
    {"cacheDiskTestReadDelayMs", HOUR_MS, false, "params.cacheDiskTestReadDelayMs must be a number of milliseconds from 0 (no wait) to 3600000"},
};

double engine_param_in_range(const char * key, double value) {
    for (const auto & r : kRanges) {
        if (std::strcmp(r.key, key) != 0) continue;
        const bool ok = value >= 0 && value <= r.max && (!r.integer || value == std::floor(value));
        if (!ok) throw Refusal(ErrorCode::INVALID_ARGUMENT, r.message);
        return value;
    }
    throw Refusal(ErrorCode::INVALID_ARGUMENT, std::string("params.") + key + " has no range");
}

void engine_params_settle(EngineParams & p) {
    p.n_parallel = std::max(1, p.n_parallel);
    p.n_batch = std::max(p.n_batch, static_cast<uint32_t>(p.n_parallel));
    p.n_ubatch = std::min(p.n_ubatch, p.n_batch);
    if (p.n_threads <= 0) p.n_threads = common_cpu_get_num_math();
    if (p.n_threads_batch <= 0) p.n_threads_batch = p.n_threads;
    p.n_ctx_slot_max = std::max(0, p.n_ctx_slot_max);
}

EngineModes engine_modes_decide(const EngineParams & p, const llama_model * model, const llama_context * ctx, bool speculative) {
    EngineModes m;
    const bool plain_kv = !llama_model_is_recurrent(model) && !llama_model_is_hybrid(model);
    const bool shareable = plain_kv && llama_model_n_swa(model) == 0;
    m.sharing = !p.embeddings && shareable && p.prefix_sharing.value_or(p.kv_unified);
    const bool gpu = engine_gpu_build();
    const bool cpu_completions = !p.embeddings && !speculative && !gpu;
    m.split_steps = cpu_completions && p.split_steps.value_or(true);
    m.early_outputs = cpu_completions && p.kv_unified && plain_kv && p.early_outputs.value_or(true);
    const unsigned decode_threads = static_cast<unsigned>(std::max(llama_n_threads(const_cast<llama_context *>(ctx)), llama_n_threads_batch(const_cast<llama_context *>(ctx))));
    m.prepare_saves = p.prepare_saves.value_or(gpu || std::thread::hardware_concurrency() > decode_threads);
    return m;
}

}  // namespace addon
