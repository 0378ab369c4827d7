#pragma once
// Scheduler: the engine thread (as llama-server's server_context::update_slots). Each turn of its
// loop it takes what the TaskQueue received, runs slot actions whose slots are idle, admits
// waiting tasks into idle slots (the SlotCachePolicy chooses the slot and places the prompt in
// its cache), builds one batch from all busy slots (BatchBuilder), decodes it, samples each slot
// whose logits are ready, and sends the results back through the TaskQueue.
// Owned by the Engine; every method runs on the engine thread. No N-API here.
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "admission.h"
#include "batch-builder.h"
#include "engine-counters.h"
#include "engine-params.h"
#include "llama.h"
#include "mtmd.h"
#include "slot-action.h"
#include "slot-cache-policy.h"
#include "slot.h"
#include "speculation.h"
#include "step-cost.h"
#include "task-queue.h"

namespace addon {

// What the scheduler runs on; the Engine owns each part and outlives the scheduler.
struct SchedulerParts {
    llama_context * ctx = nullptr;
    const llama_model * model = nullptr;
    mtmd_context * vision = nullptr;               // null: no projector
    std::vector<llama_adapter_lora *> loras;       // the adapters tasks' lora_scales index
    Speculation * spec = nullptr;                  // null: no speculative decoding
    int32_t n_ctx_seq = 0;                         // most tokens one slot holds
    enum llama_pooling_type pooling = LLAMA_POOLING_TYPE_NONE;  // the context's (embeddings)
    int32_t n_embd_out = 0;                        // floats per embedding (EngineInfo::n_embd_out)
    DiskCache * disk = nullptr;                    // --cache-disk; null when off
};

class Scheduler {
public:
    Scheduler(const EngineParams & params, const EngineModes & modes, SchedulerParts parts, TaskQueue & queue, EngineCounters & counters);
    ~Scheduler();

    // The loop; returns once the queue stops.
    void run();
    // Frees what the slots hold (their tasks, their backend sampler chains); before the context goes.
    void release_all();
    PromptCache * prompt_cache() const { return policy_.prompt_cache(); }
    // Once the loop has ended (Engine::stop): the slots' caches go to the disk tier.
    void persist_caches() { policy_.persist_caches(); }

private:
    // scheduler.cpp: the loop, admission, slot actions, release
    bool take_inbox(bool wait);
    bool gather_burst();
    size_t admit_waiting(int64_t now_us);
    void apply_cancels(const std::vector<int64_t> & cancels);
    void start_task(Slot & slot, std::unique_ptr<CompletionTask> task, int64_t now_us);
    void release_slot(Slot & slot, int64_t now_us);
    void run_slot_actions();
    void step();
    void eval_media();
    // scheduler-decode.cpp: one step's decode
    void decode_batch();
    void decode_prompt_rows(const LoraGroup & group, int32_t first);
    int32_t decode_rows(const LoraGroup & group, int32_t first, int32_t end, int32_t n_generating);
    int32_t decode_group(const LoraGroup & group, int32_t first, int32_t n);
    bool relieve_kv_pressure(int32_t & prompt_budget, int32_t n_generating);
    void fail_busy_slots(const std::string & message);
    void process_outputs(int32_t first, int32_t end);
    // scheduler-results.cpp: what a slot's outputs become
    void handle_sampled(Slot & slot, llama_token token);
    void verify_draft(Slot & slot);
    void finish_embedding(Slot & slot, int32_t first_index);
    void finish(Slot & slot);
    void fail(Slot & slot, const std::string & message);
    void emit_progress(Slot & slot);
    void emit_prompt_progress();

    const EngineParams & params_;
    const EngineModes modes_;
    SchedulerParts parts_;
    const llama_vocab * vocab_;
    TaskQueue & queue_;
    EngineCounters & counters_;
    std::vector<Slot> slots_;
    llama_batch batch_{};
    SlotCachePolicy policy_;
    StepCost step_cost_;         // learnt from every decoded step; sizes prompt shares (prefill_budget_ms)
    BatchBuilder builder_;
    std::vector<float> applied_lora_;  // scales currently set on the context
    uint64_t step_counter_ = 0;  // decode calls made (Slot::admitted_at, first_token_at, last_step)
    uint64_t admissions_ = 0;    // tasks given a slot so far (Slot::admission)
    int64_t last_decode_us_ = 0; // how long decode_group's llama_decode took
    std::deque<std::unique_ptr<CompletionTask>> waiting_;  // in arrival order
    TenantClocks tenants_;       // the tenants of waiting and running tasks (admission.h)
    std::deque<SlotAction> actions_;   // slot actions waiting for their slot to be idle
};

}  // namespace addon
