#pragma once
// The disk tier's state file (DiskCache), in one place: its layout, how it is written, and how it
// is parsed and checked when it is adopted and when it is read.
//
// Layout, one state per file (integers as the host stores them: a file is only read back by the
// build its fingerprint names):
//   magic "LLKVDSK1" (8 bytes) | H: the header's size (u64) | header (H bytes) | state (S bytes) | checksum (u64)
//   header: fingerprint size (u32), fingerprint, adapter scale count (u32), the scales (f32),
//           token count (u32), the tokens (i32), S (u64)
//   checksum: disk_hash of magic, H and header, seeded with disk_hash of the state.
// A file is complete when its size is 16 + H + S + 8 (disk_file_size), and intact when its
// checksum matches. Its header names what the state is valid for (the fingerprint, the adapter
// scales) and the tokens whose K/V it holds (at least one).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "llama.h"

namespace addon {

// A 64-bit hash of `n` bytes (eight at a time), for checksums and directory names.
uint64_t disk_hash(const void * data, size_t n, uint64_t seed = 0);

// What a file's header says.
struct DiskFileHeader {
    std::vector<llama_token> tokens;  // never empty
    std::vector<float> lora;
    uint64_t state_size = 0;          // S
};

// The bytes before the state: magic, H and the header.
std::string disk_file_prefix(const std::string & fingerprint, const std::vector<llama_token> & tokens, const std::vector<float> & lora,
                             uint64_t state_size);
// The size of a complete file whose prefix (magic, H, header) is `prefix_size` bytes.
uint64_t disk_file_size(uint64_t prefix_size, uint64_t state_size);

// Writes a whole file to `fd`: `prefix` (disk_file_prefix), the state, the checksum. `halfway`
// (may be empty) is called once half the state is written (tests: a slow disk). False on an error.
bool disk_file_write(int fd, const std::string & prefix, const uint8_t * state, size_t state_size, const std::function<void()> & halfway);

// Adoption: reads the header at the start of `fd`, a file of `file_size` bytes. nullopt when it is
// not one of ours, names another fingerprint, holds no tokens, or the file's size is not the one
// its header implies (truncated, or grown).
std::optional<DiskFileHeader> disk_file_read_header(int fd, uint64_t file_size, const std::string & fingerprint);

// A whole file read into memory, checked before anything reaches a context: its header must parse
// under `fingerprint` and hold `tokens` and `lora` (what the file held when it was adopted or
// written), its size must be the one the header implies, its checksum must match. On success
// returns null and points `state` at the state inside `file`; else the reason (for the log).
const char * disk_file_check(const uint8_t * file, uint64_t file_size, const std::string & fingerprint, const std::vector<llama_token> & tokens,
                             const std::vector<float> & lora, const uint8_t *& state, size_t & state_size);

}  // namespace addon
