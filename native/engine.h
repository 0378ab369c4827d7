#pragma once
// Engine: one llama_context shared by N slots, driven by its own thread (continuous batching).
//
// Threads: the JS thread calls submit/cancel/slots/metrics; they only touch the mutex-guarded
// inbox and the published summaries. submit() prepares tasks on a libuv worker (image decoding,
// grammar parsing) and queues them from the JS thread once all are ready. The engine thread
// owns the context, the batch and every Slot: each iteration it admits queued tasks into idle
// slots (oldest first; newest first under overload, see admit_waiting), builds ONE batch from all
// busy slots (one token per generating slot first, then prompt chunks: up to n_batch when nothing
// generates, within the prefill budget while something does), decodes once, samples each slot
// whose logits are ready, and queues events. Events reach JS in bundles through one
// ThreadSafeFunction (at most one pending call at a time).
// Ownership: the engine keeps its Model's JS object alive until dispose() resolves.
#include <napi.h>

#include <memory>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common.h"
#include "llama.h"
#include "prompt-cache.h"
#include "slot-action.h"
#include "slot.h"
#include "speculation.h"
#include "step-cost.h"
#include "task-parse.h"
#include "task.h"

namespace addon {

class Model;
class LoraAdapter;
class Vision;
class Announcement;

struct EngineParams {
    uint32_t n_ctx = 0;
    int32_t n_parallel = 4;
    uint32_t n_batch = 2048;
    uint32_t n_ubatch = 512;
    int32_t n_threads = 0;        // 0: llama.cpp's count of math cores
    int32_t n_threads_batch = 0;  // 0: same as n_threads
    bool kv_unified = true;
    int32_t flash_attn = -1;      // -1 auto, 0 off, 1 on
    bool embeddings = false;      // embedding mode: tasks are embedded, never generated
    int32_t pooling = -1;         // llama_pooling_type; -1: the model's own
    bool ctx_shift = false;       // a generating slot whose context is full drops old tokens instead of stopping
    int32_t prompt_cache_mib = 0; // --cache-ram: host-memory prompt cache size (-1 no limit, 0 off)
    bool cache_idle_slots = true; // --cache-idle-slots: idle slots dropped under KV pressure go to the prompt cache first
    bool special = false;         // -sp: generated special tokens keep their text
    int32_t n_ctx_slot_max = 0;   // --kv-unified-per-slot: cap on a slot's context (0: none)
    bool backend_sampling = false; // -bs: the context takes per-sequence sampler chains (tasks opt in)
    // Chunked prefill: tokens one step decodes while any slot is generating (its tokens first,
    // prompt chunks fill the rest, at least half the budget), so that a long prompt delays the
    // generating slots by one chunk per step instead of a whole n_batch. 0: no budget (prompts
    // fill n_batch, as llama-server). With nothing generating, prompts always fill n_batch.
    // Engine.create's default: 512 where the build has no GPU device, 0 (the time target alone)
    // where it has one (gpu_build(); docs/options.md has the measurements).
    int32_t prefill_budget = 512;
    // Chunked prefill's time target (ms): while any slot is generating, a step carries no more
    // prompt tokens than StepCost says fit in this long beside the generating tokens (at least
    // a quarter of n_ubatch, so prompts never starve). 0: no time target. Applies together with
    // prefill_budget: the smaller share wins.
    double prefill_budget_ms = 1000;
    // Adaptive LIFO (ms): free slots go to waiting tasks oldest first, but once the oldest has
    // waited this long (overload: requests arrive faster than they are served), newest first, so
    // that most clients are answered promptly and the oldest wait longer. 0: always oldest first.
    double overload_lifo_ms = 1000;
    // Burst wait (ms): an idle engine that receives tasks waits for the rest of their burst while
    // it keeps coming, until none came for this long (at most five times this long in all), so
    // that requests sent together share their first batch; requests the server announced (still
    // being prepared) are waited for up to 25 times this long. 0: starts at once. Engine.create's
    // default: 4 where the build has no GPU device, 0 where it has one (gather_burst()).
    double burst_wait_ms = 4;
    // llama-server's -sps: a task without id_slot goes to the idle slot whose cache holds the
    // largest fraction of its prompt when that fraction exceeds this, else to the least recently
    // used idle slot. 0: always the least recently used. From `server` when given.
    double slot_prompt_similarity = 0.1;
    // Prefix sharing across slots (engine-sharing.cpp): a prompt starts from the longest prefix
    // that any slot's cells hold (copied with llama_memory_seq_cp: in a unified pool the cells gain
    // a sequence id, nothing is computed or copied), and waits for a prefix another slot is
    // computing instead of computing it again. -1: on exactly when the pool is unified; 0 off;
    // 1 on (without a unified pool a copy moves a whole stream's buffer). Never for embeddings or
    // for models whose memory cannot share cells (recurrent, hybrid, sliding-window attention).
    int32_t prefix_sharing = -1;
    // llama-server's parsed command line, when given: its context flags (KV cache types, SWA,
    // RoPE/YaRN, offload) apply as there; the fields above still decide what they name.
    std::shared_ptr<common_params> server;
};

struct SlotSummary {
    int32_t id = 0;
    SlotState state = SlotState::IDLE;
    int64_t task_id = -1;
    int32_t n_prompt = 0;
    int32_t n_decoded = 0;
    int32_t n_cache = 0;
};

struct EngineCounters {
    std::atomic<uint64_t> prompt_tokens{0};
    std::atomic<uint64_t> prompt_us{0};
    std::atomic<uint64_t> predicted_tokens{0};
    std::atomic<uint64_t> predicted_us{0};
    std::atomic<uint64_t> decode_calls{0};
    std::atomic<uint64_t> split_steps{0};       // steps decoded in two calls, generating rows first (split_steps_)
    std::atomic<uint64_t> early_output_calls{0}; // calls ended early so that their outputs went out before the rest (early_outputs_)
    std::atomic<uint64_t> cached_tokens{0};     // prompt tokens reused from a slot's cache
    std::atomic<uint64_t> shared_tokens{0};     // of those, tokens taken from another slot's cells (prefix sharing)
    std::atomic<uint64_t> shared_joins{0};      // prompts that waited for another slot to compute their prefix
    std::atomic<uint64_t> busy_slot_decodes{0}; // busy slots summed over decode calls
    std::atomic<uint64_t> n_tokens_max{0};      // longest sequence seen in a slot (prompt + generation)
    std::atomic<uint64_t> context_shifts{0};
    std::atomic<uint64_t> prompt_cache_saves{0}; // slot caches copied to the host-memory prompt cache
    std::atomic<uint64_t> tasks_done{0};
    std::atomic<int32_t> queued{0};
    std::atomic<int32_t> busy_slots{0};
};

// -bs: sampler chains a context was created with (llama_context_params.samplers).
using InitialSamplers = std::vector<std::unique_ptr<common_sampler, void (*)(common_sampler *)>>;

// The slots decoded together in one step share adapter scales (when the engine has adapters).
struct LoraGroup {
    bool grouped = false;
    std::vector<float> scales;
    bool contains(const Slot & s) const { return !grouped || s.task->lora_scales == scales; }
};

// A slot's place before a batch was built, restored when the decode is retried.
struct SlotUndo {
    size_t cache = 0;
    size_t prompt_done = 0;
};

// Files: engine-js.cpp (creation, the JS methods, submission, event delivery; JS thread),
// task-parse.cpp (JS task object -> CompletionTask), engine.cpp (the engine thread's loop).
class Engine : public Napi::ObjectWrap<Engine> {
public:
    static Napi::Function define(Napi::Env env);
    static Napi::FunctionReference constructor;

