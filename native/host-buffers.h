#pragma once
// HostBuffers: host memory for the prompt cache's saved states, ready before the copies need it.
// A copy into fresh memory pays a page fault per 4 KiB page as it writes, several times slower
// than into memory already written (docs/benchmarks.md, "Figures moved from code comments"). So
// buffers given back (an entry restored or evicted) are kept, and a thread of the pool
// writes new ones ahead of time (prepare), while the engine decodes, for the saves it expects.
// Thread-safe; the engine thread takes and gives, the pool's own thread prepares.
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace addon {

struct HostBuffer {
    std::unique_ptr<uint8_t[]> data;
    size_t capacity = 0;
};

class HostBuffers {
public:
    HostBuffers() = default;
    ~HostBuffers();  // stops the preparing thread; buffers being prepared are dropped
    HostBuffers(const HostBuffers &) = delete;
    HostBuffers & operator=(const HostBuffers &) = delete;

    // The smallest buffer that holds `size` bytes and is less than twice that: a ready one, else the
    // one being prepared (waited for), else a new one in place of a request not started (that
    // request is dropped). Empty if none fits, or when out of memory.
    HostBuffer take(size_t size);
    // Whether take(size) would choose a buffer of `capacity` bytes: it holds `size` and is less than twice it.
    static bool fits(size_t capacity, size_t size);
    // A new, untouched buffer of `capacity` bytes (uninitialised); empty when out of memory.
    static HostBuffer allocate(size_t capacity);
    // `b` is ready for reuse.
    void give(HostBuffer b);
    // A buffer of `capacity` bytes is to be written ahead of time and made ready (the preparing
    // thread starts at the first request; one caller thread only).
    void prepare(size_t capacity);
    // Drops the oldest ready buffer, or else a request not yet started; false when neither exists.
    bool drop_oldest();
    // Drops every ready buffer and every request not yet started.
    void clear();

    // Capacities of the ready buffers and of those requested or being prepared.
    std::vector<size_t> capacities() const;
    // Bytes of the ready buffers and of those requested or being prepared.
    size_t bytes() const;

private:
    void run();

    mutable std::mutex mu_;
    std::condition_variable wake_;  // a request came, or stop
    std::condition_variable done_;  // the buffer being prepared is ready
    std::list<HostBuffer> ready_;  // oldest first
    std::deque<size_t> wanted_;    // capacities requested, first come first prepared
    size_t preparing_ = 0;         // capacity the thread is writing now (0: none)
    uint64_t finished_ = 0;        // buffers the thread has finished
    bool stop_ = false;
    std::thread thread_;           // started by the first prepare()
};

}  // namespace addon
