// tests/dist/recording_plan.cpp — the plan ranks that record their steps agree on before each
// step (models/train/recording_plan.h), over two real ranks: the largest capacity any rank
// proposed, and recording again when any rank must; a process alone keeps its own proposal.
#include <doctest/doctest.h>

#include <chrono>
#include <stdexcept>
#include <string>

#include "models/train/recording_plan.h"
#include "tests/support/dist_testing.h"

using namespace bareyolo;
using namespace bareyolo::dist;
using namespace bareyolo::dist::testing;
using namespace std::chrono_literals;

namespace {

void expect(const models::RecordingPlan& plan, int64_t capacity, bool record_again,
            const std::string& what) {
  if (plan.rows_capacity != capacity || plan.record_again != record_again)
    throw std::runtime_error(what + ": agreed on capacity " + std::to_string(plan.rows_capacity) +
                             (plan.record_again ? ", recording again" : ", no recording") +
                             "; expected " + std::to_string(capacity) +
                             (record_again ? ", recording again" : ", no recording"));
}

}  // namespace

TEST_CASE("recording plan: every rank takes the largest capacity, and records again with any") {
  check_ranks_ok(run_ranks(
      2,
      [](ProcessGroup& group) {
        const bool one = group.rank() == 1;
        models::RecordingPlanVote vote;
        vote.propose(group.comm.get(), {.rows_capacity = one ? 2048 : 512, .record_again = one});
        expect(vote.agreed(), 2048, true, "rank 1 needs more rows and moved");
        vote.propose(group.comm.get(), {.rows_capacity = 2048, .record_again = !one});
        expect(vote.agreed(), 2048, true, "rank 0 moved");
        vote.propose(group.comm.get(), {.rows_capacity = 2048, .record_again = false});
        expect(vote.agreed(), 2048, false, "nothing moved");
      },
      60s));
}

TEST_CASE("recording plan: a process alone agrees with itself") {
  models::RecordingPlanVote vote;
  vote.propose(nullptr, {.rows_capacity = 1024, .record_again = true});
  const models::RecordingPlan plan = vote.agreed();
  CHECK(plan.rows_capacity == 1024);
  CHECK(plan.record_again);
}
