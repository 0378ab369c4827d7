// The engine thread's part of speculative decoding, as llama-server's update_slots/post_decode:
// drafts are made before the batch is built and ride in it after each slot's sampled token, the
// draft model decodes every batch the target decodes, and a drafted slot's logits rows are
// verified by its own sampler. Only when the Engine has a Speculation (spec_).
#include <algorithm>

#include "engine.h"

namespace addon {

// A task speculates when it generates text token by token with no image and no probabilities
// (llama-server reports no probabilities for drafted tokens; here such a task simply does not draft).
void Engine::start_speculation(Slot & s) {
    if (!spec_) return;
    const CompletionTask & task = *s.task;
    spec_->truncate(s.id, s.cache.size());
    const bool allowed = task.kind == TaskKind::COMPLETION && task.media.empty() && task.n_probs == 0 && task.sampler;
    spec_->start(s.id, allowed, task.sampling.seed);
}

// One draft per generating slot of the group that may speculate, at most as long as the slot's
// context (less 2, as llama-server, so that a context shift still finds room), its n_predict
// (less the token sampled after the draft) and its share of the batch allow.
void Engine::make_drafts(const LoraGroup & group) {
    int32_t n_generating = 0;
    for (const auto & s : slots_) if (s.state == SlotState::GENERATING && group.contains(s)) n_generating++;
    if (n_generating == 0) return;
    const int32_t share = (static_cast<int32_t>(params_.n_batch) - n_generating) / n_generating;
    std::vector<DraftRequest> requests;
    for (auto & s : slots_) {
        if (s.state != SlotState::GENERATING || !group.contains(s)) continue;
        int32_t n_max = s.n_ctx - static_cast<int32_t>(s.cache.size()) - 2;
        if (s.task->n_predict >= 0) n_max = std::min(n_max, s.task->n_predict - s.n_decoded - 1);
        requests.push_back({s.id, &s.cache, s.sampled, std::min(n_max, share)});
    }
    spec_->draft(requests);
}

// The slot's drafted tokens after its sampled token (already in the batch at row i_batch), each
// with its logits.
void Engine::add_draft_tokens(Slot & s) {
    SeqDraft & d = spec_->seq(s.id);
    d.i_batch.clear();
    if (d.draft.empty()) return;
    d.i_batch.push_back(s.i_batch);
    for (llama_token t : d.draft) {
        d.i_batch.push_back(batch_.n_tokens);
        common_batch_add(batch_, t, static_cast<llama_pos>(s.cache.size()), {s.id}, true);
        s.cache.push_back(t);
    }
}

void Engine::process_draft_batch() {
    std::vector<const std::vector<llama_token> *> caches;
    for (const auto & s : slots_) caches.push_back(&s.cache);
    // A failure empties the draft context's copies of the batch's sequences; they are decoded
    // again before their next draft.
    spec_->process(batch_, caches);
}

// The target's tokens for a drafted slot: the drafted tokens its sampler accepts, then the one it
// samples after them. The rejected drafted tokens leave both contexts; the accepted ones enter the
// slot one by one, exactly as if each had been decoded on its own step (limits, stops and context
// shift apply per token; a shift can only happen at the last one, since drafts leave 2 tokens of room).
void Engine::verify_draft(Slot & s) {
    const size_t n_draft = spec_->seq(s.id).draft.size();
    const size_t base = s.cache.size() - n_draft;  // the cache up to the slot's sampled token
    const std::vector<llama_token> ids = spec_->verify(s.id, s.task->sampler.get(), ctx_);
    const size_t kept = base + ids.size() - 1;
    llama_memory_t mem = llama_get_memory(ctx_);
    llama_memory_seq_rm(mem, s.id, static_cast<llama_pos>(kept), -1);
    spec_->truncate(s.id, kept);
    s.cache.resize(base);
    size_t handled = 0;
    for (; handled < ids.size() && s.busy(); handled++) {
        if (handled > 0) s.cache.push_back(ids[handled - 1]);
        s.n_decoded++;
        handle_sampled(s, ids[handled]);
    }
    if (handled < ids.size()) {
        // Generation ended before the last accepted token: the context keeps only the cache.
        llama_memory_seq_rm(mem, s.id, static_cast<llama_pos>(s.cache.size()), -1);
        spec_->truncate(s.id, s.cache.size());
    }
}

}  // namespace addon
