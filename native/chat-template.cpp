#include "chat-template.h"

#include <stdexcept>

#include "chat.h"

namespace addon {

ChatTemplates::ChatTemplates(const llama_model * model, const std::string & override_source) {
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

}  // namespace addon
