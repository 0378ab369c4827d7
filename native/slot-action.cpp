// Slot actions on the engine thread (llama-server's POST /slots/{id}?action=save|restore|erase):
// a slot's sequence, cached tokens and images to and from a file in llama-server's format.
#include "slot-action.h"

#include <algorithm>
#include <cstdlib>

#include "slot-cache-policy.h"
#include "slot-file.h"
#include "slot.h"

namespace addon {

static int64_t now_us() { return ggml_time_us(); }

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
static void save_slot(llama_context * ctx, Slot & slot, const SlotAction & action, SlotActionResult & out) {
    try {
        SlotFile file;
        file.payload = pack_slot_tokens({slot.cache, cached_media(slot)});
        file.state.resize(llama_state_seq_get_size(ctx, slot.id));
        file.state.resize(llama_state_seq_get_data(ctx, file.state.data(), file.state.size(), slot.id));
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
static void restore_slot(llama_context * ctx, bool has_vision, SlotCachePolicy & policy, Slot & slot, const SlotAction & action, SlotActionResult & out) {
    try {
        SlotFile file;
        out.n_bytes = slot_file_read(action.dir, action.filename, file);
        SlotTokens restored = unpack_slot_tokens(file.payload, has_vision);
        if (restored.tokens.size() > static_cast<size_t>(slot.n_ctx)) {
            throw Refusal(ErrorCode::BAD_SLOT_FILE, "Restored prompt does not fit in the slot context");
        }
        const int32_t n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(llama_get_model(ctx)));
        if (std::any_of(restored.tokens.begin(), restored.tokens.end(), [n_vocab](llama_token t) { return t != LLAMA_TOKEN_NULL && (t < 0 || t >= n_vocab); })) {
            throw Refusal(ErrorCode::BAD_SLOT_FILE, "Invalid tokens in slot save file");
        }
        policy.clear_slot(slot);
        if (llama_state_seq_set_data(ctx, file.state.data(), file.state.size(), slot.id) == 0) {
            throw Refusal(ErrorCode::BAD_SLOT_FILE, "No available space in KV cache or invalid slot save file");
        }
        slot.cache = std::move(restored.tokens);
        for (auto & m : restored.media) {
            const size_t n_pos = static_cast<size_t>(mtmd_input_chunk_get_n_pos(m.chunk.get()));
            slot.cache_media.push_back({m.start, n_pos, media_hash(m.chunk.get()), std::move(m.chunk)});
        }
        out.n_tokens = static_cast<int32_t>(slot.cache.size());
    } catch (Refusal & r) {
        policy.clear_slot(slot);
        r.message = "Unable to restore slot: " + r.message;
        throw;
    }
}

SlotActionResult slot_action_run(llama_context * ctx, bool has_vision, SlotCachePolicy & policy, Slot & slot, const SlotAction & action) {
    SlotActionResult out;
    out.id = action.id;
    const int64_t t0 = now_us();
    try {
        switch (action.kind) {
            case SlotAction::Kind::SAVE: save_slot(ctx, slot, action, out); break;
            case SlotAction::Kind::RESTORE: restore_slot(ctx, has_vision, policy, slot, action, out); break;
            case SlotAction::Kind::ERASE:
                out.n_tokens = static_cast<int32_t>(slot.cache.size());
                policy.clear_slot(slot);
                break;
        }
    } catch (const Refusal & r) {
        out.error = r;
    }
    out.t_ms = (now_us() - t0) / 1000.0;
    return out;
}

}  // namespace addon
