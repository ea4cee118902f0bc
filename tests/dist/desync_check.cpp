// tests/dist/desync_check.cpp — the watched communicator's own desync checks (the rolling one a
// step, and the one before every collective), which stand in where the backend carries no
// fingerprint (NCCL). Here the backend is the TCP ring behind a TagEraser: the ring still checks
// numbers, ops and sizes, but with the tags gone two equal-size buckets swapped mix silently —
// exactly NCCL's blind spot — so only the watched communicator can catch them. Also: a failed
// collective names the rank that never reached it and writes this rank's flight record.
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "engine/distributed/comm/flight_recorder.h"
#include "engine/distributed/comm/watched_communicator.h"
#include "tests/support/dist_testing.h"

namespace bareyolo::dist {
namespace {

using namespace std::chrono_literals;
using testing::RankResult;
using testing::run_ranks;

constexpr int64_t kBucketFloats = 1000;

// Forwards every collective with its tag dropped: a backend that cannot tell buckets apart.
class TagEraser final : public Communicator {
 public:
  explicit TagEraser(Communicator& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int world_size() const override { return inner_.world_size(); }
  Backend backend() const override { return inner_.backend(); }
  WorkHandle allreduce(CommBuffer buffer, ReduceOp op, std::string_view) override {
    return inner_.allreduce(buffer, op, "");
  }
  WorkHandle broadcast(CommBuffer buffer, int root, std::string_view) override {
    return inner_.broadcast(buffer, root, "");
  }
  WorkHandle allgather(CommBuffer send, CommBuffer recv, std::string_view) override {
    return inner_.allgather(send, recv, "");
  }
  WorkHandle barrier(std::string_view) override { return inner_.barrier(""); }

 private:
  Communicator& inner_;
};

WatchedCommunicator watched_without_tags(ProcessGroup& group, DesyncCheck check) {
  return WatchedCommunicator(std::make_unique<TagEraser>(*group.comm), check);
}

// One step: buckets 3 and 4 (equal sizes) all-reduced, in swapped order on the ranks listed.
void step(Communicator& comm, bool swap) {
  std::vector<float> bucket3(size_t(kBucketFloats), 1.0f), bucket4(size_t(kBucketFloats), 2.0f);
  auto issue = [&](std::vector<float>& values, int index) {
    return comm.allreduce(CommBuffer::of(values.data(), kBucketFloats), ReduceOp::avg,
                          "bucket " + std::to_string(index));
  };
  std::vector<WorkHandle> work;
  work.push_back(swap ? issue(bucket4, 4) : issue(bucket3, 3));
  work.push_back(swap ? issue(bucket3, 3) : issue(bucket4, 4));
  for (WorkHandle& w : work) w->wait();
  comm.end_step();
}

void check_every_rank_says(const std::vector<RankResult>& results, const std::string& statement) {
  for (const RankResult& result : results) {
    INFO(result.describe());
    CHECK_FALSE(result.timed_out);
    CHECK(result.exit_code == 1);
    CHECK(result.output.find(statement) != std::string::npos);
  }
}

TEST_CASE("desync check: ranks that agree pass the rolling check, step after step") {
  auto results = run_ranks(
      2,
      [](ProcessGroup& group) {
        WatchedCommunicator comm = watched_without_tags(group, DesyncCheck::per_step);
        for (int s = 0; s < 4; ++s) step(comm, false);
      },
      60s);
  testing::check_ranks_ok(results);
}

TEST_CASE(
    "desync check: swapped equal-size buckets mix silently, and the rolling check names them") {
  // The ring alone (tags erased) would let this pass: the buckets' values simply average.
  auto results = run_ranks(
      2,
      [](ProcessGroup& group) {
        WatchedCommunicator comm = watched_without_tags(group, DesyncCheck::per_step);
        step(comm, false);
        step(comm, group.rank() == 1);  // the step that goes astray
        step(comm, false);              // its end reads the check: within one step
        throw std::runtime_error("the desync went unnoticed");
      },
      60s);
  check_every_rank_says(results,
                        "rank 1 issued all_reduce #4 bucket 4 (1,000 floats) where rank 0 issued "
                        "all_reduce #4 bucket 3 (1,000 floats)");
}

TEST_CASE("desync check: before every collective, a skipped SyncBN meeting is named at once") {
  auto results = run_ranks(
      2,
      [](ProcessGroup& group) {
        WatchedCommunicator comm = watched_without_tags(group, DesyncCheck::per_collective);
        std::vector<double> moments(9, 1.0), gathered(18, 0.0);
        if (group.rank() == 0)  // rank 1 skips this meeting
          comm.allgather(CommBuffer::of(moments.data(), 9), CommBuffer::of(gathered.data(), 18),
                         "SyncBN model.2.bn")
              ->wait();
        std::vector<float> bucket(size_t(kBucketFloats), 1.0f);
        comm.allreduce(CommBuffer::of(bucket.data(), kBucketFloats), ReduceOp::avg, "bucket 0")
            ->wait();
        throw std::runtime_error("the desync went unnoticed");
      },
      60s);
  check_every_rank_says(results,
                        "rank 1 issued all_reduce #2 bucket 0 (1,000 floats) where rank 0 issued "
                        "all_gather #2 SyncBN model.2.bn (9 doubles)");
}

TEST_CASE("desync check: before every collective, a bucket of the wrong size is named at once") {
  auto results = run_ranks(
      2,
      [](ProcessGroup& group) {
        WatchedCommunicator comm = watched_without_tags(group, DesyncCheck::per_collective);
        const int64_t count = group.rank() == 1 ? kBucketFloats - 1 : kBucketFloats;
        std::vector<float> bucket(size_t(count), 1.0f);
        comm.allreduce(CommBuffer::of(bucket.data(), count), ReduceOp::avg, "bucket 2")->wait();
        throw std::runtime_error("the desync went unnoticed");
      },
      60s);
  check_every_rank_says(results,
                        "rank 1 issued all_reduce #2 bucket 2 (999 floats) where rank 0 issued "
                        "all_reduce #2 bucket 2 (1,000 floats)");
}

TEST_CASE("flight record: a failed collective names the rank that never reached it") {
  const std::string folder =
      (std::filesystem::temp_directory_path() / ("bareyolo-flight-" + std::to_string(::getpid())))
          .string();
  std::filesystem::remove_all(folder);
  auto results = run_ranks(
      2,
      [&](ProcessGroup& group) {
        REQUIRE_FALSE(group.watched == nullptr);
        group.watched->record_flights_in(folder);
        std::vector<float> values(16, 1.0f);
        group.comm->allreduce(CommBuffer::of(values.data(), 16), ReduceOp::sum, "bucket 0")->wait();
        if (group.rank() == 1) {
          std::this_thread::sleep_for(2500ms);  // its heartbeat publishes #1 meanwhile
          std::_Exit(0);                        // gone without a word, as a crash
        }
        group.comm->allreduce(CommBuffer::of(values.data(), 16), ReduceOp::sum, "bucket 1")->wait();
      },
      60s);
  const RankResult& rank0 = results[0];
  INFO(rank0.describe());
  CHECK(rank0.exit_code == 1);
  CHECK(rank0.output.find("rank 1 never reached collective #2 (its last: all_reduce #1 bucket 0 "
                          "(16 floats))") != std::string::npos);
  CHECK(rank0.output.find(folder + "/rank0.json") != std::string::npos);
  const FlightFile flight = read_flight_record(folder + "/rank0.json");
  CHECK(flight.rank == 0);
  CHECK(flight.world_size == 2);
  REQUIRE(flight.records.size() >= 2);
  CHECK(to_string(flight.records.back().collective) == "all_reduce #2 bucket 1 (16 floats)");
  CHECK_FALSE(flight.records.back().finished_us.has_value());
  CHECK(flight.records.front().finished_us.has_value());
  std::filesystem::remove_all(folder);
}

}  // namespace
}  // namespace bareyolo::dist
