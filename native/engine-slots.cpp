// Slot actions (llama-server's POST /slots/{id}?action=save|restore|erase): the JS-thread half
// that queues one and settles its promise, and the engine-thread half that runs it.
//
// slotAction({ action, slot, dir?, filename? }) -> Promise<{ nTokens, nBytes, ms }>.
// The action waits while its slot is busy (as llama-server defers it) and then runs between two
// steps, so it never sees a half-built batch. Its result travels with the events (one
// ThreadSafeFunction call), and `deliver` settles the promise.
#include <algorithm>
#include <cstdlib>

#include "engine.h"
#include "errors.h"
#include "slot-file.h"

namespace addon {

static int64_t now_us() { return ggml_time_us(); }

// ---------------------------------------------------------------------------------------------
// JS thread

static SlotAction::Kind action_kind(Napi::Env env, const std::string & name) {
    if (name == "save") return SlotAction::Kind::SAVE;
    if (name == "restore") return SlotAction::Kind::RESTORE;
    if (name == "erase") return SlotAction::Kind::ERASE;
    throw_coded(env, ErrorCode::INVALID_ARGUMENT, "slotAction: action must be save, restore or erase");
}

// Throws INVALID_ARGUMENT (wrong shapes, a slot out of range) or DISPOSED synchronously.
Napi::Value Engine::js_slot_action(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    if (disposed_) throw_coded(env, ErrorCode::DISPOSED, "the engine is disposed");
    if (info.Length() < 1 || !info[0].IsObject()) throw_coded(env, ErrorCode::INVALID_ARGUMENT, "slotAction({ action, slot, dir, filename })");
    Napi::Object spec = info[0].As<Napi::Object>();
    if (!spec.Get("action").IsString() || !spec.Get("slot").IsNumber()) {
        throw_coded(env, ErrorCode::INVALID_ARGUMENT, "slotAction: action (string) and slot (number) are required");
    }
    SlotAction action;
    action.kind = action_kind(env, spec.Get("action").As<Napi::String>().Utf8Value());
    const double slot = spec.Get("slot").As<Napi::Number>().DoubleValue();
    if (slot != static_cast<int32_t>(slot) || slot < 0 || slot >= params_.n_parallel) {
        throw_coded(env, ErrorCode::INVALID_ARGUMENT, "slotAction: no slot " + spec.Get("slot").ToString().Utf8Value());
    }
    action.id_slot = static_cast<int32_t>(slot);
    if (action.kind != SlotAction::Kind::ERASE) {
        if (!spec.Get("dir").IsString() || !spec.Get("filename").IsString()) {
            throw_coded(env, ErrorCode::INVALID_ARGUMENT, "slotAction: save and restore need dir and filename (strings)");
        }
        action.dir = spec.Get("dir").As<Napi::String>().Utf8Value();
        action.filename = spec.Get("filename").As<Napi::String>().Utf8Value();
    }
    action.id = next_task_id_++;
    auto deferred = Napi::Promise::Deferred::New(env);
    action_promises_.emplace(action.id, deferred);
    track_active(action.id, true);  // keeps the event loop alive until it is answered
    {
        std::lock_guard<std::mutex> lock(inbox_mutex_);
        action_inbox_.push_back(std::move(action));
    }
    inbox_cv_.notify_one();
    return deferred.Promise();
}

// Called by deliver with the results taken from the engine thread.
void Engine::settle_slot_actions(Napi::Env env, std::vector<SlotActionResult> & results) {
    for (auto & r : results) {
        auto it = action_promises_.find(r.id);
        if (it == action_promises_.end()) continue;
        Napi::Promise::Deferred deferred = it->second;
        action_promises_.erase(it);
        track_active(r.id, false);
        if (r.error) {
            deferred.Reject(r.error->to_js(env).Value());
            continue;
        }
        Napi::Object o = Napi::Object::New(env);
        o.Set("nTokens", r.n_tokens);
        o.Set("nBytes", static_cast<double>(r.n_bytes));
        o.Set("ms", r.t_ms);
        deferred.Resolve(o);
    }
    results.clear();
}

// dispose(): actions never answered reject with DISPOSED.
void Engine::reject_slot_actions(Napi::Env env) {
    for (auto & [id, deferred] : action_promises_) {
        deferred.Reject(coded_error(env, ErrorCode::DISPOSED, "the engine was disposed before the slot action ran").Value());
    }
    action_promises_.clear();
}

// ---------------------------------------------------------------------------------------------
// Engine thread

// Runs the queued actions whose slots are idle, in arrival order; the others keep waiting.
void Engine::run_slot_actions() {
    std::vector<SlotActionResult> done;
    for (auto it = actions_.begin(); it != actions_.end();) {
        Slot & slot = slots_[it->id_slot];
        if (slot.busy()) {
            ++it;
            continue;
        }
        done.push_back(run_slot_action(slot, *it));
        it = actions_.erase(it);
    }
    if (done.empty()) return;
    {
        std::lock_guard<std::mutex> lock(events_mutex_);
        for (auto & r : done) action_results_.push_back(std::move(r));
    }
    publish_summaries();
    flush_events();
}

SlotActionResult Engine::run_slot_action(Slot & slot, const SlotAction & action) {
    SlotActionResult out;
    out.id = action.id;
    const int64_t t0 = now_us();
    try {
        switch (action.kind) {
            case SlotAction::Kind::SAVE: save_slot(slot, action, out); break;
            case SlotAction::Kind::RESTORE: restore_slot(slot, action, out); break;
            case SlotAction::Kind::ERASE:
                out.n_tokens = static_cast<int32_t>(slot.cache.size());
                clear_slot(slot);
                break;
        }
    } catch (const Refusal & r) {
        out.error = r;
    }
    out.t_ms = (now_us() - t0) / 1000.0;
    return out;
}

// The images of a slot's cache, each over its run of placeholders. Throws NOT_SUPPORTED when a
// placeholder has no image chunk (no such cache is built here; a guard for the file's validity).
static std::vector<SlotMedia> cached_media(const Slot & slot) {
    std::vector<SlotMedia> media;
    size_t covered = 0;
    std::vector<Slot::CachedMedia> entries = slot.cache_media;
    std::sort(entries.begin(), entries.end(), [](const auto & a, const auto & b) { return a.start < b.start; });
    for (const auto & m : entries) {
        // Entries past the cache's end or over text are stale (slot.h).
        const bool live = m.start >= covered && m.start + m.n_pos <= slot.cache.size() &&
                          std::all_of(slot.cache.begin() + m.start, slot.cache.begin() + m.start + m.n_pos, [](llama_token t) { return t == LLAMA_TOKEN_NULL; });
        if (!live || !m.chunk) continue;
        media.push_back({m.start, m.chunk});
        covered = m.start + m.n_pos;
    }
    size_t n_placeholders = 0;
    for (const auto & m : media) n_placeholders += mtmd_input_chunk_get_n_tokens(m.chunk.get());
    if (static_cast<size_t>(std::count(slot.cache.begin(), slot.cache.end(), LLAMA_TOKEN_NULL)) != n_placeholders) {
        throw Refusal(ErrorCode::NOT_SUPPORTED, "this slot's images cannot be saved");
    }
    return media;
}

// An image's hash from its chunk id: task-parse sets the id to the hash of the image file; any
// other id (a llama-server file) gets a hash of the id, which no image of a prompt matches.
static uint64_t media_hash(const mtmd_input_chunk * chunk) {
    const char * id = mtmd_input_chunk_get_id(chunk);
    const std::string text = id ? id : "";
    char * end = nullptr;
    const unsigned long long value = std::strtoull(text.c_str(), &end, 10);
    if (!text.empty() && end && *end == '\0' && std::to_string(value) == text) return value;
    uint64_t hash = 1099511628211ull ^ 0x736c6f74ull;
    for (char c : text) hash = (hash ^ static_cast<uint8_t>(c)) * 1099511628211ull;
    return hash;
}

// The slot's sequence, cached tokens and images, in llama-server's file format.
void Engine::save_slot(Slot & slot, const SlotAction & action, SlotActionResult & out) {
    try {
        SlotFile file;
        file.payload = pack_slot_tokens({slot.cache, cached_media(slot)});
        file.state.resize(llama_state_seq_get_size(ctx_, slot.id));
        file.state.resize(llama_state_seq_get_data(ctx_, file.state.data(), file.state.size(), slot.id));
        out.n_bytes = slot_file_write(action.dir, action.filename, file);
    } catch (Refusal & r) {
        r.message = "Unable to save slot: " + r.message;
        throw;
    }
    out.n_tokens = static_cast<int32_t>(slot.cache.size());
}

// Replaces the slot's sequence, cached tokens and images with a file's; on any failure the slot
// is left empty (as llama-server). The restored cache keeps the adapter scales the slot last ran
// with.
void Engine::restore_slot(Slot & slot, const SlotAction & action, SlotActionResult & out) {
    try {
        SlotFile file;
        out.n_bytes = slot_file_read(action.dir, action.filename, file);
        SlotTokens restored = unpack_slot_tokens(file.payload, vision_ != nullptr);
        if (restored.tokens.size() > static_cast<size_t>(slot.n_ctx)) {
            throw Refusal(ErrorCode::BAD_SLOT_FILE, "Restored prompt does not fit in the slot context");
        }
        const int32_t n_vocab = llama_vocab_n_tokens(vocab_);
        if (std::any_of(restored.tokens.begin(), restored.tokens.end(), [n_vocab](llama_token t) { return t != LLAMA_TOKEN_NULL && (t < 0 || t >= n_vocab); })) {
            throw Refusal(ErrorCode::BAD_SLOT_FILE, "Invalid tokens in slot save file");
        }
        clear_slot(slot);
        if (llama_state_seq_set_data(ctx_, file.state.data(), file.state.size(), slot.id) == 0) {
            throw Refusal(ErrorCode::BAD_SLOT_FILE, "No available space in KV cache or invalid slot save file");
        }
        slot.cache = std::move(restored.tokens);
        for (auto & m : restored.media) {
            const size_t n_pos = static_cast<size_t>(mtmd_input_chunk_get_n_pos(m.chunk.get()));
            slot.cache_media.push_back({m.start, n_pos, media_hash(m.chunk.get()), std::move(m.chunk)});
        }
        out.n_tokens = static_cast<int32_t>(slot.cache.size());
    } catch (Refusal & r) {
        clear_slot(slot);
        r.message = "Unable to restore slot: " + r.message;
        throw;
    }
}

// Empties the slot's KV cells, and the draft model's copy of them.
void Engine::clear_slot(Slot & slot) {
    llama_memory_seq_rm(llama_get_memory(ctx_), slot.id, -1, -1);
    slot.cache.clear();
    slot.cache_media.clear();
    slot.shared_len = 0;
    slot.exact_end = SIZE_MAX;
    if (spec_) spec_->truncate(slot.id, 0);
}

}  // namespace addon
