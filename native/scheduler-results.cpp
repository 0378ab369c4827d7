// What a slot's outputs become (engine thread): a sampled token's text, stops and limits, a
// verified draft, a context shift, an embedding, and the events that carry them to JS.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "common.h"
#include "scheduler.h"

namespace addon {

static int64_t now_us() { return ggml_time_us(); }

static void top_probabilities(llama_context * ctx, int32_t idx, int32_t n_vocab, int32_t n, llama_token sampled,
                              float & sampled_p, std::vector<std::pair<llama_token, float>> & out) {
    const float * logits = llama_get_logits_ith(ctx, idx);
    float max_logit = -INFINITY;
    for (int32_t i = 0; i < n_vocab; i++) max_logit = std::max(max_logit, logits[i]);
    double sum = 0;
    for (int32_t i = 0; i < n_vocab; i++) sum += std::exp(static_cast<double>(logits[i] - max_logit));
    std::vector<llama_token> ids(n_vocab);
    std::iota(ids.begin(), ids.end(), 0);
    const int32_t k = std::min(n, n_vocab);
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](llama_token a, llama_token b) { return logits[a] > logits[b]; });
    out.clear();
    for (int32_t i = 0; i < k; i++) {
        out.emplace_back(ids[i], static_cast<float>(std::exp(static_cast<double>(logits[ids[i]] - max_logit)) / sum));
    }
    sampled_p = static_cast<float>(std::exp(static_cast<double>(logits[sampled] - max_logit)) / sum);
}

// The candidates the sampler chain left for the token it just sampled, most probable first (as
// llama-server's post_sampling_probs: candidates with probability 0 are left out).
static void post_sampling_probabilities(common_sampler * sampler, int32_t n, llama_token sampled, float & sampled_p,
                                        std::vector<std::pair<llama_token, float>> & out) {
    const llama_token_data_array * cur = common_sampler_get_candidates(sampler, true);
    sampled_p = 0.0f;
    for (size_t i = 0; i < cur->size; i++) {
        if (cur->data[i].id == sampled) {
            sampled_p = cur->data[i].p;
            break;
        }
    }
    out.clear();
    for (size_t i = 0; i < cur->size && static_cast<int32_t>(i) < n && cur->data[i].p != 0.0f; i++) {
        out.emplace_back(cur->data[i].id, cur->data[i].p);
    }
}

void Scheduler::handle_sampled(Slot & s, llama_token token) {
    const CompletionTask & task = *s.task;
    const bool eog = llama_vocab_is_eog(vocab_, token);
    EngineEvent ev;
    ev.kind = EngineEvent::Kind::TOKEN;
    ev.task_id = task.id;
    ev.token = token;
    if (s.n_decoded == 1) ev.n_prompt = static_cast<int32_t>(task.prompt.size());
    if (task.n_probs > 0) {
        std::vector<std::pair<llama_token, float>> top;
        if (task.post_sampling_probs) {
            post_sampling_probabilities(task.sampler.get(), task.n_probs, token, ev.prob, top);
        } else {
            top_probabilities(parts_.ctx, s.i_batch, llama_vocab_n_tokens(vocab_), task.n_probs, token, ev.prob, top);
        }
        for (auto & [id, p] : top) ev.probs.push_back({id, common_token_to_piece(vocab_, id, false), p});
    }
    // With -sp, and for a preserved token (a tool-call or thinking marker of the chat format), a
    // special token keeps its text, as llama-server's accept_special_token (the chat parser sees it).
    const bool special = params_.special || task.sampling.preserved_tokens.count(token) > 0;
    const std::string piece = common_token_to_piece(vocab_, token, special);
    ev.text = s.accept_piece(piece, eog);
    s.sampled = token;

    if (s.stop == StopType::NONE) {  // not already ended by a stop string or n_indent
        if (eog) {
            s.stop = StopType::EOS;
        } else if (task.n_predict >= 0 && s.n_decoded >= task.n_predict) {
            s.stop = StopType::LIMIT;
        } else if (static_cast<int32_t>(s.cache.size()) + 1 >= s.n_ctx && !policy_.shift_context(s)) {
            s.stop = StopType::LIMIT;
            s.truncated = true;
        } else if (task.t_max_predict_ms > 0 && s.generated.find('\n') != std::string::npos &&
                   (now_us() - s.t_prompt_done_us) / 1000 > task.t_max_predict_ms) {
            s.stop = StopType::LIMIT;
        }
    }
    queue_.push_event(std::move(ev));
    if (s.stop != StopType::NONE) finish(s);
}

