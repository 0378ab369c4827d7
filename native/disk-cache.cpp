// The disk tier's store (disk-cache.h): the index of its files, the reader and writer threads, and
// the budget. The file format is disk-file.cpp's.
#include "disk-cache.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/syscall.h>
#endif

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "fd-io.h"
#include "log.h"
#include "prompt-cache.h"
#include "restore-rule.h"

namespace fs = std::filesystem;

namespace addon {

// Writes waiting (bytes of their states) beyond which a new one is dropped: at least one write
// always waits, whatever its size.
static constexpr size_t kMaxPendingBytes = 512ull << 20;
static constexpr size_t kMaxPendingWrites = 8;
bool disk_read_may_be_held(size_t held_reads, uint64_t held_bytes, uint64_t file_size) {
    return held_reads == 0 || (held_reads < kMaxHeldReads && held_bytes + file_size <= kMaxHeldBytes);
}

namespace {

void fsync_dir(const std::string & dir) {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
    if (fd < 0) return;
    ::fsync(fd);
    ::close(fd);
}

bool is_state_file(const fs::path & p) { return p.extension() == ".kv" && p.filename().string()[0] != '.'; }

}  // namespace

DiskCache::DiskCache(DiskCacheSettings settings, DiskCacheCounters & counters) : settings_(std::move(settings)), counters_(counters) {
    const std::string & fingerprint = settings_.fingerprint;
    char name[17];
    std::snprintf(name, sizeof(name), "%016llx", static_cast<unsigned long long>(disk_hash(fingerprint.data(), fingerprint.size())));
    model_dir_ = (fs::path(settings_.dir) / name).string();
    std::error_code ec;
    fs::create_directories(model_dir_, ec);
    if (ec) throw std::runtime_error("--cache-disk: cannot create " + model_dir_ + ": " + ec.message());
    ::chmod(settings_.dir.c_str(), 0700);
    ::chmod(model_dir_.c_str(), 0700);
    if (::access(model_dir_.c_str(), W_OK) != 0) throw std::runtime_error("--cache-disk: " + model_dir_ + " is not writable");
    adopt();
    enforce_budget();
    writer_ = std::thread([this] { run_writer(); });
    reader_ = std::thread([this] { run_reader(); });
}

DiskCache::~DiskCache() {
    {
        std::lock_guard<std::mutex> lock(read_mu_);
        read_stop_ = true;
    }
    read_wake_.notify_all();
    if (reader_.joinable()) reader_.join();
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
    }
    wake_.notify_all();
    if (writer_.joinable()) writer_.join();
}

// Start-up: every complete file of this fingerprint becomes an entry; anything else in the
// directory that could be mistaken for one goes.
void DiskCache::adopt() {
    std::error_code ec;
    for (const auto & de : fs::directory_iterator(model_dir_, ec)) {
        const fs::path path = de.path();
        const std::string name = path.filename().string();
        if (name.rfind(".tmp-", 0) == 0) {
            fs::remove(path, ec);
            continue;
        }
        if (!is_state_file(path)) continue;
        Entry e;
        e.path = path.string();
        std::optional<DiskFileHeader> header;
        const int fd = ::open(e.path.c_str(), O_RDONLY);
        struct stat st{};
        if (fd >= 0 && ::fstat(fd, &st) == 0) {
            e.file_size = static_cast<uint64_t>(st.st_size);
            header = disk_file_read_header(fd, e.file_size, settings_.fingerprint);
        }
        if (fd >= 0) ::close(fd);
        if (!header) {
            log_write("warn", "disk cache: deleting " + e.path + " (not a complete state of this model and layout)\n");
            fs::remove(path, ec);
            counters_.rejected++;
            continue;
        }
        e.tokens = std::move(header->tokens);
        e.lora = std::move(header->lora);
        e.id = std::strtoull(name.c_str(), nullptr, 10);
        next_id_ = std::max<uint64_t>(next_id_, e.id + 1);
        counters_.bytes += e.file_size;
        counters_.adopted++;
        entries_.push_back(std::move(e));
    }
    if (!entries_.empty()) log_debug("disk cache: " + std::to_string(entries_.size()) + " states adopted from " + model_dir_ + "\n");
}

