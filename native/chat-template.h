#pragma once
// Chat templates: llama.cpp's common chat layer (common/chat.h) renders a conversation, with its
// tools and tool history, into a prompt and returns what the model's format needs for
// generation (grammar, lazy-grammar triggers, preserved tokens, extra stops, the parser of its
// output), as llama-server's oaicompat_chat_params_parse does.
// Thread: parsing inputs and building results on the JS thread; rendering (applyChatAsync) on a
// worker thread, as llama-server renders on its HTTP threads: on the JS thread a burst of agent
// requests paid each rendering one after another (docs/benchmarks.md, "Figures moved from code
// comments"). ChatTemplates::render is const and safe from several threads at once.
#include <napi.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common.h"
#include "llama.h"

struct common_chat_templates;
struct common_chat_templates_inputs;
struct common_chat_params;

namespace addon {

struct ChatMessage {
    std::string role;
    std::string content;
};

struct ChatTemplateOptions {
    bool add_generation_prompt = true;
    std::map<std::string, std::string> kwargs;  // chat_template_kwargs, values as JSON text
};

class ChatTemplates {
public:
    // Uses `override_source` when non-empty, else the model's own template (or chatml fallback).
    // Throws std::runtime_error with the Jinja parser's message when a template does not parse.
    ChatTemplates(const llama_model * model, const std::string & override_source);
    ~ChatTemplates();

    std::string source() const;
    bool has_model_template() const;
    // Throws std::runtime_error with the template engine's message on failure.
    std::string apply(const std::vector<ChatMessage> & messages, const ChatTemplateOptions & options) const;
    // The full chat layer: prompt, grammar, triggers, parser. Throws what llama.cpp throws.
    common_chat_params render(const common_chat_templates_inputs & inputs) const;
    const common_chat_templates * get() const { return templates_; }

private:
    common_chat_templates * templates_ = nullptr;
    bool explicit_ = false;
};

// The parsed templates of one model: its own, and the last override used (llama-server has one
// --chat-template per server, so requests that pass it do not parse it again).
// Shared pointers: a render in flight on a worker keeps the templates it started with, though a
// request with another override replaces them in the cache meanwhile.
struct ChatTemplateCache {
    std::shared_ptr<const ChatTemplates> own;
    std::string override_source;
    std::shared_ptr<const ChatTemplates> override_templates;
};

// Model.applyChat(inputs) (see ChatInputs in src/native/binding.ts) -> ChatParams, with the
// templates from `cache` (parsed on first use). Throws an
// Error with `code`: BAD_TOOLS (a tool's name or parameters), BAD_JSON (jsonSchema or a kwarg
// value that is not JSON), TEMPLATE_FAILED (the template did not parse or render, or llama.cpp
// refused the combination), with llama.cpp's message; TypeError for a malformed object.
Napi::Value apply_chat_js(Napi::Env env, const llama_model * model, ChatTemplateCache & cache, Napi::Value inputs);

class Model;
// Model.applyChatAsync(inputs) -> Promise<ChatParams>: the same, rendered on a worker thread.
// Malformed inputs throw at once, as apply_chat_js; a template that fails to render rejects with
// TEMPLATE_FAILED.
Napi::Value apply_chat_async_js(Napi::Env env, Model * model, Napi::Object model_obj, ChatTemplateCache & cache, Napi::Value inputs);

// Model.chatTemplateInfo(template?) -> { source, hasModelTemplate, caps, supportsEnableThinking }:
// what llama-server reports in /props and uses for defaults (parallel_tool_calls defaults to
// caps.supports_parallel_tool_calls). Errors as apply_chat_js.
Napi::Value chat_template_info_js(Napi::Env env, const llama_model * model, ChatTemplateCache & cache, Napi::Value override_source);

// The reasoning format named by a JS value (none when absent); TypeError for an unknown name.
common_reasoning_format reasoning_format_from_js(Napi::Env env, Napi::Value v);

// Throws an Error whose `code` property is `code`.

}  // namespace addon
