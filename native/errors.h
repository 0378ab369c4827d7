#pragma once
// The addon's error codes. Every Error the addon throws or rejects with carries a `code`
// property naming one of these; src/native/binding.ts declares the same set as NativeErrorCode.
// Engine task failures that happen while a task runs are `error` events, not Errors (no code).
// No N-API here: the engine core throws Refusals; errors-js.h turns them into JS Errors.

#include <exception>
#include <string>
#include <utility>
#include <vector>

namespace addon {

enum class ErrorCode {
    INVALID_ARGUMENT,    // wrong JS types or shapes: a bug in the TypeScript caller
    TOKEN_OUT_OF_RANGE,  // a token id outside the vocabulary
    EMPTY_PROMPT,
    EXCEEDS_CONTEXT,     // details: nPromptTokens, nCtx
    EXCEEDS_BATCH,       // an embedding input larger than one batch; details: nPromptTokens, nBatch
    BAD_SAMPLING,        // invalid sampling parameters or grammar
    BAD_SCHEMA,          // a JSON schema that cannot become a grammar
    BAD_MEDIA,           // an image that cannot be used, or markers that do not match the images
    NOT_SUPPORTED,       // no projector, audio, generation on an embedding engine, ...
    TEMPLATE_FAILED,     // the chat template could not be applied
    DISPOSED,            // the object (or its model) is disposed
    IN_USE,              // dispose() of an object an engine still uses
    LOAD_FAILED,         // a model, adapter, projector, context or task could not be loaded or created
    BAD_ARGUMENTS,       // llama.cpp's parser refused a llama-server command line (it printed why)
    BAD_TOOLS,           // tool definitions of a chat that llama.cpp cannot use
    BAD_JSON,            // JSON text (tool arguments, template kwargs) that does not parse
    BAD_PARSER,          // a chat parser that cannot be built from its format and grammar
    PARSE_FAILED,        // a chat output the parser of its format refuses
    INVALID_DIFF,        // two parsed messages that are not one the continuation of the other
    BAD_SLOT_FILE,       // a slot file name or file that cannot be used (missing, a link, corrupt, too large)
    SAVE_FAILED,         // a slot file could not be written
};

const char * error_code_name(ErrorCode code);

// A refusal found where no JS value may be built (worker threads), or that the caller reports
// later (as a rejected promise). refusal_to_js (errors-js.h) builds the coded Error on the JS
// thread; `details` become numeric properties of it.
struct Refusal : std::exception {
    ErrorCode code;
    std::string message;
    std::vector<std::pair<std::string, double>> details;

    Refusal(ErrorCode code, std::string message, std::vector<std::pair<std::string, double>> details = {})
        : code(code), message(std::move(message)), details(std::move(details)) {}
    const char * what() const noexcept override { return message.c_str(); }
};

}  // namespace addon