void DiskCache::report_to(CacheEvents * events) {
    std::lock_guard<std::mutex> lock(mu_);
    events_ = events;
    if (events_) {
        for (const auto & e : entries_) events_->tier_stored(CacheTier::disk, e.id, e.tokens, e.lora);
    }
}

size_t DiskCache::longest_prefix(const std::vector<llama_token> & prompt, const std::vector<float> & lora) const {
    std::lock_guard<std::mutex> lock(mu_);
    size_t best = 0;
    for (const auto & e : entries_) {
        if (e.lora == lora) best = std::max(best, common_prefix_length(e.tokens, prompt));
    }
    return best;
}

bool DiskCache::worth_saving(const std::vector<llama_token> & tokens, const std::vector<float> & lora, size_t min_new) const {
    std::lock_guard<std::mutex> lock(mu_);
    size_t best = 0;
    for (const auto & e : entries_) {
        if (e.lora == lora) best = std::max(best, common_prefix_length(e.tokens, tokens));
    }
    for (const auto & w : writing_) {
        if (w.second == lora) best = std::max(best, common_prefix_length(w.first, tokens));
    }
    return tokens.size() >= best + min_new;
}

std::shared_ptr<DiskPrefetch> DiskCache::prefetch(const std::vector<llama_token> & prompt, const std::vector<float> & lora, size_t beat) {
    Entry chosen;
    size_t best = beat;
    {
        std::lock_guard<std::mutex> lock(mu_);
        for (const auto & e : entries_) {
            if (e.lora != lora) continue;
            const size_t n = common_prefix_length(e.tokens, prompt);
            if (n > best && restore_keeps_enough(n, e.tokens.size())) {
                best = n;
                chosen = e;
            }
        }
    }
    if (chosen.path.empty()) {
        counters_.misses++;
        return nullptr;
    }
    // A read of the same file that another task asked for is shared; the rest are bounded (each
    // holds a whole state in host memory until its task is admitted).
    held_.erase(std::remove_if(held_.begin(), held_.end(), [](const auto & w) { return w.expired(); }), held_.end());
    uint64_t held_bytes = 0;
    for (const auto & w : held_) {
        auto p = w.lock();
        if (p && p->path == chosen.path) return p;
        if (p) held_bytes += p->file_size;
    }
    if (!disk_read_may_be_held(held_.size(), held_bytes, chosen.file_size)) {
        counters_.misses++;
        return nullptr;
    }
    auto p = std::make_shared<DiskPrefetch>();
    p->path = chosen.path;
    p->file_size = chosen.file_size;
    held_.push_back(p);
    {
        std::lock_guard<std::mutex> lock(read_mu_);
        reads_.push_back(Read{std::move(chosen), p});
    }
    read_wake_.notify_one();
    return p;
}

void DiskCache::run_reader() {
    while (true) {
        Read r;
        {
            std::unique_lock<std::mutex> lock(read_mu_);
            read_wake_.wait(lock, [&] { return read_stop_ || !reads_.empty(); });
            if (read_stop_) return;
            r = std::move(reads_.front());
            reads_.pop_front();
        }
        if (settings_.read_delay_ms > 0) {
            std::unique_lock<std::mutex> lock(read_mu_);
            if (read_wake_.wait_for(lock, std::chrono::milliseconds(settings_.read_delay_ms), [&] { return read_stop_; })) return;
        }
        r.into->state = read_checked(std::move(r.entry));
        r.into->done.store(true, std::memory_order_release);
        if (on_read_) on_read_();
    }
}

