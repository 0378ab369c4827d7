// The engine thread: admitting tasks into slots, building and decoding one batch per step,
// sampling, stopping, and queueing events. Nothing here touches JS values; the JS-thread half of
// the Engine is in engine-js.cpp.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "common.h"
#include "engine.h"
#include "log.h"
#include "mtmd-helper.h"
#include "vision.h"

namespace addon {

static int64_t now_us() { return ggml_time_us(); }


void Engine::emit(EngineEvent && event) {
    std::lock_guard<std::mutex> lock(events_mutex_);
    events_.push_back(std::move(event));
}

void Engine::flush_events() {
    std::lock_guard<std::mutex> lock(events_mutex_);
    if ((events_.empty() && action_results_.empty()) || delivery_pending_ || !tsfn_live_) return;
    delivery_pending_ = true;
    tsfn_.NonBlockingCall([this](Napi::Env env, Napi::Function cb) { deliver(env, cb); });
}

void Engine::publish_summaries() {
    int32_t busy = 0;
    std::lock_guard<std::mutex> lock(summary_mutex_);
    for (size_t i = 0; i < slots_.size(); i++) {
        const Slot & s = slots_[i];
        SlotSummary & out = summaries_[i];
        out.state = s.state;
        out.task_id = s.task ? s.task->id : -1;
        out.n_prompt = s.task ? static_cast<int32_t>(s.task->prompt.size()) : 0;
        out.n_decoded = s.n_decoded;
        out.n_cache = static_cast<int32_t>(s.cache.size());
        if (s.busy()) busy++;
    }
    counters_.busy_slots = busy;
}

void Engine::run() {
    while (true) {
        // Slot actions, then tasks, left waiting by an earlier iteration take the slots freed since.
        run_slot_actions();
        admit_waiting(now_us());
        const bool any_busy = std::any_of(slots_.begin(), slots_.end(), [](const Slot & s) { return s.busy(); });
        if (!take_inbox(!any_busy)) break;
        if (!any_busy && !waiting_.empty() && params_.burst_wait_ms > 0 && !gather_burst()) break;
        run_slot_actions();
        // A burst of requests reaches the inbox over a few milliseconds, and an admission can take
        // longer (copying idle caches to host memory, cache_idle_slots: 5-40 ms each on an H100):
        // the rest of the burst, arrived meanwhile, starts now and goes into this step. As in
        // llama-server, which launches them while the first one's copies run and decodes the whole
        // burst in one batch (without this, 8 streams' first tokens came in two groups there).
        if (admit_waiting(now_us()) > 0) {
            if (!take_inbox(false)) break;
            admit_waiting(now_us());
        }
        step();
        publish_summaries();
        flush_events();
    }
}

bool Engine::take_inbox(bool wait) {
    std::vector<std::unique_ptr<CompletionTask>> incoming;
    std::vector<int64_t> cancels;
    {
        std::unique_lock<std::mutex> lock(inbox_mutex_);
        if (wait) inbox_cv_.wait(lock, [&] { return stopping_ || !inbox_.empty() || !cancel_inbox_.empty() || !action_inbox_.empty(); });
        if (stopping_) return false;
        incoming.swap(inbox_);
        cancels.swap(cancel_inbox_);
        for (auto & a : action_inbox_) actions_.push_back(std::move(a));
        action_inbox_.clear();
    }
    for (auto & t : incoming) waiting_.push_back(std::move(t));
    if (!cancels.empty()) apply_cancels(cancels);
    return true;
}

// Requests sent together reach the engine one by one: the HTTP thread takes each in turn (on the
// 2-core VM 8 requests sent at once were submitted over 10-14 ms, 1.3-2.7 ms apart). An idle
// engine that started the first at once decoded it alone (a 128-token prompt: 200 ms there) while
// the others waited for that step, and their first tokens came in two or three groups; llama-server
// decoded such a burst in one batch. So an idle engine that got tasks takes the burst's rest while
// it keeps coming: until none came for burst_wait_ms, at most five times that in all. A lone
// request pays burst_wait_ms before its first step.
// Chat requests take longer to reach the engine: their template is rendered and their prompt
// tokenized on libuv's pool, and their tool-call grammar parsed there. 12 agent requests sent at
// once (a 1,400-token system prompt with 6 tool schemas) were queued over 72 ms, up to 14 ms
// apart: the first three went alone into a step of 455 ms and the other nine waited for it. So
// while requests the server announced are still being prepared (announce()), the engine waits
// for them too, up to 25 times burst_wait_ms in all (100 ms by default); a request announced and
// submitted alone waits for nothing more than before. False once the engine is stopping.
bool Engine::gather_burst() {
    using clock = std::chrono::steady_clock;
    const auto quiet = std::chrono::microseconds(static_cast<int64_t>(params_.burst_wait_ms * 1000));
    const auto start = clock::now();
    const auto deadline = start + 5 * quiet;
    const auto announced_deadline = start + 25 * quiet;
    while (true) {
        std::unique_lock<std::mutex> lock(inbox_mutex_);
        const bool expecting = announced_ > 0;
        const auto end = expecting ? announced_deadline : deadline;
        const auto now = clock::now();
        if (now >= end) return true;
        const auto until = expecting ? end : std::min(end, now + quiet);
        const bool woken = inbox_cv_.wait_until(lock, until, [&] {
            return stopping_ || !inbox_.empty() || !cancel_inbox_.empty() || (expecting && announced_ == 0);
        });
        if (!woken) {
            if (expecting) continue;  // the announced requests' time is up: the loop ends
            return true;              // none came for burst_wait_ms
        }
        lock.unlock();
        if (!take_inbox(false)) return false;
    }
}

void Engine::apply_cancels(std::vector<int64_t> & cancels) {
    for (int64_t id : cancels) {
        auto it = std::find_if(waiting_.begin(), waiting_.end(), [id](const auto & t) { return t->id == id; });
        if (it != waiting_.end()) {
            waiting_.erase(it);
            counters_.queued--;
            continue;
        }
        for (auto & slot : slots_) {
            if (slot.task && slot.task->id == id) {
                // The KV cache keeps what was decoded, so a retry of the same prompt reuses it.
                release_slot(slot, now_us());
                counters_.tasks_done++;
            }
        }
    }
    cancels.clear();
}

// As llama-server's get_available_slot: the idle slot whose cache holds the largest fraction of
// the prompt, when that fraction exceeds slot_prompt_similarity (-sps), else the least recently
// used idle slot. Whether the task reuses the cache (cache_prompt) does not change the choice: a
// prompt goes where it is cached, replacing that copy rather than another slot's cache. A cache
// made under other LoRA scales holds nothing of the prompt (it cannot be reused).
Slot * Engine::choose_slot(const CompletionTask & task) {
    if (task.id_slot >= 0) {
        Slot & s = slots_[task.id_slot];
        return s.busy() ? nullptr : &s;
    }
    if (sharing_) return choose_slot_sharing(task);
    Slot * best = nullptr;
    double best_similarity = 0;
    Slot * lru = nullptr;
    for (auto & s : slots_) {
        if (s.busy()) continue;
        if (params_.slot_prompt_similarity > 0 && !task.prompt.empty() && !s.cache.empty() && s.cache_lora == task.lora_scales) {
            const double similarity = static_cast<double>(s.common_prefix(task)) / static_cast<double>(task.prompt.size());
            if (similarity > best_similarity && similarity > params_.slot_prompt_similarity) {
                best_similarity = similarity;
                best = &s;
            }
        }
        if (!lru || s.t_last_used_us < lru->t_last_used_us) lru = &s;
    }
    return best ? best : lru;
}

// Gives free slots to waiting tasks (waiting_ is in arrival order): oldest first, or newest
// first once the oldest has waited overload_lifo_ms (adaptive LIFO, as in Facebook's "Fail at
// Scale": under overload a FIFO queue makes every client wait for the backlog; newest first
// answers most of them at once and leaves the backlog's oldest to wait longer). Prompts then go
// in by admission (add_prompt_tokens), so the order holds for tasks admitted together.
size_t Engine::admit_waiting(int64_t now) {
    if (waiting_.empty()) return 0;
    const bool newest_first = params_.overload_lifo_ms > 0 && now - waiting_.front()->t_queued_us >= params_.overload_lifo_ms * 1000;
    std::vector<Slot *> started;
    for (size_t skipped = 0; skipped < waiting_.size();) {
        const size_t i = newest_first ? waiting_.size() - 1 - skipped : skipped;
        Slot * slot = choose_slot(*waiting_[i]);
        if (!slot) {
            skipped++;
            continue;
        }
        std::unique_ptr<CompletionTask> task = std::move(waiting_[i]);
        waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(i));
        counters_.queued--;
        start_task(*slot, std::move(task), now);
        started.push_back(slot);
    }
    // Once every task admitted together has its slot: an idle cache that one of them continues or
    // shares is judged against all of them, not freed under the first.
    if (!started.empty() && prompt_cache_ && params_.cache_idle_slots) cache_idle_slots();
    if (!started.empty() && prompt_cache_ && prepare_saves_) expect_prompt_cache_saves(started);
    // As llama-server's t_start_process_prompt: a prompt's time (timings.prompt_ms) starts once the
    // host-memory prompt cache has been served and the idle slots copied there; on a GPU those
    // copies took three times as long as a 2,000-token prompt's decode. The first progress report
    // (return_progress) goes out from there, so that its elapsed time is never above a later one's.
    const int64_t t = now_us();
    for (Slot * s : started) {
        s->t_start_us = t;
        if (s->busy() && s->task->return_progress) emit_progress(*s);
    }
    return started.size();
}

