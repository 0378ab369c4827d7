// One step's decode (engine thread): the batch BatchBuilder builds is decoded in one or more
// llama_decode calls, KV pressure is relieved and the step retried, and each call's outputs are
// read (sampled tokens, embeddings, prompts done).
#include <algorithm>

#include "common.h"
#include "log.h"
#include "scheduler.h"

namespace addon {

static int64_t now_us() { return ggml_time_us(); }

// The step trace at --verbose: what the batch held (generating tokens, each prompting slot's
// tokens) and how long its decode took, for profiling the scheduler.
static void log_step(const std::vector<Slot> & slots_, uint64_t step_counter_, int32_t n_generating, int32_t n_tokens, int64_t last_decode_us_) {
    std::string line = "step " + std::to_string(step_counter_) + ": " + std::to_string(n_tokens) + " tokens (" + std::to_string(n_generating) + " generating";
    const bool prompt_rows = n_tokens > n_generating;
    for (const auto & s : slots_) {
        if (!prompt_rows || s.state != SlotState::PROMPT || s.joined()) continue;
        line += ", slot " + std::to_string(s.id) + " prompt " + std::to_string(s.n_prompt_done) + "/" + std::to_string(s.task->prompt.size());
    }
    int32_t joined = 0;
    for (const auto & s : slots_) joined += s.joined() ? 1 : 0;
    if (joined > 0) line += ", " + std::to_string(joined) + " joined";
    line += "), decode " + std::to_string(last_decode_us_ / 1000.0) + " ms\n";
    log_debug(line);
}

// What a slot is told when llama_decode failed for another reason than a full KV cache (1).
static const char * decode_failure(int32_t ret) {
    return ret == -1 ? "Invalid input batch." : ret == 2 ? "Decoding was aborted." : "Compute error.";
}

// Builds one batch from all busy slots, decodes it and samples its outputs: the generating slots'
// tokens, then prompt tokens up to prompt_share(). On KV-cache pressure, idle slots' caches are
// dropped first, then the prompt share of the batch is halved; then the slot holding the most
// tokens fails ("Context size has been exceeded.") and the others go on. With split steps the
// generating rows and the prompt rows of one batch are decoded by two llama_decode calls, with
// early outputs a batch's rows may take more calls still (EngineModes says why; decode_rows).
void Scheduler::decode_batch() {
    int32_t prompt_budget = static_cast<int32_t>(params_.n_batch);
    while (true) {
        const LoraGroup group = builder_.next_lora_group();
        common_batch_clear(batch_);
        const int32_t n_generating = builder_.add_generating_tokens(group, parts_.spec);
        builder_.add_prompt_tokens(group, std::min<int32_t>(prompt_budget, builder_.prompt_share(n_generating, builder_.prompts_came_after_generation(group))));
        if (batch_.n_tokens == 0) return;

        const int32_t n_prompt = batch_.n_tokens - n_generating;
        const bool split = modes_.split_steps && n_generating > 0 && n_prompt > 0 && batch_.n_tokens >= kTiledAttentionRows;
        const int32_t ret = decode_rows(group, 0, split ? n_generating : batch_.n_tokens, n_generating);
        if (ret == 0) {
            if (split) {
                counters_.split_steps++;
                decode_prompt_rows(group, n_generating);
            } else {
                emit_prompt_progress();
            }
            return;
        }
        builder_.take_back_rows(0, batch_.n_tokens);
        if (ret != 1) {
            fail_busy_slots(decode_failure(ret));
            return;
        }
        if (!relieve_kv_pressure(prompt_budget, n_generating)) return;
    }
}

// The second call of a split step: the batch's prompt rows from `first` on, after its generating
// rows were decoded and sampled. On KV-cache pressure the slots that had rows in it are put back
// and the rows rebuilt as relieve_kv_pressure allows, within the step's prompt share (the
// generating slots have had their token this step). Only those slots: sampling may have ended a
// generating slot, and a slot that joined its prefix may have taken it since the batch was built.
void Scheduler::decode_prompt_rows(const LoraGroup & group, int32_t first) {
    int32_t budget = batch_.n_tokens - first;
    while (true) {
        const int32_t ret = decode_rows(group, first, batch_.n_tokens, 0);
        if (ret == 0) {
            emit_prompt_progress();
            return;
        }
        builder_.take_back_rows(first, batch_.n_tokens);
        if (ret != 1) {
            fail_busy_slots(decode_failure(ret));
            return;
        }
        if (!relieve_kv_pressure(budget, 0)) return;
        for (auto & s : slots_) s.i_batch = -1;
        common_batch_clear(batch_);
        builder_.add_prompt_tokens(group, budget);
        if (batch_.n_tokens == 0) return;
        first = 0;
    }
}

// Decodes the batch's rows [first, end), of which those before `n_generating` (a batch index) are
// generating rows, and samples their outputs. Without early outputs that is one llama_decode
// call. With it, the rows go in as few calls as possible, each a whole number of n_ubatch rows
// (but the last) that ends where a stretch of n_ubatch rows holding an output (a prompt's last
// token, a generating token) ends; the outputs of each call are sampled and sent before the next
// call. llama_decode would split the rows into the same ubatches itself (a unified pool takes
// n_ubatch rows in order), so the work and its results are the same; only the outputs of early
// ubatches are out sooner: 8 prompts of 128 tokens arriving together get their first tokens in
// two groups, the first at half the time of the whole batch, the last as before (llama-server
// samples a batch once, after its last ubatch). Returns llama_decode's result for the first call
// (nothing changed when it failed: the caller puts the slots back). A later call that fails has
// its rows and the rest taken back (the next step builds them again, and relieves KV pressure
// then) and, on an error other than a full cache, fails the busy slots; that returns 0.
int32_t Scheduler::decode_rows(const LoraGroup & group, int32_t first, int32_t end, int32_t n_generating) {
    const int32_t n_ubatch = static_cast<int32_t>(llama_n_ubatch(parts_.ctx));
    for (int32_t from = first; from < end;) {
        int32_t to = end;
        if (modes_.early_outputs) {
            for (int32_t i = from; i < end && to == end; i++) {
                const int32_t stretch_end = from + ((i - from) / n_ubatch + 1) * n_ubatch;
                if (batch_.logits[i] && stretch_end < end) to = stretch_end;
            }
        }
        const int32_t ret = decode_group(group, from, to - from);
        if (ret != 0) {
            if (from == first) return ret;
            builder_.take_back_rows(from, end);
            if (ret != 1) fail_busy_slots(decode_failure(ret));
            return 0;
        }
        const int32_t n_gen = std::clamp(n_generating - from, 0, to - from);
        step_cost_.observe(n_gen, to - from - n_gen, static_cast<double>(last_decode_us_));
        if (log_debug_enabled()) log_step(slots_, step_counter_, n_gen, to - from, last_decode_us_);
        process_outputs(from, to);
        if (to < end) {
            counters_.early_output_calls++;
            queue_.flush();  // out now, not after the batch's last call
        }
        from = to;
    }
    return 0;
}

// Sets the group's adapter scales on the context (when they changed) and decodes the batch's rows
// [first, first + n); returns llama_decode's result. On success the group's slots are marked as
// served this step.
int32_t Scheduler::decode_group(const LoraGroup & group, int32_t first, int32_t n) {
    if (group.grouped && applied_lora_ != group.scales) {
        llama_set_adapters_lora(parts_.ctx, parts_.loras.data(), parts_.loras.size(), const_cast<float *>(group.scales.data()));
        applied_lora_ = group.scales;
    }
    llama_batch rows = batch_;
    rows.n_tokens = n;
    rows.token += first;
    rows.pos += first;
    rows.n_seq_id += first;
    rows.seq_id += first;
    rows.logits += first;
    const int64_t t_start = now_us();
    const int32_t ret = llama_decode(parts_.ctx, rows);
    counters_.decode_calls++;
    if (ret == 0) {
        // Timed until the results are ready: a GPU backend returns before it has computed them.
        llama_synchronize(parts_.ctx);
        last_decode_us_ = now_us() - t_start;
    }
    for (const auto & s : slots_) {
        if (s.busy()) counters_.busy_slot_decodes++;
        if (s.cache.size() > counters_.n_tokens_max) counters_.n_tokens_max = s.cache.size();
    }
    if (ret == 0) {
        if (parts_.spec) speculation_process_batch(*parts_.spec, batch_, slots_);
        step_counter_++;
        for (auto & s : slots_) if (s.busy() && group.contains(s)) s.last_step = step_counter_;
    }
    return ret;
}

// After llama_decode found no room in the KV cache (1): frees room for the next attempt, cheapest
// first: idle slots' caches (saved to the prompt cache with --cache-idle-slots), then half of the batch's prompt share, then the busy slot holding
// the most tokens (it fails: "Context size has been exceeded."). False when no busy slot is left.
bool Scheduler::relieve_kv_pressure(int32_t & prompt_budget, int32_t n_generating) {
    llama_memory_t mem = llama_get_memory(parts_.ctx);
    if (policy_.free_idle_cells()) return true;
    if (batch_.n_tokens > n_generating && prompt_budget > 1) {
        prompt_budget /= 2;
        return true;
    }
    Slot * largest = nullptr;
    for (auto & s : slots_) if (s.busy() && (!largest || s.cache.size() > largest->cache.size())) largest = &s;
    if (!largest) return false;
    // As llama-server, an error rather than a truncated answer: the request asked for more than
    // the pool could hold. Unlike llama-server, which fails every busy slot, the others go on.
    fail(*largest, "Context size has been exceeded.");
    llama_memory_seq_rm(mem, largest->id, -1, -1);
    largest->cache.clear();
    return true;
}

// Ends every busy slot with `message` and empties its sequence (a decode error).
void Scheduler::fail_busy_slots(const std::string & message) {
    llama_memory_t mem = llama_get_memory(parts_.ctx);
    for (auto & s : slots_) {
        if (!s.busy()) continue;
        fail(s, message);
        llama_memory_seq_rm(mem, s.id, -1, -1);
        s.cache.clear();
    }
}

// Reads the outputs of the batch rows [first, end) just decoded (as rows 0.. of that decode):
// embeddings, a prompt's end, a verified draft, or a sampled token.
void Scheduler::process_outputs(int32_t first, int32_t end) {
    for (auto & s : slots_) {
        if (!s.busy() || s.i_batch < first || s.i_batch >= end) continue;
        s.i_batch -= first;
        if (s.task->kind == TaskKind::EMBEDDING) {
            finish_embedding(s, s.i_batch);
            continue;
        }
        if (s.state == SlotState::PROMPT) {
            const int64_t t = now_us();
            s.t_prompt_done_us = t;
            s.first_token_at = step_counter_;
            s.state = SlotState::GENERATING;
            counters_.prompt_tokens += s.task->prompt.size() - s.n_cached;
            counters_.cached_tokens += s.n_cached;
            counters_.prompt_us += t - s.t_start_us;
            if (s.task->n_predict == 0) {
                s.stop = StopType::LIMIT;
                finish(s);
                continue;
            }
            if (parts_.spec) parts_.spec->begin(s.id, s.cache);
        } else if (parts_.spec && !parts_.spec->seq(s.id).draft.empty()) {
            verify_draft(s);
            continue;
        }
        const llama_token token = common_sampler_sample(s.task->sampler.get(), parts_.ctx, s.i_batch);
        common_sampler_accept(s.task->sampler.get(), token, true);
        s.n_decoded++;
        handle_sampled(s, token);
    }
}

}  // namespace addon
