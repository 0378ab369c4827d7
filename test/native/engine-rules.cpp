// The engine's scheduling and cache rules, tested on the engine core without a server:
// SlotCachePolicy (slot choice, joins and the chained-join rule, eviction under pressure,
// unsharing before cells move), BatchBuilder (step composition), StepCost (pricing the next
// step's prompt tokens for the time target, a rising cost one rise ahead), admission (fair share across
// tenants, order within a tenant, the one queue without fair share: admission.h), the disk tier's
// bound on reads held and its rule for writing again (disk-cache.h), its state file (disk-file.h),
// and the one rule for restoring a saved state in both tiers (restore-rule.h). Run by
// test/native/engine-rules.unit.test.ts: `engine_rules_test MODEL.gguf` prints its plan ("1..N",
// the number of checks a full run makes) then one line per check, "ok - NAME" or
// "not ok - NAME # DETAIL", and exits 1 when any failed or the count is not the plan's.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "admission.h"
#include "batch-builder.h"
#include "disk-cache.h"
#include "disk-file.h"
#include "engine-counters.h"
#include "engine-params.h"
#include "prompt-cache.h"
#include "restore-rule.h"
#include "slot-cache-policy.h"
#include "slot.h"
#include "step-cost.h"

using namespace addon;

// The plan: how many checks a full run makes, printed first ("1..N"). A run that makes another
// number of checks (a section returned early, a check dropped or added without the plan) fails.
static constexpr int kPlannedChecks = 122;
static int failures = 0;
static int checks_run = 0;

static void check(bool ok, const std::string & name, const std::string & detail = "") {
    if (!ok) failures++;
    checks_run++;
    std::printf("%s - %s%s\n", ok ? "ok" : "not ok", name.c_str(), ok || detail.empty() ? "" : (" # " + detail).c_str());
}

static void check_eq(long long got, long long want, const std::string & name) {
    check(got == want, name, "got " + std::to_string(got) + ", want " + std::to_string(want));
}

// Token ids: `base` then `n` distinct tokens (all inside any vocabulary used here).
static std::vector<llama_token> tokens(llama_token base, size_t n) {
    std::vector<llama_token> out(n);
    for (size_t i = 0; i < n; i++) out[i] = base + static_cast<llama_token>(i);
    return out;
}