    explicit Engine(const Napi::CallbackInfo & info);
    ~Engine() override;

private:
    friend class TaskSubmitWorker;
    friend class Announcement;

    // JS thread (engine-js.cpp)
    static Napi::Value create(const Napi::CallbackInfo & info);
    Napi::Value js_submit(const Napi::CallbackInfo & info);
    Napi::Promise submit_now(Napi::Env env, std::vector<TaskRequest> & requests, const TaskLimits & limits, Announcement & announcement);
    Napi::Value js_announce(const Napi::CallbackInfo & info);
    // One announced request has its tasks queued or refused, or was withdrawn: it no longer counts.
    void settle_announcement();
    Napi::Value js_count_tokens(const Napi::CallbackInfo & info);
    Napi::Value js_cancel(const Napi::CallbackInfo & info);
    Napi::Value js_slots(const Napi::CallbackInfo & info);
    Napi::Value js_metrics(const Napi::CallbackInfo & info);
    Napi::Value js_info(const Napi::CallbackInfo & info);
    Napi::Value js_dispose(const Napi::CallbackInfo & info);
    Napi::Value js_slot_action(const Napi::CallbackInfo & info);   // engine-slots.cpp
    void settle_slot_actions(Napi::Env env, std::vector<SlotActionResult> & results);
    void reject_slot_actions(Napi::Env env);
    TaskLimits task_limits() const;
    // Puts the tasks on the inbox; `announced`: they are an announced request's, which stops counting.
    void enqueue(std::vector<std::unique_ptr<CompletionTask>> tasks, bool announced = false);
    void deliver(Napi::Env env, Napi::Function callback);
    void track_active(int64_t id, bool active);
    void stop_thread();
    void free_context();

