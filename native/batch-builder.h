#pragma once
// BatchBuilder: what one step decodes (engine thread). From the busy slots it builds one
// llama_batch: the LoRA group the step serves, one token per generating slot first (and its
// drafted tokens with speculation), then prompt chunks in admission order within the step's
// prompt share (chunked prefill); and it takes rows back when a decode fails (the one undo
// mechanism: a slot's rows are always its last cache entries). No decoding happens here, so its
// rules are tested on plain slots (test/native/engine-rules.cpp).
#include <cstdint>
#include <vector>

#include "engine-params.h"
#include "llama.h"
#include "slot.h"
#include "step-cost.h"

namespace addon {

class Speculation;

// The slots decoded together in one step share adapter scales (when the engine has adapters).
struct LoraGroup {
    bool grouped = false;
    std::vector<float> scales;
    // Reads the slot's task: only for busy slots.
    bool contains(const Slot & s) const { return !grouped || s.task->lora_scales == scales; }
};

class BatchBuilder {
public:
    // `batch` holds at least max(n_batch, n_parallel) rows; n_ubatch: the context's.
    BatchBuilder(std::vector<Slot> & slots, llama_batch & batch, const EngineParams & params, const StepCost & cost, int32_t n_ubatch, bool has_loras)
        : slots_(slots), batch_(batch), params_(params), cost_(cost), n_ubatch_(n_ubatch), has_loras_(has_loras) {}

    // The group of the busy slot served least recently, so that groups alternate and none starves.
    LoraGroup next_lora_group() const;
    // One token per generating slot of the group (its last sampled token), then its drafted
    // tokens when `spec` drafts for it; returns the rows added.
    int32_t add_generating_tokens(const LoraGroup & group, Speculation * spec);
    // Whether a prompt of the group waits that was admitted once one of its generating slots had
    // its first token (chunked prefill holds such a prompt back; a burst's own prompts are not).
    bool prompts_came_after_generation(const LoraGroup & group) const;
    // How many prompt tokens a step may add after `n_generating` generating tokens.
    int32_t prompt_share(int32_t n_generating, bool held_back) const;
    // Prompt tokens of the group's prompting slots, up to `budget`, in admission order.
    void add_prompt_tokens(const LoraGroup & group, int32_t budget);
    // Puts back the slots that had rows in the batch's [from, end), as if those rows had not
    // been added.
    void take_back_rows(int32_t from, int32_t end);

private:
    std::vector<Slot> & slots_;
    llama_batch & batch_;
    const EngineParams & params_;
    const StepCost & cost_;
    int32_t n_ubatch_;
    bool has_loras_;
};

}  // namespace addon
