#include "chat-template.h"
#include "errors-js.h"
#include "model-worker.h"

#include <chrono>
#include <cmath>
#include <stdexcept>

#include "chat.h"

namespace addon {

ChatTemplates::ChatTemplates(const llama_model * model, const std::string & override_source) {
    if (!override_source.empty() && override_source != "chatml") {
        // common_chat_templates_init logs the parser's message and rethrows a sliced
        // std::exception; parsing here first keeps the message for the caller.
        common_chat_template check(override_source, "", "");
    }
    auto ptr = common_chat_templates_init(model, override_source);
    templates_ = ptr.release();
    explicit_ = common_chat_templates_was_explicit(templates_);
}

ChatTemplates::~ChatTemplates() {
    if (templates_) common_chat_templates_free(templates_);
}

std::string ChatTemplates::source() const { return common_chat_templates_source(templates_); }

bool ChatTemplates::has_model_template() const { return explicit_; }

std::string ChatTemplates::apply(const std::vector<ChatMessage> & messages, const ChatTemplateOptions & options) const {
    common_chat_templates_inputs inputs;
    inputs.use_jinja = true;
    inputs.add_generation_prompt = options.add_generation_prompt;
    inputs.chat_template_kwargs = options.kwargs;
    for (const auto & m : messages) {
        common_chat_msg msg;
        msg.role = m.role;
        msg.content = m.content;
        inputs.messages.push_back(std::move(msg));
    }
    return common_chat_templates_apply(templates_, inputs).prompt;
}

common_chat_params ChatTemplates::render(const common_chat_templates_inputs & inputs) const {
    return common_chat_templates_apply(templates_, inputs);
}

// ---------------------------------------------------------------------------------------------
// ChatInputs (JS) -> common_chat_templates_inputs

static std::string string_field(Napi::Env env, Napi::Object o, const char * key, const std::string & where, bool required = false) {
    Napi::Value v = o.Get(key);
    if (v.IsString()) return v.As<Napi::String>();
    if (v.IsUndefined() || v.IsNull()) {
        if (required) throw_coded(env, ErrorCode::INVALID_ARGUMENT, where + "." + key + " must be a string");
        return "";
    }
    throw_coded(env, ErrorCode::INVALID_ARGUMENT, where + "." + key + " must be a string");
}

static void read_content(Napi::Env env, Napi::Value v, const std::string & where, common_chat_msg & msg) {
    if (v.IsUndefined() || v.IsNull()) return;
    if (v.IsString()) {
        msg.content = v.As<Napi::String>();
        return;
    }
    if (!v.IsArray()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, where + ".content must be a string or an array of parts");
    Napi::Array parts = v.As<Napi::Array>();
    for (uint32_t i = 0; i < parts.Length(); i++) {
        std::string at = where + ".content[" + std::to_string(i) + "]";
        if (!parts.Get(i).IsObject()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, at + " must be an object");
        Napi::Object p = parts.Get(i).As<Napi::Object>();
        common_chat_msg_content_part part;
        part.type = string_field(env, p, "type", at, true);
        if (part.type != "text" && part.type != "media_marker") throw_coded(env, ErrorCode::INVALID_ARGUMENT, at + ".type must be text or media_marker");
        part.text = string_field(env, p, "text", at, true);
        msg.content_parts.push_back(std::move(part));
    }
}

static common_chat_msg message_from_js(Napi::Env env, Napi::Value v, uint32_t index) {
    std::string where = "messages[" + std::to_string(index) + "]";
    if (!v.IsObject()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, where + " must be an object");
    Napi::Object o = v.As<Napi::Object>();
    common_chat_msg msg;
    msg.role = string_field(env, o, "role", where, true);
    read_content(env, o.Get("content"), where, msg);
    msg.reasoning_content = string_field(env, o, "reasoningContent", where);
    msg.tool_call_id = string_field(env, o, "toolCallId", where);
    msg.tool_name = string_field(env, o, "toolName", where);
    Napi::Value calls = o.Get("toolCalls");
    if (calls.IsArray()) {
        Napi::Array arr = calls.As<Napi::Array>();
        for (uint32_t i = 0; i < arr.Length(); i++) {
            std::string at = where + ".toolCalls[" + std::to_string(i) + "]";
            if (!arr.Get(i).IsObject()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, at + " must be an object");
            Napi::Object c = arr.Get(i).As<Napi::Object>();
            common_chat_tool_call call;
            call.id = string_field(env, c, "id", at);
            call.name = string_field(env, c, "name", at, true);
            call.arguments = string_field(env, c, "arguments", at, true);
            msg.tool_calls.push_back(std::move(call));
        }
    } else if (!calls.IsUndefined() && !calls.IsNull()) {
        throw_coded(env, ErrorCode::INVALID_ARGUMENT, where + ".toolCalls must be an array");
    }
    return msg;
}

// A tool as llama-server's common_chat_tools_parse_oaicompat makes it; parameters default to {}.
static common_chat_tool tool_from_js(Napi::Env env, Napi::Value v, uint32_t index) {
    std::string where = "tools[" + std::to_string(index) + "]";
    if (!v.IsObject()) throw_coded(env, ErrorCode::BAD_TOOLS, where + " must be an object");
    Napi::Object o = v.As<Napi::Object>();
    common_chat_tool tool;
    if (!o.Get("name").IsString() || o.Get("name").As<Napi::String>().Utf8Value().empty()) {
        throw_coded(env, ErrorCode::BAD_TOOLS, where + ".name must be a non-empty string");
    }
    tool.name = o.Get("name").As<Napi::String>();
    Napi::Value desc = o.Get("description");
    if (desc.IsString()) tool.description = desc.As<Napi::String>();
    else if (!desc.IsUndefined() && !desc.IsNull()) throw_coded(env, ErrorCode::BAD_TOOLS, where + ".description must be a string");
    Napi::Value params = o.Get("parameters");
    tool.parameters = "{}";
    if (params.IsString()) {
        tool.parameters = params.As<Napi::String>();
        common_json parsed;
        try {
            parsed = common_json::parse(tool.parameters);
        } catch (const std::exception & e) {
            throw_coded(env, ErrorCode::BAD_TOOLS, where + ".parameters is not valid JSON: " + e.what());
        }
        if (!parsed.is_object()) throw_coded(env, ErrorCode::BAD_TOOLS, where + ".parameters must be a JSON object (a JSON schema)");
    } else if (!params.IsUndefined() && !params.IsNull()) {
        throw_coded(env, ErrorCode::BAD_TOOLS, where + ".parameters must be JSON text");
    }
    return tool;
}

static common_chat_tool_choice tool_choice_from_js(Napi::Env env, Napi::Value v) {
    if (v.IsUndefined() || v.IsNull()) return COMMON_CHAT_TOOL_CHOICE_AUTO;
    std::string s = v.IsString() ? v.As<Napi::String>().Utf8Value() : "";
    if (s == "auto") return COMMON_CHAT_TOOL_CHOICE_AUTO;
    if (s == "none") return COMMON_CHAT_TOOL_CHOICE_NONE;
    if (s == "required") return COMMON_CHAT_TOOL_CHOICE_REQUIRED;
    throw_coded(env, ErrorCode::INVALID_ARGUMENT, "toolChoice must be auto, none or required");
}

static common_chat_continuation continuation_from_js(Napi::Env env, Napi::Value v) {
    if (v.IsUndefined() || v.IsNull()) return COMMON_CHAT_CONTINUATION_NONE;
    std::string s = v.IsString() ? v.As<Napi::String>().Utf8Value() : "";
    if (s == "none") return COMMON_CHAT_CONTINUATION_NONE;
    if (s == "auto") return COMMON_CHAT_CONTINUATION_AUTO;
    if (s == "reasoning") return COMMON_CHAT_CONTINUATION_REASONING;
    if (s == "content") return COMMON_CHAT_CONTINUATION_CONTENT;
    throw_coded(env, ErrorCode::INVALID_ARGUMENT, "continueFinalMessage must be none, auto, reasoning or content");
}

common_reasoning_format reasoning_format_from_js(Napi::Env env, Napi::Value v) {
    if (v.IsUndefined() || v.IsNull()) return COMMON_REASONING_FORMAT_NONE;
    std::string s = v.IsString() ? v.As<Napi::String>().Utf8Value() : "";
    if (s == "none") return COMMON_REASONING_FORMAT_NONE;
    if (s == "auto") return COMMON_REASONING_FORMAT_AUTO;
    if (s == "deepseek") return COMMON_REASONING_FORMAT_DEEPSEEK;
    if (s == "deepseek-legacy") return COMMON_REASONING_FORMAT_DEEPSEEK_LEGACY;
    throw_coded(env, ErrorCode::INVALID_ARGUMENT, "reasoningFormat must be none, auto, deepseek or deepseek-legacy");
}

static void check_json(Napi::Env env, const std::string & text, const std::string & what) {
    try {
        (void) common_json::parse(text);
    } catch (const std::exception & e) {
        throw_coded(env, ErrorCode::BAD_JSON, what + " is not valid JSON: " + e.what());
    }
}

// Flat field mapping of ChatInputs.
static common_chat_templates_inputs chat_inputs_from_js(Napi::Env env, Napi::Object o) {
    common_chat_templates_inputs in;
    in.use_jinja = true;
    if (!o.Get("messages").IsArray()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, "applyChat(inputs): inputs.messages must be an array");
    Napi::Array messages = o.Get("messages").As<Napi::Array>();
    for (uint32_t i = 0; i < messages.Length(); i++) in.messages.push_back(message_from_js(env, messages.Get(i), i));
    Napi::Value tools = o.Get("tools");
    if (tools.IsArray()) {
        Napi::Array arr = tools.As<Napi::Array>();
        for (uint32_t i = 0; i < arr.Length(); i++) in.tools.push_back(tool_from_js(env, arr.Get(i), i));
    } else if (!tools.IsUndefined() && !tools.IsNull()) {
        throw_coded(env, ErrorCode::BAD_TOOLS, "tools must be an array");
    }
    in.tool_choice = tool_choice_from_js(env, o.Get("toolChoice"));
    if (o.Get("parallelToolCalls").IsBoolean()) in.parallel_tool_calls = o.Get("parallelToolCalls").As<Napi::Boolean>();
    if (o.Get("addGenerationPrompt").IsBoolean()) in.add_generation_prompt = o.Get("addGenerationPrompt").As<Napi::Boolean>();
    in.continue_final_message = continuation_from_js(env, o.Get("continueFinalMessage"));
    in.reasoning_format = reasoning_format_from_js(env, o.Get("reasoningFormat"));
    if (o.Get("enableThinking").IsBoolean()) in.enable_thinking = o.Get("enableThinking").As<Napi::Boolean>();
    if (o.Get("forcePureContent").IsBoolean()) in.force_pure_content = o.Get("forcePureContent").As<Napi::Boolean>();
    // --no-jinja: llama.cpp's built-in templates by name (llama_chat_apply_template), as llama-server.
    if (o.Get("useJinja").IsBoolean()) in.use_jinja = o.Get("useJinja").As<Napi::Boolean>();
    in.json_schema = string_field(env, o, "jsonSchema", "inputs");
    if (!in.json_schema.empty()) check_json(env, in.json_schema, "jsonSchema");
    in.grammar = string_field(env, o, "grammar", "inputs");
    Napi::Value kwargs = o.Get("kwargs");
    if (kwargs.IsObject()) {
        Napi::Object kw = kwargs.As<Napi::Object>();
        Napi::Array keys = kw.GetPropertyNames();
        for (uint32_t i = 0; i < keys.Length(); i++) {
            std::string key = keys.Get(i).As<Napi::String>();
            Napi::Value val = kw.Get(key);
            if (!val.IsString()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, "kwargs." + key + " must be JSON text");
            std::string text = val.As<Napi::String>();
            check_json(env, text, "kwargs." + key);
            in.chat_template_kwargs[key] = text;
        }
    }
    Napi::Value now = o.Get("now");
    if (now.IsNumber() && std::isfinite(now.As<Napi::Number>().DoubleValue())) {
        auto ms = std::chrono::milliseconds(static_cast<int64_t>(now.As<Napi::Number>().DoubleValue()));
        in.now = std::chrono::system_clock::time_point(std::chrono::duration_cast<std::chrono::system_clock::duration>(ms));
    }
    return in;
}

// ---------------------------------------------------------------------------------------------
// common_chat_params -> ChatParams (JS)

static const char * trigger_type_name(common_grammar_trigger_type t) {
    switch (t) {
        case COMMON_GRAMMAR_TRIGGER_TYPE_TOKEN: return "token";
        case COMMON_GRAMMAR_TRIGGER_TYPE_WORD: return "word";
        case COMMON_GRAMMAR_TRIGGER_TYPE_PATTERN: return "pattern";
        case COMMON_GRAMMAR_TRIGGER_TYPE_PATTERN_FULL: return "patternFull";
    }
    return "word";
}

static Napi::Array strings_to_js(Napi::Env env, const std::vector<std::string> & v) {
    Napi::Array out = Napi::Array::New(env, v.size());
    for (size_t i = 0; i < v.size(); i++) out.Set(static_cast<uint32_t>(i), v[i]);
    return out;
}

static Napi::Object chat_params_to_js(Napi::Env env, const common_chat_params & p) {
    Napi::Object o = Napi::Object::New(env);
    o.Set("prompt", p.prompt);
    o.Set("format", common_chat_format_name(p.format));
    o.Set("grammar", p.grammar);
    o.Set("grammarLazy", p.grammar_lazy);
    Napi::Array triggers = Napi::Array::New(env, p.grammar_triggers.size());
    for (size_t i = 0; i < p.grammar_triggers.size(); i++) {
        const auto & t = p.grammar_triggers[i];
        Napi::Object jt = Napi::Object::New(env);
        jt.Set("type", trigger_type_name(t.type));
        jt.Set("value", t.value);
        jt.Set("token", t.token == LLAMA_TOKEN_NULL ? env.Null() : Napi::Number::New(env, t.token));
        triggers.Set(static_cast<uint32_t>(i), jt);
    }
    o.Set("grammarTriggers", triggers);
    o.Set("preservedTokens", strings_to_js(env, p.preserved_tokens));
    o.Set("additionalStops", strings_to_js(env, p.additional_stops));
    o.Set("generationPrompt", p.generation_prompt);
    o.Set("supportsThinking", p.supports_thinking);
    o.Set("thinkingStartTag", p.thinking_start_tag);
    o.Set("thinkingEndTags", strings_to_js(env, p.thinking_end_tags));
    o.Set("parser", p.parser);
    return o;
}

// The model's templates, or the override's; each parsed once while it stays the one in use.
static std::shared_ptr<const ChatTemplates> templates_for(Napi::Env env, const llama_model * model, ChatTemplateCache & cache,
                                                         const std::string & override_source) {
    try {
        if (override_source.empty()) {
            if (!cache.own) cache.own = std::make_shared<const ChatTemplates>(model, "");
            return cache.own;
        }
        if (!cache.override_templates || cache.override_source != override_source) {
            cache.override_templates.reset();
            cache.override_templates = std::make_shared<const ChatTemplates>(model, override_source);
            cache.override_source = override_source;
        }
        return cache.override_templates;
    } catch (const std::exception & e) {
        throw_coded(env, ErrorCode::TEMPLATE_FAILED, std::string("chat template failed to parse: ") + e.what());
    }
}

Napi::Value chat_template_info_js(Napi::Env env, const llama_model * model, ChatTemplateCache & cache, Napi::Value override_source) {
    if (!override_source.IsUndefined() && !override_source.IsString()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, "chatTemplateInfo(template?): template must be a string");
    std::shared_ptr<const ChatTemplates> templates = templates_for(env, model, cache, override_source.IsString() ? override_source.As<Napi::String>().Utf8Value() : "");
    Napi::Object o = Napi::Object::New(env);
    o.Set("source", templates->source());
    o.Set("hasModelTemplate", templates->has_model_template());
    Napi::Object caps = Napi::Object::New(env);
    for (const auto & [name, value] : common_chat_templates_get_caps(templates->get())) caps.Set(name, value);
    o.Set("caps", caps);
    try {
        o.Set("supportsEnableThinking", common_chat_templates_support_enable_thinking(templates->get()));
    } catch (const std::exception & e) {
        throw_coded(env, ErrorCode::TEMPLATE_FAILED, std::string("chat template failed: ") + e.what());
    }
    return o;
}

// An applyChat call's inputs and templates, read on the JS thread, to render anywhere.
struct ChatRender {
    common_chat_templates_inputs inputs;
    std::shared_ptr<const ChatTemplates> templates;
};

static ChatRender chat_render_from_js(Napi::Env env, const llama_model * model, ChatTemplateCache & cache, Napi::Value value) {
    if (!value.IsObject()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, "applyChat(inputs): inputs must be an object");
    Napi::Object o = value.As<Napi::Object>();
    ChatRender r;
    r.inputs = chat_inputs_from_js(env, o);
    r.templates = templates_for(env, model, cache, string_field(env, o, "template", "inputs"));
    return r;
}

static const char * kRenderFailed = "chat template failed: ";

Napi::Value apply_chat_js(Napi::Env env, const llama_model * model, ChatTemplateCache & cache, Napi::Value value) {
    ChatRender r = chat_render_from_js(env, model, cache, value);
    common_chat_params params;
    try {
        params = r.templates->render(r.inputs);
    } catch (const std::exception & e) {
        throw_coded(env, ErrorCode::TEMPLATE_FAILED, std::string(kRenderFailed) + e.what());
    }
    return chat_params_to_js(env, params);
}

class ChatRenderWorker : public ModelWorker {
public:
    ChatRenderWorker(Napi::Env env, Model * model, Napi::Object model_obj, ChatRender render)
        : ModelWorker(env, model, model_obj), render_(std::move(render)) {}
    void Execute() override {
        try {
            params_ = render_.templates->render(render_.inputs);
        } catch (const std::exception & e) {
            fail(ErrorCode::TEMPLATE_FAILED, std::string(kRenderFailed) + e.what());
        }
    }
    Napi::Value result(Napi::Env env) override { return chat_params_to_js(env, params_); }

private:
    ChatRender render_;
    common_chat_params params_;
};

Napi::Value apply_chat_async_js(Napi::Env env, Model * model, Napi::Object model_obj, ChatTemplateCache & cache, Napi::Value value) {
    auto * worker = new ChatRenderWorker(env, model, model_obj, chat_render_from_js(env, model->get(), cache, value));
    worker->Queue();
    return worker->promise();
}

}  // namespace addon