    // engine thread (engine.cpp)
    void run();
    // Moves the inbox's tasks to waiting_ and applies its cancels, first waiting for something to
    // arrive when `wait`; false once the engine is stopping.
    bool take_inbox(bool wait);
    bool gather_burst();
    void choose_step_modes();
    // Starts waiting tasks in free slots; returns how many started.
    size_t admit_waiting(int64_t now_us);
    void apply_cancels(std::vector<int64_t> & cancels);
    Slot * choose_slot(const CompletionTask & task);
    void start_task(Slot & slot, std::unique_ptr<CompletionTask> task, int64_t now_us);
    void step();
    void decode_batch();
    LoraGroup next_lora_group() const;
    int32_t add_generating_tokens(const LoraGroup & group);
    bool prompts_came_after_generation(const LoraGroup & group) const;
    int32_t prompt_share(int32_t n_generating, bool held_back) const;
    void add_prompt_tokens(const LoraGroup & group, int32_t budget);
    int32_t decode_group(const LoraGroup & group, int32_t first, int32_t n);
    void decode_prompt_rows(const LoraGroup & group, int32_t first);
    int32_t decode_rows(const LoraGroup & group, int32_t first, int32_t end, int32_t n_generating);
    void take_back_rows(int32_t from, int32_t end);
    void process_outputs(int32_t first, int32_t end);
    void emit_prompt_progress();
    void log_step(int32_t n_generating, int32_t n_tokens);
    bool relieve_kv_pressure(int32_t & prompt_budget, int32_t n_generating);
    bool drop_idle_caches(const Slot * except);
    void cache_idle_slots();
    // Copies an idle slot's cache to the prompt cache (not a slot holding images, whose cache needs
    // them); true when a copy was made. The caller trims the cache to its limits.
    bool save_to_prompt_cache(const Slot & slot);
    void expect_prompt_cache_saves(const std::vector<Slot *> & started);
    void fail_busy_slots(const std::string & message);
    void eval_media();
    void handle_sampled(Slot & slot, llama_token token);
    // engine thread, speculative decoding (engine-speculation.cpp)
    void start_speculation(Slot & slot);
    void make_drafts(const LoraGroup & group);
    void add_draft_tokens(Slot & slot);
    void process_draft_batch();
    void verify_draft(Slot & slot);
    void finish_embedding(Slot & slot, int32_t first_index);
    void finish(Slot & slot);
    bool shift_context(Slot & slot);
    void fail(Slot & slot, const std::string & message);
    void emit(EngineEvent && event);
    void swap_cached_prompt(Slot & slot, const CompletionTask & task, bool load);
    // engine thread, prefix sharing (engine-sharing.cpp)
    struct PrefixSource {
        Slot * slot = nullptr;
        size_t n = 0;
    };
    bool prefix_sharing_in_effect(int32_t wanted) const;
    size_t adopt_shared_prefix(Slot & slot, size_t keep);
    PrefixSource longest_cached_prefix(const Slot & dst, const CompletionTask & task);
    PrefixSource longest_pending_prefix(const Slot & dst, const CompletionTask & task);
    void share_prefix(Slot & dst, Slot & src, size_t n);
    void settle_joins(const Slot * ending);
    bool unshare(Slot & slot);
    bool evict_lru_idle();
    bool worth_keeping_idle(const Slot & idle) const;
    Slot * choose_slot_sharing(const CompletionTask & task);
    void attach_backend_sampler(Slot & slot);
    void release_slot(Slot & slot, int64_t now_us);
    size_t reuse_cache_chunks(Slot & slot, const std::vector<llama_token> & previous, size_t keep);
    void emit_progress(Slot & slot);
    void flush_events();
    void publish_summaries();
    // engine thread, slot actions (engine-slots.cpp)
    void run_slot_actions();
    SlotActionResult run_slot_action(Slot & slot, const SlotAction & action);
    void save_slot(Slot & slot, const SlotAction & action, SlotActionResult & out);
    void restore_slot(Slot & slot, const SlotAction & action, SlotActionResult & out);
    void clear_slot(Slot & slot);

