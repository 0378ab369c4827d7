#pragma once
// Admission: which waiting task the next free slot goes to. Pure rules over the waiting tasks and
// each tenant's virtual time; the Scheduler calls them on the engine thread (admit_waiting,
// take_inbox, apply_cancels, release_slot). No N-API, no llama_context.
//
// A tenant is whoever a request belongs to (an API key, an access token's tenant; "" is the
// anonymous tenant): one tenant, one queue. The rules (docs/tenants.md):
//  - Across tenants, weighted fair queuing on tokens. Each tenant has a virtual time. Admitting a
//    task advances it by the task's estimated cost / the tenant's weight (admission_cost: prompt
//    tokens + the tokens it may generate); when the task ends, the difference between what it
//    used (prompt + generated) and the estimate is added, divided by the weight likewise.
//  - The next task comes from the tenant whose head task has the better class (interactive before
//    batch), then the lowest virtual time, then the fewest tasks running, then the oldest head.
//  - A tenant with nothing waiting and nothing running is idle and forgotten: when a task of it
//    arrives again it starts at the lowest virtual time of the active tenants less what their
//    running tasks were charged (start-time fair queuing's system virtual time: the start of the
//    work in service), so with no credit banked while idle. So a tenant's backlog delays another
//    tenant's new request by at most the time it takes a slot to free, never by its length.
//  - Within a tenant: the better class first, then lower `priority` (vLLM's field), then arrival
//    order, or newest first once the tenant's oldest waiting task has waited overload_lifo_ms
//    (the adaptive LIFO applies inside a tenant's queue, not across tenants).
//  - Router mode: a tenant's tokens on the router's other model processes are charged to it here
//    when it is active (charge_elsewhere), so that the share holds across the models.
//  - Without fair share (--no-fair-share) every task counts as one tenant's: the order is the one
//    within a tenant over the whole queue (class, priority, then oldest first or newest first).
//    So with one tenant the two orders are the same, and `priority` is honoured by both.
#include <cstdint>
#include <string>
#include <vector>

namespace addon {

enum class PriorityClass : int32_t { PRIORITY_CLASS_INTERACTIVE = 0, PRIORITY_CLASS_BATCH = 1 };

// The largest weight a tenant may have (the tenant settings' bound; the task parser refuses more).
constexpr double TENANT_MAX_WEIGHT = 100;

// Whom a task belongs to and how it ranks; set by TypeScript from the request's tenant.
struct TenantShare {
    std::string tenant;      // "" the anonymous tenant
    double weight = 1.0;     // > 0 and <= TENANT_MAX_WEIGHT: share of the engine relative to other tenants
    PriorityClass priority_class = PriorityClass::PRIORITY_CLASS_INTERACTIVE;
    int32_t priority = 0;    // within the tenant: lower first
};

// Generated tokens a task without n_predict is expected to cost (capped by its slot's room).
constexpr int32_t ADMISSION_DEFAULT_PREDICT = 1024;

// A task's estimated cost in tokens: its prompt, plus n_predict, or when unlimited (-1) the
// room left in its slot's context capped at ADMISSION_DEFAULT_PREDICT. At least 1.
int64_t admission_cost(int64_t n_prompt, int32_t n_predict, int32_t n_ctx_slot);

// What the rules see of one waiting task.
struct AdmissionEntry {
    const TenantShare * share = nullptr;
    int64_t t_queued_us = 0;
};

// The tenants' virtual times and their tasks waiting and running. Engine thread only.
class TenantClocks {
public:
    // A task of the tenant started waiting; an idle tenant starts at the active ones' lowest time.
    void arrive(const TenantShare & share);
    // A waiting task left without a slot (cancelled).
    void withdraw(const TenantShare & share);
    // A waiting task got a slot: its tenant is charged `cost`.
    void admit(const TenantShare & share, int64_t cost);
    // A running task ended having used `used` tokens, `cost` having been charged at admission.
    void finish(const TenantShare & share, int64_t cost, int64_t used);
    // Router mode: the tenant used `tokens` on another model process of the router. An active
    // tenant is charged them (divided by its weight), so that the share holds across the models;
    // an idle one is not (it comes back at the active tenants' start, as always: no debt banked).
    void charge_elsewhere(const std::string & tenant, int64_t tokens);
    void clear() { clocks_.clear(); }

    // The tenant's virtual time (0 for one not known), its running tasks, and the tenants known.
    double vtime(const std::string & tenant) const;
    int32_t running(const std::string & tenant) const;
    size_t n_active() const { return clocks_.size(); }

private:
    struct Clock {
        std::string tenant;
        double vtime = 0;
        double in_service = 0;  // what its running tasks were charged (cost / weight)
        double weight = 1.0;    // the weight of its latest task (charge_elsewhere divides by it)
        int32_t waiting = 0;
        int32_t running = 0;
    };
    Clock * find(const std::string & tenant);
    const Clock * find(const std::string & tenant) const;
    void forget_if_idle(Clock * c);
    std::vector<Clock> clocks_;  // the active tenants (few: a linear search)
};

// The index into `waiting` (in arrival order) of the task to try next, among those not marked in
// `skip` (tried already: no slot for them now); waiting.size() when none is left.
// `overload_lifo_ms` 0: always oldest first within a tenant. `fair_share` false: every task is
// the one tenant's.
size_t admission_next(const std::vector<AdmissionEntry> & waiting, const std::vector<bool> & skip, const TenantClocks & clocks, int64_t now_us,
                      double overload_lifo_ms, bool fair_share);

}  // namespace addon