// The whole file is read and checked before anything reaches the context.
std::optional<DiskCache::State> DiskCache::read_checked(Entry chosen) {
    auto reject = [&](const char * why) -> std::optional<State> {
        log_write("warn", "disk cache: deleting " + chosen.path + " (" + why + ")\n");
        std::error_code ec;
        fs::remove(chosen.path, ec);
        std::lock_guard<std::mutex> lock(mu_);
        for (size_t i = 0; i < entries_.size(); i++) {
            if (entries_[i].path == chosen.path) {
                counters_.bytes -= entries_[i].file_size;
                if (events_) events_->tier_removed(CacheTier::disk, entries_[i].id);
                entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(i));
                break;
            }
        }
        counters_.rejected++;
        counters_.misses++;
        return std::nullopt;
    };
    const int fd = ::open(chosen.path.c_str(), O_RDONLY);
    if (fd < 0) return reject("gone");
    State st;
    st.file = HostBuffers::allocate(chosen.file_size);
    const bool read_ok = st.file.data && read_all(fd, st.file.data.get(), chosen.file_size);
    char extra;
    const bool at_end = read_ok && ::read(fd, &extra, 1) == 0;  // the file did not grow since
    ::close(fd);
    if (!st.file.data) {  // out of memory: the file stays
        counters_.misses++;
        return std::nullopt;
    }
    if (!read_ok || !at_end) return reject("size changed");
    counters_.bytes_read += chosen.file_size;
    if (const char * why = disk_file_check(st.file.data.get(), chosen.file_size, settings_.fingerprint, chosen.tokens, chosen.lora, st.data, st.size)) {
        return reject(why);
    }
    st.path = chosen.path;
    st.tokens = std::move(chosen.tokens);
    return st;
}

void DiskCache::restored(const State & state) {
    ::utimensat(AT_FDCWD, state.path.c_str(), nullptr, 0);  // its last use, for the LRU order across restarts
    counters_.hits++;
}

bool DiskCache::room_for(std::unique_lock<std::mutex> & lock, size_t size, bool wait) {
    auto room = [&] { return writes_.empty() || (pending_bytes_ + size <= kMaxPendingBytes && writes_.size() < kMaxPendingWrites); };
    if (wait) idle_.wait(lock, room);
    if (room()) return true;
    counters_.dropped++;
    return false;
}

bool DiskCache::save(llama_context * ctx, int32_t seq, const std::vector<llama_token> & tokens, const std::vector<float> & lora, bool wait) {
    if (tokens.empty()) return false;
    const size_t size = llama_state_seq_get_size(ctx, seq);
    if (size == 0) return false;
    {
        std::unique_lock<std::mutex> lock(mu_);
        if (!room_for(lock, size, wait)) return false;
    }
    HostBuffer b = HostBuffers::allocate(size);
    if (!b.data) return false;
    const size_t written = llama_state_seq_get_data(ctx, b.data.get(), size, seq);
    if (written == 0) return false;
    return save_buffer(tokens, lora, std::move(b), written, wait);
}

bool DiskCache::save_buffer(std::vector<llama_token> tokens, std::vector<float> lora, HostBuffer buffer, size_t size, bool wait) {
    {
        std::unique_lock<std::mutex> lock(mu_);
        if (!room_for(lock, size, wait)) return false;
        writing_.emplace_back(tokens, lora);
        pending_bytes_ += size;
        counters_.pending++;
        writes_.push_back(Write{std::move(tokens), std::move(lora), std::move(buffer), size});
    }
    wake_.notify_one();
    return true;
}

void DiskCache::flush() {
    std::unique_lock<std::mutex> lock(mu_);
    idle_.wait(lock, [this] { return writing_.empty(); });
}

void DiskCache::run_writer() {
#ifdef __linux__
    // Background work: the writer (checksum, write, fsync) takes a core only when decoding leaves one.
    setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19);
#endif
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
        wake_.wait(lock, [this] { return stop_ || !writes_.empty(); });
        if (writes_.empty()) break;  // stopping, everything written
        Write w = std::move(writes_.front());
        writes_.pop_front();
        lock.unlock();
        write_file(w);
        lock.lock();
        pending_bytes_ -= w.size;
        counters_.pending--;
        for (size_t i = 0; i < writing_.size(); i++) {
            if (writing_[i].first == w.tokens && writing_[i].second == w.lora) {
                writing_.erase(writing_.begin() + static_cast<std::ptrdiff_t>(i));
                break;
            }
        }
        lock.unlock();
        enforce_budget();
        lock.lock();
        idle_.notify_all();
    }
    idle_.notify_all();
}

