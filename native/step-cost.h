#pragma once
// StepCost: what one decode step costs on this machine now, learnt from the steps just decoded, so
// that chunked prefill can size a step's prompt share to a time target (--prefill-budget-ms).
// A step's time is modelled as (generating tokens x their cost) + (prompt tokens x their cost).
// Both costs move with the KV cache's size (attention spans the cells in use) and with whatever
// else the machine runs, so each is a moving average that follows the last few steps. Engine
// thread only.
#include <algorithm>
#include <cstdint>

namespace addon {

class StepCost {
public:
    // A step decoded `n_generating` tokens of generating slots and `n_prompt` prompt tokens in `us`.
    void observe(int32_t n_generating, int32_t n_prompt, double us) {
        if (n_prompt <= 0) {
            if (n_generating > 0) follow(generating_us_, us / n_generating);
            return;
        }
        // The generating tokens' share, as the last steps without prompt tokens priced them; the
        // prompt is charged at least half of the step, so a stale estimate cannot price it at zero.
        const double generating = n_generating * std::max(generating_us_, 0.0);
        follow(prompt_us_, std::max(us - generating, us / 2) / n_prompt);
    }

    // How many prompt tokens fit beside `n_generating` generating tokens in a step of `target_us`;
    // -1 while no step with prompt tokens has been seen (nothing to go by yet).
    int32_t prompt_tokens_within(double target_us, int32_t n_generating) const {
        if (prompt_us_ <= 0) return -1;
        const double left = target_us - n_generating * std::max(generating_us_, 0.0);
        if (left <= 0) return 0;
        return static_cast<int32_t>(std::min(left / prompt_us_, 1e9));
    }

private:
    // The newest step's weight in each average: the cost of a prompt token grows step by step as
    // a long prompt fills the cache, so the average must catch up within a few steps.
    static constexpr double kWeight = 0.5;
    static void follow(double & average, double sample) { average = average < 0 ? sample : average + kWeight * (sample - average); }

    double generating_us_ = -1; // per token of a generating slot (steps without prompt tokens)
    double prompt_us_ = -1;     // per prompt token, the generating tokens' share taken out
};

} // namespace addon
