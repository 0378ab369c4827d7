// Admission's rules: the tenants' virtual times (TenantClocks) and the choice of the next waiting
// task (admission_next). The rules themselves are stated in admission.h.
#include "admission.h"

#include <algorithm>

namespace addon {

int64_t admission_cost(int64_t n_prompt, int32_t n_predict, int32_t n_ctx_slot) {
    const int64_t room = std::max<int64_t>(0, static_cast<int64_t>(n_ctx_slot) - n_prompt);
    const int64_t predict = n_predict >= 0 ? n_predict : std::min<int64_t>(room, ADMISSION_DEFAULT_PREDICT);
    return std::max<int64_t>(1, n_prompt + predict);
}

TenantClocks::Clock * TenantClocks::find(const std::string & tenant) {
    for (auto & c : clocks_) {
        if (c.tenant == tenant) return &c;
    }
    return nullptr;
}

const TenantClocks::Clock * TenantClocks::find(const std::string & tenant) const {
    for (const auto & c : clocks_) {
        if (c.tenant == tenant) return &c;
    }
    return nullptr;
}

void TenantClocks::forget_if_idle(Clock * c) {
    if (c->waiting > 0 || c->running > 0) return;
    clocks_.erase(clocks_.begin() + (c - clocks_.data()));
}

void TenantClocks::arrive(const TenantShare & share) {
    if (Clock * c = find(share.tenant)) {
        c->waiting++;
        c->weight = share.weight;
        return;
    }
    // Back from idle (or new): the lowest virtual time of the active tenants before the tasks they
    // are running now were charged (their start, as start-time fair queuing's system virtual
    // time), neither credit nor debt. So the newcomer goes before a tenant that is being served.
    double start = 0;
    for (size_t i = 0; i < clocks_.size(); i++) {
        const double v = clocks_[i].vtime - clocks_[i].in_service;
        start = i == 0 ? v : std::min(start, v);
    }
    clocks_.push_back(Clock{share.tenant, start, 0, share.weight, 1, 0});
}

void TenantClocks::withdraw(const TenantShare & share) {
    Clock * c = find(share.tenant);
    if (!c) return;
    c->waiting = std::max(0, c->waiting - 1);
    forget_if_idle(c);
}

void TenantClocks::admit(const TenantShare & share, int64_t cost) {
    Clock * c = find(share.tenant);
    if (!c) return;
    c->waiting = std::max(0, c->waiting - 1);
    c->running++;
    c->vtime += static_cast<double>(cost) / share.weight;
    c->in_service += static_cast<double>(cost) / share.weight;
}

void TenantClocks::finish(const TenantShare & share, int64_t cost, int64_t used) {
    Clock * c = find(share.tenant);
    if (!c) return;
    c->running = std::max(0, c->running - 1);
    c->vtime += static_cast<double>(used - cost) / share.weight;
    c->in_service = c->running == 0 ? 0 : std::max(0.0, c->in_service - static_cast<double>(cost) / share.weight);
    forget_if_idle(c);
}

void TenantClocks::charge_elsewhere(const std::string & tenant, int64_t tokens) {
    Clock * c = find(tenant);
    if (c && tokens > 0) c->vtime += static_cast<double>(tokens) / c->weight;
}

double TenantClocks::vtime(const std::string & tenant) const {
    const Clock * c = find(tenant);
    return c ? c->vtime : 0;
}

int32_t TenantClocks::running(const std::string & tenant) const {
    const Clock * c = find(tenant);
    return c ? c->running : 0;
}

namespace {

// One tenant's queue as admission_next sees it: when its oldest task arrived, and its head.
struct TenantQueue {
    const std::string * tenant;
    int64_t oldest_us;
    bool newest_first = false;
    size_t head;  // waiting.size(): nothing left to try
};

// Within one tenant: the better class, then the lower priority, then arrival order (or newest first).
bool before_within(const AdmissionEntry & a, size_t ia, const AdmissionEntry & b, size_t ib, bool newest_first) {
    if (a.share->priority_class != b.share->priority_class) return a.share->priority_class < b.share->priority_class;
    if (a.share->priority != b.share->priority) return a.share->priority < b.share->priority;
    return newest_first ? ia > ib : ia < ib;
}

}  // namespace

size_t admission_next(const std::vector<AdmissionEntry> & waiting, const std::vector<bool> & skip, const TenantClocks & clocks, int64_t now_us,
                      double overload_lifo_ms, bool fair_share) {
    static const std::string one_tenant;
    const size_t none = waiting.size();
    std::vector<TenantQueue> queues;
    // Waiting is in arrival order: a tenant's first entry is its oldest.
    for (size_t i = 0; i < waiting.size(); i++) {
        const std::string & tenant = fair_share ? waiting[i].share->tenant : one_tenant;
        auto q = std::find_if(queues.begin(), queues.end(), [&](const TenantQueue & t) { return *t.tenant == tenant; });
        if (q == queues.end()) {
            const int64_t oldest = waiting[i].t_queued_us;
            const bool lifo = overload_lifo_ms > 0 && static_cast<double>(now_us - oldest) >= overload_lifo_ms * 1000;
            queues.push_back(TenantQueue{&tenant, oldest, lifo, none});
            q = queues.end() - 1;
        }
        if (skip[i]) continue;
        if (q->head == none || before_within(waiting[i], i, waiting[q->head], q->head, q->newest_first)) q->head = i;
    }
    size_t best = none;
    const TenantQueue * best_q = nullptr;
    for (const auto & q : queues) {
        if (q.head == none) continue;
        if (!best_q) {
            best = q.head;
            best_q = &q;
            continue;
        }
        const PriorityClass c = waiting[q.head].share->priority_class;
        const PriorityClass best_c = waiting[best].share->priority_class;
        if (c != best_c) {
            if (c < best_c) best = q.head, best_q = &q;
            continue;
        }
        const double v = clocks.vtime(*q.tenant);
        const double best_v = clocks.vtime(*best_q->tenant);
        if (v != best_v) {
            if (v < best_v) best = q.head, best_q = &q;
            continue;
        }
        const int32_t r = clocks.running(*q.tenant);
        const int32_t best_r = clocks.running(*best_q->tenant);
        if (r != best_r) {
            if (r < best_r) best = q.head, best_q = &q;
            continue;
        }
        if (q.oldest_us < best_q->oldest_us) best = q.head, best_q = &q;
    }
    return best;
}

}  // namespace addon
