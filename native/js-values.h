#pragma once
// Readers of optional numeric and string fields of plain JS objects (TypeScript validated them; a missing
// or non-number field takes the fallback).
#include <napi.h>

#include <cstdint>
#include <string>

namespace addon {

inline uint32_t read_u32(Napi::Object o, const char * key, uint32_t fallback) {
    Napi::Value v = o.Get(key);
    return v.IsNumber() ? v.As<Napi::Number>().Uint32Value() : fallback;
}

inline int32_t read_i32(Napi::Object o, const char * key, int32_t fallback) {
    Napi::Value v = o.Get(key);
    return v.IsNumber() ? v.As<Napi::Number>().Int32Value() : fallback;
}

inline std::string read_string(Napi::Object o, const char * key, const std::string & fallback) {
    Napi::Value v = o.Get(key);
    return v.IsString() ? v.As<Napi::String>().Utf8Value() : fallback;
}

inline double read_f64(Napi::Object o, const char * key, double fallback) {
    Napi::Value v = o.Get(key);
    return v.IsNumber() ? v.As<Napi::Number>().DoubleValue() : fallback;
}

}  // namespace addon
