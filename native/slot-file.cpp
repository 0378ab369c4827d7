#include "slot-file.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "errors.h"
#include "fd-io.h"

namespace addon {

static constexpr uint32_t PACKED_VERSION = 1;  // llama-server's SERVER_TOKENS_STATE_VERSION

namespace {

// A descriptor closed on scope exit.
struct Fd {
    int fd = -1;
    explicit Fd(int fd) : fd(fd) {}
    Fd(const Fd &) = delete;
    Fd & operator=(const Fd &) = delete;
    ~Fd() { if (fd >= 0) ::close(fd); }
};

[[noreturn]] void refuse(ErrorCode code, const std::string & message) { throw Refusal(code, message); }

bool name_is_plain(const std::string & name) {
    return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
           name.find('\\') == std::string::npos && name.find('\0') == std::string::npos;
}

// Opens `name` inside `dir` (the header's confinement rules); `io_code` codes failures that are
// not the client's.
int open_in_dir(const std::string & dir, const std::string & name, int flags, ErrorCode io_code) {
    if (!name_is_plain(name)) refuse(ErrorCode::BAD_SLOT_FILE, "Invalid filename");
    Fd d(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (d.fd < 0) refuse(io_code, "cannot open the slot save directory: " + std::string(std::strerror(errno)));
    // O_NONBLOCK: opening a FIFO planted in the directory must not block the engine thread.
    const int fd = ::openat(d.fd, name.c_str(), flags | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0644);
    if (fd < 0) {
        const int err = errno;
        if (err == ELOOP) refuse(ErrorCode::BAD_SLOT_FILE, "the file is a symbolic link");
        if (err == ENOENT) refuse(ErrorCode::BAD_SLOT_FILE, "file not found");
        refuse(err == ENXIO || err == EISDIR ? ErrorCode::BAD_SLOT_FILE : io_code, std::strerror(err));
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        refuse(ErrorCode::BAD_SLOT_FILE, "not a regular file");
    }
    return fd;
}

}  // namespace

uint64_t slot_file_write(const std::string & dir, const std::string & name, const SlotFile & file) {
    Fd fd(open_in_dir(dir, name, O_WRONLY | O_CREAT | O_TRUNC, ErrorCode::SAVE_FAILED));
    const uint32_t header[3] = {LLAMA_STATE_SEQ_MAGIC, LLAMA_STATE_SEQ_VERSION, static_cast<uint32_t>(file.payload.size())};
    if (!write_all(fd.fd, header, sizeof(header)) ||
        !write_all(fd.fd, file.payload.data(), file.payload.size() * sizeof(llama_token)) ||
        !write_all(fd.fd, file.state.data(), file.state.size())) {
        refuse(ErrorCode::SAVE_FAILED, std::strerror(errno));
    }
    return sizeof(header) + file.payload.size() * sizeof(llama_token) + file.state.size();
}

uint64_t slot_file_read(const std::string & dir, const std::string & name, SlotFile & out) {
    Fd fd(open_in_dir(dir, name, O_RDONLY, ErrorCode::BAD_SLOT_FILE));
    struct stat st {};
    ::fstat(fd.fd, &st);
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    uint32_t header[3] = {};
    if (size < sizeof(header) || !read_all(fd.fd, header, sizeof(header)) ||
        header[0] != LLAMA_STATE_SEQ_MAGIC || header[1] != LLAMA_STATE_SEQ_VERSION) {
        refuse(ErrorCode::BAD_SLOT_FILE, "not a slot save file of this version");
    }
    const uint64_t rest = size - sizeof(header);
    if (static_cast<uint64_t>(header[2]) * sizeof(llama_token) > rest) {
        refuse(ErrorCode::BAD_SLOT_FILE, "token count in the slot save file exceeds its size");
    }
    out.payload.resize(header[2]);
    out.state.resize(rest - header[2] * sizeof(llama_token));
    if (!read_all(fd.fd, out.payload.data(), out.payload.size() * sizeof(llama_token)) ||
        !read_all(fd.fd, out.state.data(), out.state.size())) {
        refuse(ErrorCode::BAD_SLOT_FILE, "the slot save file could not be read");
    }
    return size;
}

namespace {

// llama-server's server_tokens_state_writer / _reader: native-endian words and u32-counted vectors.
class PayloadWriter {
public:
    template <typename T> void put(T value) {
        const auto * p = reinterpret_cast<const char *>(&value);
        bytes_.insert(bytes_.end(), p, p + sizeof(T));
    }
    template <typename T> void put_vector(const T * data, size_t n) {
        put(static_cast<uint32_t>(n));
        const auto * p = reinterpret_cast<const char *>(data);
        bytes_.insert(bytes_.end(), p, p + n * sizeof(T));
    }
    std::vector<llama_token> take() {
        bytes_.resize((bytes_.size() + sizeof(llama_token) - 1) / sizeof(llama_token) * sizeof(llama_token), 0);
        std::vector<llama_token> out(bytes_.size() / sizeof(llama_token));
        std::memcpy(out.data(), bytes_.data(), bytes_.size());
        return out;
    }

private:
    std::vector<char> bytes_;
};

class PayloadReader {
public:
    explicit PayloadReader(const std::vector<llama_token> & payload)
        : data_(reinterpret_cast<const char *>(payload.data())), size_(payload.size() * sizeof(llama_token)) {}
    template <typename T> T get() {
        if (size_ - pos_ < sizeof(T)) refuse(ErrorCode::BAD_SLOT_FILE, "Unexpected end of server tokens state");
        T value;
        std::memcpy(&value, data_ + pos_, sizeof(T));
        pos_ += sizeof(T);
        return value;
    }
    template <typename T> std::vector<T> get_vector() {
        const uint32_t n = get<uint32_t>();
        if (n > remaining() / sizeof(T)) refuse(ErrorCode::BAD_SLOT_FILE, "Unexpected end of server tokens state");
        std::vector<T> out(n);
        if (n > 0) std::memcpy(out.data(), data_ + pos_, n * sizeof(T));
        pos_ += n * sizeof(T);
        return out;
    }
    size_t remaining() const { return size_ - pos_; }

private:
    const char * data_;
    size_t size_;
    size_t pos_ = 0;
};

// Loads one image chunk and checks that it covers placeholders [start, start + n) of `tokens`.
SlotMedia load_media(const std::vector<char> & bytes, size_t start, const std::vector<llama_token> & tokens) {
    std::shared_ptr<mtmd_input_chunk> chunk(bytes.empty() ? nullptr : mtmd_input_chunk_load(bytes.data(), bytes.size()), mtmd_input_chunk_free);
    if (!chunk) refuse(ErrorCode::BAD_SLOT_FILE, "Cannot load media chunk from server tokens state");
    if (mtmd_input_chunk_get_type(chunk.get()) != MTMD_INPUT_CHUNK_TYPE_IMAGE) refuse(ErrorCode::BAD_SLOT_FILE, "only images are supported in slot files");
    const size_t n = mtmd_input_chunk_get_n_tokens(chunk.get());
    if (static_cast<size_t>(mtmd_input_chunk_get_n_pos(chunk.get())) != n) {
        refuse(ErrorCode::BAD_SLOT_FILE, "images whose positions differ from their tokens are not supported in slot files");
    }
    if (n == 0 || start > tokens.size() || n > tokens.size() - start ||
        std::any_of(tokens.begin() + start, tokens.begin() + start + n, [](llama_token t) { return t != LLAMA_TOKEN_NULL; })) {
        refuse(ErrorCode::BAD_SLOT_FILE, "Invalid tokens in slot save file");
    }
    return {start, std::move(chunk)};
}

}  // namespace

std::vector<llama_token> pack_slot_tokens(const SlotTokens & slot) {
    PayloadWriter w;
    w.put<llama_token>(LLAMA_TOKEN_NULL);
    w.put<uint32_t>(PACKED_VERSION);
    w.put_vector(slot.tokens.data(), slot.tokens.size());
    std::vector<uint32_t> keys;
    for (const auto & m : slot.media) keys.push_back(static_cast<uint32_t>(m.start));
    w.put_vector(keys.data(), keys.size());
    for (const auto & m : slot.media) {
        size_t n = 0;
        if (mtmd_input_chunk_save(m.chunk.get(), nullptr, 0, &n) != 0 || n == 0) refuse(ErrorCode::NOT_SUPPORTED, "Cannot serialize media chunk");
        std::vector<char> bytes(n);
        if (mtmd_input_chunk_save(m.chunk.get(), bytes.data(), bytes.size(), nullptr) != 0) refuse(ErrorCode::NOT_SUPPORTED, "Cannot serialize media chunk");
        w.put_vector(bytes.data(), bytes.size());
    }
    return w.take();
}

SlotTokens unpack_slot_tokens(const std::vector<llama_token> & payload, bool has_vision) {
    SlotTokens out;
    if (payload.empty() || payload[0] != LLAMA_TOKEN_NULL) {  // a plain token list
        out.tokens = payload;
    } else {
        PayloadReader r(payload);
        r.get<llama_token>();
        if (r.get<uint32_t>() != PACKED_VERSION) refuse(ErrorCode::BAD_SLOT_FILE, "Unsupported server tokens state version");
        out.tokens = r.get_vector<llama_token>();
        const std::vector<uint32_t> keys = r.get_vector<uint32_t>();
        if (!keys.empty() && !has_vision) refuse(ErrorCode::BAD_SLOT_FILE, "Cannot restore media tokens without an mmproj");
        size_t covered_to = 0;
        for (uint32_t key : keys) {
            if (key < covered_to) refuse(ErrorCode::BAD_SLOT_FILE, "Invalid tokens in slot save file");
            out.media.push_back(load_media(r.get_vector<char>(), key, out.tokens));
            covered_to = key + mtmd_input_chunk_get_n_tokens(out.media.back().chunk.get());
        }
        if (r.remaining() >= sizeof(llama_token)) refuse(ErrorCode::BAD_SLOT_FILE, "Trailing data in server tokens state");
    }
    size_t n_placeholders = 0;
    for (const auto & m : out.media) n_placeholders += mtmd_input_chunk_get_n_tokens(m.chunk.get());
    if (static_cast<size_t>(std::count(out.tokens.begin(), out.tokens.end(), LLAMA_TOKEN_NULL)) != n_placeholders) {
        refuse(ErrorCode::BAD_SLOT_FILE, "Invalid tokens in slot save file");
    }
    return out;
}

}  // namespace addon
