#pragma once
// ChatParser: llama.cpp's parser of one model's chat output (common_chat_parse with the PEG
// parser that Model.applyChat returned), splitting generated text into content, reasoning and
// tool calls. One per request, made from that request's ChatParams; it keeps no state between
// calls, so the caller parses the whole text generated so far each time, as llama-server's
// task_result_state::update_chat_msg does per token.
// Thread: JS thread (llama-server parses on its HTTP threads; the cost grows with the text).
// Diffs: ChatParser.diff(previous, current) is llama.cpp's common_chat_msg_diff::compute_diffs,
// so stream deltas are exactly llama-server's; tool call ids are left to the caller (llama-server
// gives each call without one a random id, kept by index for the rest of the stream).
#include <napi.h>

#include "chat.h"

namespace addon {

class ChatParser : public Napi::ObjectWrap<ChatParser> {
public:
    static Napi::Function define(Napi::Env env);

    // new ChatParser({ format, parser, generationPrompt, reasoningFormat?, reasoningInContent?,
    // parseToolCalls?, isContinuation?, echo? }). Throws (code BAD_PARSER) for an unknown format
    // or a parser that does not load.
    explicit ChatParser(const Napi::CallbackInfo & info);

private:
    // parse(text, isPartial) -> ChatParsedMessage. A complete text (isPartial false) that does not
    // match the format throws (code PARSE_FAILED) with llama.cpp's message; a partial one returns
    // what is parsed so far.
    Napi::Value parse(const Napi::CallbackInfo & info);
    // ChatParser.diff(previous, current) -> ChatMessageDiff[]; throws (code INVALID_DIFF) when the
    // current message withdraws something the previous one had.
    static Napi::Value diff(const Napi::CallbackInfo & info);

    common_chat_parser_params params_;
};

}  // namespace addon
