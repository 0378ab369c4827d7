#pragma once
// DiskCache: the disk tier's store (--cache-disk DIR): its files, their index, the threads that
// read and write them, and the budget. What goes there and when a prompt is restored from it is
// the policy's (disk-tier.h); the file format is disk-file.h's. Slot states (the K/V of a prompt
// and its answer, as llama_state_seq_get_data writes it) are kept in files, found again by prefix
// as the host-memory tier's entries are, and survive restarts and model swaps.
//
// Files. DIR/<fingerprint hash>/<n>.kv, one state each (disk-file.h). The fingerprint names what a
// state is valid for: the llama.cpp build, the model file, the adapters loaded, the KV types and
// the context/sequence layout (disk-tier.cpp composes it); two models never share a directory,
// and a file whose header names another fingerprint is never loaded.
//
// Crash safety. A file is written under a temporary name (.tmp-*), fsynced, renamed into place
// and its directory fsynced: a kill at any moment leaves either no file or a complete one. At
// start-up (adoption) temporary files are deleted, and so is every file whose header is not
// readable, names another fingerprint, or whose size is not the one its header implies
// (truncated); the checksum is verified when a file is loaded, and a file that fails it is deleted
// and counted as a miss. Nothing that is not complete and intact is ever restored.
//
// Threads. The engine thread looks up (longest_prefix), asks for reads (prefetch: when a task
// arrives) and hands states over for writing (save: a copy of the sequence's state into host
// memory, then queued). A reader thread reads and checks the files asked for, and tells the
// engine when one is ready (set_on_read): the task waits for its read in the queue while the
// other slots go on decoding, so the engine thread never waits for the disk. Tasks that want the
// same file share one read. One writer thread of its own, at the lowest priority (Linux: nice
// 19), writes, renames and enforces the budget; when the writes waiting exceed their bound the
// new one is dropped (counted). The destructor finishes the writes queued (a graceful shutdown
// leaves them on disk) and drops the reads not started.
//
// Budget. The files of the whole DIR (every fingerprint's: router mode's models share it) are
// kept under `budget_bytes`, least recently used first out; a file's last use is its mtime (set
// when written and when loaded), so the order survives restarts.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cache-events.h"
#include "disk-file.h"
#include "host-buffers.h"
#include "llama.h"

namespace addon {

// For /metrics (readable from any thread).
struct DiskCacheCounters {
    std::atomic<uint64_t> hits{0};          // prompts restored from a file
    std::atomic<uint64_t> misses{0};        // prompts that found no file worth restoring
    std::atomic<uint64_t> bytes_written{0};
    std::atomic<uint64_t> bytes_read{0};
    std::atomic<uint64_t> files_written{0};
    std::atomic<uint64_t> evictions{0};     // files deleted for the budget, or superseded by a longer state
    std::atomic<uint64_t> rejected{0};      // files deleted unread: another layout, truncated, failed checksum
    std::atomic<uint64_t> dropped{0};       // writes dropped because too many were waiting
    std::atomic<uint64_t> adopted{0};       // files found valid at start-up
    std::atomic<int32_t> pending{0};        // writes queued or in progress
    std::atomic<uint64_t> bytes{0};         // bytes of this fingerprint's files
};

// Reads asked for, or done and still held by a waiting task (each a whole state in host memory):
// beyond this many, or this many bytes, a task computes its prompt instead. One is always allowed.
constexpr size_t kMaxHeldReads = 16;
constexpr uint64_t kMaxHeldBytes = 2ull << 30;
// Whether one more read of `file_size` bytes may be asked for while `held_reads` reads of
// `held_bytes` in all are held (DiskCache::prefetch's bound).
bool disk_read_may_be_held(size_t held_reads, uint64_t held_bytes, uint64_t file_size);

struct DiskPrefetch;

// Where the store keeps its files and how.
struct DiskCacheSettings {
    std::string dir;            // DIR
    uint64_t budget_bytes = 0;  // over the whole DIR; 0: no limit
    std::string fingerprint;    // what the states are valid for (the files' subdirectory and headers)
    // Tests only (EngineParams::cache_disk_test_*): a slow disk. Each write waits this long half
    // way through its state, each read this long before it starts; a shutdown cuts either short.
    int64_t write_delay_ms = 0;
    int64_t read_delay_ms = 0;
};

class DiskCache {
public:
    // Adopts DIR/<hash of fingerprint>'s files (creating the directories). Throws std::runtime_error
    // when DIR cannot be created or written. `counters` outlive the cache (the engine's, read
    // after it is gone).
    DiskCache(DiskCacheSettings settings, DiskCacheCounters & counters);
    ~DiskCache();
    DiskCache(const DiskCache &) = delete;
    DiskCache & operator=(const DiskCache &) = delete;

    // Engine thread. Longest common prefix of `prompt` with a file's tokens under the same adapter scales.
    size_t longest_prefix(const std::vector<llama_token> & prompt, const std::vector<float> & lora) const;

