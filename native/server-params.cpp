#include "server-params.h"

#include <map>
#include <set>

#include "arg.h"
#include "build-info.h"
#include "download.h"
#include "errors-js.h"
#include "preset.h"
#include "chat.h"
#include "sampling.h"

#include <algorithm>

namespace addon {

Napi::FunctionReference ServerParams::constructor;

Napi::Function ServerParams::define(Napi::Env env) {
    Napi::Function fn = DefineClass(env, "ServerParams", {
        StaticMethod<&ServerParams::parse>("parse"),
        StaticMethod<&ServerParams::options>("options"),
        StaticMethod<&ServerParams::build_info>("buildInfo"),
        InstanceMethod<&ServerParams::js_values>("values"),
        InstanceMethod<&ServerParams::js_given>("given"),
        InstanceMethod<&ServerParams::js_router_models>("routerModels"),
    });
    constructor = Napi::Persistent(fn);
    constructor.SuppressDestruct();
    return fn;
}

ServerParams::ServerParams(const Napi::CallbackInfo & info) : Napi::ObjectWrap<ServerParams>(info) {
    if (info.Length() < 1 || !info[0].IsExternal()) {
        throw_coded(info.Env(), ErrorCode::INVALID_ARGUMENT, "ServerParams cannot be constructed directly; use ServerParams.parse(argv)");
    }
}

ServerParams & ServerParams::from_js(Napi::Env env, Napi::Value value) {
    if (!value.IsObject() || !value.As<Napi::Object>().InstanceOf(constructor.Value())) throw_coded(env, ErrorCode::INVALID_ARGUMENT, "expected a ServerParams");
    return *Unwrap(value.As<Napi::Object>());
}

static std::vector<std::string> string_array(Napi::Env env, Napi::Value v, const char * what) {
    if (!v.IsArray()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, std::string(what) + " must be an array of strings");
    Napi::Array arr = v.As<Napi::Array>();
    std::vector<std::string> out;
    for (uint32_t i = 0; i < arr.Length(); i++) {
        if (!arr.Get(i).IsString()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, std::string(what) + " must be an array of strings");
        out.push_back(arr.Get(i).As<Napi::String>().Utf8Value());
    }
    return out;
}

// parse(argv): argv[0] is the program name, as in main(). Throws (code BAD_ARGUMENTS) when
// llama.cpp's parser refuses the command line; it has printed why.
Napi::Value ServerParams::parse(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    std::vector<std::string> argv = string_array(env, info[0], "argv");
    Napi::Object obj = constructor.New({Napi::External<void>::New(env, nullptr)});
    ServerParams * self = Unwrap(obj);
    self->argv_ = argv;
    std::vector<char *> ptrs;
    for (auto & a : self->argv_) ptrs.push_back(a.data());
    ptrs.push_back(nullptr);
    if (!common_params_parse(static_cast<int>(argv.size()), ptrs.data(), self->params_, LLAMA_EXAMPLE_SERVER)) {
        throw_coded(env, ErrorCode::BAD_ARGUMENTS, "invalid command line (see the message above)");
    }
    // As llama-server right after parsing: --numa applies to the whole process.
    if (self->params_.numa != GGML_NUMA_STRATEGY_DISABLED) llama_numa_init(self->params_.numa);
    return obj;
}

static Napi::Array names_of(Napi::Env env, const std::vector<const char *> & names) {
    Napi::Array out = Napi::Array::New(env, names.size());
    for (size_t i = 0; i < names.size(); i++) out.Set(static_cast<uint32_t>(i), names[i]);
    return out;
}

// buildInfo(): llama.cpp's "b<build number>-<commit>", as llama-server's /props reports it.
Napi::Value ServerParams::build_info(const Napi::CallbackInfo & info) {
    return Napi::String::New(info.Env(), llama_build_info());
}

// options(): every option llama-server accepts, as its parser defines it.
Napi::Value ServerParams::options(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    common_params scratch;
    common_params_context ctx = common_params_parser_init(scratch, LLAMA_EXAMPLE_SERVER);
    Napi::Array out = Napi::Array::New(env);
    uint32_t n = 0;
    for (const common_arg & opt : ctx.options) {
        if (opt.is_preset_only) continue;
        Napi::Object o = Napi::Object::New(env);
        o.Set("names", names_of(env, opt.args));
        o.Set("negatedNames", names_of(env, opt.args_neg));
        o.Set("env", opt.env ? Napi::Value(Napi::String::New(env, opt.env)) : env.Null());
        o.Set("valueHint", opt.value_hint ? Napi::Value(Napi::String::New(env, opt.value_hint)) : env.Null());
        o.Set("help", opt.help);
        o.Set("sampling", opt.is_sampling);
        out.Set(n++, o);
    }
    return out;
}

// given(): the first name of every option set on the command line or through its environment
// variable, in command-line order, then those from the environment.
Napi::Value ServerParams::js_given(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    common_params scratch;
    common_params_context ctx = common_params_parser_init(scratch, LLAMA_EXAMPLE_SERVER);
    std::map<std::string, const common_arg *> by_name;
    for (const common_arg & opt : ctx.options) {
        for (const char * a : opt.args) by_name[a] = &opt;
        for (const char * a : opt.args_neg) by_name[a] = &opt;
    }
    std::vector<std::string> given;
    auto add = [&](const common_arg * opt) {
        std::string name = opt->args.empty() ? opt->args_neg[0] : opt->args[0];
        if (std::find(given.begin(), given.end(), name) == given.end()) given.push_back(name);
    };
    for (size_t i = 1; i < argv_.size(); i++) {
        std::string arg = argv_[i];
        if (arg.rfind("--", 0) == 0) std::replace(arg.begin(), arg.end(), '_', '-');
        auto it = by_name.find(arg);
        if (it == by_name.end()) continue;
        const common_arg * opt = it->second;
        add(opt);
        if (opt->handler_int || opt->handler_string) i += 1;
        else if (opt->handler_str_str) i += 2;
    }
    for (const common_arg & opt : ctx.options) {
        if (opt.has_value_from_env()) add(&opt);
    }
    Napi::Array out = Napi::Array::New(env, given.size());
    for (size_t i = 0; i < given.size(); i++) out.Set(static_cast<uint32_t>(i), given[i]);
    return out;
}

static Napi::Array strings(Napi::Env env, const std::vector<std::string> & v) {
    Napi::Array out = Napi::Array::New(env, v.size());
    for (size_t i = 0; i < v.size(); i++) out.Set(static_cast<uint32_t>(i), v[i]);
    return out;
}

// flat field mapping
static Napi::Object sampling_values(Napi::Env env, const common_params_sampling & s) {
    Napi::Object o = Napi::Object::New(env);
    o.Set("seed", static_cast<double>(s.seed));
    o.Set("nProbs", s.n_probs);
    o.Set("minKeep", s.min_keep);
    o.Set("topK", s.top_k);
    o.Set("topP", s.top_p);
    o.Set("minP", s.min_p);
    o.Set("xtcProbability", s.xtc_probability);
    o.Set("xtcThreshold", s.xtc_threshold);
    o.Set("typicalP", s.typ_p);
    o.Set("temperature", s.temp);
    o.Set("dynatempRange", s.dynatemp_range);
    o.Set("dynatempExponent", s.dynatemp_exponent);
    o.Set("repeatLastN", s.penalty_last_n);
    o.Set("repeatPenalty", s.penalty_repeat);
    o.Set("frequencyPenalty", s.penalty_freq);
    o.Set("presencePenalty", s.penalty_present);
    o.Set("dryMultiplier", s.dry_multiplier);
    o.Set("dryBase", s.dry_base);
    o.Set("dryAllowedLength", s.dry_allowed_length);
    o.Set("dryPenaltyLastN", s.dry_penalty_last_n);
    o.Set("drySequenceBreakers", strings(env, s.dry_sequence_breakers));
    o.Set("adaptiveTarget", s.adaptive_target);
    o.Set("adaptiveDecay", s.adaptive_decay);
    o.Set("mirostat", s.mirostat);
    o.Set("mirostatTau", s.mirostat_tau);
    o.Set("mirostatEta", s.mirostat_eta);
    o.Set("topNSigma", s.top_n_sigma);
    o.Set("ignoreEos", s.ignore_eos);
    o.Set("backendSampling", s.backend_sampling);
    o.Set("timingsPerToken", s.timing_per_token);
    std::vector<std::string> samplers;
    for (auto t : s.samplers) samplers.push_back(common_sampler_type_to_str(t));
    o.Set("samplers", strings(env, samplers));
    o.Set("grammar", s.grammar.grammar);
    Napi::Array bias = Napi::Array::New(env, s.logit_bias.size());
    for (size_t i = 0; i < s.logit_bias.size(); i++) {
        Napi::Array pair = Napi::Array::New(env, 2);
        pair.Set(0u, s.logit_bias[i].token);
        pair.Set(1u, s.logit_bias[i].bias);
        bias.Set(static_cast<uint32_t>(i), pair);
    }
    o.Set("logitBias", bias);
    o.Set("reasoningBudget", s.reasoning_budget_tokens);
    o.Set("reasoningBudgetMessage", s.reasoning_budget_message);
    return o;
}

// A flat field mapping (exempt from the function-length rule).
Napi::Value ServerParams::js_values(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    const common_params & p = params_;
    Napi::Object o = Napi::Object::New(env);
    o.Set("model", p.model.path);
    o.Set("mmproj", p.mmproj.path);
    o.Set("noMmproj", p.no_mmproj);
    o.Set("mmprojUseGpu", p.mmproj_use_gpu);
    // Models named by the hub or a URL: src/inference/download makes them local files before loading.
    o.Set("hfRepo", p.model.hf_repo);
    o.Set("hfFile", p.model.hf_file);
    o.Set("hfToken", p.hf_token);
    o.Set("modelUrl", p.model.url);
    o.Set("mmprojUrl", p.mmproj.url);
    o.Set("offline", p.offline);
    o.Set("draftHfRepo", p.speculative.draft.mparams.hf_repo);
    o.Set("draftModel", p.speculative.draft.mparams.path);
    std::vector<std::string> aliases(p.model_alias.begin(), p.model_alias.end());
    o.Set("aliases", strings(env, aliases));
    std::vector<std::string> tags(p.model_tags.begin(), p.model_tags.end());
    o.Set("tags", strings(env, tags));
    o.Set("hosts", strings(env, p.hostnames));
    o.Set("port", p.port);
    o.Set("reusePort", p.reuse_port);
    o.Set("apiKeys", strings(env, p.api_keys));
    o.Set("apiPrefix", p.api_prefix);
    o.Set("nParallel", p.n_parallel);
    o.Set("nCtx", p.n_ctx);
    o.Set("nBatch", p.n_batch);
    o.Set("nUbatch", p.n_ubatch);
    o.Set("nPredict", p.n_predict);
    o.Set("nKeep", p.n_keep);
    o.Set("threads", p.cpuparams.n_threads);
    o.Set("threadsBatch", p.cpuparams_batch.n_threads);
    o.Set("threadsHttp", p.n_threads_http);
    o.Set("nGpuLayers", p.n_gpu_layers);
    o.Set("flashAttn", static_cast<int>(p.flash_attn_type));
    o.Set("loadMode", static_cast<int>(p.load_mode));
    o.Set("ctxShift", p.ctx_shift);
    o.Set("kvUnified", p.kv_unified);
    o.Set("kvUnifiedPerSlot", p.kv_unified_per_slot);
    o.Set("swaFull", p.swa_full);
    o.Set("cacheReuse", p.n_cache_reuse);
    o.Set("cachePrompt", p.cache_prompt);
    o.Set("cacheRamMib", p.cache_ram_mib);
    o.Set("cacheIdleSlots", p.cache_idle_slots);
    o.Set("special", p.special);
    o.Set("cacheTypeK", ggml_type_name(p.cache_type_k));
    o.Set("cacheTypeV", ggml_type_name(p.cache_type_v));
    o.Set("slotSavePath", p.slot_save_path);
    o.Set("slotPromptSimilarity", p.slot_prompt_similarity);
    o.Set("endpointSlots", p.endpoint_slots);
    o.Set("endpointProps", p.endpoint_props);
    o.Set("endpointMetrics", p.endpoint_metrics);
    o.Set("corsOrigins", p.cors_origins);
    o.Set("corsMethods", p.cors_methods);
    o.Set("corsHeaders", p.cors_headers);
    o.Set("corsCredentials", p.cors_credentials);
    o.Set("timeoutRead", p.timeout_read);
    o.Set("timeoutWrite", p.timeout_write);
    o.Set("publicPath", p.public_path);
    o.Set("sslKeyFile", p.ssl_file_key);
    o.Set("sslCertFile", p.ssl_file_cert);
    o.Set("ssePingInterval", p.sse_ping_interval);
    o.Set("promptsLogDir", p.path_prompts_log_dir);
    o.Set("uiMcpProxy", p.ui_mcp_proxy);
    o.Set("serverTools", strings(env, p.server_tools));
    o.Set("serverToolsRuntime", p.server_tools_runtime);
    o.Set("mcpServersConfig", p.mcp_servers_config);
    o.Set("mcpServersJson", p.mcp_servers_json);
    o.Set("corsOriginsExplicit", p.cors_origins_explicit);
    o.Set("webui", p.ui);
    o.Set("chatTemplate", p.chat_template);
    o.Set("useJinja", p.use_jinja);
    o.Set("skipChatParsing", p.force_pure_content_parser);
    o.Set("enableChatTemplate", p.enable_chat_template);
    Napi::Object kwargs = Napi::Object::New(env);
    for (const auto & [k, v] : p.default_template_kwargs) kwargs.Set(k, v);
    o.Set("chatTemplateKwargs", kwargs);
    o.Set("reasoningFormat", common_reasoning_format_name(p.reasoning_format));
    o.Set("enableReasoning", p.enable_reasoning);
    o.Set("prefillAssistant", p.prefill_assistant);
    o.Set("sleepIdleSeconds", p.sleep_idle_seconds);
    o.Set("mediaPath", p.media_path);
    o.Set("verbosity", p.verbosity);
    o.Set("logJson", p.log_json);
    o.Set("embedding", p.embedding);
    o.Set("poolingType", static_cast<int>(p.pooling_type));
    o.Set("embdNormalize", p.embd_normalize);
    o.Set("antiprompt", strings(env, p.antiprompt));
    o.Set("spmInfill", p.spm_infill);
    Napi::Array loras = Napi::Array::New(env, p.lora_adapters.size());
    for (size_t i = 0; i < p.lora_adapters.size(); i++) {
        Napi::Object l = Napi::Object::New(env);
        l.Set("path", p.lora_adapters[i].path);
        l.Set("scale", p.lora_adapters[i].scale);
        loras.Set(static_cast<uint32_t>(i), l);
    }
    o.Set("loras", loras);
    o.Set("loraInitWithoutApply", p.lora_init_without_apply);
    o.Set("modelsDir", p.models_dir);
    o.Set("modelsPreset", p.models_preset);
    o.Set("modelsMax", p.models_max);
    o.Set("modelsAutoload", p.models_autoload);
    o.Set("sampling", sampling_values(env, p.sampling));
    return o;
}

// Router mode (llama-server's server_models::load_models, phase 1): the models of the HF cache,
// of --models-dir and of --models-preset, cascaded as there (the preset's [*] section under each,
// a preset over a same-named directory or cache model), with the router's own command line laid
// over every one. Options a child must not get (API keys, the router's flags, SSL, log file) and
// the model's host, port and alias (set per spawn) are left out of its args.

static void unset_router_reserved(common_preset & preset, bool model_args) {
    for (const char * env : {"LLAMA_ARG_LOG_FILE", "LLAMA_ARG_SSL_KEY_FILE", "LLAMA_ARG_SSL_CERT_FILE", "LLAMA_API_KEY",
                             "LLAMA_ARG_API_KEY_FILE", "LLAMA_ARG_MODELS_DIR", "LLAMA_ARG_MODELS_MAX", "LLAMA_ARG_MODELS_PRESET",
                             "LLAMA_ARG_MODELS_AUTOLOAD", "LLAMA_ARG_HOST", "LLAMA_ARG_PORT"}) {
        preset.unset_option(env);
    }
    if (model_args) {
        for (const char * env : {"LLAMA_ARG_MODEL", "LLAMA_ARG_MMPROJ", "LLAMA_ARG_ALIAS", "LLAMA_ARG_HF_REPO"}) preset.unset_option(env);
    }
}

static std::vector<std::string> comma_list(const common_preset & preset, const char * env) {
    std::vector<std::string> out;
    std::string value;
    if (!preset.get_option(env, value)) return out;
    for (auto & item : string_split<std::string>(value, ',')) {
        item = string_strip(item);
        if (!item.empty() && std::find(out.begin(), out.end(), item) == out.end()) out.push_back(item);
    }
    std::sort(out.begin(), out.end());
    return out;
}

// A model named by its HF repo (a cache model, or hf-repo in a preset) becomes its cached local
// files, found offline as llama-server finds them: this server loads local files only. Left as it
// is when the cache does not hold it (the child then refuses -hf and the model fails to load).
static void resolve_cached_files(const common_preset_context & ctx, common_preset & preset) {
    std::string repo;
    if (!preset.get_option("LLAMA_ARG_HF_REPO", repo) || repo.empty()) return;
    try {
        common_params p;
        preset.apply_to_params(p, {"LLAMA_ARG_HF_REPO", "LLAMA_ARG_HF_FILE", "LLAMA_ARG_MMPROJ", "LLAMA_ARG_NO_MMPROJ"});
        p.offline = true;
        common_models_handler handler = common_models_handler_init(p, LLAMA_EXAMPLE_SERVER);
        common_models_handler_apply(handler, p);
        if (p.model.path.empty()) return;
        preset.unset_option("LLAMA_ARG_HF_REPO");
        preset.unset_option("LLAMA_ARG_HF_FILE");
        preset.set_option(ctx, "LLAMA_ARG_MODEL", p.model.path);
        if (!p.mmproj.path.empty() && !p.no_mmproj) preset.set_option(ctx, "LLAMA_ARG_MMPROJ", p.mmproj.path);
    } catch (const std::exception &) {
        // not cached: left as it is
    }
}

static Napi::Object router_model(Napi::Env env, const common_preset_context & ctx, common_preset preset, const char * source, bool hidden) {
    Napi::Object o = Napi::Object::New(env);
    o.Set("name", preset.name);
    o.Set("source", source);
    o.Set("hidden", hidden);
    o.Set("aliases", strings(env, comma_list(preset, "LLAMA_ARG_ALIAS")));
    o.Set("tags", strings(env, comma_list(preset, "LLAMA_ARG_TAGS")));
    std::string value;
    int stop_timeout = 10;
    if (preset.get_option(COMMON_ARG_PRESET_STOP_TIMEOUT, value)) {
        try { stop_timeout = std::stoi(value); } catch (...) { stop_timeout = 10; }
    }
    o.Set("stopTimeout", stop_timeout);
    o.Set("loadOnStartup", preset.get_option(COMMON_ARG_PRESET_LOAD_ON_STARTUP, value) && common_arg_utils::is_truthy(value));
    // The router unloads an idle model itself (its child exits), so a child never sleeps.
    int sleep_idle = -1;
    for (auto it = preset.options.begin(); it != preset.options.end(); ++it) {
        const auto & names = it->first.args;
        if (std::find_if(names.begin(), names.end(), [](const char * a) { return std::string(a) == "--sleep-idle-seconds"; }) == names.end()) continue;
        try { sleep_idle = std::stoi(it->second); } catch (...) { sleep_idle = -1; }
        preset.options.erase(it);
        break;
    }
    o.Set("sleepIdleSeconds", sleep_idle);
    unset_router_reserved(preset, false);
    common_preset shown = preset;
    shown.unset_option("LLAMA_ARG_ALIAS");
    shown.unset_option("LLAMA_ARG_TAGS");
    o.Set("presetIni", shown.to_ini());
    resolve_cached_files(ctx, preset);
    preset.unset_option("LLAMA_ARG_ALIAS");
    std::string mmproj;
    preset.get_option("LLAMA_ARG_MMPROJ", mmproj);
    o.Set("mmproj", mmproj);
    o.Set("args", strings(env, preset.to_args("")));
    return o;
}

// The cache models whose file a preset with dedup-cache-models already serves (hidden from the
// listing, still usable), as llama-server's load_models finds them.
static std::set<std::string> deduplicated_cache_models(const common_presets & custom, const common_presets & cached,
                                                      const std::map<std::string, const char *> & source) {
    std::set<std::string> paths;
    auto add = [&paths](const common_preset & preset, const char * repo_key, const char * file_key) {
        std::string repo;
        if (!preset.get_option(repo_key, repo) || repo.empty()) return;
        std::string file;
        preset.get_option(file_key, file);
        std::string path = common_download_resolve_path(repo, file);
        if (!path.empty()) paths.insert(path);
    };
    for (const auto & [name, preset] : custom) {
        std::string value;
        if (!preset.get_option(COMMON_ARG_PRESET_DEDUP_CACHE_MODELS, value) || !common_arg_utils::is_truthy(value)) continue;
        add(preset, "LLAMA_ARG_HF_REPO", "LLAMA_ARG_HF_FILE");
        add(preset, "LLAMA_ARG_SPEC_DRAFT_HF_REPO", "LLAMA_ARG_SPEC_DRAFT_MODEL");
    }
    std::set<std::string> hidden;
    if (paths.empty()) return hidden;
    for (const auto & [name, preset] : cached) {
        if (std::string(source.at(name)) != "cache") continue;
        std::string path = common_download_resolve_path(name);
        if (!path.empty() && paths.count(path)) hidden.insert(name);
    }
    return hidden;
}

// routerModels(): every model of router mode, sorted by name; throws (BAD_ARGUMENTS) when a
// preset file or models directory cannot be read, as llama-server refuses to start then.
Napi::Value ServerParams::js_router_models(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    const common_params & p = params_;
    try {
        common_preset_context ctx(LLAMA_EXAMPLE_SERVER);
        std::vector<char *> ptrs;
        std::vector<std::string> argv = argv_;
        for (auto & a : argv) ptrs.push_back(a.data());
        common_preset base = ctx.load_from_args(static_cast<int>(ptrs.size()), ptrs.data());
        unset_router_reserved(base, true);
        common_presets cached = ctx.load_from_cache();
        common_presets local;
        if (!p.models_dir.empty()) local = ctx.load_from_models_dir(p.models_dir);
        common_preset global;
        common_presets custom;
        if (!p.models_preset.empty()) custom = ctx.load_from_ini(p.models_preset, global);
        cached = ctx.cascade(global, cached);
        local = ctx.cascade(global, local);
        custom = ctx.cascade(global, custom);
        common_presets all;
        std::map<std::string, const char *> source;
        for (const auto & [name, preset] : cached) { all[name] = preset; source[name] = "cache"; }
        for (const auto & [name, preset] : local) { all[name] = preset; source[name] = "models_dir"; }
        for (const auto & [name, preset] : custom) {
            if (all.count(name)) all[name].merge(preset);
            else all[name] = preset;
            source[name] = "preset";
        }
        std::set<std::string> hidden = deduplicated_cache_models(custom, cached, source);
        Napi::Array out = Napi::Array::New(env);
        uint32_t n = 0;
        for (auto & [name, preset] : all) {
            preset.merge(base);
            out.Set(n++, router_model(env, ctx, preset, source[name], hidden.count(name) > 0));
        }
        return out;
    } catch (const Napi::Error &) {
        throw;
    } catch (const std::exception & e) {
        throw_coded(env, ErrorCode::BAD_ARGUMENTS, e.what());
    }
    return env.Undefined();
}

}  // namespace addon
