// tests/dist/desync.cpp — desynchronised collectives on the TCP ring and the shm communicator: a
// rank that issues its collectives in another order, skips one, or passes a buffer of another
// size. On the ring every frame carries its collective's fingerprint
// (engine/distributed/comm/ring_frame.h); on shm every rank compares every rank's fingerprint at
// the collective's first meeting (engine/distributed/comm/shm_meetings.h). Either way the wrong
// collective fails every rank at once — none waits for the timeout (3 hours here, the default) —
// with a message naming two neighbouring ranks and the collective each issued.
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <vector>

#include "engine/distributed/ddp/sync_batchnorm.h"
#include "tests/support/dist_testing.h"

namespace bareyolo::dist {
namespace {

using namespace std::chrono_literals;
using testing::CpuBackend;
using testing::kCpuBackends;
using testing::RankResult;
using testing::run_ranks;

// A gradient bucket's size: more than 64 KB, so the all-reduce takes the ring schedule, and
// more than 1 MB, so it is received on the link's receiving thread.
constexpr int64_t kBucketFloats = 300'000;

// What rank r issued where the ranks parted, as to_string names it; `issued[r]`.
using Issued = std::vector<std::string>;

// Every rank failed within seconds of the start, none by the timeout, with a message that
// names a rank and its previous neighbour on the ring and the collectives they issued where
// those differ (the rank that found it says so, the others pass its words on).
void check_every_rank_names_the_desync(const std::vector<RankResult>& results, const Issued& issued,
                                       std::chrono::steady_clock::time_point started) {
  const int world = int(results.size());
  std::vector<std::string> statements;
  for (int r = 0; r < world; ++r) {
    const int prev = (r + world - 1) % world;
    if (issued[size_t(prev)] != issued[size_t(r)])
      statements.push_back("rank " + std::to_string(prev) + " issued " + issued[size_t(prev)] +
                           " where rank " + std::to_string(r) + " issued " + issued[size_t(r)]);
  }
  REQUIRE_FALSE(statements.empty());
  for (const RankResult& result : results) {
    INFO(result.describe());
    CHECK_FALSE(result.timed_out);
    CHECK(result.exit_code == 1);
    CHECK(result.ended - started < 10s);
    bool named = false;
    for (const std::string& statement : statements)
      named = named || result.output.find(statement) != std::string::npos;
    CHECK_MESSAGE(named, "expected one of: " << statements.front()
                                             << (statements.size() > 1 ? " | " + statements.back()
                                                                       : std::string()));
  }
}

// All-reduces two buckets of equal size, as the reducer issues them during backward (both in
// flight, then waited for); a rank in `swapped` issues bucket 4 before bucket 3.
void allreduce_buckets(ProcessGroup& group, const std::vector<int>& swapped) {
  std::vector<float> bucket3(size_t(kBucketFloats), 1.0f), bucket4(size_t(kBucketFloats), 2.0f);
  auto issue = [&](std::vector<float>& values, int index) {
    return group.comm->allreduce(CommBuffer::of(values.data(), kBucketFloats), ReduceOp::avg,
                                 "bucket " + std::to_string(index));
  };
  const bool swap = std::find(swapped.begin(), swapped.end(), group.rank()) != swapped.end();
  std::vector<WorkHandle> work;
  if (swap) {
    work.push_back(issue(bucket4, 4));
    work.push_back(issue(bucket3, 3));
  } else {
    work.push_back(issue(bucket3, 3));
    work.push_back(issue(bucket4, 4));
  }
  for (WorkHandle& w : work) w->wait();
}

TEST_CASE("desync: a rank that swaps two buckets of equal size fails every rank, naming both") {
  const std::string bucket3 = "all_reduce #1 bucket 3 (300,000 floats)";
  const std::string bucket4 = "all_reduce #1 bucket 4 (300,000 floats)";
  for (const CpuBackend& cpu : kCpuBackends) {
    INFO(cpu.name);
    {  // 2 ranks
      const auto started = std::chrono::steady_clock::now();
      check_every_rank_names_the_desync(
          run_ranks(2, [](ProcessGroup& group) { allreduce_buckets(group, {1}); }, 60s,
                    {.backend = cpu.backend}),
          {bucket3, bucket4}, started);
    }
    {  // 3 ranks: rank 1, between two that agree, learns it from its neighbours

      const auto started = std::chrono::steady_clock::now();
      check_every_rank_names_the_desync(
          run_ranks(3, [](ProcessGroup& group) { allreduce_buckets(group, {2}); }, 60s,
                    {.backend = cpu.backend}),
          {bucket3, bucket3, bucket4}, started);
    }
  }
}

TEST_CASE("desync: a rank that skips one SyncBN meeting fails every rank, naming both") {
  // Three layers' forward meetings of 16 channels each (33 doubles a rank: count, means, M2s);
  // rank 1 skips the second, so its second collective is the third layer's.
  const std::vector<std::string> layers = {"model.2.cv1.bn", "model.2.cv2.bn", "model.3.bn"};
  for (const CpuBackend& cpu : kCpuBackends) {
    INFO(cpu.name);
    const auto started = std::chrono::steady_clock::now();
    auto results = run_ranks(
        3,
        [&](ProcessGroup& group) {
          Tensor record = Tensor::from_vector(std::vector<double>(33, 0.5), {1, 33, 1, 1}),
                 gathered;
          for (const std::string& layer : layers) {
            if (group.rank() == 1 && layer == layers[1]) continue;
            allgather_moment_records(*group.comm, record, gathered, "SyncBN " + layer);
          }
        },
        60s, {.backend = cpu.backend});
    const std::string expected = "all_gather #2 SyncBN model.2.cv2.bn (33 doubles)";
    const std::string skipped_to = "all_gather #2 SyncBN model.3.bn (33 doubles)";
    check_every_rank_names_the_desync(results, {expected, skipped_to, expected}, started);
  }
}

TEST_CASE("desync: a rank that sends a bucket of the wrong size fails every rank, naming both") {
  for (const CpuBackend& cpu : kCpuBackends) {
    INFO(cpu.name);
    const auto started = std::chrono::steady_clock::now();
    auto results = run_ranks(
        3,
        [](ProcessGroup& group) {
          const int64_t count = group.rank() == 1 ? kBucketFloats - 1 : kBucketFloats;
          std::vector<float> bucket(size_t(count), 1.0f);
          group.comm->allreduce(CommBuffer::of(bucket.data(), count), ReduceOp::avg, "bucket 2")
              ->wait();
        },
        60s, {.backend = cpu.backend});
    const std::string right = "all_reduce #1 bucket 2 (300,000 floats)";
    const std::string wrong = "all_reduce #1 bucket 2 (299,999 floats)";
    check_every_rank_names_the_desync(results, {right, wrong, right}, started);
  }
}

}  // namespace
}  // namespace bareyolo::dist