    // A state read from a file and checked (fingerprint, size, checksum), ready for
    // llama_state_seq_set_data.
    struct State {
        std::string path;
        std::vector<llama_token> tokens;
        HostBuffer file;          // the whole file
        const uint8_t * data = nullptr;  // the state inside it
        size_t size = 0;
    };
    // Engine thread. Asks the reader thread for the file (same adapter scales) sharing the longest
    // prefix with `prompt`, when that prefix is longer than `beat` tokens and the file is worth
    // restoring for it (restore_keeps_enough, as the host-memory tier); a read
    // of that file already asked for (or done, and still held by a task) is shared. Null (a miss)
    // when no file qualifies, or when the reads asked for or held already reach their bound
    // (kMaxHeldReads, kMaxHeldBytes; one is always allowed). Once the
    // read is done, its `state` is empty (a miss) when the file failed its checks (it is deleted)
    // or there was no memory to read it into.
    std::shared_ptr<DiskPrefetch> prefetch(const std::vector<llama_token> & prompt, const std::vector<float> & lora, size_t beat);
    // Engine thread: `state` was restored (a hit; the file's last use is now).
    void restored(const State & state);
    // Before the first prefetch: called on the reader thread after each read (wakes the engine).
    void set_on_read(std::function<void()> on_read) { on_read_ = std::move(on_read); }

    // Engine thread. Whether a state of `tokens` adds enough to what the files (and writes
    // waiting) hold to be written: at least `min_new` tokens past the longest prefix they share.
    bool worth_saving(const std::vector<llama_token> & tokens, const std::vector<float> & lora, size_t min_new) const;

    // Engine thread. Copies sequence `seq`'s state and queues it for writing. False when nothing
    // was queued (empty state, out of memory, or too many writes waiting: dropped, unless `wait`,
    // which waits for the writer instead, as at shutdown).
    bool save(llama_context * ctx, int32_t seq, const std::vector<llama_token> & tokens, const std::vector<float> & lora, bool wait = false);
    // Engine thread. Queues a state already in host memory (an entry the host-memory tier evicts).
    bool save_buffer(std::vector<llama_token> tokens, std::vector<float> lora, HostBuffer buffer, size_t size, bool wait = false);

    // Any thread: blocks until every write queued so far is on disk (tests, shutdown).
    void flush();

    // Any thread: reports each file as it is written and deleted (CacheEvents' disk tier), starting
    // with those held now (adopted at start-up, or written since).
    void report_to(CacheEvents * events);

    const DiskCacheCounters & counters() const { return counters_; }
    const std::string & directory() const { return model_dir_; }

private:
    struct Entry {
        std::string path;
        std::vector<llama_token> tokens;
        std::vector<float> lora;
        uint64_t file_size = 0;
        uint64_t id = 0;  // <id>.kv
    };
    struct Write {
        std::vector<llama_token> tokens;
        std::vector<float> lora;
        HostBuffer buffer;
        size_t size = 0;
    };

    struct Read {
        Entry entry;
        std::shared_ptr<DiskPrefetch> into;
    };

    // With mu_ held: whether a write of `size` bytes may be queued now (waiting for room when `wait`).
    bool room_for(std::unique_lock<std::mutex> & lock, size_t size, bool wait);
    void adopt();
    // The reader thread: reads the whole file and checks it (nullopt: gone, changed, or failing
    // its checksum, then deleted; or no memory).
    std::optional<State> read_checked(Entry chosen);
    void run_reader();
    void run_writer();
    void write_file(Write & w);
    void enforce_budget();
    void remove_entry_locked(size_t i, bool count_eviction);

    const DiskCacheSettings settings_;
    std::string model_dir_;   // DIR/<hash>
    DiskCacheCounters & counters_;

    mutable std::mutex mu_;   // entries_, writes_, pending_bytes_, stop_, events_
    CacheEvents * events_ = nullptr;
    std::condition_variable wake_;
    std::condition_variable idle_;
    std::vector<Entry> entries_;
    std::deque<Write> writes_;
    std::vector<std::pair<std::vector<llama_token>, std::vector<float>>> writing_;  // queued or in progress, for worth_saving
    size_t pending_bytes_ = 0;
    uint64_t next_id_ = 0;
    bool stop_ = false;
    std::thread writer_;

    std::mutex read_mu_;      // reads_, read_stop_
    std::condition_variable read_wake_;
    std::deque<Read> reads_;
    bool read_stop_ = false;
    std::function<void()> on_read_;
    std::vector<std::weak_ptr<DiskPrefetch>> held_;  // engine thread: reads asked for, alive while a task holds them
    std::thread reader_;
};

// A read asked for by prefetch, shared by the tasks that want the file. `state` may be read by the
// engine thread once `done` is true (the reader thread sets it last, with release order).
struct DiskPrefetch {
    std::string path;
    uint64_t file_size = 0;
    std::atomic<bool> done{false};
    std::optional<DiskCache::State> state;
};

}  // namespace addon
