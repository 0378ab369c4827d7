#include "slot.h"

#include <algorithm>

namespace addon {

size_t utf8_complete_prefix(const std::string & text) {
    const size_t len = text.size();
    // Look at most 4 bytes back for the start of the last sequence.
    for (size_t back = 1; back <= 4 && back <= len; back++) {
        unsigned char c = static_cast<unsigned char>(text[len - back]);
        if ((c & 0xC0) == 0x80) continue;  // continuation byte
        size_t need = (c & 0x80) == 0 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
        return back >= need ? len : len - back;
    }
    return len;
}

// Position of the earliest suffix of `text` that is a proper prefix of `word`, or npos.
static size_t find_partial_stop(const std::string & text, const std::string & word) {
    if (word.empty() || text.empty()) return std::string::npos;
    const size_t max_len = std::min(text.size(), word.size() - 1);
    for (size_t len = max_len; len > 0; len--) {
        if (text.compare(text.size() - len, len, word, 0, len) == 0) return text.size() - len;
    }
    return std::string::npos;
}

size_t Slot::common_prefix(const CompletionTask & t) const {
    const auto & prompt = t.prompt;
    size_t n = 0;
    while (n < cache.size() && n < prompt.size() && cache[n] == prompt[n]) {
        if (prompt[n] != LLAMA_TOKEN_NULL) {
            n++;
            continue;
        }
        const auto span = std::find_if(t.media.begin(), t.media.end(), [n](const MediaSpan & m) { return m.start == n; });
        const auto cached = std::find_if(cache_media.begin(), cache_media.end(), [n](const CachedMedia & m) { return m.start == n; });
        if (span == t.media.end() || cached == cache_media.end() || cached->hash != span->hash || cached->n_pos != span->n_pos ||
            n + span->n_pos > cache.size()) {
            break;
        }
        n += span->n_pos;
    }
    return n;
}

void Slot::forget_media_after(size_t end) {
    cache_media.erase(std::remove_if(cache_media.begin(), cache_media.end(), [end](const CachedMedia & m) { return m.start + m.n_pos > end; }),
                      cache_media.end());
}

void Slot::media_cached(const MediaSpan & span) {
    forget_media_after(span.start);
    cache_media.push_back({span.start, span.n_pos, span.hash, std::shared_ptr<mtmd_input_chunk>(mtmd_input_chunk_copy(span.chunk.get()), mtmd_input_chunk_free)});
}

size_t Slot::assign(std::unique_ptr<CompletionTask> t, int64_t now_us) {
    task = std::move(t);
    size_t keep = 0;
    if (task->cache_prompt) {
        keep = common_prefix(*task);
        // The last prompt token is always evaluated: its logits give the first generated token
        // (a prompt ends with text, never inside an image).
        if (keep == task->prompt.size() && keep > 0) keep--;
    }
    cache.resize(keep);
    forget_media_after(keep);
    // The kept entries stay as exact as they were; everything past them is computed afresh.
    if (exact_end >= keep) exact_end = SIZE_MAX;
    shared_len = std::min(shared_len, keep);
    join_slot = -1;
    join_task = -1;
    join_len = 0;
    n_prompt_done = keep;
    n_cached = static_cast<int32_t>(keep);
    state = SlotState::PROMPT;
    i_batch = -1;
    sampled = LLAMA_TOKEN_NULL;
    generated.clear();
    n_sent = 0;
    indent_scan = 0;
    n_decoded = 0;
    stop = StopType::NONE;
    stopping_word.clear();
    truncated = false;
    t_start_us = now_us;
    t_prompt_done_us = 0;
    first_token_at = 0;
    t_last_used_us = now_us;
    return keep;
}

std::string Slot::accept_piece(const std::string & piece, bool is_eog) {
    generated += piece;
    const size_t complete = utf8_complete_prefix(generated);
    if (complete < generated.size()) return "";  // wait for the rest of the character

    const std::string & all = generated;
    size_t search_from = n_sent;
    // A stop string can only end inside the new piece, so it starts no earlier than this.
    size_t earliest_stop = std::string::npos;
    std::string word_found;
    for (const auto & word : task->stop) {
        if (word.empty()) continue;
        size_t from = all.size() > piece.size() + word.size() ? all.size() - piece.size() - word.size() : 0;
        from = std::max(from, search_from);
        size_t pos = all.find(word, from);
        if (pos != std::string::npos && pos < earliest_stop) {
            earliest_stop = pos;
            word_found = word;
        }
    }
    if (earliest_stop != std::string::npos) {
        generated.erase(earliest_stop);
        stop = StopType::WORD;
        stopping_word = word_found;
        return take_unsent();
    }
    if (task->n_indent > 0 && cut_underindented_line()) return take_unsent();
    size_t send_until = generated.size();
    if (!is_eog && !task->stop.empty()) {
        const std::string tail = generated.substr(n_sent);
        for (const auto & word : task->stop) {
            size_t pos = find_partial_stop(tail, word);
            if (pos != std::string::npos) send_until = std::min(send_until, n_sent + pos);
        }
    }
    std::string out = generated.substr(n_sent, send_until - n_sent);
    n_sent = send_until;
    return out;
}

// llama-server's n_indent: once a line after the first shows its first character (not a space or
// tab), an indentation below n_indent ends generation there; the new line and its blanks stay.
bool Slot::cut_underindented_line() {
    for (;;) {
        const size_t nl = generated.find('\n', indent_scan);
        if (nl == std::string::npos) return false;
        const size_t first = generated.find_first_not_of(" \t", nl + 1);
        if (first == std::string::npos) {
            indent_scan = nl;  // the line is still blank: look again when more text comes
            return false;
        }
        if (first - (nl + 1) < static_cast<size_t>(task->n_indent)) {
            generated.erase(first);
            stop = StopType::LIMIT;
            return true;
        }
        indent_scan = nl + 1;
    }
}

std::string Slot::take_unsent() {
    std::string out = unsent();
    n_sent = generated.size();
    return out;
}

std::string Slot::unsent() const {
    return n_sent < generated.size() ? generated.substr(n_sent) : std::string();
}

void Slot::release(int64_t now_us) {
    task.reset();
    join_slot = -1;
    join_task = -1;
    join_len = 0;
    state = SlotState::IDLE;
    i_batch = -1;
    t_last_used_us = now_us;
}

}  // namespace addon
