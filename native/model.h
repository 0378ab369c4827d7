#pragma once
// Model: a loaded GGUF model (llama_model) and its vocabulary.
// Ownership: the JS object owns the llama_model; every Engine holds a reference to its Model's
// JS object, so the weights outlive the contexts built on them. dispose() is idempotent and
// refuses while engines are still using the model.
// Threads: loading runs on a worker thread (Model.load); every other method runs on the JS
// thread and is cheap (tokenization of ordinary prompts, metadata).
#include <napi.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "llama.h"

namespace addon {

struct ChatTemplateCache;

class Model : public Napi::ObjectWrap<Model> {
public:
    static Napi::Function define(Napi::Env env);
    static Napi::FunctionReference constructor;

    explicit Model(const Napi::CallbackInfo & info);
    ~Model() override;

    llama_model * get() const { return model_; }
    const llama_vocab * vocab() const { return vocab_; }
    // Every end-of-generation token (llama_vocab_is_eog), found once at load: ignore_eos biases
    // them all (as llama-server's logit_bias_eog), instead of a scan of the vocabulary on the JS
    // thread per request (docs/benchmarks.md, "Figures moved from code comments").
    const std::vector<llama_token> & eog_tokens() const { return eog_tokens_; }
    std::string path() const { return path_; }

    // Engines register themselves so that dispose() cannot free weights they use.
    void retain() { users_++; }
    void release() { users_--; }

    // The live Model behind a JS value; throws a TypeError for anything else and an Error for a
    // disposed model.
    static Model * from_js(Napi::Env env, Napi::Value value);

    std::vector<llama_token> tokenize(const std::string & text, bool add_special, bool parse_special) const;
    std::string piece(llama_token token, bool special) const;

private:
    static Napi::Value load(const Napi::CallbackInfo & info);
    Napi::Value metadata(const Napi::CallbackInfo & info);
    Napi::Value js_tokenize(const Napi::CallbackInfo & info);
    Napi::Value js_tokenize_async(const Napi::CallbackInfo & info);
    Napi::Value js_detokenize(const Napi::CallbackInfo & info);
    Napi::Value js_token_piece(const Napi::CallbackInfo & info);
    Napi::Value js_apply_chat_template(const Napi::CallbackInfo & info);
    Napi::Value js_apply_chat(const Napi::CallbackInfo & info);
    Napi::Value js_apply_chat_async(const Napi::CallbackInfo & info);
    Napi::Value js_chat_template_info(const Napi::CallbackInfo & info);
    Napi::Value js_dispose(const Napi::CallbackInfo & info);
    Napi::Value js_disposed(const Napi::CallbackInfo & info);

    void check_alive(Napi::Env env) const;

    llama_model * model_ = nullptr;
    const llama_vocab * vocab_ = nullptr;
    std::string path_;
    std::vector<llama_token> eog_tokens_;
    std::atomic<int> users_{0};
    std::unique_ptr<ChatTemplateCache> chat_templates_;  // parsed templates (applyChat, chatTemplateInfo)
};

}  // namespace addon
