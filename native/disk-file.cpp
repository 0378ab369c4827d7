// The disk tier's state file: layout, write, parse and checks (disk-file.h states the format).
#include "disk-file.h"

#include <cstring>

#include "fd-io.h"

namespace addon {

static constexpr char kMagic[8] = {'L', 'L', 'K', 'V', 'D', 'S', 'K', '1'};
static constexpr uint64_t kPreamble = sizeof(kMagic) + sizeof(uint64_t);  // magic and H
static constexpr uint64_t kMaxHeader = 64ull << 20;  // a header beyond this is not one of ours

uint64_t disk_hash(const void * data, size_t n, uint64_t seed) {
    const auto * p = static_cast<const uint8_t *>(data);
    uint64_t h = seed ^ (0x9E3779B97F4A7C15ull * (n + 1));
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        std::memcpy(&w, p + i, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
    }
    uint64_t tail = 0;
    std::memcpy(&tail, p + i, n - i);
    h = (h ^ tail) * 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 29;
    return h;
}

namespace {

template <typename T>
void put(std::string & out, const T & v) {
    out.append(reinterpret_cast<const char *>(&v), sizeof(T));
}

// A cursor over a header's bytes.
struct Cursor {
    const uint8_t * p;
    size_t left;
    template <typename T>
    bool get(T & out) {
        if (left < sizeof(T)) return false;
        std::memcpy(&out, p, sizeof(T));
        p += sizeof(T);
        left -= sizeof(T);
        return true;
    }
    template <typename T>
    bool get_vector(std::vector<T> & out, uint32_t n) {
        if (left / sizeof(T) < n) return false;
        out.resize(n);
        std::memcpy(out.data(), p, n * sizeof(T));
        p += n * sizeof(T);
        left -= n * sizeof(T);
        return true;
    }
};

// The header's H bytes (after magic and H), under `fingerprint`.
std::optional<DiskFileHeader> parse_header(const uint8_t * header, size_t size, const std::string & fingerprint) {
    Cursor c{header, size};
    DiskFileHeader h;
    uint32_t n_fp = 0, n_lora = 0, n_tokens = 0;
    std::vector<char> fp;
    const bool ok = c.get(n_fp) && c.get_vector(fp, n_fp) && std::string(fp.begin(), fp.end()) == fingerprint && c.get(n_lora) &&
                    c.get_vector(h.lora, n_lora) && c.get(n_tokens) && c.get_vector(h.tokens, n_tokens) && c.get(h.state_size) && c.left == 0 &&
                    !h.tokens.empty();
    if (!ok) return std::nullopt;
    return h;
}

uint64_t checksum(const void * prefix, size_t prefix_size, const void * state, size_t state_size) {
    return disk_hash(prefix, prefix_size, disk_hash(state, state_size));
}

}  // namespace

std::string disk_file_prefix(const std::string & fingerprint, const std::vector<llama_token> & tokens, const std::vector<float> & lora,
                             uint64_t state_size) {
    std::string h;
    put(h, static_cast<uint32_t>(fingerprint.size()));
    h += fingerprint;
    put(h, static_cast<uint32_t>(lora.size()));
    h.append(reinterpret_cast<const char *>(lora.data()), lora.size() * sizeof(float));
    put(h, static_cast<uint32_t>(tokens.size()));
    h.append(reinterpret_cast<const char *>(tokens.data()), tokens.size() * sizeof(llama_token));
    put(h, state_size);
    std::string out(kMagic, sizeof(kMagic));
    put(out, static_cast<uint64_t>(h.size()));
    return out + h;
}

uint64_t disk_file_size(uint64_t prefix_size, uint64_t state_size) { return prefix_size + state_size + sizeof(uint64_t); }

bool disk_file_write(int fd, const std::string & prefix, const uint8_t * state, size_t state_size, const std::function<void()> & halfway) {
    const uint64_t sum = checksum(prefix.data(), prefix.size(), state, state_size);
    const size_t half = state_size / 2;
    if (!write_all(fd, prefix.data(), prefix.size()) || !write_all(fd, state, half)) return false;
    if (halfway) halfway();
    return write_all(fd, state + half, state_size - half) && write_all(fd, &sum, sizeof(sum));
}

std::optional<DiskFileHeader> disk_file_read_header(int fd, uint64_t file_size, const std::string & fingerprint) {
    char magic[sizeof(kMagic)];
    uint64_t header_size = 0;
    if (!read_all(fd, magic, sizeof(magic)) || std::memcmp(magic, kMagic, sizeof(kMagic)) != 0) return std::nullopt;
    if (!read_all(fd, &header_size, sizeof(header_size)) || header_size > kMaxHeader) return std::nullopt;
    std::vector<uint8_t> header(header_size);
    if (!read_all(fd, header.data(), header.size())) return std::nullopt;
    auto h = parse_header(header.data(), header.size(), fingerprint);
    if (!h || file_size != disk_file_size(kPreamble + header_size, h->state_size)) return std::nullopt;
    return h;
}

const char * disk_file_check(const uint8_t * file, uint64_t file_size, const std::string & fingerprint, const std::vector<llama_token> & tokens,
                             const std::vector<float> & lora, const uint8_t *& state, size_t & state_size) {
    uint64_t header_size = 0;
    if (file_size < disk_file_size(kPreamble, 0) || std::memcmp(file, kMagic, sizeof(kMagic)) != 0) return "header changed";
    std::memcpy(&header_size, file + sizeof(kMagic), sizeof(header_size));
    if (header_size > file_size - disk_file_size(kPreamble, 0)) return "header changed";
    const auto h = parse_header(file + kPreamble, header_size, fingerprint);
    if (!h || h->tokens != tokens || h->lora != lora) return "header changed";
    const uint64_t prefix_size = kPreamble + header_size;
    if (file_size != disk_file_size(prefix_size, h->state_size)) return "size changed";
    uint64_t stored = 0;
    std::memcpy(&stored, file + prefix_size + h->state_size, sizeof(stored));
    if (checksum(file, prefix_size, file + prefix_size, h->state_size) != stored) return "checksum";
    state = file + prefix_size;
    state_size = h->state_size;
    return nullptr;
}

}  // namespace addon