// --cache-idle-slots with --cache-ram, as llama-server when a task starts (here once the tasks
// admitted together have started): every idle slot's cache
// goes to the prompt cache (a later prompt that shares it gets it back from there), and with a
// unified KV pool its cells are freed, so that the pool's used span, which every step's attention
// covers, holds only what running tasks need. A slot holding images keeps its cache (it cannot be
// saved without them). With prefix sharing an idle cache that is mostly a prefix of a running
// task's prompt stays (worth_keeping_idle): it costs the span little, and the conversation it
// holds comes back at no cost. Such a cache is copied to host memory only when its cells go: KV
// pressure (evict_lru_idle, drop_idle_caches) or a task that takes its slot (start_task). The copy
// is not free: on an H100 each 1,400-token cache took about 40 ms of the step loop, and copying
// the eleven kept caches of an agent fleet's first round made its second round 0.50 s where it
// takes 0.05 s without them (llama-server, which copies and frees every idle slot: 0.47-0.60 s).
void Engine::cache_idle_slots() {
    for (auto & s : slots_) {
        if (s.busy() || s.cache.empty() || !s.cache_media.empty()) continue;
        if (params_.kv_unified && sharing_ && worth_keeping_idle(s)) continue;
        if (save_to_prompt_cache(s)) {
            log_debug("slot " + std::to_string(s.id) + ": __TEST_TAG_CACHE_IDLE_SLOT__\n");
            prompt_cache_->trim();
        }
        if (params_.kv_unified) clear_slot(s);
    }
}

