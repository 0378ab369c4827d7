#pragma once
// SlotAction: llama-server's POST /slots/{id}?action=save|restore|erase, as engine-thread work.
// JS queues one (Engine.slotAction, engine-slots.cpp) and gets a promise; the engine thread runs
// it once its slot is idle (a busy slot defers it, as llama-server's queue does) and answers
// through the event delivery, which settles the promise on the JS thread.
#include <cstdint>
#include <optional>
#include <string>

#include "errors.h"

namespace addon {

struct SlotAction {
    enum class Kind { SAVE, RESTORE, ERASE } kind = Kind::ERASE;
    int64_t id = 0;           // the promise's key (an id from the task counter)
    int32_t id_slot = 0;      // checked against the engine's slots before queueing
    std::string dir;          // SAVE, RESTORE: the --slot-save-path directory
    std::string filename;     // SAVE, RESTORE: one name inside it (never a path)
};

struct SlotActionResult {
    int64_t id = 0;
    std::optional<Refusal> error;  // set: the promise rejects with it
    int32_t n_tokens = 0;          // saved, restored or erased cached tokens
    uint64_t n_bytes = 0;          // SAVE: bytes written; RESTORE: bytes read
    double t_ms = 0;               // SAVE, RESTORE: time taken
};

}  // namespace addon