    Model * model_ = nullptr;
    Napi::ObjectReference model_ref_;
    std::vector<LoraAdapter *> loras_;
    std::vector<Napi::ObjectReference> lora_refs_;
    std::vector<llama_adapter_lora *> lora_handles_;
    std::vector<float> applied_lora_;   // scales currently set on the context
    Vision * vision_ = nullptr;
    Napi::ObjectReference vision_ref_;
    uint64_t step_counter_ = 0;
    uint64_t admissions_ = 0;   // tasks given a slot so far (Slot::admission)
    llama_context * ctx_ = nullptr;
    // Speculative decoding (--spec-type, -md); null when off. Freed before ctx_ (its draft context reads ctx_).
    std::unique_ptr<Speculation> spec_;
    StepCost step_cost_;        // learnt from every decoded step; sizes prompt shares (prefill_budget_ms)
    int64_t last_decode_us_ = 0; // how long decode_group's llama_decode took
    // Persistent CPU threadpools (with llama-server's polling), attached to the context: without
    // them ggml starts and joins its worker threads on every decode.
    std::unique_ptr<common_threadpools> threadpools_;
    const llama_vocab * vocab_ = nullptr;
    llama_batch batch_{};
    EngineParams params_;
    int32_t n_ctx_seq_ = 0;
    bool embeddings_ = false;
    bool sharing_ = false;    // prefix sharing in effect (EngineParams::prefix_sharing, decided at creation)
    // A step holding generating tokens, prompt tokens and kTiledAttentionRows rows or more decodes
    // them by two llama_decode calls, the generating rows first. On the CPU backend such a batch
    // takes ggml's tiled flash attention, which skips a tile of KV cells only when every query row
    // of its 64-row tile is masked there: one tile holding the generating rows of N sequences
    // beside prompt rows must read every cell those sequences hold, for all 64 rows, in every
    // head. In a pool full of other conversations that tile took about a third of a chunked prompt
    // step (docs/benchmarks.md). Decoded alone, the few generating rows take the untiled kernel,
    // which skips masked cells one by one, and the prompt rows' tiles skip other sequences' cells.
    // Costs one more pass over the weights per such step; on when the build has no GPU backend (the
    // CUDA kernels were not measured), not with a draft model (its drafted rows stay with their
    // slot's row) and not for embeddings.
    bool split_steps_ = false;
    // A step's rows are decoded by one llama_decode call per stretch of whole ubatches that ends
    // with an output, whose outputs are sampled and sent before the next call (decode_rows): where
    // prompts arriving together make a batch of several ubatches, the prompts that end in its
    // first ubatches get their first token that much sooner, and the last ones as before. On a
    // CPU build (each ubatch is computed in turn, and nothing overlaps one call with the next),
    // with a unified pool (whose ubatches are n_ubatch rows in order, as the calls take them: the
    // same work, the same results), a model with a plain KV cache (not recurrent or hybrid, whose
    // ubatches are split by sequence), not with a draft model and not for embeddings.
    // LLAMA_ADDON_NO_EARLY_OUTPUTS in the environment turns it off (for comparisons).
    bool early_outputs_ = false;
    // Whether buffers for the prompt cache's expected saves are written ahead on the buffer thread
    // (HostBuffers): where the build has a GPU backend, or the machine has more hardware threads
    // than decoding uses. On the 2-core VM with -t 2 that thread took the cores from the decode
    // that runs meanwhile: with clients' defaults one stream's first token came 0.94-0.82x
    // llama-server's without it and 1.06-1.03x with it (two alternating runs each).
    bool prepare_saves_ = false;
    // Whether the build has a GPU or integrated-GPU backend device (the CUDA or Metal build on a
    // machine with such a device): the defaults that were measured on CPUs only do not apply there.
    static bool gpu_build();
    static constexpr int32_t kTiledAttentionRows = 64;  // GGML_FA_TILE_Q in ggml-cpu/common.h
    enum llama_pooling_type pooling_ = LLAMA_POOLING_TYPE_NONE;
    int32_t n_embd_out_ = 0;

