// tests/support/random_matched_rows.h — random matched rows (build_targets' output) for the loss
// tests: the generator the selftest's loss checks use (tools/selftest/random_matched_rows.h),
// called with a test's Rng.
#pragma once

#include "tools/selftest/random_matched_rows.h"

namespace bareyolo::testing {

using selftest::random_matched_rows;

}  // namespace bareyolo::testing