// The caches of the tasks just started go to the prompt cache when their slots are taken or, with
// --cache-idle-slots, at the next admission once they end: buffers for them are prepared now,
// while the tasks run (HostBuffers), as many as this admission (and KV pressure since the last)
// saved: where conversations come back to their slots nothing is saved and nothing written
// ahead. The length expected is the prompt and the tokens asked for (a task without a limit: the
// prompt and a quarter of it, at least 256 tokens).
void Engine::expect_prompt_cache_saves(const std::vector<Slot *> & started) {
    std::vector<size_t> lengths;
    for (const Slot * s : started) {
        if (!s->busy()) continue;
        const CompletionTask & t = *s->task;
        if (t.kind != TaskKind::COMPLETION || !t.cache_prompt || !t.media.empty()) continue;
        const size_t n_prompt = t.prompt.size();
        const size_t n_gen = t.n_predict > 0 ? static_cast<size_t>(t.n_predict) : std::max<size_t>(256, n_prompt / 4);
        lengths.push_back(std::min(n_prompt + n_gen, static_cast<size_t>(llama_n_ctx(ctx_))));
    }
    prompt_cache_->expect(lengths);
}

bool Engine::save_to_prompt_cache(const Slot & slot) {
    const int64_t t0 = now_us();
    if (!slot.cache_media.empty() || !prompt_cache_->save(ctx_, slot.id, slot.cache, slot.cache_lora)) return false;
    counters_.prompt_cache_saves++;
    if (log_debug_enabled()) log_debug("slot " + std::to_string(slot.id) + ": " + std::to_string(slot.cache.size()) + " tokens to the prompt cache in " +
              std::to_string((now_us() - t0) / 1000.0) + " ms (" + std::to_string(prompt_cache_->n_entries()) + " entries, " +
              std::to_string(prompt_cache_->held_bytes() >> 20) + " MiB held)\n");
    return true;
}

void Engine::start_task(Slot & slot, std::unique_ptr<CompletionTask> task, int64_t now) {
    llama_memory_t mem = llama_get_memory(ctx_);
    // As llama-server's get_available_slot, at every completion task's start with a prompt cache:
    // the slot's outgoing cache goes to host memory (one kept idle in the pool has no copy there
    // yet), and a task that uses the cache gets back the cached prompt that serves it best. With
    // sharing only when host memory holds a longer prefix than the pool's cells: a prefix in the
    // pool costs nothing, one from host memory a copy.
    if (prompt_cache_ && task->kind == TaskKind::COMPLETION) {
        log_debug("srv  get_availabl: updating prompt cache\n");
        const bool use_ram = task->cache_prompt && task->media.empty();
        const bool load = use_ram && (!sharing_ || prompt_cache_->longest_prefix(task->prompt, task->lora_scales) > longest_cached_prefix(slot, *task).n);
        swap_cached_prompt(slot, *task, load);
    }
    // K/V computed under other adapter scales cannot be reused.
    if (slot.cache_lora != task->lora_scales) {
        slot.cache.clear();
        slot.cache_lora = task->lora_scales;
    }
    std::vector<llama_token> previous;
    if (task->n_cache_reuse > 0 && task->cache_prompt && task->media.empty() && slot.cache_media.empty() && llama_memory_can_shift(mem)) {
        // Moving cells that other sequences share would move them for those too.
        unshare(slot);
        previous = slot.cache;
    }
    size_t keep = slot.assign(std::move(task), now);
    slot.admission = ++admissions_;
    slot.admitted_at = step_counter_;
    if (!previous.empty()) keep = reuse_cache_chunks(slot, previous, keep);
    if (!llama_memory_seq_rm(mem, slot.id, static_cast<llama_pos>(keep), -1)) {
        // Memory that cannot drop a suffix (recurrent models): start the sequence afresh.
        llama_memory_seq_rm(mem, slot.id, -1, -1);
        slot.cache.clear();
        slot.n_prompt_done = 0;
        slot.n_cached = 0;
    }
    adopt_shared_prefix(slot, slot.cache.size());
    start_speculation(slot);
    // Penalty samplers see the prompt, as in llama-server.
    if (slot.task->sampler) {
        for (llama_token t : slot.task->prompt) common_sampler_accept(slot.task->sampler.get(), t, false);
    }
    attach_backend_sampler(slot);
}