// The embedding of an input is read from its last decode, as llama-server reads it: with images,
// that is the text after the last image (attending to everything before it); pooled over those
// tokens, or one vector per token with pooling none.
void Scheduler::finish_embedding(Slot & s, int32_t first) {
    const int64_t t = now_us();
    EngineEvent ev;
    ev.kind = EngineEvent::Kind::EMBEDDING;
    ev.task_id = s.task->id;
    ev.n_prompt = static_cast<int32_t>(s.task->prompt.size());
    ev.t_prompt_ms = (t - s.t_start_us) / 1000.0;
    ev.slot_id = s.id;
    const auto & media = s.task->media;
    const size_t last_run = media.empty() ? 0 : media.back().start + media.back().n_pos;
    const int32_t n = static_cast<int32_t>(s.task->prompt.size() - last_run);
    if (parts_.pooling == LLAMA_POOLING_TYPE_NONE) {
        ev.embedding.reserve(static_cast<size_t>(n) * parts_.n_embd_out);
        for (int32_t i = 0; i < n; i++) {
            const float * e = llama_get_embeddings_ith(parts_.ctx, first + i);
            if (e) ev.embedding.insert(ev.embedding.end(), e, e + parts_.n_embd_out);
            else ev.embedding.insert(ev.embedding.end(), parts_.n_embd_out, 0.0f);
        }
        ev.n_vectors = n;
    } else {
        const float * e = llama_get_embeddings_seq(parts_.ctx, s.id);
        if (!e) e = llama_get_embeddings_ith(parts_.ctx, first + n - 1);
        if (e) ev.embedding.assign(e, e + parts_.n_embd_out);
        else ev.embedding.assign(parts_.n_embd_out, 0.0f);
        ev.n_vectors = 1;
    }
    counters_.prompt_tokens += s.task->prompt.size();
    counters_.prompt_us += t - s.t_start_us;
    counters_.tasks_done++;
    queue_.push_event(std::move(ev));
    release_slot(s, t);  // an embedding task never uses the prompt cache: its cells are freed there
}

void Scheduler::finish(Slot & s) {
    const int64_t t = now_us();
    EngineEvent ev;
    ev.kind = EngineEvent::Kind::DONE;
    ev.task_id = s.task->id;
    ev.text = s.unsent();
    ev.stop = s.stop;
    ev.stopping_word = s.stopping_word;
    ev.truncated = s.truncated;
    ev.n_prompt = static_cast<int32_t>(s.task->prompt.size());
    ev.n_cached = s.n_cached;
    ev.n_predicted = s.n_decoded;
    ev.t_prompt_ms = s.t_prompt_done_us ? (s.t_prompt_done_us - s.t_start_us) / 1000.0 : (t - s.t_start_us) / 1000.0;
    ev.t_predict_ms = s.t_prompt_done_us ? (t - s.t_prompt_done_us) / 1000.0 : 0.0;
    ev.slot_id = s.id;
    if (parts_.spec) {
        ev.n_draft = parts_.spec->seq(s.id).n_drafted;
        ev.n_draft_accepted = parts_.spec->seq(s.id).n_accepted;
    }
    counters_.predicted_tokens += s.n_decoded;
    counters_.predicted_us += s.t_prompt_done_us ? t - s.t_prompt_done_us : 0;
    counters_.tasks_done++;
    queue_.push_event(std::move(ev));
    release_slot(s, t);
}

void Scheduler::fail(Slot & s, const std::string & message) {
    EngineEvent ev;
    ev.kind = EngineEvent::Kind::ERROR;
    ev.task_id = s.task->id;
    ev.message = message;
    counters_.tasks_done++;
    queue_.push_event(std::move(ev));
    release_slot(s, now_us());
}

// return_progress: how far the slot's prompt is, as llama-server reports it (total, cache,
// processed, time); once when the prompt starts, then after every batch that adds to it.
void Scheduler::emit_progress(Slot & slot) {
    EngineEvent ev{EngineEvent::Kind::PROGRESS};
    ev.task_id = slot.task->id;
    ev.n_prompt = static_cast<int32_t>(slot.task->prompt.size());
    ev.n_cached = slot.n_cached;
    ev.n_processed = static_cast<int32_t>(slot.n_prompt_done);
    ev.t_elapsed_ms = (now_us() - slot.t_start_us) / 1000.0;
    slot.n_progress_sent = slot.n_prompt_done;
    queue_.push_event(std::move(ev));
}

void Scheduler::emit_prompt_progress() {
    for (auto & s : slots_) {
        if (s.busy() && s.task->return_progress && s.n_prompt_done != s.n_progress_sent) emit_progress(s);
    }
}

// The target's tokens for a drafted slot: the drafted tokens its sampler accepts, then the one it
// samples after them. The rejected drafted tokens leave both contexts; the accepted ones enter the
// slot one by one, exactly as if each had been decoded on its own step (limits, stops and context
// shift apply per token; a shift can only happen at the last one, since drafts leave 2 tokens of room).
void Scheduler::verify_draft(Slot & s) {
    const size_t n_draft = parts_.spec->seq(s.id).draft.size();
    const size_t base = s.cache.size() - n_draft;  // the cache up to the slot's sampled token
    const std::vector<llama_token> ids = parts_.spec->verify(s.id, s.task->sampler.get(), parts_.ctx);
    const size_t kept = base + ids.size() - 1;
    llama_memory_t mem = llama_get_memory(parts_.ctx);
    llama_memory_seq_rm(mem, s.id, static_cast<llama_pos>(kept), -1);
    parts_.spec->truncate(s.id, kept);
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
        parts_.spec->truncate(s.id, s.cache.size());
    }
}

}  // namespace addon
