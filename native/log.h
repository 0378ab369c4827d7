#pragma once
// Routing of llama.cpp / ggml log lines. By default only warnings and errors reach stderr
// (LLAMA_ADDON_LOG=debug|info|warn|error|none changes that). Error lines are also kept per
// thread so that a failed load can explain itself in its exception message.
#include <string>

namespace addon {

void log_install();

// Lowest level printed from now on: "debug", "info", "warn", "error" or "none"; false for another name.
bool log_set_level(const std::string & name);

// Clears, then returns, the error lines logged on the calling thread since the last call.
void log_capture_begin();
std::string log_capture_end();

}  // namespace addon
