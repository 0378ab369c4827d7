#include "log.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "llama.h"
#include "mtmd-helper.h"
#include "mtmd.h"
// llama.cpp's common log (its name clashes with this directory's log.h).
#include "../vendor/llama.cpp/common/log.h"

namespace addon {

static int g_min_level = GGML_LOG_LEVEL_WARN;
static bool g_through_common = false;
static thread_local bool t_capturing = false;
static thread_local std::string t_captured;

// -1 for an unknown name.
static int level_named(const char * v) {
    if (!strcmp(v, "debug")) return GGML_LOG_LEVEL_DEBUG;
    if (!strcmp(v, "info")) return GGML_LOG_LEVEL_INFO;
    if (!strcmp(v, "warn")) return GGML_LOG_LEVEL_WARN;
    if (!strcmp(v, "error")) return GGML_LOG_LEVEL_ERROR;
    if (!strcmp(v, "none")) return GGML_LOG_LEVEL_ERROR + 1;
    return -1;
}

static int level_from_env() {
    const char * v = std::getenv("LLAMA_ADDON_LOG");
    int level = v ? level_named(v) : -1;
    return level < 0 ? GGML_LOG_LEVEL_WARN : level;
}

bool log_set_level(const std::string & name) {
    int level = level_named(name.c_str());
    if (level < 0) return false;
    g_min_level = level;
    return true;
}

static void on_log(ggml_log_level level, const char * text, void *) {
    static thread_local ggml_log_level last = GGML_LOG_LEVEL_INFO;
    // CONT lines continue the previous line's level.
    if (level == GGML_LOG_LEVEL_CONT) level = last; else last = level;
    if (t_capturing && level == GGML_LOG_LEVEL_ERROR) t_captured += text;
    if (level >= g_min_level && level != GGML_LOG_LEVEL_NONE) {
        if (g_through_common) common_log_add(common_log_main(), level, "%s", text);
        else std::fputs(text, stderr);
    }
}

void log_use_common() {
    g_through_common = true;
}

bool log_write(const std::string & name, const std::string & text) {
    int level = level_named(name.c_str());
    if (level < 0 || level > GGML_LOG_LEVEL_ERROR) return false;
    if (g_through_common) common_log_add(common_log_main(), static_cast<ggml_log_level>(level), "%s", text.c_str());
    else std::fputs(text.c_str(), stderr);
    return true;
}

bool log_debug_enabled() { return GGML_LOG_LEVEL_DEBUG >= g_min_level; }

void log_debug(const std::string & text) {
    on_log(GGML_LOG_LEVEL_DEBUG, text.c_str(), nullptr);
}

void log_install() {
    g_min_level = level_from_env();
    llama_log_set(on_log, nullptr);
    mtmd_log_set(on_log, nullptr);
    mtmd_helper_log_set(on_log, nullptr);
}

void log_capture_begin() {
    t_capturing = true;
    t_captured.clear();
}

std::string log_capture_end() {
    t_capturing = false;
    std::string out;
    out.swap(t_captured);
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
    return out;
}

}  // namespace addon
