#include "host-buffers.h"

#include <new>

namespace addon {

HostBuffers::~HostBuffers() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
        wanted_.clear();
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
}

HostBuffer HostBuffers::allocate(size_t capacity) {
    HostBuffer b;
    b.data.reset(new (std::nothrow) uint8_t[capacity]);
    if (b.data) b.capacity = capacity;
    return b;
}

bool HostBuffers::fits(size_t capacity, size_t size) { return capacity >= size && capacity / 2 < size; }

HostBuffer HostBuffers::take(size_t size) {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
        auto best = ready_.end();
        for (auto it = ready_.begin(); it != ready_.end(); ++it) {
            if (fits(it->capacity, size) && (best == ready_.end() || it->capacity < best->capacity)) best = it;
        }
        if (best != ready_.end()) {
            HostBuffer b = std::move(*best);
            ready_.erase(best);
            return b;
        }
        // The one being written is the nearest to ready: wait for it.
        if (preparing_ > 0 && fits(preparing_, size)) {
            const uint64_t finished = finished_;
            done_.wait(lock, [&] { return finished_ != finished; });
            continue;
        }
        // One requested but not started: this thread writes into it (the request goes).
        auto want = wanted_.end();
        for (auto it = wanted_.begin(); it != wanted_.end(); ++it) {
            if (fits(*it, size) && (want == wanted_.end() || *it < *want)) want = it;
        }
        if (want == wanted_.end()) return {};
        const size_t capacity = *want;
        wanted_.erase(want);
        lock.unlock();
        return allocate(capacity);
    }
}

void HostBuffers::give(HostBuffer b) {
    if (!b.data) return;
    std::lock_guard<std::mutex> lock(mu_);
    ready_.push_back(std::move(b));
}

void HostBuffers::prepare(size_t capacity) {
    if (capacity == 0) return;
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });  // at the first request
    {
        std::lock_guard<std::mutex> lock(mu_);
        wanted_.push_back(capacity);
    }
    wake_.notify_one();
}

bool HostBuffers::drop_oldest() {
    HostBuffer dropped;  // freed outside the lock
    std::lock_guard<std::mutex> lock(mu_);
    if (!ready_.empty()) {
        dropped = std::move(ready_.front());
        ready_.pop_front();
        return true;
    }
    if (!wanted_.empty()) {
        wanted_.pop_front();
        return true;
    }
    return false;
}

void HostBuffers::clear() {
    std::list<HostBuffer> dropped;
    std::lock_guard<std::mutex> lock(mu_);
    dropped.swap(ready_);
    wanted_.clear();
}

std::vector<size_t> HostBuffers::capacities() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<size_t> out;
    for (const auto & b : ready_) out.push_back(b.capacity);
    out.insert(out.end(), wanted_.begin(), wanted_.end());
    if (preparing_ > 0) out.push_back(preparing_);
    return out;
}

size_t HostBuffers::bytes() const {
    size_t total = 0;
    for (size_t c : capacities()) total += c;
    return total;
}

// Writing a byte of every page makes the kernel map it now, on this thread, instead of on the engine
// thread during a save.
void HostBuffers::run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
        wake_.wait(lock, [this] { return stop_ || !wanted_.empty(); });
        if (stop_) return;
        preparing_ = wanted_.front();
        wanted_.pop_front();
        lock.unlock();
        HostBuffer b = allocate(preparing_);
        if (b.data) {
            volatile uint8_t * p = b.data.get();
            for (size_t i = 0; i < b.capacity; i += 4096) p[i] = 0;
        }
        lock.lock();
        preparing_ = 0;
        finished_++;
        if (b.data && !stop_) ready_.push_back(std::move(b));
        done_.notify_all();
        if (stop_) return;
    }
}

}  // namespace addon
