#include "sampler.h"

#include <cmath>

#include "errors-js.h"
#include "json-schema-to-grammar.h"
#include "json.h"
#include "sampling.h"

namespace addon {

template <typename T>
static void read_number(Napi::Object o, const char * key, T & out) {
    Napi::Value v = o.Get(key);
    if (v.IsNumber()) out = static_cast<T>(v.As<Napi::Number>().DoubleValue());
}

static void read_bool(Napi::Object o, const char * key, bool & out) {
    Napi::Value v = o.Get(key);
    if (v.IsBoolean()) out = v.As<Napi::Boolean>();
}

static std::vector<std::string> read_strings(Napi::Env env, Napi::Value v, const char * key) {
    std::vector<std::string> out;
    if (!v.IsArray()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, std::string(key) + " must be an array of strings");
    Napi::Array arr = v.As<Napi::Array>();
    for (uint32_t i = 0; i < arr.Length(); i++) {
        Napi::Value item = arr.Get(i);
        if (!item.IsString()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, std::string(key) + " must be an array of strings");
        out.push_back(item.As<Napi::String>());
    }
    return out;
}

static const char * trigger_types[] = {"token", "word", "pattern", "patternFull"};

// The chat layer's part of the sampling parameters, converted to token ids as llama-server's
// request schema does (server-schema.cpp): preserved tokens that are one token each; a trigger
// word that is one token becomes a token trigger and must be preserved; generation prompt and
// reasoning-budget tags as given.
static void chat_sampling_from_js(Napi::Env env, Napi::Object o, const llama_vocab * vocab, common_params_sampling & p) {
    read_bool(o, "grammarLazy", p.grammar_lazy);
    if (o.Get("generationPrompt").IsString()) p.generation_prompt = o.Get("generationPrompt").As<Napi::String>();
    if (o.Get("preservedTokens").IsArray()) {
        for (const auto & text : read_strings(env, o.Get("preservedTokens"), "preservedTokens")) {
            auto ids = common_tokenize(vocab, text, false, true);
            if (ids.size() == 1) p.preserved_tokens.insert(ids[0]);
        }
    }
    Napi::Value triggers = o.Get("grammarTriggers");
    if (triggers.IsArray()) {
        Napi::Array arr = triggers.As<Napi::Array>();
        for (uint32_t i = 0; i < arr.Length(); i++) {
            Napi::Value v = arr.Get(i);
            if (!v.IsObject() || !v.As<Napi::Object>().Get("type").IsString() || !v.As<Napi::Object>().Get("value").IsString()) {
                throw_coded(env, ErrorCode::INVALID_ARGUMENT, "grammarTriggers entries must be { type, value, token? }");
            }
            Napi::Object t = v.As<Napi::Object>();
            std::string type = t.Get("type").As<Napi::String>();
            common_grammar_trigger trigger;
            trigger.value = t.Get("value").As<Napi::String>();
            int found = -1;
            for (int k = 0; k < 4; k++) if (type == trigger_types[k]) found = k;
            if (found < 0) throw_coded(env, ErrorCode::INVALID_ARGUMENT, "grammarTriggers type must be token, word, pattern or patternFull");
            trigger.type = static_cast<common_grammar_trigger_type>(found);
            if (trigger.type == COMMON_GRAMMAR_TRIGGER_TYPE_WORD) {
                auto ids = common_tokenize(vocab, trigger.value, false, true);
                if (ids.size() == 1) {
                    if (p.preserved_tokens.count(ids[0]) == 0) {
                        throw_coded(env, ErrorCode::BAD_SAMPLING, "invalid sampling parameters: grammar trigger word should be marked as preserved token: " + trigger.value);
                    }
                    trigger.type = COMMON_GRAMMAR_TRIGGER_TYPE_TOKEN;
                    trigger.token = ids[0];
                }
            } else if (trigger.type == COMMON_GRAMMAR_TRIGGER_TYPE_TOKEN) {
                if (!t.Get("token").IsNumber()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, "a token trigger needs its token id");
                trigger.token = t.Get("token").As<Napi::Number>().Int32Value();
            }
            p.grammar_triggers.push_back(std::move(trigger));
        }
    }
    if (p.grammar_lazy && p.grammar_triggers.empty()) throw_coded(env, ErrorCode::BAD_SAMPLING, "invalid sampling parameters: no triggers set for lazy grammar");

    read_number(o, "reasoningBudgetTokens", p.reasoning_budget_tokens);
    read_bool(o, "reasoningControl", p.reasoning_control);
    if (o.Get("reasoningBudgetStartTag").IsString()) {
        p.reasoning_budget_start = common_tokenize(vocab, o.Get("reasoningBudgetStartTag").As<Napi::String>().Utf8Value(), false, true);
    }
    if (o.Get("reasoningBudgetEndTags").IsArray()) {
        for (const auto & tag : read_strings(env, o.Get("reasoningBudgetEndTags"), "reasoningBudgetEndTags")) {
            if (!tag.empty()) p.reasoning_budget_end.push_back(common_tokenize(vocab, tag, false, true));
        }
    }
    if (!p.reasoning_budget_end.empty()) {
        llama_tokens forced = p.reasoning_budget_end.front();
        if (o.Get("reasoningBudgetMessage").IsString()) {
            auto message = common_tokenize(vocab, o.Get("reasoningBudgetMessage").As<Napi::String>().Utf8Value(), false, true);
            forced.insert(forced.begin(), message.begin(), message.end());
        }
        p.reasoning_budget_forced = std::move(forced);
    }
}

void sampling_params_from_js(Napi::Env env, Napi::Object o, const llama_model * model, int32_t n_ctx_seq,
                             const std::vector<llama_token> & eog_tokens, common_params_sampling & p) {
    double seed = -1;
    read_number(o, "seed", seed);
    // As llama-server's uint32 seed: -1 (= LLAMA_DEFAULT_SEED) is random, other values wrap to 32 bits.
    p.seed = !std::isfinite(seed) ? LLAMA_DEFAULT_SEED : static_cast<uint32_t>(static_cast<int64_t>(seed));
    read_number(o, "temperature", p.temp);
    read_number(o, "dynatempRange", p.dynatemp_range);
    read_number(o, "dynatempExponent", p.dynatemp_exponent);
    read_number(o, "topK", p.top_k);
    read_number(o, "topP", p.top_p);
    read_number(o, "minP", p.min_p);
    read_number(o, "typicalP", p.typ_p);
    read_number(o, "xtcProbability", p.xtc_probability);
    read_number(o, "xtcThreshold", p.xtc_threshold);
    read_number(o, "topNSigma", p.top_n_sigma);
    read_number(o, "repeatPenalty", p.penalty_repeat);
    read_number(o, "repeatLastN", p.penalty_last_n);
    read_number(o, "frequencyPenalty", p.penalty_freq);
    read_number(o, "presencePenalty", p.penalty_present);
    read_number(o, "dryMultiplier", p.dry_multiplier);
    read_number(o, "dryBase", p.dry_base);
    read_number(o, "dryAllowedLength", p.dry_allowed_length);
    read_number(o, "dryPenaltyLastN", p.dry_penalty_last_n);
    read_number(o, "mirostat", p.mirostat);
    read_number(o, "mirostatTau", p.mirostat_tau);
    read_number(o, "mirostatEta", p.mirostat_eta);
    read_number(o, "adaptiveTarget", p.adaptive_target);
    read_number(o, "adaptiveDecay", p.adaptive_decay);
    read_number(o, "minKeep", p.min_keep);
    read_number(o, "nProbs", p.n_probs);
    read_bool(o, "ignoreEos", p.ignore_eos);
    read_bool(o, "backendSampling", p.backend_sampling);
    p.no_perf = true;
    if (p.penalty_last_n == -1) p.penalty_last_n = n_ctx_seq;
    if (p.dry_penalty_last_n == -1) p.dry_penalty_last_n = n_ctx_seq;

    if (o.Get("drySequenceBreakers").IsArray()) {
        p.dry_sequence_breakers = read_strings(env, o.Get("drySequenceBreakers"), "drySequenceBreakers");
    }
    if (o.Get("samplers").IsArray()) {
        p.samplers = common_sampler_types_from_names(read_strings(env, o.Get("samplers"), "samplers"));
    }
    Napi::Value grammar = o.Get("grammar");
    if (grammar.IsString() && grammar.As<Napi::String>().Utf8Value().size() > 0) {
        bool from_schema = o.Get("grammarFromSchema").ToBoolean();
        common_grammar_type type = from_schema ? COMMON_GRAMMAR_TYPE_OUTPUT_FORMAT : COMMON_GRAMMAR_TYPE_USER;
        if (o.Get("grammarToolCalls").ToBoolean()) type = COMMON_GRAMMAR_TYPE_TOOL_CALLS;
        p.grammar = common_grammar(type, grammar.As<Napi::String>().Utf8Value());
    }

    const llama_vocab * vocab = llama_model_get_vocab(model);
    chat_sampling_from_js(env, o, vocab, p);
    const int32_t n_vocab = llama_vocab_n_tokens(vocab);
    p.logit_bias.clear();
    Napi::Value bias = o.Get("logitBias");
    if (bias.IsArray()) {
        Napi::Array arr = bias.As<Napi::Array>();
        for (uint32_t i = 0; i < arr.Length(); i++) {
            Napi::Value pair = arr.Get(i);
            if (!pair.IsArray() || pair.As<Napi::Array>().Length() != 2) throw_coded(env, ErrorCode::INVALID_ARGUMENT, "logitBias entries must be [token, bias] pairs");
            double tok = pair.As<Napi::Array>().Get(0u).ToNumber().DoubleValue();
            double b = pair.As<Napi::Array>().Get(1u).ToNumber().DoubleValue();
            if (!(tok >= 0 && tok < n_vocab)) throw Refusal(ErrorCode::TOKEN_OUT_OF_RANGE, "logitBias token out of range");
            p.logit_bias.push_back({static_cast<llama_token>(tok), static_cast<float>(b)});
        }
    }
    if (p.ignore_eos) {
        for (llama_token t : eog_tokens) p.logit_bias.push_back({t, -INFINITY});
    }
}

common_sampler * sampler_create(const llama_model * model, common_params_sampling & params) {
    common_sampler * smpl = nullptr;
    try {
        smpl = common_sampler_init(model, params);
    } catch (const std::exception & e) {
        throw Refusal(ErrorCode::BAD_SAMPLING, std::string("invalid sampling parameters: ") + e.what());
    }
    if (!smpl) throw Refusal(ErrorCode::BAD_SAMPLING, "invalid sampling parameters: the sampler could not be created");
    return smpl;
}

Napi::Value json_schema_to_grammar_js(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    if (info.Length() < 1 || !info[0].IsString()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, "jsonSchemaToGrammar(schemaJson)");
    try {
        common_json schema = common_json::parse(info[0].As<Napi::String>().Utf8Value());
        return Napi::String::New(env, json_schema_to_grammar(schema));
    } catch (const std::exception & e) {
        throw_coded(env, ErrorCode::BAD_SCHEMA, std::string("invalid JSON schema: ") + e.what());
    }
}

}  // namespace addon
