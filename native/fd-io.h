#pragma once
// Whole reads and writes on a POSIX file descriptor (slot files, the disk tier's state files).
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>

namespace addon {

// Writes all `size` bytes, retrying after EINTR; false on an error or a write of nothing.
inline bool write_all(int fd, const void * data, size_t size) {
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

// Reads exactly `size` bytes, retrying after EINTR; false on an error or the end of the file first.
inline bool read_all(int fd, void * data, size_t size) {
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

}  // namespace addon
