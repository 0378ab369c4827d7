#pragma once
// Speculation: llama-server's speculative decoding for one Engine, through llama.cpp's
// common/speculative. The drafters are the ones --spec-type names: a draft model (draft-simple,
// with -md: its own context, sharing the target's vocabulary) and the n-gram drafters that need no
// model. Each step, every generating slot that may speculate gets one draft; the target model
// verifies it in the shared batch (the slot's sampled token, then the drafted ones, each with its
// logits), and the slot keeps the drafted tokens its own sampler would have chosen, plus the one
// it samples after them. So greedy output is the output without speculation.
//
// Threads: created on the engine's creation worker (create), then used by the engine thread only;
// the counters are atomics read by the JS thread.
// Ownership: owns the draft model and its context (common_speculative_init_result) and the
// common_speculative state. The draft context reads the target context (ctx_other), so it must be
// destroyed first: the Engine frees its Speculation before its context.
#include <atomic>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common.h"
#include "sampling.h"
#include "speculative.h"

namespace addon {

// llama-server's /metrics counters: spec_decode_num_draft_tokens_total, _accepted_tokens_total,
// _drafts_total (verification steps), and accepted tokens per draft position.
struct SpeculationCounters {
    std::atomic<uint64_t> draft_tokens{0};
    std::atomic<uint64_t> accepted{0};
    std::atomic<uint64_t> verif_steps{0};
    std::vector<std::atomic<uint64_t>> accepted_per_pos;  // sized once, at creation
};

// One sequence's speculative state (seq_id == slot id).
struct SeqDraft {
    llama_tokens draft;            // drafted tokens following the slot's sampled token, this step
    std::vector<int32_t> i_batch;  // batch rows of the sampled token and of each drafted token
    llama_tokens history;          // the sequence's text tokens, as the drafters read them
    llama_tokens dft_cache;        // tokens whose K/V is in the draft context for this sequence
    bool allowed = false;          // the running task speculates (not with images or probabilities)
    std::mt19937 synth_rng;        // synthetic acceptance (--spec-synth-*): seeded per task
    int32_t n_drafted = 0;         // the running task's drafted tokens
    int32_t n_accepted = 0;        // ... and those accepted
};

// What the engine asks a draft for: the slot's sequence, its cache (tokens in the target context)
// and the token sampled last (not in the cache yet), and the longest draft that fits.
struct DraftRequest {
    int32_t seq;
    const std::vector<llama_token> * cache;
    llama_token sampled;
    int32_t n_max;
};

class Speculation {
public:
    // What `server`'s speculative flags ask for, for a target context of n_parallel sequences
    // (n_threads: the engine's). nullptr when they ask for none (no --spec-type, or -md without
    // draft-simple: llama-server loads such a draft model and leaves it unused). Throws Refusal
    // when they cannot be honoured: a draft model that does not load or whose vocabulary is not
    // the target's, a type this server does not run.
    static std::unique_ptr<Speculation> create(const common_params & server, llama_model * model, llama_context * ctx_tgt,
                                               int32_t n_parallel, int32_t n_threads, int32_t n_threads_batch);
    // The longest draft `server`'s flags allow (0: no speculation); sizes the target's outputs.
    static int32_t configured_n_max(const common_params & server);

    Speculation(const Speculation &) = delete;
    Speculation & operator=(const Speculation &) = delete;
    ~Speculation();

    int32_t n_max() const { return n_max_; }
    std::string types() const;

    // A task starts in slot `seq`; `allowed`: it may speculate. Resets its counts.
    void start(int32_t seq, bool allowed, uint32_t seed);
    // The prompt of slot `seq` is decoded: the drafters learn it (common_speculative_begin).
    void begin(int32_t seq, const std::vector<llama_token> & cache);
    // Drafts for every request at once (common_speculative_draft); results in seq(i).draft.
    void draft(const std::vector<DraftRequest> & requests);
    // After the target decoded `batch`: the draft model decodes it too, as llama-server does, once
    // each sequence's draft context holds the target's tokens before the batch (`caches[seq]`,
    // whose tail the batch added). False when the draft context failed.
    bool process(const llama_batch & batch, const std::vector<const std::vector<llama_token> *> & caches);
    // The target's verdict on slot `seq`'s draft: the drafted tokens its sampler accepts, then the
    // token it samples after them (at least one token). Counts them; clears the draft.
    std::vector<llama_token> verify(int32_t seq, common_sampler * smpl, llama_context * ctx_tgt);
    // The target keeps positions [0, n) of `seq`: so does the draft context.
    void truncate(int32_t seq, size_t n);
    // The target's context shift of `seq` (positions [n_keep, n_keep + n_discard) dropped, the rest
    // moved down), mirrored on the draft context.
    void shift(int32_t seq, int32_t n_keep, int32_t n_discard, int32_t n_past);

    SeqDraft & seq(int32_t id) { return seqs_[id]; }
    SpeculationCounters & counters() { return counters_; }

private:
    Speculation() = default;
    bool sync_draft(int32_t seq, const std::vector<llama_token> & cache, size_t upto);

    common_speculative_init_result_ptr init_;  // the draft model and its context (draft-simple)
    llama_context * ctx_dft_ = nullptr;
    common_params_speculative params_;
    common_speculative_ptr spec_;
    int32_t n_max_ = 0;
    std::vector<SeqDraft> seqs_;
    llama_batch catchup_{};                     // draft-context catch-up batches
    int32_t catchup_size_ = 0;
    SpeculationCounters counters_;
};

// The engine thread's steps of speculative decoding (speculation-steps.cpp), as llama-server's
// update_slots/post_decode: drafts are made before the batch is built and ride in it after each
// slot's sampled token, and the draft model decodes every batch the target decodes. The target's
// verdict on a drafted slot is the scheduler's (Scheduler::verify_draft).
struct LoraGroup;
struct Slot;
// A task speculates when it generates text token by token with no image and no probabilities
// (llama-server reports no probabilities for drafted tokens; here such a task simply does not draft).
void speculation_start(Speculation & spec, const Slot & slot);
// One draft per generating slot of the group that may speculate.
void speculation_make_drafts(Speculation & spec, std::vector<Slot> & slots, const LoraGroup & group, int32_t n_batch);
// The slot's drafted tokens after its sampled token (already in the batch at row i_batch).
void speculation_add_draft_tokens(Speculation & spec, Slot & slot, llama_batch & batch);
// The draft model decodes the batch the target just decoded.
void speculation_process_batch(Speculation & spec, const llama_batch & batch, const std::vector<Slot> & slots);

}  // namespace addon
