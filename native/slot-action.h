#pragma once
// SlotAction: llama-server's POST /slots/{id}?action=save|restore|erase, as engine-thread work.
// JS queues one (Engine.slotAction, engine-binding-slots.cpp) and gets a promise; the engine
// thread runs it once its slot is idle (a busy slot defers it, as llama-server's queue does:
// Scheduler::run_slot_actions, slot_action_run) and answers through the event delivery, which
// settles the promise on the JS thread.
#include <cstdint>
#include <optional>
#include <string>

#include "errors.h"
#include "llama.h"

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

class SlotCachePolicy;
struct Slot;

// Engine thread: runs `action` on its idle `slot` (save: the sequence, cached tokens and images
// in llama-server's file format; restore: the reverse, the slot left empty on any failure;
// erase). A refusal (BAD_SLOT_FILE, SAVE_FAILED, NOT_SUPPORTED) is the result's error.
SlotActionResult slot_action_run(llama_context * ctx, bool has_vision, SlotCachePolicy & policy, Slot & slot, const SlotAction & action);

}  // namespace addon
