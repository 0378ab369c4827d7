#include "task-queue.h"

#include "ggml.h"

namespace addon {

void TaskQueue::push_tasks(std::vector<std::unique_ptr<CompletionTask>> tasks, bool prepared) {
    counters_.queued += static_cast<int32_t>(tasks.size());
    {
        std::lock_guard<std::mutex> lock(in_mutex_);
        const int64_t now = ggml_time_us();
        for (auto & t : tasks) {
            t->t_queued_us = now;
            tasks_.push_back(std::move(t));
        }
        if (prepared && preparing_ > 0) preparing_--;
    }
    in_cv_.notify_one();
}

void TaskQueue::push_cancel(int64_t id) {
    {
        std::lock_guard<std::mutex> lock(in_mutex_);
        cancels_.push_back(id);
    }
    in_cv_.notify_one();
}

void TaskQueue::wake() {
    {
        std::lock_guard<std::mutex> lock(in_mutex_);
        woken_ = true;
    }
    in_cv_.notify_one();
}

void TaskQueue::push_charges(std::vector<TenantCharge> charges) {
    std::lock_guard<std::mutex> lock(in_mutex_);
    for (auto & c : charges) charges_.push_back(std::move(c));
}

void TaskQueue::push_action(SlotAction action) {
    {
        std::lock_guard<std::mutex> lock(in_mutex_);
        actions_.push_back(std::move(action));
    }
    in_cv_.notify_one();
}

void TaskQueue::begin_preparing() {
    std::lock_guard<std::mutex> lock(in_mutex_);
    preparing_++;
}

void TaskQueue::end_preparing() {
    {
        std::lock_guard<std::mutex> lock(in_mutex_);
        if (preparing_ > 0) preparing_--;
    }
    in_cv_.notify_one();
}

int32_t TaskQueue::n_preparing() {
    std::lock_guard<std::mutex> lock(in_mutex_);
    return preparing_;
}

void TaskQueue::stop() {
    {
        std::lock_guard<std::mutex> lock(in_mutex_);
        stopping_ = true;
    }
    in_cv_.notify_all();
}

bool TaskQueue::take(bool wait, Intake & out) {
    std::unique_lock<std::mutex> lock(in_mutex_);
    if (wait) in_cv_.wait(lock, [&] { return stopping_ || woken_ || !tasks_.empty() || !cancels_.empty() || !actions_.empty(); });
    if (stopping_) return false;
    woken_ = false;
    for (auto & t : tasks_) out.tasks.push_back(std::move(t));
    tasks_.clear();
    out.cancels.insert(out.cancels.end(), cancels_.begin(), cancels_.end());
    cancels_.clear();
    for (auto & a : actions_) out.actions.push_back(std::move(a));
    actions_.clear();
    for (auto & c : charges_) out.charges.push_back(std::move(c));
    charges_.clear();
    return true;
}

BurstWait TaskQueue::wait_for_burst(std::chrono::microseconds quiet, std::chrono::steady_clock::time_point deadline,
                                    std::chrono::steady_clock::time_point preparing_deadline) {
    std::unique_lock<std::mutex> lock(in_mutex_);
    while (true) {
        const bool expecting = preparing_ > 0;
        const auto end = expecting ? preparing_deadline : deadline;
        const auto now = std::chrono::steady_clock::now();
        if (now >= end) return BurstWait::QUIET;
        const auto until = expecting ? end : std::min(end, now + quiet);
        const bool woken = in_cv_.wait_until(lock, until, [&] {
            return stopping_ || !tasks_.empty() || !cancels_.empty() || (expecting && preparing_ == 0);
        });
        if (stopping_) return BurstWait::STOPPING;
        if (woken) return BurstWait::ARRIVED;
        if (!expecting) return BurstWait::QUIET;  // none came for `quiet`
        // the prepared requests' time is up: the next turn ends the wait
    }
}

void TaskQueue::push_event(EngineEvent && event) {
    std::lock_guard<std::mutex> lock(out_mutex_);
    events_.push_back(std::move(event));
}

void TaskQueue::push_action_results(std::vector<SlotActionResult> results) {
    std::lock_guard<std::mutex> lock(out_mutex_);
    for (auto & r : results) action_results_.push_back(std::move(r));
}

void TaskQueue::flush() {
    std::lock_guard<std::mutex> lock(out_mutex_);
    if ((events_.empty() && action_results_.empty()) || delivery_pending_ || !schedule_delivery_) return;
    delivery_pending_ = true;
    schedule_delivery_();
}

void TaskQueue::take_results(std::vector<EngineEvent> & events, std::vector<SlotActionResult> & actions) {
    std::lock_guard<std::mutex> lock(out_mutex_);
    events.swap(events_);
    actions.swap(action_results_);
    delivery_pending_ = false;
}

void TaskQueue::set_delivery(std::function<void()> schedule) {
    std::lock_guard<std::mutex> lock(out_mutex_);
    schedule_delivery_ = std::move(schedule);
}

void TaskQueue::publish(const std::vector<Slot> & slots) {
    int32_t busy = 0;
    std::lock_guard<std::mutex> lock(summary_mutex_);
    summaries_.resize(slots.size());
    for (size_t i = 0; i < slots.size(); i++) {
        const Slot & s = slots[i];
        SlotSummary & out = summaries_[i];
        out.id = s.id;
        out.state = s.state;
        out.task_id = s.task ? s.task->id : -1;
        out.n_prompt = s.task ? static_cast<int32_t>(s.task->prompt.size()) : 0;
        out.n_decoded = s.n_decoded;
        out.n_cache = static_cast<int32_t>(s.cache.size());
        if (s.busy()) busy++;
    }
    counters_.busy_slots = busy;
    cache_events_.observe(slots);
}

std::vector<SlotSummary> TaskQueue::summaries() {
    std::lock_guard<std::mutex> lock(summary_mutex_);
    return summaries_;
}

}  // namespace addon
