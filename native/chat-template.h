#pragma once
// Chat templates: llama.cpp's common Jinja engine applied to a list of messages.
// Thread: JS thread (rendering a template is fast and allocation-bound).
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "llama.h"

struct common_chat_templates;

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
    ChatTemplates(const llama_model * model, const std::string & override_source);
    ~ChatTemplates();

    std::string source() const;
    bool has_model_template() const;
    // Throws std::runtime_error with the template engine's message on failure.
    std::string apply(const std::vector<ChatMessage> & messages, const ChatTemplateOptions & options) const;

private:
    common_chat_templates * templates_ = nullptr;
    bool explicit_ = false;
};

}  // namespace addon
