// The engine thread's loop: taking what arrived, slot actions, admission, and one step per turn.
#include "scheduler.h"

#include <algorithm>
#include <chrono>

#include "common.h"
#include "log.h"
#include "mtmd-helper.h"

namespace addon {

static int64_t now_us() { return ggml_time_us(); }

Scheduler::Scheduler(const EngineParams & params, const EngineModes & modes, SchedulerParts parts, TaskQueue & queue, EngineCounters & counters)
    : params_(params),
      modes_(modes),
      parts_(std::move(parts)),
      vocab_(llama_model_get_vocab(parts_.model)),
      queue_(queue),
      counters_(counters),
      slots_(static_cast<size_t>(params.n_parallel)),
      batch_(llama_batch_init(static_cast<int32_t>(std::max<uint32_t>(params.n_batch, params.n_parallel)), 0, 1)),
      policy_(parts_.ctx, slots_, params, modes.sharing, parts_.spec, counters, parts_.disk),
      builder_(slots_, batch_, params, step_cost_, static_cast<int32_t>(llama_n_ubatch(parts_.ctx)), !parts_.loras.empty()) {
    policy_.set_prepare_saves(modes.prepare_saves);
    if (PromptCache * cache = policy_.prompt_cache()) cache->report_to(&queue_.cache_events());
    for (int32_t i = 0; i < params.n_parallel; i++) {
        slots_[i].id = i;
        slots_[i].n_ctx = parts_.n_ctx_seq;
    }
    queue_.publish(slots_);
}

Scheduler::~Scheduler() {
    release_all();
    if (batch_.token) llama_batch_free(batch_);
}

void Scheduler::release_all() {
    for (auto & slot : slots_) {
        if (slot.backend_sampler) llama_set_sampler(parts_.ctx, slot.id, nullptr);  // its chain goes with the task
        slot.backend_sampler = false;
        slot.task.reset();
    }
    waiting_.clear();
    tenants_.clear();
}

void Scheduler::run() {
    while (true) {
        // Slot actions, then tasks, left waiting by an earlier turn take the slots freed since.
        run_slot_actions();
        admit_waiting(now_us());
        const bool any_busy = std::any_of(slots_.begin(), slots_.end(), [](const Slot & s) { return s.busy(); });
        policy_.save_due_to_disk(!any_busy && waiting_.empty(), now_us());
        if (!take_inbox(!any_busy)) break;
        if (!any_busy && !waiting_.empty() && params_.burst_wait_ms > 0 && !gather_burst()) break;
        run_slot_actions();
        // A burst of requests reaches the queue over a few milliseconds, and an admission can take
        // longer (copying idle caches to host memory): the rest of the burst, arrived meanwhile,
        // starts now and goes into this step, as in llama-server, which launches them while the
        // first one's copies run and decodes the whole burst in one batch.
        if (admit_waiting(now_us()) > 0) {
            if (!take_inbox(false)) break;
            admit_waiting(now_us());
        }
        step();
        queue_.publish(slots_);
        queue_.flush();
    }
}

// Moves what the queue received to waiting_ and actions_ and applies its cancels, first waiting
// for something to arrive when `wait`; false once the engine is stopping.
bool Scheduler::take_inbox(bool wait) {
    Intake in;
    if (!queue_.take(wait, in)) return false;
    for (auto & t : in.tasks) {
        tenants_.arrive(t->share);
        policy_.prefetch_from_disk(*t);
        waiting_.push_back(std::move(t));
    }
    for (auto & a : in.actions) actions_.push_back(std::move(a));
    if (!in.cancels.empty()) apply_cancels(in.cancels);
    for (const auto & c : in.charges) {
        tenants_.charge_elsewhere(c.tenant, c.tokens);
        counters_.tokens_elsewhere += static_cast<uint64_t>(std::max<int64_t>(0, c.tokens));
    }
    return true;
}

// Requests sent together reach the engine one by one, and an idle engine that started the first
// at once decoded it alone while the others waited for that step (docs/benchmarks.md, "burst
// wait"); llama-server decodes such a burst in one batch. So an idle engine that got tasks takes
// the burst's rest while it keeps coming: until none came for burst_wait_ms, at most five times
// that in all; a lone request pays burst_wait_ms before its first step. Chat requests take longer
// to reach the engine (their template rendered, their prompt tokenized, their grammar parsed on
// libuv's pool), so while requests are being prepared (TaskQueue::begin_preparing) the engine
// waits for them too, up to 25 times burst_wait_ms in all. False once the engine is stopping.
bool Scheduler::gather_burst() {
    using clock = std::chrono::steady_clock;
    const auto quiet = std::chrono::microseconds(static_cast<int64_t>(params_.burst_wait_ms * 1000));
    const auto start = clock::now();
    while (true) {
        switch (queue_.wait_for_burst(quiet, start + 5 * quiet, start + 25 * quiet)) {
            case BurstWait::QUIET: return true;
            case BurstWait::STOPPING: return false;
            case BurstWait::ARRIVED:
                if (!take_inbox(false)) return false;
                break;
        }
    }
}

void Scheduler::apply_cancels(const std::vector<int64_t> & cancels) {
    for (int64_t id : cancels) {
        auto it = std::find_if(waiting_.begin(), waiting_.end(), [id](const auto & t) { return t->id == id; });
        if (it != waiting_.end()) {
            tenants_.withdraw((*it)->share);
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
}

// Gives free slots to waiting tasks in admission's order (admission.h): by tenant with fair share;
// without it every task counts as one tenant's, so the order is the one within a tenant over the
// whole queue: the better class, then the lower priority, then oldest first, or newest first once
// the oldest has waited overload_lifo_ms (adaptive LIFO, as in Facebook's "Fail at Scale": under
// overload a FIFO queue makes every client wait for the backlog; newest first answers most of
// them at once and leaves the backlog's oldest to wait longer). A task that finds no slot now
// (choose_slot: its id_slot busy, or its state still being read from the disk tier) is skipped
// this turn; the others go on. Prompts then go in by admission (BatchBuilder::add_prompt_tokens),
// so the order holds for tasks admitted together. Returns how many started.
size_t Scheduler::admit_waiting(int64_t now) {
    if (waiting_.empty()) return 0;
    std::vector<AdmissionEntry> entries;
    entries.reserve(waiting_.size());
    for (const auto & t : waiting_) entries.push_back(AdmissionEntry{&t->share, t->t_queued_us});
    std::vector<bool> skip(waiting_.size(), false);
    std::vector<Slot *> started;
    const auto idle = [](const Slot & s) { return !s.busy(); };
    while (std::any_of(slots_.begin(), slots_.end(), idle)) {
        const size_t i = admission_next(entries, skip, tenants_, now, params_.overload_lifo_ms, params_.fair_share);
        if (i == entries.size()) break;
        Slot * slot = policy_.choose_slot(*waiting_[i]);
        if (!slot) {
            skip[i] = true;
            continue;
        }
        std::unique_ptr<CompletionTask> task = std::move(waiting_[i]);
        waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(i));
        entries.erase(entries.begin() + static_cast<std::ptrdiff_t>(i));
        skip.erase(skip.begin() + static_cast<std::ptrdiff_t>(i));
        start_task(*slot, std::move(task), now);
        started.push_back(slot);
    }
    // Once every task admitted together has its slot: an idle cache that one of them continues or
    // shares is judged against all of them, not freed under the first.
    policy_.after_admission(started);
    // As llama-server's t_start_process_prompt: a prompt's time (timings.prompt_ms) starts once the
    // host-memory prompt cache has been served and the idle slots copied there. The first progress
    // report (return_progress) goes out from there, so that its elapsed time is never above a
    // later one's.
    const int64_t t = now_us();
    for (Slot * s : started) {
        s->t_start_us = t;
        if (s->busy() && s->task->return_progress) emit_progress(*s);
    }
    return started.size();
}

// -bs / backend_sampling: the task's sampler chain runs in the decode graph, as llama-server does
// it: not with a grammar or a reasoning budget (common_sampling refuses those), nor when raw
// probabilities are asked for (they need the logits before sampling).
static void attach_backend_sampler(llama_context * ctx, const EngineParams & params, Slot & slot) {
    if (!params.backend_sampling) return;
    const CompletionTask & t = *slot.task;
    const bool use = t.kind == TaskKind::COMPLETION && t.sampler && t.sampling.backend_sampling && t.sampling.grammar.empty() &&
                     t.sampling.reasoning_budget_tokens < 0 && !(t.n_probs > 0 && !t.post_sampling_probs);
    llama_set_sampler(ctx, slot.id, use ? common_sampler_get(t.sampler.get()) : nullptr);
    slot.backend_sampler = use;
}

// Charges the task's tenant (admission.h) and gives it the slot.
void Scheduler::start_task(Slot & slot, std::unique_ptr<CompletionTask> task, int64_t now) {
    counters_.queued--;
    task->admission_cost = admission_cost(static_cast<int64_t>(task->prompt.size()), task->n_predict, slot.n_ctx);
    tenants_.admit(task->share, task->admission_cost);
    policy_.place(slot, std::move(task), now);
    slot.admission = ++admissions_;
    slot.admitted_at = step_counter_;
    if (parts_.spec) speculation_start(*parts_.spec, slot);
    // Penalty samplers see the prompt, as in llama-server.
    if (slot.task->sampler) {
        for (llama_token t : slot.task->prompt) common_sampler_accept(slot.task->sampler.get(), t, false);
    }
    attach_backend_sampler(parts_.ctx, params_, slot);
}

// Ends the slot's task; its sampler chain leaves the decode graph first (it is freed with the task).
// A task that did not use the prompt cache (cache_prompt false) leaves nothing in it either:
// llama-server keeps such a task's cells, and every idle slot's cells widen the span of the KV
// pool that later batches' attention covers; this frees them for the next task instead
// (docs/llama-server-differences.md, "cache_prompt").
void Scheduler::release_slot(Slot & slot, int64_t now) {
    // Slots waiting for this one's prefix take what it holds before its cells may go.
    if (policy_.sharing()) {
        for (Slot * settled : policy_.settle_joins(&slot)) {
            if (settled->task->return_progress) emit_progress(*settled);
        }
    }
    if (slot.backend_sampler) {
        llama_set_sampler(parts_.ctx, slot.id, nullptr);
        slot.backend_sampler = false;
    }
    if (slot.task) {
        // Its tenant's virtual time is corrected by what the task used (admission.h).
        const int64_t used = static_cast<int64_t>(slot.task->prompt.size()) + slot.n_decoded;
        tenants_.finish(slot.task->share, slot.task->admission_cost, used);
    }
    policy_.task_ending(slot, now);
    if (slot.task && !slot.task->cache_prompt) policy_.clear_slot(slot);
    slot.release(now);
}

// Runs the queued slot actions whose slots are idle, in arrival order; the others keep waiting.
void Scheduler::run_slot_actions() {
    std::vector<SlotActionResult> done;
    for (auto it = actions_.begin(); it != actions_.end();) {
        Slot & slot = slots_[it->id_slot];
        if (slot.busy()) {
            ++it;
            continue;
        }
        done.push_back(slot_action_run(parts_.ctx, parts_.vision != nullptr, policy_, slot, *it));
        it = actions_.erase(it);
    }
    if (done.empty()) return;
    queue_.push_action_results(std::move(done));
    queue_.publish(slots_);
    queue_.flush();
}

void Scheduler::step() {
    if (!std::any_of(slots_.begin(), slots_.end(), [](const Slot & s) { return s.busy(); })) return;
    if (policy_.sharing()) {
        for (Slot * settled : policy_.settle_joins(nullptr)) {
            if (settled->task->return_progress) emit_progress(*settled);
        }
    }
    if (parts_.vision) eval_media();
    decode_batch();
}

// Encodes and decodes the images that slots have reached, one image per slot and step; text
// around them goes through the shared batch.
void Scheduler::eval_media() {
    for (auto & s : slots_) {
        if (s.state != SlotState::PROMPT || s.task->media.empty() || s.joined()) continue;
        for (const auto & span : s.task->media) {
            if (span.start != s.n_prompt_done) continue;
            llama_pos new_n_past = 0;
            const int32_t ret = mtmd_helper_eval_chunk_single(parts_.vision, parts_.ctx, span.chunk.get(), static_cast<llama_pos>(s.cache.size()),
                                                              s.id, static_cast<int32_t>(params_.n_batch), false, &new_n_past);
            counters_.decode_calls++;
            if (ret != 0) {
                llama_memory_seq_rm(llama_get_memory(parts_.ctx), s.id, -1, -1);
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

}  // namespace addon
