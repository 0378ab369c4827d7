#include <algorithm>

#include "batch-builder.h"
#include "speculation.h"

namespace addon {

void speculation_start(Speculation & spec, const Slot & s) {
    const CompletionTask & task = *s.task;
    spec.truncate(s.id, s.cache.size());
    const bool allowed = task.kind == TaskKind::COMPLETION && task.media.empty() && task.n_probs == 0 && task.sampler;
    spec.start(s.id, allowed, task.sampling.seed);
}

// At most as long as the slot's context (less 2, as llama-server, so that a context shift still
// finds room), its n_predict (less the token sampled after the draft) and its share of the batch
// allow.
void speculation_make_drafts(Speculation & spec, std::vector<Slot> & slots, const LoraGroup & group, int32_t n_batch) {
    int32_t n_generating = 0;
    for (const auto & s : slots) if (s.state == SlotState::GENERATING && group.contains(s)) n_generating++;
    if (n_generating == 0) return;
    const int32_t share = (n_batch - n_generating) / n_generating;
    std::vector<DraftRequest> requests;
    for (auto & s : slots) {
        if (s.state != SlotState::GENERATING || !group.contains(s)) continue;
        int32_t n_max = s.n_ctx - static_cast<int32_t>(s.cache.size()) - 2;
        if (s.task->n_predict >= 0) n_max = std::min(n_max, s.task->n_predict - s.n_decoded - 1);
        requests.push_back({s.id, &s.cache, s.sampled, std::min(n_max, share)});
    }
    spec.draft(requests);
}

// Each drafted token with its logits.
void speculation_add_draft_tokens(Speculation & spec, Slot & s, llama_batch & batch) {
    SeqDraft & d = spec.seq(s.id);
    d.i_batch.clear();
    if (d.draft.empty()) return;
    d.i_batch.push_back(s.i_batch);
    for (llama_token t : d.draft) {
        d.i_batch.push_back(batch.n_tokens);
        common_batch_add(batch, t, static_cast<llama_pos>(s.cache.size()), {s.id}, true);
        s.cache.push_back(t);
    }
}

// A failure empties the draft context's copies of the batch's sequences; they are decoded again
// before their next draft.
void speculation_process_batch(Speculation & spec, const llama_batch & batch, const std::vector<Slot> & slots) {
    std::vector<const std::vector<llama_token> *> caches;
    for (const auto & s : slots) caches.push_back(&s.cache);
    spec.process(batch, caches);
}

}  // namespace addon