// -bs / backend_sampling: the task's sampler chain runs in the decode graph, as llama-server does
// it: not with a grammar or a reasoning budget (common_sampling refuses those), nor when raw
// probabilities are asked for (they need the logits before sampling).
void Engine::attach_backend_sampler(Slot & slot) {
    if (!params_.backend_sampling) return;
    const CompletionTask & t = *slot.task;
    const bool use = t.kind == TaskKind::COMPLETION && t.sampler && t.sampling.backend_sampling && t.sampling.grammar.empty() &&
                     t.sampling.reasoning_budget_tokens < 0 && !(t.n_probs > 0 && !t.post_sampling_probs);
    llama_set_sampler(ctx_, slot.id, use ? common_sampler_get(t.sampler.get()) : nullptr);
    slot.backend_sampler = use;
}

// Ends the slot's task; its sampler chain leaves the decode graph first (it is freed with the task).
// A task that did not use the prompt cache (cache_prompt false) leaves nothing in it either:
// llama-server keeps such a task's cells, and every idle slot's cells widen the span of the KV
// pool that later batches' attention covers (a 512-token prompt's prefill was 20% slower after a
// dozen such requests); this frees them for the next task instead (docs/llama-server-differences.md, "cache_prompt").
void Engine::release_slot(Slot & slot, int64_t now) {
    // Slots waiting for this one's prefix take what it holds before its cells may go.
    if (sharing_) settle_joins(&slot);
    if (slot.backend_sampler) {
        llama_set_sampler(ctx_, slot.id, nullptr);
        slot.backend_sampler = false;
    }
    if (slot.task && !slot.task->cache_prompt) clear_slot(slot);
    slot.release(now);
}

// --cache-ram: before a slot loses most of its cache to `task` (or when it is empty), its prompt
// goes to the prompt cache and (with `load`) the cached prompt that serves `task` best, if any
// beats what the slot holds, comes back into it. Slots holding images are not saved (their cache
// needs the images).
void Engine::swap_cached_prompt(Slot & slot, const CompletionTask & task, bool load) {
    const bool same_lora = slot.cache_lora == task.lora_scales;
    const size_t lcp = same_lora ? common_prefix_length(slot.cache, task.prompt) : 0;
    if (!slot.cache.empty() && 2 * lcp >= slot.cache.size()) return;
    save_to_prompt_cache(slot);
    if (!load) {
        prompt_cache_->trim();
        return;
    }
    bool failed = false;
    const std::vector<llama_token> current = same_lora ? slot.cache : std::vector<llama_token>{};
    auto restored = prompt_cache_->load(ctx_, slot.id, task.prompt, task.lora_scales, current, failed);
    if (failed) {
        // No room for it in the KV pool: idle slots make room (into the prompt cache themselves
        // with --cache-idle-slots), as they would for the prompt's own decode.
        llama_memory_seq_rm(llama_get_memory(ctx_), slot.id, -1, -1);
        slot.cache.clear();
        drop_idle_caches(&slot);
        restored = prompt_cache_->load(ctx_, slot.id, task.prompt, task.lora_scales, {}, failed);
    }
    if (restored) {
        slot.cache = std::move(*restored);
        slot.cache_lora = task.lora_scales;
        slot.forget_media_after(0);
    } else if (failed) {
        llama_memory_seq_rm(llama_get_memory(ctx_), slot.id, -1, -1);
        slot.cache.clear();
        slot.forget_media_after(0);
    }
    prompt_cache_->trim();
}

// --cache-reuse (llama-server's algorithm): past the common prefix `keep`, every run of at least
// n_cache_reuse tokens of the `previous` cache that matches the prompt at the current position is
// shifted there (its K/V moved, not recomputed); tokens that match nothing are skipped. Returns
// the new number of cached prompt tokens; the caller drops the rest of the sequence. As after the
// prefix, the prompt's last token is always evaluated again.
size_t Engine::reuse_cache_chunks(Slot & slot, const std::vector<llama_token> & previous, size_t keep) {
    llama_memory_t mem = llama_get_memory(ctx_);
    const auto & prompt = slot.task->prompt;
    const size_t min_chunk = static_cast<size_t>(slot.task->n_cache_reuse);
    size_t head_c = keep;  // in the previous cache
    size_t head_p = keep;  // in the prompt; head_p <= head_c throughout
    while (head_c < previous.size() && head_p < prompt.size()) {
        size_t n_match = 0;
        while (head_c + n_match < previous.size() && head_p + n_match < prompt.size() && previous[head_c + n_match] == prompt[head_p + n_match]) {
            n_match++;
        }
        if (n_match < min_chunk) {
            head_c++;
            continue;
        }
        const auto shift = static_cast<llama_pos>(head_p) - static_cast<llama_pos>(head_c);
        slot.exact_end = std::min(slot.exact_end, head_p);  // moved K/V is not what a fresh computation gives
        llama_memory_seq_rm(mem, slot.id, static_cast<llama_pos>(head_p), static_cast<llama_pos>(head_c));
        llama_memory_seq_add(mem, slot.id, static_cast<llama_pos>(head_c), static_cast<llama_pos>(head_c + n_match), shift);
        slot.cache.insert(slot.cache.end(), prompt.begin() + head_p, prompt.begin() + head_p + n_match);
        head_c += n_match;
        head_p += n_match;
    }
    size_t reused = head_p;
    if (reused == prompt.size() && reused > 0) {
        reused--;
        slot.cache.pop_back();
    }
    slot.n_prompt_done = reused;
    slot.n_cached = static_cast<int32_t>(reused);
    return reused;
}

