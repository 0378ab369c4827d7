#pragma once
// The addon's coded errors as JS values (binding layer): errors.h's ErrorCode on a Napi::Error's
// `code` property, which src/native/binding.ts declares as NativeErrorCode.
#include <napi.h>

#include <string>

#include "errors.h"

namespace addon {

// A JS Error carrying `code` (a TypeError for INVALID_ARGUMENT).
Napi::Error coded_error(Napi::Env env, ErrorCode code, const std::string & message);
[[noreturn]] void throw_coded(Napi::Env env, ErrorCode code, const std::string & message);
// The coded Error of a Refusal (JS thread); its `details` become numeric properties.
Napi::Error refusal_to_js(Napi::Env env, const Refusal & r);

}  // namespace addon
