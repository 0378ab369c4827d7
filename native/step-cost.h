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
        const double sample = std::max(us - generating, us / 2) / n_prompt;
        follow(prompt_us_, sample);
        // A long prompt's tokens cost more chunk by chunk (each attends to every cell before it):
        // 1.66, 1.83, 1.99, 2.19, 2.31 ms a token in five chunks of a 2,000-token prompt on two
        // cores, where the average priced each next chunk 9-15% low and the step overran its
        // target by as much. So the next step is priced at the newest sample plus its rise over
        // the one before (one more such rise), or at the average when that is dearer.
        const double rise = last_prompt_sample_ > 0 ? std::max(sample - last_prompt_sample_, 0.0) : 0.0;
        prompt_ahead_us_ = std::max(prompt_us_, sample + rise);
        last_prompt_sample_ = sample;
    }

    // How many prompt tokens fit beside `n_generating` generating tokens in a step of `target_us`;
    // -1 while no step with prompt tokens has been seen (nothing to go by yet).
    int32_t prompt_tokens_within(double target_us, int32_t n_generating) const {
        if (prompt_ahead_us_ <= 0) return -1;
        const double left = target_us - n_generating * std::max(generating_us_, 0.0);
        if (left <= 0) return 0;
        return static_cast<int32_t>(std::min(left / prompt_ahead_us_, 1e9));
    }

private:
    // The newest step's weight in each average: the cost of a prompt token grows step by step as
    // a long prompt fills the cache, so the average must catch up within a few steps.
    static constexpr double kWeight = 0.5;
    static void follow(double & average, double sample) { average = average < 0 ? sample : average + kWeight * (sample - average); }

    double generating_us_ = -1; // per token of a generating slot (steps without prompt tokens)
    double prompt_us_ = -1;     // per prompt token, the generating tokens' share taken out
    double last_prompt_sample_ = -1; // the newest step's cost per prompt token
    double prompt_ahead_us_ = -1;    // what the next step's prompt tokens are priced at (observe says how)
};

} // namespace addon
