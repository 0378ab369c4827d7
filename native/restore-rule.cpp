// The rule restore-rule.h states.
#include "restore-rule.h"

namespace addon {

bool restore_keeps_enough(size_t common_prefix, size_t state_tokens) { return state_tokens > 0 && 4 * common_prefix >= state_tokens; }

}  // namespace addon
