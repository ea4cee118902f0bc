// tests/dist/selftest.cpp — the collective half of `bareyolo selftest`
// (tools/selftest/nccl_checks.h) without a GPU, on the TCP ring over loopback:
//  - check_collectives on 2 and 3 ranks: the values each rank expects from the others are right
//    (sums, averages, both broadcast roots, the allgather's order, the barrier's timing), so that
//    on GPUs only NCCL itself is under test;
//  - run_collective_checks forks a worker per device through the launcher and reports every rank
//    by name; NCCL asked for on CPU ranks fails every rank, with the cause in full.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>

#include "tests/support/dist_testing.h"
#include "tools/selftest/nccl_checks.h"

using namespace bareyolo;
using namespace bareyolo::selftest;

TEST_CASE("the selftest's collective checks hold on 2 and 3 TCP ranks") {
  for (int world : {2, 3}) {
    INFO("world " << world);
    dist::testing::check_ranks_ok(dist::testing::run_ranks(
        world, [](dist::ProcessGroup& group) { check_collectives(*group.comm, Device::cpu()); },
        std::chrono::seconds(100), {.backend = dist::Backend::tcp}));
  }
}

TEST_CASE("run_collective_checks reports every rank of the workers it forks") {
  const std::vector<Device> two_ranks = {Device::cpu(), Device::cpu()};
  const std::vector<CheckResult> passed = run_collective_checks(two_ranks, dist::Backend::tcp);
  REQUIRE(passed.size() == 2);
  for (int rank = 0; rank < 2; ++rank) {
    const CheckResult& r = passed[size_t(rank)];
    CAPTURE(r.failure);
    CHECK(r.passed);
    CHECK(r.group == "tcp");
    CHECK(r.name == "collectives, rank " + std::to_string(rank) + " of 2");
  }
  CHECK(verdict_line(passed) == "selftest: PASS (2 checks on cpu)");

  const std::vector<CheckResult> failed = run_collective_checks(two_ranks, dist::Backend::nccl);
  REQUIRE(failed.size() == 2);
  CHECK_FALSE(all_passed(failed));
  CHECK(std::none_of(failed.begin(), failed.end(), [](const CheckResult& r) { return r.passed; }));
  CHECK(std::any_of(failed.begin(), failed.end(), [](const CheckResult& r) {
    return r.failure.find("the NCCL backend needs a GPU") != std::string::npos;
  }));
}
