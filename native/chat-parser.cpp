#include "chat-parser.h"
#include "errors-js.h"

#include "chat-template.h"

namespace addon {

Napi::Function ChatParser::define(Napi::Env env) {
    return DefineClass(env, "ChatParser", {
        InstanceMethod<&ChatParser::parse>("parse"),
        StaticMethod<&ChatParser::diff>("diff"),
    });
}

static bool format_from_name(const std::string & name, common_chat_format & out) {
    for (int f = 0; f < COMMON_CHAT_FORMAT_COUNT; f++) {
        if (name == common_chat_format_name(static_cast<common_chat_format>(f))) {
            out = static_cast<common_chat_format>(f);
            return true;
        }
    }
    return false;
}

static bool read_flag(Napi::Object o, const char * key, bool fallback) {
    Napi::Value v = o.Get(key);
    return v.IsBoolean() ? v.As<Napi::Boolean>().Value() : fallback;
}

ChatParser::ChatParser(const Napi::CallbackInfo & info) : Napi::ObjectWrap<ChatParser>(info) {
    Napi::Env env = info.Env();
    if (info.Length() < 1 || !info[0].IsObject()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, "new ChatParser(options): options must be an object");
    Napi::Object o = info[0].As<Napi::Object>();
    if (!o.Get("format").IsString()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, "ChatParser: format must be a string");
    std::string format = o.Get("format").As<Napi::String>();
    if (!format_from_name(format, params_.format)) throw_coded(env, ErrorCode::BAD_PARSER, "unknown chat format: " + format);
    if (o.Get("generationPrompt").IsString()) params_.generation_prompt = o.Get("generationPrompt").As<Napi::String>();
    params_.reasoning_format = reasoning_format_from_js(env, o.Get("reasoningFormat"));
    params_.reasoning_in_content = read_flag(o, "reasoningInContent", false);
    params_.parse_tool_calls = read_flag(o, "parseToolCalls", true);
    params_.is_continuation = read_flag(o, "isContinuation", false);
    params_.echo = read_flag(o, "echo", false);
    Napi::Value parser = o.Get("parser");
    if (parser.IsString() && !parser.As<Napi::String>().Utf8Value().empty()) {
        try {
            params_.parser.load(parser.As<Napi::String>().Utf8Value());
        } catch (const std::exception & e) {
            throw_coded(env, ErrorCode::BAD_PARSER, std::string("chat parser does not load: ") + e.what());
        }
    }
}

static Napi::Object tool_call_to_js(Napi::Env env, const common_chat_tool_call & c) {
    Napi::Object o = Napi::Object::New(env);
    o.Set("id", c.id);
    o.Set("name", c.name);
    o.Set("arguments", c.arguments);
    return o;
}

static Napi::Object message_to_js(Napi::Env env, const common_chat_msg & msg) {
    Napi::Object o = Napi::Object::New(env);
    o.Set("content", msg.content);
    o.Set("reasoningContent", msg.reasoning_content);
    Napi::Array calls = Napi::Array::New(env, msg.tool_calls.size());
    for (size_t i = 0; i < msg.tool_calls.size(); i++) calls.Set(static_cast<uint32_t>(i), tool_call_to_js(env, msg.tool_calls[i]));
    o.Set("toolCalls", calls);
    return o;
}

Napi::Value ChatParser::parse(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    if (info.Length() < 1 || !info[0].IsString()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, "parse(text, isPartial): text must be a string");
    const bool is_partial = info.Length() > 1 && info[1].ToBoolean();
    common_chat_msg msg;
    try {
        msg = common_chat_parse(info[0].As<Napi::String>().Utf8Value(), is_partial, params_);
    } catch (const std::exception & e) {
        throw_coded(env, ErrorCode::PARSE_FAILED, e.what());
    }
    return message_to_js(env, msg);
}

static std::string optional_string(Napi::Object o, const char * key) {
    Napi::Value v = o.Get(key);
    return v.IsString() ? v.As<Napi::String>().Utf8Value() : std::string();
}

// The inverse of message_to_js, for diff().
static common_chat_msg message_from_js(Napi::Env env, Napi::Value v, const char * name) {
    if (!v.IsObject()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, std::string("diff(previous, current): ") + name + " must be a parsed message");
    Napi::Object o = v.As<Napi::Object>();
    common_chat_msg msg;
    msg.role = "assistant";
    msg.content = optional_string(o, "content");
    msg.reasoning_content = optional_string(o, "reasoningContent");
    Napi::Value calls = o.Get("toolCalls");
    if (calls.IsArray()) {
        Napi::Array arr = calls.As<Napi::Array>();
        for (uint32_t i = 0; i < arr.Length(); i++) {
            if (!arr.Get(i).IsObject()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, std::string(name) + ".toolCalls entries must be objects");
            Napi::Object c = arr.Get(i).As<Napi::Object>();
            msg.tool_calls.push_back({optional_string(c, "name"), optional_string(c, "arguments"), optional_string(c, "id")});
        }
    }
    return msg;
}

Napi::Value ChatParser::diff(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    common_chat_msg previous = message_from_js(env, info.Length() > 0 ? info[0] : env.Undefined(), "previous");
    common_chat_msg current = message_from_js(env, info.Length() > 1 ? info[1] : env.Undefined(), "current");
    std::vector<common_chat_msg_diff> diffs;
    try {
        diffs = common_chat_msg_diff::compute_diffs(previous, current);
    } catch (const std::exception & e) {
        throw_coded(env, ErrorCode::INVALID_DIFF, e.what());
    }
    Napi::Array out = Napi::Array::New(env, diffs.size());
    for (size_t i = 0; i < diffs.size(); i++) {
        const auto & d = diffs[i];
        Napi::Object jd = Napi::Object::New(env);
        jd.Set("reasoningContentDelta", d.reasoning_content_delta);
        jd.Set("contentDelta", d.content_delta);
        const bool has_call = d.tool_call_index != std::string::npos;
        jd.Set("toolCallIndex", has_call ? Napi::Number::New(env, static_cast<double>(d.tool_call_index)) : env.Null());
        jd.Set("toolCallDelta", has_call ? Napi::Value(tool_call_to_js(env, d.tool_call_delta)) : env.Null());
        out.Set(static_cast<uint32_t>(i), jd);
    }
    return out;
}

}  // namespace addon
