// Speculation: the draft model and the drafters (common/speculative), driven as llama-server's
// server-context.cpp drives them. Engine thread only, after create().
#include "speculation.h"

#include <algorithm>

#include "errors.h"
#include "log.h"

namespace addon {

static bool has_type(const common_params_speculative & p, common_speculative_type t) {
    return std::find(p.types.begin(), p.types.end(), t) != p.types.end();
}

int32_t Speculation::configured_n_max(const common_params & server) {
    return common_speculative_n_max(&server.speculative);
}

// The types whose drafters read the target's hidden states (a model-specific head): this server
// runs none of them.
static void refuse_unsupported_types(const common_params_speculative & p) {
    for (auto t : {COMMON_SPECULATIVE_TYPE_DRAFT_EAGLE3, COMMON_SPECULATIVE_TYPE_DRAFT_MTP, COMMON_SPECULATIVE_TYPE_DRAFT_DFLASH,
                   COMMON_SPECULATIVE_TYPE_DRAFT_DSPARK}) {
        if (has_type(p, t)) {
            throw Refusal(ErrorCode::NOT_SUPPORTED, "--spec-type " + common_speculative_type_to_str(t) +
                                                        " is not supported by this server (draft-simple and the ngram-* types are)");
        }
    }
}

std::unique_ptr<Speculation> Speculation::create(const common_params & server, llama_model * model, llama_context * ctx_tgt,
                                                 int32_t n_parallel, int32_t n_threads, int32_t n_threads_batch) {
    const common_params_speculative & sp = server.speculative;
    const bool any_type = std::any_of(sp.types.begin(), sp.types.end(), [](common_speculative_type t) { return t != COMMON_SPECULATIVE_TYPE_NONE; });
    if (!any_type && !sp.has_dft() && !sp.has_synth()) return nullptr;
    refuse_unsupported_types(sp);
    const bool wants_draft = has_type(sp, COMMON_SPECULATIVE_TYPE_DRAFT_SIMPLE);
    if (wants_draft && !sp.has_dft()) {
        throw Refusal(ErrorCode::NOT_SUPPORTED, "--spec-type draft-simple needs a draft model (-md FNAME)");
    }
    std::unique_ptr<Speculation> self(new Speculation());
    self->params_ = sp;

    if (sp.has_dft()) {
        // As llama-server: the draft model's context copies the target's parameters, with the
        // draft's own flags (-ngld, -devd, -ctkd/-ctvd, -td, -otd) over them.
        common_params base = server;
        base.n_parallel = n_parallel;
        base.n_batch = llama_n_batch(ctx_tgt);
        base.n_ubatch = llama_n_ubatch(ctx_tgt);
        base.kv_unified = true;
        base.cpuparams.n_threads = n_threads;
        base.cpuparams_batch.n_threads = n_threads_batch;
        common_params params_dft = common_base_params_to_speculative(base);
        log_capture_begin();
        self->init_ = common_speculative_init_from_params(params_dft, model, ctx_tgt);
        std::string errors = log_capture_end();
        if (!self->init_->model() || !self->init_->context()) {
            throw Refusal(ErrorCode::LOAD_FAILED, "failed to load the draft model '" + sp.draft.mparams.path + "'" +
                                                      (errors.empty() ? std::string() : ": " + errors));
        }
        self->ctx_dft_ = self->init_->context();
        self->params_.draft.ctx_tgt = ctx_tgt;
        self->params_.draft.ctx_dft = self->ctx_dft_;
    }
    // (This decodes two tokens into the fresh context, then clears it.)
    if (any_type && common_context_can_seq_rm(ctx_tgt) != COMMON_CONTEXT_SEQ_RM_TYPE_PART) {
        throw Refusal(ErrorCode::NOT_SUPPORTED,
                      "speculative decoding needs a context that can drop the tail of a sequence (this model's memory cannot)");
    }
    try {
        self->spec_.reset(common_speculative_init(self->params_, static_cast<uint32_t>(n_parallel)));
    } catch (const std::exception & e) {
        // The draft model's vocabulary is not the target's (llama-server logs this and runs without
        // speculation; a server asked to speculate refuses to start instead).
        throw Refusal(ErrorCode::NOT_SUPPORTED, "the draft model '" + sp.draft.mparams.path +
                                                    "' cannot draft for this model (it must share the model's vocabulary): " + e.what());
    }
    if (!self->spec_) {
        if (self->params_.has_synth()) {
            throw Refusal(ErrorCode::NOT_SUPPORTED, "synthetic acceptance (--spec-synth-*) needs a --spec-type");
        }
        return nullptr;
    }
    self->n_max_ = common_speculative_n_max(self->spec_.get());
    self->seqs_.resize(n_parallel);
    self->counters_.accepted_per_pos = std::vector<std::atomic<uint64_t>>(std::max(0, self->n_max_));
    if (self->ctx_dft_) {
        self->catchup_size_ = static_cast<int32_t>(llama_n_batch(self->ctx_dft_));
        self->catchup_ = llama_batch_init(self->catchup_size_, 0, 1);
    }
    return self;
}

Speculation::~Speculation() {
    spec_.reset();
    if (catchup_.token) llama_batch_free(catchup_);
    init_.reset();
}

std::string Speculation::types() const {
    return common_speculative_type_name_str(params_.types);
}

void Speculation::start(int32_t seq, bool allowed, uint32_t seed) {
    SeqDraft & s = seqs_[seq];
    s.allowed = allowed;
    s.draft.clear();
    s.i_batch.clear();
    s.n_drafted = 0;
    s.n_accepted = 0;
    s.synth_rng.seed(seed);
}

static void text_tokens(const std::vector<llama_token> & cache, llama_tokens & out) {
    out.clear();
    for (llama_token t : cache) if (t != LLAMA_TOKEN_NULL) out.push_back(t);
}

void Speculation::begin(int32_t seq, const std::vector<llama_token> & cache) {
    SeqDraft & s = seqs_[seq];
    if (!s.allowed) return;
    text_tokens(cache, s.history);
    common_speculative_begin(spec_.get(), seq, s.history);
}

// Brings the draft context's copy of `seq` to the target's first `upto` cache tokens: drops what
// differs, decodes what is missing. False (the task stops speculating) when it cannot: an image in
// the cache, or a failed decode.
bool Speculation::sync_draft(int32_t seq, const std::vector<llama_token> & cache, size_t upto) {
    SeqDraft & s = seqs_[seq];
    size_t common = 0;
    const size_t n = std::min(s.dft_cache.size(), upto);
    while (common < n && s.dft_cache[common] == cache[common]) common++;
    if (common < s.dft_cache.size()) {
        llama_memory_seq_rm(llama_get_memory(ctx_dft_), seq, static_cast<llama_pos>(common), -1);
        s.dft_cache.resize(common);
    }
    while (s.dft_cache.size() < upto) {
        common_batch_clear(catchup_);
        while (s.dft_cache.size() < upto && catchup_.n_tokens < catchup_size_) {
            const llama_token t = cache[s.dft_cache.size()];
            if (t == LLAMA_TOKEN_NULL) return false;
            common_batch_add(catchup_, t, static_cast<llama_pos>(s.dft_cache.size()), {seq}, false);
            s.dft_cache.push_back(t);
        }
        if (llama_decode(ctx_dft_, catchup_) != 0) {
            llama_memory_seq_rm(llama_get_memory(ctx_dft_), seq, -1, -1);
            s.dft_cache.clear();
            return false;
        }
    }
    return true;
}

void Speculation::draft(const std::vector<DraftRequest> & requests) {
    std::vector<int32_t> drafting;
    for (const DraftRequest & r : requests) {
        SeqDraft & s = seqs_[r.seq];
        s.draft.clear();
        common_speculative_get_draft_params(spec_.get(), r.seq).drafting = false;
        if (!s.allowed || r.n_max <= 0) continue;
        if (ctx_dft_ && !sync_draft(r.seq, *r.cache, r.cache->size())) {
            s.allowed = false;
            continue;
        }
        text_tokens(*r.cache, s.history);
        common_speculative_get_draft_params(spec_.get(), r.seq) = {
            /* .drafting = */ true,
            /* .n_max    = */ r.n_max,
            /* .pos0     = */ static_cast<llama_pos>(r.cache->size()),
            /* .id_last  = */ r.sampled,
            /* .prompt   = */ &s.history,
            /* .result   = */ &s.draft,
        };
        drafting.push_back(r.seq);
    }
    if (drafting.empty()) return;
    common_speculative_draft(spec_.get());
    if (!ctx_dft_) return;
    // The draft model decoded the sampled and drafted tokens; as llama-server, it forgets them and
    // decodes them again with the target's batch (process).
    for (int32_t seq : drafting) {
        llama_memory_seq_rm(llama_get_memory(ctx_dft_), seq, static_cast<llama_pos>(seqs_[seq].dft_cache.size()), -1);
    }
}

bool Speculation::process(const llama_batch & batch, const std::vector<const std::vector<llama_token> *> & caches) {
    if (!ctx_dft_) return common_speculative_process(spec_.get(), batch);
    // Each sequence's first position in the batch, and whether the draft context can follow it.
    std::vector<llama_pos> first(seqs_.size(), -1);
    std::vector<int32_t> count(seqs_.size(), 0);
    for (int32_t i = 0; i < batch.n_tokens; i++) {
        const llama_seq_id seq = batch.seq_id[i][0];
        if (first[seq] < 0) first[seq] = batch.pos[i];
        count[seq]++;
    }
    bool all = true;
    for (size_t seq = 0; seq < seqs_.size(); seq++) {
        // A sequence the target shortened elsewhere (a slot's cache dropped or restored) gives
        // its room back in the draft context too.
        if (first[seq] < 0) {
            if (seqs_[seq].dft_cache.size() > caches[seq]->size()) truncate(static_cast<int32_t>(seq), caches[seq]->size());
            continue;
        }
        const auto & cache = *caches[seq];
        bool text = std::none_of(cache.end() - count[seq], cache.end(), [](llama_token t) { return t == LLAMA_TOKEN_NULL; });
        if (!text || !sync_draft(static_cast<int32_t>(seq), cache, static_cast<size_t>(first[seq]))) {
            first[seq] = -1;
            all = false;
        }
    }
    llama_batch view = batch;
    std::vector<llama_token> tokens;
    std::vector<llama_pos> pos;
    std::vector<int32_t> n_seq;
    std::vector<llama_seq_id *> seq_ids;
    if (!all) {
        // Only the sequences the draft context follows.
        for (int32_t i = 0; i < batch.n_tokens; i++) {
            if (first[batch.seq_id[i][0]] < 0) continue;
            tokens.push_back(batch.token[i]);
            pos.push_back(batch.pos[i]);
            n_seq.push_back(1);
            seq_ids.push_back(batch.seq_id[i]);
        }
        if (tokens.empty()) return true;
        view = {static_cast<int32_t>(tokens.size()), tokens.data(), nullptr, pos.data(), n_seq.data(), seq_ids.data(), nullptr};
    }
    if (!common_speculative_process(spec_.get(), view)) {
        for (size_t seq = 0; seq < seqs_.size(); seq++) {
            if (first[seq] < 0) continue;
            llama_memory_seq_rm(llama_get_memory(ctx_dft_), static_cast<llama_seq_id>(seq), -1, -1);
            seqs_[seq].dft_cache.clear();
        }
        return false;
    }
    for (size_t seq = 0; seq < seqs_.size(); seq++) {
        if (first[seq] < 0) continue;
        const auto & cache = *caches[seq];
        seqs_[seq].dft_cache.assign(cache.begin(), cache.begin() + first[seq] + count[seq]);
    }
    return true;
}

// llama-server's synthetic verification (--spec-synth-*, for benchmarks): each drafted token is
// accepted with its configured probability instead of by comparison with the target's.
static std::vector<llama_token> sample_and_accept_synth(common_sampler * smpl, llama_context * ctx, const std::vector<int32_t> & idxs,
                                                        const llama_tokens & draft, const std::vector<double> & probs, std::mt19937 & rng) {
    std::vector<llama_token> result;
    const llama_vocab * vocab = llama_model_get_vocab(llama_get_model(ctx));
    std::uniform_real_distribution<double> dist(0.0, 1.0);
    for (size_t i = 0; i < draft.size(); ++i) {
        const llama_token id = common_sampler_sample(smpl, ctx, idxs[i]);
        const bool accept = dist(rng) < probs[i];
        if (accept && !llama_vocab_is_eog(vocab, draft[i])) {
            common_sampler_accept(smpl, draft[i], false);
            result.push_back(draft[i]);
            continue;
        }
        common_sampler_accept(smpl, id, true);
        result.push_back(id);
        return result;
    }
    const llama_token id = common_sampler_sample(smpl, ctx, idxs[draft.size()]);
    common_sampler_accept(smpl, id, true);
    result.push_back(id);
    return result;
}

std::vector<llama_token> Speculation::verify(int32_t seq, common_sampler * smpl, llama_context * ctx_tgt) {
    SeqDraft & s = seqs_[seq];
    const auto & synth = common_speculative_get_synth_probs(spec_.get());
    std::vector<llama_token> ids = synth.empty() ? common_sampler_sample_and_accept_n(smpl, ctx_tgt, s.i_batch, s.draft)
                                                 : sample_and_accept_synth(smpl, ctx_tgt, s.i_batch, s.draft, synth, s.synth_rng);
    const size_t n_accepted = ids.size() - 1;
    common_speculative_accept(spec_.get(), seq, static_cast<uint16_t>(n_accepted));
    s.n_drafted += static_cast<int32_t>(s.draft.size());
    s.n_accepted += static_cast<int32_t>(n_accepted);
    counters_.draft_tokens += s.draft.size();
    counters_.accepted += n_accepted;
    counters_.verif_steps++;
    for (size_t i = 0; i < n_accepted && i < counters_.accepted_per_pos.size(); i++) counters_.accepted_per_pos[i]++;
    s.draft.clear();
    s.i_batch.clear();
    return ids;
}

void Speculation::truncate(int32_t seq, size_t n) {
    SeqDraft & s = seqs_[seq];
    if (!ctx_dft_ || s.dft_cache.size() <= n) return;
    llama_memory_seq_rm(llama_get_memory(ctx_dft_), seq, static_cast<llama_pos>(n), -1);
    s.dft_cache.resize(n);
}

void Speculation::shift(int32_t seq, int32_t n_keep, int32_t n_discard, int32_t n_past) {
    SeqDraft & s = seqs_[seq];
    if (!ctx_dft_) return;
    llama_memory_t mem = llama_get_memory(ctx_dft_);
    if (static_cast<int32_t>(s.dft_cache.size()) != n_past || !llama_memory_seq_rm(mem, seq, n_keep, n_keep + n_discard)) {
        // Not in step with the target: the next sync decodes the sequence again.
        llama_memory_seq_rm(mem, seq, -1, -1);
        s.dft_cache.clear();
        return;
    }
    llama_memory_seq_add(mem, seq, n_keep + n_discard, n_past, -n_discard);
    s.dft_cache.erase(s.dft_cache.begin() + n_keep, s.dft_cache.begin() + n_keep + n_discard);
}

}  // namespace addon