// return_progress: how far the slot's prompt is, as llama-server reports it (total, cache,
// processed, time); once when the prompt starts, then after every batch that adds to it.
void Engine::emit_progress(Slot & slot) {
    EngineEvent ev{EngineEvent::Kind::PROGRESS};
    ev.task_id = slot.task->id;
    ev.n_prompt = static_cast<int32_t>(slot.task->prompt.size());
    ev.n_cached = slot.n_cached;
    ev.n_processed = static_cast<int32_t>(slot.n_prompt_done);
    ev.t_elapsed_ms = (now_us() - slot.t_start_us) / 1000.0;
    slot.n_progress_sent = slot.n_prompt_done;
    emit(std::move(ev));
}

// What a slot is told when llama_decode failed for another reason than a full KV cache (1).
static const char * decode_failure(int32_t ret) {
    return ret == -1 ? "Invalid input batch." : ret == 2 ? "Decoding was aborted." : "Compute error.";
}

// Puts a slot back where it was before a batch that failed was built.
static void take_back(Slot & s, const SlotUndo & undo) {
    s.cache.resize(undo.cache);
    s.n_prompt_done = undo.prompt_done;
    s.i_batch = -1;
}

// Builds one batch from all busy slots, decodes it and samples its outputs: the generating slots'
// tokens, then prompt tokens up to prompt_share(). On KV-cache pressure, idle slots' caches are
// dropped first, then the prompt share of the batch is halved; then the slot holding the most
// tokens fails ("Context size has been exceeded.") and the others go on. With split_steps_ the
// generating rows and the prompt rows of one batch are decoded by two llama_decode calls (see
// split_steps_ in engine.h for why); with early_outputs_ a batch's rows may take more calls still
// (decode_rows).
void Engine::decode_batch() {
    int32_t prompt_budget = static_cast<int32_t>(params_.n_batch);
    std::vector<SlotUndo> undo(slots_.size());
    while (true) {
        const LoraGroup group = next_lora_group();
        for (size_t i = 0; i < slots_.size(); i++) undo[i] = {slots_[i].cache.size(), slots_[i].n_prompt_done};
        common_batch_clear(batch_);
        const int32_t n_generating = add_generating_tokens(group);
        add_prompt_tokens(group, std::min<int32_t>(prompt_budget, prompt_share(n_generating, prompts_came_after_generation(group))));
        if (batch_.n_tokens == 0) return;

        const int32_t n_prompt = batch_.n_tokens - n_generating;
        const bool split = split_steps_ && n_generating > 0 && n_prompt > 0 && batch_.n_tokens >= kTiledAttentionRows;
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
        for (size_t i = 0; i < slots_.size(); i++) take_back(slots_[i], undo[i]);
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
void Engine::decode_prompt_rows(const LoraGroup & group, int32_t first) {
    int32_t budget = batch_.n_tokens - first;
    while (true) {
        const int32_t ret = decode_rows(group, first, batch_.n_tokens, 0);
        if (ret == 0) {
            emit_prompt_progress();
            return;
        }
        take_back_rows(first, batch_.n_tokens);
        if (ret != 1) {
            fail_busy_slots(decode_failure(ret));
            return;
        }
        if (!relieve_kv_pressure(budget, 0)) return;
        for (auto & s : slots_) s.i_batch = -1;
        common_batch_clear(batch_);
        add_prompt_tokens(group, budget);
        if (batch_.n_tokens == 0) return;
        first = 0;
    }
}

// Decodes the batch's rows [first, end), of which those before `n_generating` (a batch index) are
// generating rows, and samples their outputs. Without early_outputs_ that is one llama_decode
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
int32_t Engine::decode_rows(const LoraGroup & group, int32_t first, int32_t end, int32_t n_generating) {
    const int32_t n_ubatch = static_cast<int32_t>(llama_n_ubatch(ctx_));
    for (int32_t from = first; from < end;) {
        int32_t to = end;
        if (early_outputs_) {
            for (int32_t i = from; i < end && to == end; i++) {
                const int32_t stretch_end = from + ((i - from) / n_ubatch + 1) * n_ubatch;
                if (batch_.logits[i] && stretch_end < end) to = stretch_end;
            }
        }
        const int32_t ret = decode_group(group, from, to - from);
        if (ret != 0) {
            if (from == first) return ret;
            take_back_rows(from, end);
            if (ret != 1) fail_busy_slots(decode_failure(ret));
            return 0;
        }
        const int32_t n_gen = std::clamp(n_generating - from, 0, to - from);
        step_cost_.observe(n_gen, to - from - n_gen, static_cast<double>(last_decode_us_));
        if (log_debug_enabled()) log_step(n_gen, to - from);
        process_outputs(from, to);
        if (to < end) {
            counters_.early_output_calls++;
            flush_events();  // out now, not after the batch's last call
        }
        from = to;
    }
    return 0;
}

// Puts back the slots that had rows in the batch's [from, end), as if those rows had not been
// added: each slot's rows are its last cache entries (and, while prompting, its last prompt
// tokens fed).
void Engine::take_back_rows(int32_t from, int32_t end) {
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

void Engine::emit_prompt_progress() {
    for (auto & s : slots_) {
        if (s.busy() && s.task->return_progress && s.n_prompt_done != s.n_progress_sent) emit_progress(s);
    }
}

// The step trace at --verbose: what the batch held (generating tokens, each prompting slot's
// tokens) and how long its decode took, for profiling the scheduler.
void Engine::log_step(int32_t n_generating, int32_t n_tokens) {
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

// Slots decoded together must share adapter scales: a step serves the group of the busy slot
// served least recently, so groups alternate and none starves.
LoraGroup Engine::next_lora_group() const {
    LoraGroup group;
    if (loras_.empty()) return group;
    const Slot * first = nullptr;
    for (const auto & s : slots_) if (s.busy() && (!first || s.last_step < first->last_step)) first = &s;
    if (first) {
        group.scales = first->task->lora_scales;
        group.grouped = true;
    }
    return group;
}

// One token per generating slot of the group (its last sampled token); returns their count.
// With speculation, each slot's drafted tokens follow its sampled token (all with logits).
int32_t Engine::add_generating_tokens(const LoraGroup & group) {
    if (spec_) make_drafts(group);
    for (auto & s : slots_) {
        s.i_batch = -1;
        if (s.state != SlotState::GENERATING || !group.contains(s)) continue;
        s.i_batch = batch_.n_tokens;
        common_batch_add(batch_, s.sampled, static_cast<llama_pos>(s.cache.size()), {s.id}, true);
        s.cache.push_back(s.sampled);
        if (spec_) add_draft_tokens(s);
    }
    return batch_.n_tokens;
}

bool Engine::gpu_build() {
    return ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_GPU) != nullptr ||
           ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_IGPU) != nullptr;
}

// Whether a prompt of the group waits that was admitted once one of its generating slots had its
// first token: a prompt that arrived while others streamed (chunked prefill holds it back for
// them). Prompts admitted with the generating slots, in one burst (a wave of 32 requests larger
// than n_batch), are not held back for those slots' second token: the burst's last first tokens
// would come a few chunks later than in llama-server, which decodes the rest in one batch.
bool Engine::prompts_came_after_generation(const LoraGroup & group) const {
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

// How many prompt tokens a step may add after `n_generating` generating tokens (chunked prefill,
// as vLLM's token budget): with nothing generating, or only slots admitted with the prompts
// waiting (`held_back` false), what n_batch leaves (a lone prompt goes in n_batch-sized chunks,
// as in llama-server). Otherwise the smaller of two shares:
// - prefill_budget: the step stays within that many tokens, yet prompts get at least half of it
//   however many slots generate, so they never starve;
// - prefill_budget_ms: the prompt tokens that the recent steps' costs say fit beside the
//   generating tokens in that time (at least a quarter of n_ubatch), so that the generating slots'
//   next token is not held back much longer than that, whatever the model, machine or cache size.
// The share never exceeds what n_batch leaves.
int32_t Engine::prompt_share(int32_t n_generating, bool held_back) const {
    const int32_t room = static_cast<int32_t>(params_.n_batch) - n_generating;
    if (n_generating == 0 || !held_back) return room;
    int32_t share = room;
    const int32_t budget = params_.prefill_budget;
    if (budget > 0) share = std::min(share, std::max(budget - n_generating, budget / 2));
    if (params_.prefill_budget_ms > 0) {
        const int32_t fits = step_cost_.prompt_tokens_within(params_.prefill_budget_ms * 1000, n_generating);
        const int32_t floor = std::max<int32_t>(1, static_cast<int32_t>(llama_n_ubatch(ctx_)) / 4);
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

// Prompt tokens of the group's prompting slots, up to `budget`, in admission order (so an early
// long prompt is not starved by later ones; see admit_waiting). An embedding input's text goes in
// whole or waits (each run of text between its images, with images); a prompt stops before its
// next image (eval_media evaluates images on their own). A slot whose prompt is complete gets its
// logits (i_batch) on its last token.
void Engine::add_prompt_tokens(const LoraGroup & group, int32_t budget) {
    std::vector<Slot *> prompting;
    for (auto & s : slots_) if (s.state == SlotState::PROMPT && group.contains(s) && !s.joined()) prompting.push_back(&s);
    std::sort(prompting.begin(), prompting.end(), [](Slot * a, Slot * b) { return a->admission < b->admission; });
    for (Slot * s : prompting) {
        const auto & prompt = s->task->prompt;
        const size_t stop_at = text_end(*s->task, s->n_prompt_done);
        if (s->task->kind == TaskKind::EMBEDDING) {
            // Every token is an output; i_batch marks the first token of the input's last run of
            // text, whose outputs are its embedding (finish_embedding).
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

// Sets the group's adapter scales on the context (when they changed) and decodes the batch's rows
// [first, first + n); returns llama_decode's result. On success the group's slots are marked as
// served this step.
int32_t Engine::decode_group(const LoraGroup & group, int32_t first, int32_t n) {
    if (group.grouped && applied_lora_ != group.scales) {
        llama_set_adapters_lora(ctx_, lora_handles_.data(), lora_handles_.size(), const_cast<float *>(group.scales.data()));
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
    const int32_t ret = llama_decode(ctx_, rows);
    counters_.decode_calls++;
    if (ret == 0) {
        // Timed until the results are ready: a GPU backend returns before it has computed them.
        llama_synchronize(ctx_);
        last_decode_us_ = now_us() - t_start;
    }
    for (const auto & s : slots_) {
        if (s.busy()) counters_.busy_slot_decodes++;
        if (s.cache.size() > counters_.n_tokens_max) counters_.n_tokens_max = s.cache.size();
    }
    if (ret == 0) {
        if (spec_) process_draft_batch();
        step_counter_++;
        for (auto & s : slots_) if (s.busy() && group.contains(s)) s.last_step = step_counter_;
    }
    return ret;
}

// After llama_decode found no room in the KV cache (1): frees room for the next attempt, cheapest
// first: idle slots' caches (saved to the prompt cache with --cache-idle-slots), then half of the batch's prompt share, then the busy slot holding
// the most tokens (it fails: "Context size has been exceeded."). False when no busy slot is left.
bool Engine::relieve_kv_pressure(int32_t & prompt_budget, int32_t n_generating) {
    llama_memory_t mem = llama_get_memory(ctx_);
    if (sharing_ ? evict_lru_idle() : drop_idle_caches(nullptr)) return true;
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

// Empties the KV cache of every idle slot but `except`, saving each to the prompt cache first
// (--cache-idle-slots). True when anything was freed.
bool Engine::drop_idle_caches(const Slot * except) {
    llama_memory_t mem = llama_get_memory(ctx_);
    bool freed = false;
    for (auto & s : slots_) {
        if (&s == except || s.busy() || s.cache.empty()) continue;
        if (prompt_cache_ && params_.cache_idle_slots && save_to_prompt_cache(s)) prompt_cache_->trim();
        clear_slot(s);
        freed = true;
    }
    return freed;
}

// Ends every busy slot with `message` and empties its sequence (a decode error).
void Engine::fail_busy_slots(const std::string & message) {
    llama_memory_t mem = llama_get_memory(ctx_);
    for (auto & s : slots_) {
        if (!s.busy()) continue;
        fail(s, message);
        llama_memory_seq_rm(mem, s.id, -1, -1);
        s.cache.clear();
    }
}

// Encodes and decodes the images that slots have reached, one image per slot and step; text
// around them goes through the shared batch.
void Engine::eval_media() {
    for (auto & s : slots_) {
        if (s.state != SlotState::PROMPT || s.task->media.empty() || s.joined()) continue;
        for (const auto & span : s.task->media) {
            if (span.start != s.n_prompt_done) continue;
            llama_pos new_n_past = 0;
            const int32_t ret = mtmd_helper_eval_chunk_single(vision_->get(), ctx_, span.chunk.get(), static_cast<llama_pos>(s.cache.size()),
                                                              s.id, static_cast<int32_t>(params_.n_batch), false, &new_n_past);
            counters_.decode_calls++;
            if (ret != 0) {
                llama_memory_seq_rm(llama_get_memory(ctx_), s.id, -1, -1);
                s.cache.clear();
                fail(s, "failed to evaluate an image");
                break;
            }
            s.cache.insert(s.cache.end(), span.n_pos, LLAMA_TOKEN_NULL);
            s.media_cached(span);
            s.n_prompt_done += span.n_pos;
            break;
        }
    }
}

void Engine::step() {
    if (!std::any_of(slots_.begin(), slots_.end(), [](const Slot & s) { return s.busy(); })) return;
    if (sharing_) settle_joins(nullptr);
    if (vision_) eval_media();
    decode_batch();
}

// Reads the outputs of the batch rows [first, end) just decoded (as rows 0.. of that decode):
// embeddings, a prompt's end, a verified draft, or a sampled token.
void Engine::process_outputs(int32_t first, int32_t end) {
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
            if (spec_) spec_->begin(s.id, s.cache);
        } else if (spec_ && !spec_->seq(s.id).draft.empty()) {
            verify_draft(s);
            continue;
        }
        const llama_token token = common_sampler_sample(s.task->sampler.get(), ctx_, s.i_batch);
        common_sampler_accept(s.task->sampler.get(), token, true);
        s.n_decoded++;
        handle_sampled(s, token);
    }
}

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

void Engine::handle_sampled(Slot & s, llama_token token) {
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
            top_probabilities(ctx_, s.i_batch, llama_vocab_n_tokens(vocab_), task.n_probs, token, ev.prob, top);
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
        } else if (static_cast<int32_t>(s.cache.size()) + 1 >= s.n_ctx && !shift_context(s)) {
            s.stop = StopType::LIMIT;
            s.truncated = true;
        } else if (task.t_max_predict_ms > 0 && s.generated.find('\n') != std::string::npos &&
                   (now_us() - s.t_prompt_done_us) / 1000 > task.t_max_predict_ms) {
            s.stop = StopType::LIMIT;
        }
    }
    emit(std::move(ev));
    if (s.stop != StopType::NONE) finish(s);
}

// llama-server's context shift: keep the first n_keep tokens (+ BOS), drop n_discard after them
// (default half of the rest) and move the remainder down. Not for prompts with images (their
// positions are not one per cache entry). False when the slot cannot be shifted.
bool Engine::shift_context(Slot & s) {
    const CompletionTask & task = *s.task;
    if (!params_.ctx_shift || !task.media.empty()) return false;
    const int32_t n_past = static_cast<int32_t>(s.cache.size());
    int32_t n_keep = task.n_keep < 0 ? static_cast<int32_t>(task.prompt.size()) : task.n_keep;
    if (llama_vocab_get_add_bos(vocab_)) n_keep += 1;
    n_keep = std::max(0, std::min(s.n_ctx - 4, n_keep));
    const int32_t n_left = n_past - n_keep;
    const int32_t n_discard = std::clamp(task.n_discard > 0 ? task.n_discard : n_left / 2, 0, std::max(0, n_left - 1));
    if (n_discard == 0) return false;
    llama_memory_t mem = llama_get_memory(ctx_);
    // Cells past the discarded run move: they must be this slot's alone.
    if (s.shared_len > static_cast<size_t>(n_keep + n_discard) && !unshare(s)) return false;
    if (!llama_memory_seq_rm(mem, s.id, n_keep, n_keep + n_discard)) return false;
    llama_memory_seq_add(mem, s.id, n_keep + n_discard, n_past, -n_discard);
    s.shared_len = std::min(s.shared_len, static_cast<size_t>(n_keep));
    s.exact_end = std::min(s.exact_end, static_cast<size_t>(n_keep));
    if (spec_) spec_->shift(s.id, n_keep, n_discard, n_past);
    s.cache.erase(s.cache.begin() + n_keep, s.cache.begin() + n_keep + n_discard);
    s.truncated = true;
    counters_.context_shifts++;
    return true;
}

// The embedding of an input is read from its last decode, as llama-server reads it: with images,
// that is the text after the last image (attending to everything before it); pooled over those
// tokens, or one vector per token with pooling none.
void Engine::finish_embedding(Slot & s, int32_t first) {
    const int64_t t = now_us();
    EngineEvent ev;
    ev.kind = EngineEvent::Kind::EMBEDDING;
    ev.task_id = s.task->id;
    ev.n_prompt = static_cast<int32_t>(s.task->prompt.size());
    const auto & media = s.task->media;
    const size_t last_run = media.empty() ? 0 : media.back().start + media.back().n_pos;
    const int32_t n = static_cast<int32_t>(s.task->prompt.size() - last_run);
    if (pooling_ == LLAMA_POOLING_TYPE_NONE) {
        ev.embedding.reserve(static_cast<size_t>(n) * n_embd_out_);
        for (int32_t i = 0; i < n; i++) {
            const float * e = llama_get_embeddings_ith(ctx_, first + i);
            if (e) ev.embedding.insert(ev.embedding.end(), e, e + n_embd_out_);
            else ev.embedding.insert(ev.embedding.end(), n_embd_out_, 0.0f);
        }
        ev.n_vectors = n;
    } else {
        const float * e = llama_get_embeddings_seq(ctx_, s.id);
        if (!e) e = llama_get_embeddings_ith(ctx_, first + n - 1);
        if (e) ev.embedding.assign(e, e + n_embd_out_);
        else ev.embedding.assign(n_embd_out_, 0.0f);
        ev.n_vectors = 1;
    }
    counters_.prompt_tokens += s.task->prompt.size();
    counters_.prompt_us += t - s.t_start_us;
    counters_.tasks_done++;
    emit(std::move(ev));
    release_slot(s, t);  // an embedding task never uses the prompt cache: its cells are freed there
}

void Engine::finish(Slot & s) {
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
    if (spec_) {
        ev.n_draft = spec_->seq(s.id).n_drafted;
        ev.n_draft_accepted = spec_->seq(s.id).n_accepted;
    }
    counters_.predicted_tokens += s.n_decoded;
    counters_.predicted_us += s.t_prompt_done_us ? t - s.t_prompt_done_us : 0;
    counters_.tasks_done++;
    emit(std::move(ev));
    release_slot(s, t);
}

void Engine::fail(Slot & s, const std::string & message) {
    EngineEvent ev;
    ev.kind = EngineEvent::Kind::ERROR;
    ev.task_id = s.task->id;
    ev.message = message;
    counters_.tasks_done++;
    emit(std::move(ev));
    release_slot(s, now_us());
}

}  // namespace addon