static std::vector<llama_token> concat(std::vector<llama_token> a, const std::vector<llama_token> & b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

static std::unique_ptr<CompletionTask> task(int64_t id, std::vector<llama_token> prompt) {
    auto t = std::make_unique<CompletionTask>();
    t->id = id;
    t->prompt = std::move(prompt);
    t->n_predict = 4;
    return t;
}

// A model's context with `n` slots in one unified KV pool, and the policy over its slots.
struct Bench {
    llama_context * ctx = nullptr;
    EngineParams params;
    EngineCounters counters;
    std::vector<Slot> slots;
    std::unique_ptr<SlotCachePolicy> policy;

    Bench(llama_model * model, int32_t n, bool sharing, double similarity = 0.1) {
        params.n_parallel = n;
        params.n_ctx = 2048;
        params.n_batch = 512;
        params.slot_prompt_similarity = similarity;
        params.prompt_cache_mib = 0;
        llama_context_params cp = llama_context_default_params();
        cp.n_ctx = params.n_ctx;
        cp.n_batch = params.n_batch;
        cp.n_ubatch = params.n_batch;
        cp.n_seq_max = static_cast<uint32_t>(n);
        cp.kv_unified = true;
        cp.n_threads = 1;
        cp.n_threads_batch = 1;
        ctx = llama_init_from_model(model, cp);
        slots.resize(static_cast<size_t>(n));
        for (int32_t i = 0; i < n; i++) {
            slots[i].id = i;
            slots[i].n_ctx = static_cast<int32_t>(params.n_ctx) / n;
        }
        policy = std::make_unique<SlotCachePolicy>(ctx, slots, params, sharing, nullptr, counters, nullptr);
    }
    ~Bench() {
        for (auto & s : slots) s.task.reset();
        llama_free(ctx);
    }

    // Decodes `prompt` into slot `id`'s sequence (its cells computed), leaving the slot idle with
    // that cache, last used at `used_us`.
    void compute(int32_t id, const std::vector<llama_token> & prompt, int64_t used_us) {
        Slot & s = slots[id];
        llama_memory_seq_rm(llama_get_memory(ctx), id, -1, -1);
        llama_batch batch = llama_batch_init(static_cast<int32_t>(prompt.size()), 0, 1);
        for (size_t i = 0; i < prompt.size(); i++) common_batch_add(batch, prompt[i], static_cast<llama_pos>(i), {id}, false);
        const int32_t ret = llama_decode(ctx, batch);
        llama_batch_free(batch);
        check(ret == 0, "setup: slot " + std::to_string(id) + "'s prompt decodes");
        s.cache = prompt;
        s.cache_lora.clear();
        s.state = SlotState::IDLE;
        s.t_last_used_us = used_us;
    }

    llama_pos pos_max(int32_t id) { return llama_memory_seq_pos_max(llama_get_memory(ctx), id); }
};

static void slot_choice(llama_model * model) {
    const auto system = tokens(100, 40);
    {
        Bench b(model, 3, false, 0.5);
        b.slots[0].cache = concat(system, tokens(500, 40));  // shares 40 of the prompt's 50
        b.slots[0].t_last_used_us = 30;
        b.slots[1].cache = tokens(900, 10);
        b.slots[1].t_last_used_us = 10;
        b.slots[2].t_last_used_us = 20;
        auto t = task(1, concat(system, tokens(700, 10)));
        check(b.policy->choose_slot(*t) == &b.slots[0], "without sharing: the slot holding the largest fraction of the prompt above -sps");
        b.slots[0].cache = concat(tokens(100, 20), tokens(500, 60));  // shares 20 of 50: 0.4 < 0.5
        check(b.policy->choose_slot(*t) == &b.slots[1], "without sharing: below -sps, the least recently used idle slot");
        t->id_slot = 2;
        check(b.policy->choose_slot(*t) == &b.slots[2], "id_slot: that slot when it is idle");
        b.slots[2].state = SlotState::GENERATING;
        check(b.policy->choose_slot(*t) == nullptr, "id_slot: none while that slot is busy");
    }
    {
        Bench b(model, 3, true);
        b.slots[0].cache = concat(system, tokens(500, 60));  // another conversation on the same system prompt
        b.slots[0].t_last_used_us = 10;
        b.slots[1].cache = concat(system, tokens(600, 40));  // the conversation the prompt continues
        b.slots[1].t_last_used_us = 30;
        b.slots[2].t_last_used_us = 20;
        auto t = task(1, concat(concat(system, tokens(600, 40)), tokens(800, 5)));
        check(b.policy->choose_slot(*t) == &b.slots[1], "sharing: the slot of the conversation the prompt continues");
        auto other = task(2, concat(system, tokens(700, 20)));
        check(b.policy->choose_slot(*other) == &b.slots[2], "sharing: no continuation, an empty slot (it loses nothing)");
        b.slots[2].cache = tokens(900, 5);
        check(b.policy->choose_slot(*other) == &b.slots[0], "sharing: no empty slot, the least recently used");
    }
}

// Joins: a prompt waits for a prefix another slot is about to compute, when it is at least
// kJoinMinTokens longer than what it holds; a slot that itself waits is a source only for
// kJoinMinTokens beyond its own join.
static void joins(llama_model * model) {
    const auto system = tokens(100, 64);
    Bench b(model, 4, true);
    b.policy->place(b.slots[0], task(1, concat(system, tokens(300, 36))), 1);
    check(!b.slots[0].joined(), "the first prompt computes its prefix itself");
    b.policy->place(b.slots[1], task(2, concat(system, tokens(400, 40))), 2);
    check(b.slots[1].joined() && b.slots[1].join_slot == 0, "a prompt sharing 64 tokens with one being computed waits for it");
    check_eq(static_cast<long long>(b.slots[1].join_len), 64, "it waits for the 64 shared tokens");
    // Shares 64 + 31 tokens with the joined slot 1, 64 with slot 0: below slot 1's join + 32.
    b.policy->place(b.slots[2], task(3, concat(concat(system, tokens(400, 31)), tokens(800, 10))), 3);
    check(b.slots[2].joined() && b.slots[2].join_slot == 0, "chained joins: 31 tokens beyond a joined slot's join: waits for that slot's source");
    // Shares 64 + 32 with slot 1: a source now.
    b.policy->place(b.slots[3], task(4, concat(concat(system, tokens(400, 32)), tokens(900, 10))), 4);
    check(b.slots[3].joined() && b.slots[3].join_slot == 1, "chained joins: 32 tokens beyond a joined slot's join: waits for that slot");
    Bench short_share(model, 2, true);
    short_share.policy->place(short_share.slots[0], task(1, concat(tokens(100, 31), tokens(300, 20))), 1);
    short_share.policy->place(short_share.slots[1], task(2, concat(tokens(100, 31), tokens(400, 20))), 2);
    check(!short_share.slots[1].joined(), "fewer than 32 shared tokens: computed, not waited for");
}

// A prompt starts from the longest prefix another slot's cells hold (no computation), and gives
// the slot cells of its own before they move (unshare), so that the source's stay in place.
static void sharing_and_unsharing(llama_model * model) {
    const auto system = tokens(100, 48);
    Bench b(model, 2, true);
    b.compute(0, system, 10);
    b.policy->place(b.slots[1], task(2, concat(system, tokens(400, 8))), 20);
    check_eq(static_cast<long long>(b.slots[1].cache.size()), 48, "the shared prefix is taken from slot 0's cells");
    check_eq(static_cast<long long>(b.slots[1].n_prompt_done), 48, "the prompt's decode starts after it");
    check(b.slots[1].shared_len == 48 && b.slots[0].shared_len == 48, "both slots know those cells are shared");
    check_eq(b.pos_max(1), 47, "slot 1's sequence holds the 48 positions");
    check(b.policy->unshare(b.slots[1]), "unshare finds room");
    check_eq(static_cast<long long>(b.slots[1].shared_len), 0, "after unshare the slot's cells are its own");
    llama_memory_t mem = llama_get_memory(b.ctx);
    llama_memory_seq_rm(mem, 1, 8, 16);
    llama_memory_seq_add(mem, 1, 16, 48, -8);  // a context shift of slot 1
    check_eq(b.pos_max(0), 47, "moving the unshared slot's cells leaves the source's in place");
    check_eq(b.pos_max(1), 39, "and moves the slot's own");
}

// Eviction under KV pressure: with sharing the least recently used idle slot's cells go (cells
// running slots share stay); without, every idle slot's.
static void eviction(llama_model * model) {
    for (const bool sharing : {true, false}) {
        const std::string mode = sharing ? "sharing: " : "no sharing: ";
        Bench b(model, 3, sharing);
        b.compute(0, tokens(100, 20), 30);
        b.compute(1, tokens(200, 20), 10);
        b.compute(2, tokens(300, 20), 20);
        b.slots[2].state = SlotState::GENERATING;  // busy: never evicted
        b.slots[2].task = task(9, tokens(300, 20));
        check(b.policy->free_idle_cells(), mode + "frees idle cells");
        check_eq(static_cast<long long>(b.slots[1].cache.size()), 0, mode + "the least recently used idle slot is emptied");
        check_eq(b.pos_max(1), -1, mode + "its cells are gone");
        check_eq(static_cast<long long>(b.slots[0].cache.size()), sharing ? 20 : 0, mode + (sharing ? "the other idle slot keeps its cache" : "every idle slot is emptied"));
        check_eq(static_cast<long long>(b.slots[2].cache.size()), 20, mode + "a busy slot keeps its cache");
        if (sharing) {
            check(b.policy->free_idle_cells(), "sharing: a second eviction takes the next idle slot");
            check_eq(static_cast<long long>(b.slots[0].cache.size()), 0, "sharing: ... slot 0");
        }
        check(!b.policy->free_idle_cells(), mode + "nothing idle left: false");
    }
}

// Step composition: generating tokens first, prompt chunks in admission order within the
// prompt share, and rows taken back exactly.
static void step_composition(llama_model * model) {
    Bench b(model, 3, false);
    llama_batch batch = llama_batch_init(512, 0, 1);
    StepCost cost;
    b.params.prefill_budget = 64;
    b.params.prefill_budget_ms = 0;
    BatchBuilder builder(b.slots, batch, b.params, cost, 512, false);
    Slot & gen = b.slots[0];
    gen.task = task(1, tokens(100, 10));
    gen.state = SlotState::GENERATING;
    gen.cache = tokens(100, 10);
    gen.sampled = 7;
    gen.first_token_at = 1;
    Slot & late = b.slots[1];
    late.task = task(2, tokens(200, 100));
    late.state = SlotState::PROMPT;
    late.admission = 2;
    late.admitted_at = 2;  // admitted after slot 0's first token: held back
    Slot & early = b.slots[2];
    early.task = task(3, tokens(300, 20));
    early.state = SlotState::PROMPT;
    early.admission = 1;
    early.admitted_at = 2;
    const LoraGroup group = builder.next_lora_group();
    common_batch_clear(batch);
    const int32_t n_gen = builder.add_generating_tokens(group, nullptr);
    check_eq(n_gen, 1, "one row per generating slot");
    check(batch.token[0] == 7 && batch.seq_id[0][0] == 0 && batch.logits[0], "the generating row comes first, its sampled token, with logits");
    const bool held = builder.prompts_came_after_generation(group);
    check(held, "prompts admitted after a first token are held back");
    const int32_t share = builder.prompt_share(n_gen, held);
    check_eq(share, 63, "prefill budget 64: 63 prompt tokens beside one generating token");
    check_eq(builder.prompt_share(n_gen, false), 511, "not held back: what n_batch leaves");
    builder.add_prompt_tokens(group, share);
    check(batch.seq_id[1][0] == 2, "prompts in admission order: the earlier admitted first");
    check_eq(static_cast<long long>(early.n_prompt_done), 20, "the earlier prompt whole");
    check(early.i_batch == 20 && batch.logits[20], "its last token gives logits");
    check_eq(static_cast<long long>(late.n_prompt_done), 43, "the later prompt gets the rest of the share");
    check_eq(batch.n_tokens, 64, "the step holds the budget");
    builder.take_back_rows(0, batch.n_tokens);
    check(gen.cache.size() == 10 && early.cache.empty() && late.cache.empty(), "taken back: every cache as before the step");
    check(early.n_prompt_done == 0 && late.n_prompt_done == 0 && gen.i_batch == -1 && early.i_batch == -1, "taken back: prompts and outputs as before");
    gen.first_token_at = 3;
    check(!builder.prompts_came_after_generation(group), "prompts admitted with the generating slots (one burst) are not held back");
    llama_batch_free(batch);
}

// Admission (admission.h) over a queue of tasks and a count of free slots, without an engine:
// the tenants' clocks, the waiting tasks in arrival order, and what each admitted task cost.
struct AdmissionQueue {
    TenantClocks clocks;
    std::vector<std::unique_ptr<TenantShare>> shares;  // stable addresses for the entries
    std::vector<AdmissionEntry> waiting;
    std::vector<std::string> names;  // a name per waiting task, for the checks
    double lifo_ms = 0;
    bool fair_share = true;

    void arrive(const std::string & tenant, const std::string & name, int64_t t_us, double weight = 1,
                PriorityClass c = PriorityClass::PRIORITY_CLASS_INTERACTIVE, int32_t priority = 0) {
        shares.push_back(std::make_unique<TenantShare>(TenantShare{tenant, weight, c, priority}));
        clocks.arrive(*shares.back());
        waiting.push_back(AdmissionEntry{shares.back().get(), t_us});
        names.push_back(name);
    }
    // The next task admitted at `now`, charged `cost`; "" when none waits.
    std::string admit(int64_t now, int64_t cost = 100) {
        std::vector<bool> skip(waiting.size(), false);
        const size_t i = admission_next(waiting, skip, clocks, now, lifo_ms, fair_share);
        if (i == waiting.size()) return "";
        clocks.admit(*waiting[i].share, cost);
        const std::string name = names[i];
        waiting.erase(waiting.begin() + static_cast<std::ptrdiff_t>(i));
        names.erase(names.begin() + static_cast<std::ptrdiff_t>(i));
        return name;
    }
    std::string admit_n(int n, int64_t now, int64_t cost = 100) {
        std::string order;
        for (int k = 0; k < n; k++) order += (k ? " " : "") + admit(now, cost);
        return order;
    }
};

// StepCost (step-cost.h): the time target's prices. Nothing to go by before a prompt step; a
// prompt's rising cost per token is priced one rise ahead; a falling one at the average.
static void step_cost(void) {
    StepCost cost;
    check_eq(cost.prompt_tokens_within(1e6, 10), -1, "step cost: no prompt step seen yet, no price");
    cost.observe(10, 0, 1000);    // 10 generating tokens: 100 us each
    cost.observe(0, 100, 10000);  // 100 prompt tokens: 100 us each
    check_eq(cost.prompt_tokens_within(1e6, 10), 9990, "step cost: one prompt step: (1 s - 10 x 100 us) / 100 us");
    cost.observe(0, 100, 12000);  // 120 us each: rising by 20
    check_eq(cost.prompt_tokens_within(1e6, 10), 7135, "step cost: a rising cost is priced one rise ahead (140 us)");
    cost.observe(0, 100, 8000);   // 80 us each: falling; the average is 95
    check_eq(cost.prompt_tokens_within(1e6, 10), 10515, "step cost: a falling one at the average (95 us)");
    check_eq(cost.prompt_tokens_within(500, 10), 0, "step cost: a target the generating tokens use up leaves no prompt tokens");
}

static void admission(void) {
    check_eq(admission_cost(100, 28, 2048), 128, "cost: prompt + n_predict");
    check_eq(admission_cost(100, -1, 2048), 100 + ADMISSION_DEFAULT_PREDICT, "cost without n_predict: the default, capped ...");
    check_eq(admission_cost(100, -1, 300), 300, "... by the slot's room");

    {
        // Tenant A: a backlog of ten, two slots running A's first two. B's request arrives last.
        AdmissionQueue q;
        for (int i = 0; i < 10; i++) q.arrive("A", "a" + std::to_string(i), i);
        check(q.admit_n(2, 10, 128) == "a0 a1", "one tenant: arrival order");
        q.arrive("B", "b0", 20);
        check(q.admit(30) == "b0", "a tenant's backlog: another tenant's new request gets the next free slot");
        check(q.admit(40) == "a2", "then the backlog goes on in arrival order");
    }
    {
        // A (weight 2) and B (weight 1), both with a backlog of equal tasks, one slot: each task ends as estimated.
        AdmissionQueue q;
        for (int i = 0; i < 6; i++) q.arrive("A", "a", i, 2);
        for (int i = 0; i < 6; i++) q.arrive("B", "b", 10 + i, 1);
        std::string order;
        for (int k = 0; k < 6; k++) {
            const std::string name = q.admit(100);
            order += name;
            q.clocks.finish(TenantShare{name == "a" ? "A" : "B", name == "a" ? 2.0 : 1.0}, 100, 100);
        }
        check(order == "abaaba", "weights: a tenant of weight 2 gets two tasks for one of weight 1", order);
    }
    {
        AdmissionQueue q;
        q.arrive("B", "b0", 0, 1, PriorityClass::PRIORITY_CLASS_BATCH);
        q.arrive("A", "a0", 5, 1, PriorityClass::PRIORITY_CLASS_INTERACTIVE);
        q.arrive("A", "a1", 6, 1, PriorityClass::PRIORITY_CLASS_INTERACTIVE);
        check(q.admit_n(3, 10) == "a0 a1 b0", "classes: interactive before batch, whatever the virtual times");
    }
    {
        AdmissionQueue q;
        q.arrive("A", "p5", 0, 1, PriorityClass::PRIORITY_CLASS_INTERACTIVE, 5);
        q.arrive("A", "p0", 1, 1, PriorityClass::PRIORITY_CLASS_INTERACTIVE, 0);
        q.arrive("A", "p3", 2, 1, PriorityClass::PRIORITY_CLASS_INTERACTIVE, 3);
        q.arrive("A", "q0", 3, 1, PriorityClass::PRIORITY_CLASS_INTERACTIVE, 0);
        check(q.admit_n(4, 10) == "p0 q0 p3 p5", "priority within a tenant: lower first, then arrival order");
    }
    {
        // A's oldest has waited past the LIFO threshold (1000 ms); B's has not.
        AdmissionQueue q;
        q.lifo_ms = 1000;
        for (int i = 0; i < 3; i++) q.arrive("A", "a" + std::to_string(i), i * 1000);
        for (int i = 0; i < 3; i++) q.arrive("B", "b" + std::to_string(i), 1'500'000 + i * 1000);
        const std::string order = q.admit_n(6, 2'000'000);
        check(order == "a2 b0 a1 b1 a0 b2", "adaptive LIFO within a tenant: A's newest first, B's oldest first, the tenants alternating", order);
    }
}

// Admission over time: a tenant back from idle, the end of a task correcting its estimate, router
// mode's charges, and the one queue without fair share.
static void admission_over_time(void) {
    {
        // B ran one task and went idle; A then used 10,000 tokens alone. B comes back.
        AdmissionQueue q;
        q.arrive("B", "b0", 0);
        check(q.admit(1) == "b0", "B alone");
        q.clocks.finish(TenantShare{"B"}, 100, 100);
        check_eq(static_cast<long long>(q.clocks.n_active()), 0, "a tenant with nothing waiting or running is forgotten");
        for (int i = 0; i < 3; i++) q.arrive("A", "a", 10 + i);
        check(q.admit_n(2, 20, 5000) == "a a", "A alone: two tasks of 5000 tokens");
        q.clocks.finish(TenantShare{"A"}, 5000, 5000);
        for (int i = 1; i <= 3; i++) q.arrive("B", "b" + std::to_string(i), 300 + i);
        check(q.clocks.vtime("A") == 10000 && q.clocks.vtime("B") == 5000,
              "a tenant back from idle starts where the active tenants' running work started (no credit banked while idle)");
        const std::string order = q.admit_n(4, 400, 5000);
        check(order == "b1 a b2 b3", "so B's three tasks take turns with A's, not all ahead of it", order);
    }
    {
        // A task estimated at 1000 tokens that used 100: its tenant's time is corrected at the end.
        AdmissionQueue q;
        q.arrive("A", "a0", 0, 2);
        q.arrive("A", "a1", 0, 2);  // keeps A active after a0 ends
        q.arrive("B", "b0", 0);
        check(q.admit(1, 1000) == "a0", "equal times: the first to arrive");
        q.clocks.finish(TenantShare{"A", 2}, 1000, 100);
        check(q.clocks.vtime("A") == 50, "the end corrects the estimate: (1000 + (100 - 1000)) / weight 2");
    }
    {
        // Router mode: A (weight 2) and B wait here, A first; A used 600 tokens on another model.
        AdmissionQueue q;
        q.arrive("A", "a0", 0, 2);
        q.arrive("B", "b0", 1);
        q.clocks.charge_elsewhere("A", 600);
        q.clocks.charge_elsewhere("C", 600);
        check(q.clocks.vtime("A") == 300, "a tenant's use of another model is charged here, divided by its weight");
        check_eq(static_cast<long long>(q.clocks.n_active()), 2, "an idle tenant is not charged (it banks no debt)");
        check(q.admit(2) == "b0", "so the other tenant's later request goes first");
        check(q.admit(3) == "a0", "then A's");
    }
    {
        // Without fair share (--no-fair-share): one queue whatever the tenants.
        AdmissionQueue q;
        q.fair_share = false;
        for (int i = 0; i < 3; i++) q.arrive("A", "a" + std::to_string(i), i);
        q.arrive("B", "b0", 10);
        check(q.admit_n(4, 20) == "a0 a1 a2 b0", "without fair share: arrival order across tenants (A's backlog first)");
        q.arrive("A", "p5", 30, 1, PriorityClass::PRIORITY_CLASS_INTERACTIVE, 5);
        q.arrive("B", "p0", 31, 1, PriorityClass::PRIORITY_CLASS_INTERACTIVE, 0);
        q.arrive("A", "q0", 32, 1, PriorityClass::PRIORITY_CLASS_INTERACTIVE, 0);
        check(q.admit_n(3, 40) == "p0 q0 p5", "without fair share: priority honoured too, lower first, then arrival order");
        q.lifo_ms = 1000;
        for (int i = 0; i < 3; i++) q.arrive(i % 2 ? "B" : "A", "n" + std::to_string(i), 100 + i * 1000);
        check(q.admit_n(3, 2'000'000) == "n2 n1 n0", "without fair share: adaptive LIFO over the whole queue, newest first");
    }
}

// A fresh directory under /tmp (a failed check and an empty path when it cannot be made), removed
// with everything in it when this goes out of scope.
struct TempDir {
    std::string path;
    explicit TempDir(const std::string & checks) {
        char name[] = "/tmp/engine-rules-disk-XXXXXX";
        if (mkdtemp(name)) path = name;
        else check(false, checks + ": a temporary directory", "mkdtemp failed");
    }
    ~TempDir() {
        std::error_code ec;
        if (!path.empty()) std::filesystem::remove_all(path, ec);
    }
};

// DiskCache::prefetch: reads held by waiting tasks are bounded (kMaxHeldReads, kMaxHeldBytes; one
// always allowed), a read of a file already asked for is shared and not counted again, and a read
// released by its tasks makes room. On a real directory of small states.
static void disk_read_bound(void) {
    constexpr uint64_t GiB = 1ull << 30;
    check(disk_read_may_be_held(0, 0, 3 * GiB), "disk reads: one read is always allowed, whatever its size");
    check(disk_read_may_be_held(kMaxHeldReads - 1, 0, 1), "disk reads: below the count bound, allowed");
    check(!disk_read_may_be_held(kMaxHeldReads, 0, 1), "disk reads: at the count bound, refused");
    check(disk_read_may_be_held(1, kMaxHeldBytes - GiB, GiB), "disk reads: up to the byte bound, allowed");
    check(!disk_read_may_be_held(1, kMaxHeldBytes - GiB, GiB + 1), "disk reads: past the byte bound, refused");

    const TempDir dir("disk reads");
    if (dir.path.empty()) return;
    const std::vector<float> lora;
    const size_t files = kMaxHeldReads + 1;
    auto prompt_of = [](size_t i) { return tokens(static_cast<llama_token>(1000 * (i + 1)), 80); };
    {
        DiskCacheCounters counters;
        DiskCache cache(DiskCacheSettings{dir.path, 0, "engine-rules"}, counters);
        for (size_t i = 0; i < files; i++) {
            HostBuffer b = HostBuffers::allocate(256);
            for (size_t j = 0; j < 256; j++) b.data[j] = static_cast<uint8_t>(i + j);
            cache.save_buffer(prompt_of(i), lora, std::move(b), 256, true);
        }
        cache.flush();
        check_eq(static_cast<long long>(counters.files_written.load()), static_cast<long long>(files), "disk reads: the states are on disk");

        std::vector<std::shared_ptr<DiskPrefetch>> held;
        for (size_t i = 0; i < kMaxHeldReads; i++) held.push_back(cache.prefetch(prompt_of(i), lora, 0));
        bool all = true;
        for (const auto & p : held) all = all && p != nullptr;
        check(all, "disk reads: up to the bound, each file is read");
        const uint64_t misses = counters.misses.load();
        check(cache.prefetch(prompt_of(files - 1), lora, 0) == nullptr, "disk reads: one more file than the bound is not read (the task computes its prompt)");
        check_eq(static_cast<long long>(counters.misses.load() - misses), 1, "disk reads: the refused read counts as a miss");
        check(cache.prefetch(prompt_of(0), lora, 0) == held[0], "disk reads: a file already asked for is shared, past the bound too");

        // A read in progress is held by the reader too; once a later one is done, the reader has let go of the first.
        auto read_back = [&](const std::shared_ptr<DiskPrefetch> & p, size_t i) {
            while (!p->done.load(std::memory_order_acquire)) std::this_thread::yield();
            return p->state && p->state->tokens == prompt_of(i) && p->state->size == 256 && p->state->data[0] == static_cast<uint8_t>(i);
        };
        bool read = true;
        for (size_t i = 0; i < held.size(); i++) read = read_back(held[i], i) && read;
        check(read, "disk reads: each read returns the state that was written");
        held.erase(held.begin());
        auto later = cache.prefetch(prompt_of(files - 1), lora, 0);
        check(later != nullptr, "disk reads: a read released by its tasks makes room for another");
        check(later && read_back(later, files - 1), "disk reads: and it is read");
    }
}

// DiskCache::worth_saving: a state on disk, or being written, is not written again; once the
// budget evicted its file, it is worth writing again. (The writer used to keep every state it had
// written in its list of writes in progress: flush() never returned, and an evicted prefix was
// never written again.)
static void disk_rewrite_after_eviction(void) {
    const TempDir dir("disk writes");
    if (dir.path.empty()) return;
    const std::vector<float> lora;
    const auto first = tokens(100, 80);
    const auto second = tokens(500, 80);
    auto state = [] {
        HostBuffer b = HostBuffers::allocate(4096);
        std::fill(b.data.get(), b.data.get() + 4096, uint8_t{7});
        return b;
    };
    uint64_t file_size = 0;
    {
        DiskCacheCounters counters;
        DiskCache measure(DiskCacheSettings{dir.path + "/measure", 0, "engine-rules"}, counters);
        measure.save_buffer(first, lora, state(), 4096, true);
        measure.flush();
        file_size = counters.bytes.load();
    }
    {
        DiskCacheCounters counters;
        DiskCache cache(DiskCacheSettings{dir.path + "/one-file", file_size + file_size / 2, "engine-rules"}, counters);
        check(cache.worth_saving(first, lora, 1), "disk writes: a state not on disk is worth writing");
        cache.save_buffer(first, lora, state(), 4096, true);
        check(!cache.worth_saving(first, lora, 1), "disk writes: nor while it is being written");
        cache.flush();
        check(!cache.worth_saving(first, lora, 1), "disk writes: a state on disk is not worth writing again");
        cache.save_buffer(second, lora, state(), 4096, true);
        cache.flush();
        check_eq(static_cast<long long>(counters.evictions.load()), 1, "disk writes: the budget holds one file: the first is evicted");
        check(cache.worth_saving(first, lora, 1), "disk writes: an evicted state is worth writing again");
        check(!cache.worth_saving(second, lora, 1), "disk writes: the file kept is not");
    }
}

// One rule for both tiers (restore-rule.h): a saved state is restored only for a prompt that keeps
// at least a quarter of it. The rule, then each tier applying it: the host-memory prompt cache
// (PromptCache::load) and the disk tier (DiskCache::prefetch), each with a state of 400 tokens and
// prompts sharing 99 and 100 of them.
static void restore_rule(llama_model * model) {
    check(restore_keeps_enough(25, 100), "restore rule: a prompt keeping a quarter of a state restores it");
    check(!restore_keeps_enough(24, 100), "restore rule: less than a quarter, never (a large state for a sliver of it)");
    check(restore_keeps_enough(100, 100), "restore rule: the whole state");
    check(!restore_keeps_enough(0, 0), "restore rule: a state of no tokens serves nothing");

    const auto state = tokens(100, 400);
    auto prompt_sharing = [&](size_t n) { return concat(std::vector<llama_token>(state.begin(), state.begin() + static_cast<std::ptrdiff_t>(n)), tokens(3000, 20)); };
    {
        Bench b(model, 2, false);
        b.compute(0, state, 1);
        PromptCache cache(-1, 0, 2048);
        check(cache.save(b.ctx, 0, state, {}), "restore rule: setup: the state is in the host-memory prompt cache");
        bool failed = false;
        check(!cache.load(b.ctx, 1, prompt_sharing(99), {}, {}, failed), "restore rule: host memory: 99 of 400 tokens kept, not restored");
        check(cache.load(b.ctx, 1, prompt_sharing(100), {}, {}, failed).has_value(), "restore rule: host memory: 100 of 400 tokens kept, restored");
    }
    const TempDir dir("restore rule");
    if (dir.path.empty()) return;
    DiskCacheCounters counters;
    DiskCache disk(DiskCacheSettings{dir.path, 0, "engine-rules"}, counters);
    HostBuffer b = HostBuffers::allocate(256);
    std::fill(b.data.get(), b.data.get() + 256, uint8_t{1});
    disk.save_buffer(state, {}, std::move(b), 256, true);
    disk.flush();
    check(disk.prefetch(prompt_sharing(99), {}, 0) == nullptr, "restore rule: disk: 99 of 400 tokens kept, not read");
    check(disk.prefetch(prompt_sharing(100), {}, 0) != nullptr, "restore rule: disk: 100 of 400 tokens kept, read");
}

// The state file (disk-file.h): what disk_file_write writes, disk_file_read_header adopts and
// disk_file_check accepts; a truncated file is not adopted, another fingerprint is neither
// adopted nor accepted, and a flipped byte of the state fails the checksum.
static void disk_file_format(void) {
    const TempDir dir("disk file");
    if (dir.path.empty()) return;
    const std::vector<llama_token> toks = tokens(10, 50);
    const std::vector<float> lora = {0.5f};
    std::vector<uint8_t> state(1000);
    for (size_t i = 0; i < state.size(); i++) state[i] = static_cast<uint8_t>(i * 7);
    const std::string prefix = disk_file_prefix("fp", toks, lora, state.size());
    const std::string path = dir.path + "/0.kv";
    int halfway_calls = 0;
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    check(fd >= 0 && disk_file_write(fd, prefix, state.data(), state.size(), [&] { halfway_calls++; }), "disk file: written");
    if (fd >= 0) ::close(fd);
    check_eq(halfway_calls, 1, "disk file: the slow-disk hook runs once, half way");
    const uint64_t size = disk_file_size(prefix.size(), state.size());
    check_eq(static_cast<long long>(std::filesystem::file_size(path)), static_cast<long long>(size), "disk file: its size is the layout's");

    auto read_header = [&](const std::string & fingerprint, uint64_t file_size) {
        const int rfd = ::open(path.c_str(), O_RDONLY);
        auto h = disk_file_read_header(rfd, file_size, fingerprint);
        ::close(rfd);
        return h;
    };
    const auto h = read_header("fp", size);
    check(h && h->tokens == toks && h->lora == lora && h->state_size == state.size(), "disk file: adoption reads back its tokens, scales and state size");
    check(!read_header("other", size), "disk file: another fingerprint is not adopted");
    check(!read_header("fp", size - 1), "disk file: a file of another size (truncated) is not adopted");

    std::vector<uint8_t> file(size);
    const int rfd = ::open(path.c_str(), O_RDONLY);
    const bool read_ok = rfd >= 0 && ::read(rfd, file.data(), file.size()) == static_cast<ssize_t>(file.size());
    if (rfd >= 0) ::close(rfd);
    const uint8_t * at = nullptr;
    size_t n = 0;
    const char * why = read_ok ? disk_file_check(file.data(), size, "fp", toks, lora, at, n) : "unread";
    check(why == nullptr && n == state.size() && at && std::equal(state.begin(), state.end(), at), "disk file: a whole file passes its checks and gives the state", why ? why : "");
    why = disk_file_check(file.data(), size, "other", toks, lora, at, n);
    check(why && std::string(why) == "header changed", "disk file: another fingerprint is refused at load", why ? why : "accepted");
    file[prefix.size() + 10] ^= 0xff;
    why = disk_file_check(file.data(), size, "fp", toks, lora, at, n);
    check(why && std::string(why) == "checksum", "disk file: a flipped byte of the state fails the checksum", why ? why : "accepted");
}

int main(int argc, char ** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: engine_rules_test MODEL.gguf\n");
        return 2;
    }
    std::printf("1..%d\n", kPlannedChecks);
    llama_log_set([](ggml_log_level, const char *, void *) {}, nullptr);
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    llama_model * model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        std::fprintf(stderr, "cannot load %s\n", argv[1]);
        return 2;
    }
    slot_choice(model);
    joins(model);
    sharing_and_unsharing(model);
    eviction(model);
    step_composition(model);
    step_cost();
    admission();
    admission_over_time();
    disk_read_bound();
    disk_rewrite_after_eviction();
    restore_rule(model);
    disk_file_format();
    llama_model_free(model);
    llama_backend_free();
    if (checks_run != kPlannedChecks) {
        std::fprintf(stderr, "%d checks ran, %d planned\n", checks_run, kPlannedChecks);
        return 1;
    }
    return failures == 0 ? 0 : 1;
}
