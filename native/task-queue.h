#pragma once
// TaskQueue: everything that crosses between the JS thread and an engine's thread, and every lock
// that guards it, as llama-server's server_queue / server_response:
//   in:  prepared tasks, cancellations, slot actions and tenants' charges from other model
//        processes (JS thread -> engine thread), and the
//        count of requests the server is still preparing (their chat template rendered, their
//        prompt tokenized) that an idle engine gathering a burst waits for;
//   out: events and slot-action results (engine thread -> JS thread), handed over in bundles
//        through one delivery call at a time, and the slots' summaries for /slots.
// Each method says which thread may call it. No N-API here: the binding layer gives the queue a
// function that schedules a delivery on the JS thread (set_delivery).
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cache-events.h"
#include "engine-counters.h"
#include "slot-action.h"
#include "slot.h"
#include "task.h"

namespace addon {

// Tokens a tenant used on another model process of the router (TenantClocks::charge_elsewhere).
struct TenantCharge {
    std::string tenant;
    int64_t tokens = 0;
};

// What the engine thread takes from the queue in one go.
struct Intake {
    std::vector<std::unique_ptr<CompletionTask>> tasks;
    std::vector<int64_t> cancels;
    std::vector<SlotAction> actions;
    std::vector<TenantCharge> charges;
};

enum class BurstWait { ARRIVED, QUIET, STOPPING };

class TaskQueue {
public:
    explicit TaskQueue(EngineCounters & counters) : counters_(counters) {}

    // JS thread. Tasks enter together (so that they can share their first batch); `prepared`:
    // they are those of a request counted by begin_preparing, which stops counting now.
    void push_tasks(std::vector<std::unique_ptr<CompletionTask>> tasks, bool prepared);
    void push_cancel(int64_t id);
    void push_action(SlotAction action);
    // Router mode: tenants' use of other model processes. Does not wake the engine thread: a
    // charge only matters to an admission, which the next turn of the loop makes anyway.
    void push_charges(std::vector<TenantCharge> charges);
    // JS thread: a generating request arrived and is being prepared; end_preparing: it was
    // withdrawn before its tasks were pushed (an error, the client gone), or refused.
    void begin_preparing();
    void end_preparing();
    // Any thread: requests being prepared now.
    int32_t n_preparing();
    // Any thread: the engine thread stops at its next wait (take, wait_for_burst return false / STOPPING).
    void stop();
    // Any thread: a waiting task became ready to admit (its disk read is done): the engine thread's
    // next take returns at once (an idle engine waiting in take wakes now).
    void wake();

    // Engine thread: moves what arrived into `out` (appending), first waiting for something
    // when `wait`; false once the queue is stopping.
    bool take(bool wait, Intake & out);
    // Engine thread, an idle engine gathering a burst: waits until something arrives (ARRIVED),
    // or nothing came for `quiet` and nothing is being prepared (QUIET, also at `deadline`, or
    // at `preparing_deadline` while requests are being prepared), or the queue stops.
    BurstWait wait_for_burst(std::chrono::microseconds quiet, std::chrono::steady_clock::time_point deadline,
                             std::chrono::steady_clock::time_point preparing_deadline);

    // Engine thread: results for JS, sent by the next flush.
    void push_event(EngineEvent && event);
    void push_action_results(std::vector<SlotActionResult> results);
    // Engine thread: schedules a delivery of what is pending, unless one is scheduled already.
    void flush();
    // JS thread, inside a delivery: takes what is pending; the next flush schedules a new delivery.
    void take_results(std::vector<EngineEvent> & events, std::vector<SlotActionResult> & actions);
    // JS thread: how a delivery is scheduled (null: results stay queued, e.g. once disposed).
    void set_delivery(std::function<void()> schedule);

    // Engine thread: the slots' state for /slots (and the busy-slot count).
    void publish(const std::vector<Slot> & slots);
    // Any thread.
    std::vector<SlotSummary> summaries();
    // The slots' cache changes for the KV-cache events, observed at each publish (off until enabled).
    CacheEvents & cache_events() { return cache_events_; }

private:
    EngineCounters & counters_;

    std::mutex in_mutex_;
    std::condition_variable in_cv_;
    std::vector<std::unique_ptr<CompletionTask>> tasks_;
    std::vector<int64_t> cancels_;
    std::vector<SlotAction> actions_;
    std::vector<TenantCharge> charges_;
    int32_t preparing_ = 0;
    bool stopping_ = false;
    bool woken_ = false;

    std::mutex out_mutex_;
    std::vector<EngineEvent> events_;
    std::vector<SlotActionResult> action_results_;
    bool delivery_pending_ = false;
    std::function<void()> schedule_delivery_;

    std::mutex summary_mutex_;
    std::vector<SlotSummary> summaries_;
    CacheEvents cache_events_;
};

}  // namespace addon
