#include "batch-builder.h"

#include <algorithm>

#include "common.h"
#include "speculation.h"

namespace addon {

LoraGroup BatchBuilder::next_lora_group() const {
    LoraGroup group;
    if (!has_loras_) return group;
    const Slot * first = nullptr;
    for (const auto & s : slots_) if (s.busy() && (!first || s.last_step < first->last_step)) first = &s;
    if (first) {
        group.scales = first->task->lora_scales;
        group.grouped = true;
    }
    return group;
}

int32_t BatchBuilder::add_generating_tokens(const LoraGroup & group, Speculation * spec) {
    if (spec) speculation_make_drafts(*spec, slots_, group, static_cast<int32_t>(params_.n_batch));
    for (auto & s : slots_) {
        s.i_batch = -1;
        if (s.state != SlotState::GENERATING || !group.contains(s)) continue;
        s.i_batch = batch_.n_tokens;
        common_batch_add(batch_, s.sampled, static_cast<llama_pos>(s.cache.size()), {s.id}, true);
        s.cache.push_back(s.sampled);
        if (spec) speculation_add_draft_tokens(*spec, s, batch_);
    }
    return batch_.n_tokens;
}

// Prompts admitted with the generating slots, in one burst (a wave of requests larger than
// n_batch), are not held back for those slots' second token: the burst's last first tokens
// would come a few chunks later than in llama-server, which decodes the rest in one batch.
bool BatchBuilder::prompts_came_after_generation(const LoraGroup & group) const {
    uint64_t first_token = UINT64_MAX;
    uint64_t last_admitted = 0;
    bool prompting = false;
    for (const auto & s : slots_) {
        if (!s.busy() || !group.contains(s)) continue;  // contains() reads the task
        if (s.state == SlotState::GENERATING) first_token = std::min(first_token, s.first_token_at);
        if (s.state == SlotState::PROMPT && !s.joined()) {
            prompting = true;
            last_admitted = std::max(last_admitted, s.admitted_at);
        }
    }
    return prompting && first_token <= last_admitted;
}

// Chunked prefill, as vLLM's token budget: with nothing generating, or only slots admitted with
// the prompts waiting (`held_back` false), what n_batch leaves (a lone prompt goes in
// n_batch-sized chunks, as in llama-server). Otherwise the smaller of two shares:
// - prefill_budget: the step stays within that many tokens, yet prompts get at least half of it
//   however many slots generate, so they never starve;
// - prefill_budget_ms: the prompt tokens that the recent steps' costs say fit beside the
//   generating tokens in that time (at least a quarter of n_ubatch), so that the generating slots'
//   next token is not held back much longer than that, whatever the model, machine or cache size.
// The share never exceeds what n_batch leaves.
int32_t BatchBuilder::prompt_share(int32_t n_generating, bool held_back) const {
    const int32_t room = static_cast<int32_t>(params_.n_batch) - n_generating;
    if (n_generating == 0 || !held_back) return room;
    int32_t share = room;
    const int32_t budget = params_.prefill_budget;
    if (budget > 0) share = std::min(share, std::max(budget - n_generating, budget / 2));
    if (params_.prefill_budget_ms > 0) {
        const int32_t fits = cost_.prompt_tokens_within(params_.prefill_budget_ms * 1000, n_generating);
        const int32_t floor = std::max<int32_t>(1, n_ubatch_ / 4);
        if (fits >= 0) share = std::min(share, std::max(fits, floor));
    }
    return std::max(share, 0);
}

// Where the text of a prompt fed up to `done` stops: at its next image, or its end.
static size_t text_end(const CompletionTask & task, size_t done) {
    for (const auto & span : task.media) {
        if (span.start >= done) return span.start;
    }
    return task.prompt.size();
}

// In admission order, so that an early long prompt is not starved by later ones. An embedding
// input's text goes in whole or waits (each run of text between its images, with images); a
// prompt stops before its next image (the scheduler evaluates images on their own). A slot whose
// prompt is complete gets its logits (i_batch) on its last token.
void BatchBuilder::add_prompt_tokens(const LoraGroup & group, int32_t budget) {
    std::vector<Slot *> prompting;
    for (auto & s : slots_) if (s.state == SlotState::PROMPT && group.contains(s) && !s.joined()) prompting.push_back(&s);
    std::sort(prompting.begin(), prompting.end(), [](Slot * a, Slot * b) { return a->admission < b->admission; });
    for (Slot * s : prompting) {
        const auto & prompt = s->task->prompt;
        const size_t stop_at = text_end(*s->task, s->n_prompt_done);
        if (s->task->kind == TaskKind::EMBEDDING) {
            // Every token is an output; i_batch marks the first token of the input's last run of
            // text, whose outputs are its embedding.
            const int32_t n = static_cast<int32_t>(stop_at - s->n_prompt_done);
            if (n > budget) continue;
            if (stop_at == prompt.size()) s->i_batch = batch_.n_tokens;
            for (; s->n_prompt_done < stop_at; s->n_prompt_done++) {
                common_batch_add(batch_, prompt[s->n_prompt_done], static_cast<llama_pos>(s->cache.size()), {s->id}, true);
                s->cache.push_back(prompt[s->n_prompt_done]);
            }
            budget -= n;
            continue;
        }
        while (budget > 0 && s->n_prompt_done < stop_at) {
            common_batch_add(batch_, prompt[s->n_prompt_done], static_cast<llama_pos>(s->cache.size()), {s->id}, false);
            s->cache.push_back(prompt[s->n_prompt_done]);
            s->n_prompt_done++;
            budget--;
        }
        if (s->n_prompt_done == prompt.size()) {
            s->i_batch = batch_.n_tokens - 1;
            batch_.logits[s->i_batch] = true;
        }
    }
}

// Each slot's rows are its last cache entries (and, while prompting, its last prompt tokens fed).
void BatchBuilder::take_back_rows(int32_t from, int32_t end) {
    std::vector<int32_t> rows(slots_.size(), 0);
    for (int32_t i = from; i < end; i++) rows[batch_.seq_id[i][0]]++;
    for (size_t i = 0; i < slots_.size(); i++) {
        Slot & s = slots_[i];
        if (rows[i] == 0) continue;
        s.cache.resize(s.cache.size() - static_cast<size_t>(rows[i]));
        if (s.state == SlotState::PROMPT) s.n_prompt_done -= static_cast<size_t>(rows[i]);
        if (s.i_batch >= from) s.i_batch = -1;
    }
}

}  // namespace addon
