#include "errors.h"

namespace addon {

const char * error_code_name(ErrorCode code) {
    switch (code) {
        case ErrorCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
        case ErrorCode::TOKEN_OUT_OF_RANGE: return "TOKEN_OUT_OF_RANGE";
        case ErrorCode::EMPTY_PROMPT: return "EMPTY_PROMPT";
        case ErrorCode::EXCEEDS_CONTEXT: return "EXCEEDS_CONTEXT";
        case ErrorCode::EXCEEDS_BATCH: return "EXCEEDS_BATCH";
        case ErrorCode::BAD_SAMPLING: return "BAD_SAMPLING";
        case ErrorCode::BAD_SCHEMA: return "BAD_SCHEMA";
        case ErrorCode::BAD_MEDIA: return "BAD_MEDIA";
        case ErrorCode::NOT_SUPPORTED: return "NOT_SUPPORTED";
        case ErrorCode::TEMPLATE_FAILED: return "TEMPLATE_FAILED";
        case ErrorCode::DISPOSED: return "DISPOSED";
        case ErrorCode::IN_USE: return "IN_USE";
        case ErrorCode::LOAD_FAILED: return "LOAD_FAILED";
        case ErrorCode::BAD_ARGUMENTS: return "BAD_ARGUMENTS";
        case ErrorCode::BAD_TOOLS: return "BAD_TOOLS";
        case ErrorCode::BAD_JSON: return "BAD_JSON";
        case ErrorCode::BAD_PARSER: return "BAD_PARSER";
        case ErrorCode::PARSE_FAILED: return "PARSE_FAILED";
        case ErrorCode::INVALID_DIFF: return "INVALID_DIFF";
        case ErrorCode::BAD_SLOT_FILE: return "BAD_SLOT_FILE";
        case ErrorCode::SAVE_FAILED: return "SAVE_FAILED";
    }
    return "INVALID_ARGUMENT";
}

}  // namespace addon
