#pragma once
// Routing of llama.cpp / ggml log lines. By default only warnings and errors reach stderr
// (LLAMA_ADDON_LOG=debug|info|warn|error|none changes that). Error lines are also kept per
// thread so that a failed load can explain itself in its exception message.
#include <string>

namespace addon {

void log_install();

// Lowest level printed from now on: "debug", "info", "warn", "error" or "none"; false for another name.
bool log_set_level(const std::string & name);

// From now on every line printed goes through common's log (common_log_main) instead of straight
// to stderr, so that the options llama.cpp's parser set on it apply as in llama-server:
// --log-file, --log-jsonl, --log-prefix, --log-timestamps, --log-colors.
void log_use_common();

// Prints a line of the host program at `level` ("error", "warn", "info", "debug") through the
// same route as llama.cpp's lines (the host decides what to print: no level filter); false for
// another level name.
bool log_write(const std::string & level, const std::string & text);

// A debug line of the addon's own (as llama-server's SRV_DBG): printed only at level "debug"
// (--verbose), through the same route as llama.cpp's lines.
void log_debug(const std::string & text);
// Whether debug lines are printed now (so that a caller builds one only then).
bool log_debug_enabled();

// Clears, then returns, the error lines logged on the calling thread since the last call.
void log_capture_begin();
std::string log_capture_end();

}  // namespace addon
