#pragma once
// Slot files: one sequence's KV state and its cached tokens, byte for byte as llama-server writes
// them (llama_state_seq_save_file's format: magic, version, token count, tokens, sequence state;
// the tokens being llama-server's packed server_tokens payload), confined to one directory.
//
// Confinement: the file is opened relative to the directory's own descriptor, by a name that
// holds no separator and is not "." or "..", without following a symbolic link (O_NOFOLLOW),
// and only when it is a regular file. Nothing outside the directory is created, written or read.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "llama.h"
#include "mtmd.h"

namespace addon {

struct SlotFile {
    std::vector<llama_token> payload;  // the token payload (packed or a plain legacy token list)
    std::vector<uint8_t> state;        // llama_state_seq_get_data's bytes
};

// Throw Refusal: BAD_SLOT_FILE for a name or file the client chose badly (a missing file, a
// link, not a regular file, a corrupt header), SAVE_FAILED for a write that failed.
// Both return the file's size in bytes.
uint64_t slot_file_write(const std::string & dir, const std::string & name, const SlotFile & file);
uint64_t slot_file_read(const std::string & dir, const std::string & name, SlotFile & out);

// An image of a slot's cache: placeholder positions [start, start + n_pos) and its chunk.
struct SlotMedia {
    size_t start = 0;
    std::shared_ptr<mtmd_input_chunk> chunk;
};

struct SlotTokens {
    std::vector<llama_token> tokens;  // LLAMA_TOKEN_NULL at image positions
    std::vector<SlotMedia> media;     // in order, each over a run of placeholders
};

// llama-server's packed server_tokens payload (version 1): LLAMA_TOKEN_NULL, the version, the
// token vector, the media start indices, each media chunk as mtmd_input_chunk_save bytes; padded
// to whole tokens. Throws Refusal(NOT_SUPPORTED) when a chunk cannot be serialized.
std::vector<llama_token> pack_slot_tokens(const SlotTokens & slot);

// The cached tokens and images of a payload, packed or a plain token list (older llama-servers).
// Checks that the images' chunks load and cover exactly the placeholder positions. Throws
// Refusal(BAD_SLOT_FILE) for a payload it cannot use (images without `has_vision` included).
SlotTokens unpack_slot_tokens(const std::vector<llama_token> & payload, bool has_vision);

}  // namespace addon
