#include "slot-file.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "errors.h"

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

bool write_all(int fd, const void * data, size_t size) {
    const auto * p = static_cast<const uint8_t *>(data);
    while (size > 0) {
        const ssize_t n = ::write(fd, p, size);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        p += n;
        size -= static_cast<size_t>(n);
    }
    return true;
}

bool read_all(int fd, void * data, size_t size) {
    auto * p = static_cast<uint8_t *>(data);
    while (size > 0) {
        const ssize_t n = ::read(fd, p, size);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        p += n;
        size -= static_cast<size_t>(n);
    }
    return true;
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

std::vector<llama_token> pack_slot_tokens(const std::vector<llama_token> & tokens) {
    std::vector<llama_token> out;
    out.reserve(tokens.size() + 4);
    out.push_back(LLAMA_TOKEN_NULL);
    out.push_back(static_cast<llama_token>(PACKED_VERSION));
    out.push_back(static_cast<llama_token>(tokens.size()));
    out.insert(out.end(), tokens.begin(), tokens.end());
    out.push_back(0);  // no media
    return out;
}

std::vector<llama_token> unpack_slot_tokens(const std::vector<llama_token> & payload, bool has_vision) {
    if (payload.empty() || payload[0] != LLAMA_TOKEN_NULL) return payload;  // a plain token list
    if (payload.size() < 3 || static_cast<uint32_t>(payload[1]) != PACKED_VERSION) {
        refuse(ErrorCode::BAD_SLOT_FILE, "Unsupported server tokens state version");
    }
    const uint32_t n_tokens = static_cast<uint32_t>(payload[2]);
    if (n_tokens > payload.size() - 3 || payload.size() - 3 - n_tokens < 1) {
        refuse(ErrorCode::BAD_SLOT_FILE, "Unexpected end of server tokens state");
    }
    const size_t media_at = 3 + n_tokens;
    if (payload[media_at] != 0) {
        refuse(ErrorCode::BAD_SLOT_FILE, has_vision ? "restoring media tokens from a slot file is not supported by this server"
                                                    : "Cannot restore media tokens without an mmproj");
    }
    if (payload.size() > media_at + 1) refuse(ErrorCode::BAD_SLOT_FILE, "Trailing data in server tokens state");
    return std::vector<llama_token>(payload.begin() + 3, payload.begin() + static_cast<std::ptrdiff_t>(media_at));
}

}  // namespace addon