    std::vector<Slot> slots_;
    std::unique_ptr<PromptCache> prompt_cache_;  // --cache-ram; null when off
    // -bs: the chains the context was created with (one per sequence), alive as long as it is.
    std::unique_ptr<InitialSamplers> initial_samplers_;
    std::deque<std::unique_ptr<CompletionTask>> waiting_;
    std::deque<SlotAction> actions_;   // slot actions waiting for their slot to be idle

    std::mutex inbox_mutex_;
    std::condition_variable inbox_cv_;
    std::vector<std::unique_ptr<CompletionTask>> inbox_;
    std::vector<int64_t> cancel_inbox_;
    std::vector<SlotAction> action_inbox_;
    // Requests the server has received and is preparing (announce()), not yet submitted: an idle
    // engine gathering a burst waits for them (gather_burst).
    int32_t announced_ = 0;
    bool stopping_ = false;

    std::mutex events_mutex_;
    std::vector<EngineEvent> events_;
    std::vector<SlotActionResult> action_results_;
    bool delivery_pending_ = false;
    Napi::ThreadSafeFunction tsfn_;
    bool tsfn_live_ = false;

    std::mutex summary_mutex_;
    std::vector<SlotSummary> summaries_;
    EngineCounters counters_;

    // JS thread only
    std::unordered_set<int64_t> js_active_;  // queued tasks (and slot actions) that have not ended
    std::unordered_map<int64_t, Napi::Promise::Deferred> action_promises_;
    // Tasks being prepared by a TaskSubmitWorker; cancel() sets the flag, and the task is then
    // never queued.
    std::unordered_map<int64_t, std::shared_ptr<std::atomic<bool>>> preparing_;
    bool tsfn_referenced_ = false;
    int64_t next_task_id_ = 1;
    std::thread thread_;
    bool disposed_ = false;
};

}  // namespace addon