// Writer thread: the state to a temporary file, synced, then renamed into place; a longer state
// supersedes the files it contains.
void DiskCache::write_file(Write & w) {
    const std::string prefix = disk_file_prefix(settings_.fingerprint, w.tokens, w.lora, w.size);
    uint64_t id;
    {
        std::lock_guard<std::mutex> lock(mu_);
        id = next_id_++;
    }
    const std::string tmp = model_dir_ + "/.tmp-" + std::to_string(::getpid()) + "-" + std::to_string(id);
    const std::string path = model_dir_ + "/" + std::to_string(id) + ".kv";
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    // Tests: a slow disk, half way through the state (a shutdown cuts the wait short).
    const auto halfway = [this] {
        if (settings_.write_delay_ms <= 0) return;
        std::unique_lock<std::mutex> lock(mu_);
        wake_.wait_for(lock, std::chrono::milliseconds(settings_.write_delay_ms), [this] { return stop_; });
    };
    bool ok = fd >= 0 && disk_file_write(fd, prefix, w.buffer.data.get(), w.size, halfway) && ::fsync(fd) == 0;
    if (fd >= 0) ::close(fd);
    ok = ok && ::rename(tmp.c_str(), path.c_str()) == 0;
    if (!ok) {
        log_write("warn", "disk cache: could not write " + path + ": " + std::strerror(errno) + "\n");
        ::unlink(tmp.c_str());
        return;
    }
    fsync_dir(model_dir_);
    const uint64_t file_size = disk_file_size(prefix.size(), w.size);
    counters_.bytes_written += file_size;
    counters_.files_written++;
    counters_.bytes += file_size;
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = entries_.size(); i-- > 0;) {
        const Entry & e = entries_[i];
        if (e.lora == w.lora && e.tokens.size() <= w.tokens.size() && common_prefix_length(e.tokens, w.tokens) == e.tokens.size()) {
            remove_entry_locked(i, true);
        }
    }
    // Copies: run_writer finds the write's entry in writing_ by these tokens once this returns.
    entries_.push_back(Entry{path, w.tokens, w.lora, file_size, id});
    if (events_) events_->tier_stored(CacheTier::disk, id, w.tokens, w.lora);
}

void DiskCache::remove_entry_locked(size_t i, bool count_eviction) {
    std::error_code ec;
    fs::remove(entries_[i].path, ec);
    counters_.bytes -= entries_[i].file_size;
    if (count_eviction) counters_.evictions++;
    if (events_) events_->tier_removed(CacheTier::disk, entries_[i].id);
    entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(i));
}

// Writer thread (and start-up): the least recently used files of the whole directory, every
// model's, go until the rest fits the budget. Another process sharing the directory may delete
// the same files meanwhile; a file already gone is simply skipped.
void DiskCache::enforce_budget() {
    const uint64_t budget = settings_.budget_bytes;
    if (budget == 0) return;
    struct File {
        fs::path path;
        uint64_t size;
        int64_t mtime;  // file clock ticks: only compared
    };
    std::vector<File> files;
    uint64_t total = 0;
    std::error_code ec;
    for (const auto & model : fs::directory_iterator(settings_.dir, ec)) {
        if (!model.is_directory(ec)) continue;
        for (const auto & de : fs::directory_iterator(model.path(), ec)) {
            if (!is_state_file(de.path())) continue;
            const uint64_t size = de.file_size(ec);
            if (ec) continue;
            const auto mtime = fs::last_write_time(de.path(), ec);
            if (ec) continue;
            files.push_back(File{de.path(), size, static_cast<int64_t>(mtime.time_since_epoch().count())});
            total += size;
        }
    }
    if (total <= budget) return;
    std::sort(files.begin(), files.end(), [](const File & a, const File & b) { return a.mtime < b.mtime; });
    std::lock_guard<std::mutex> lock(mu_);
    for (const File & f : files) {
        if (total <= budget) break;
        total -= f.size;
        bool mine = false;
        for (size_t i = 0; i < entries_.size(); i++) {
            if (entries_[i].path == f.path.string()) {
                remove_entry_locked(i, true);
                mine = true;
                break;
            }
        }
        if (!mine) {
            fs::remove(f.path, ec);
            counters_.evictions++;
        }
    }
}

}  // namespace addon
