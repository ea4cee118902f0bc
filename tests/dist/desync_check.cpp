// tests/dist/desync_check.cpp — the watched communicator's own desync checks (the rolling one a
// step, and the one before every collective), which stand in where the backend carries no
// fingerprint (NCCL). Here the backend is the TCP ring behind a TagEraser: the ring still checks
// numbers, ops and sizes, but with the tags gone two equal-size buckets swapped mix silently —
// exactly NCCL's blind spot — so only the watched communicator can catch them. Over a
// device-only backend (NCCL's shape, tests/support/device_only_communicator.h) the rolling
// check goes through host staging and never makes the host wait for a device that runs behind
// it. Also: a failed collective names the rank that never reached it and writes this rank's
// flight record.
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "engine/distributed/comm/flight_recorder.h"
#include "engine/distributed/comm/watched_communicator.h"
#include "tests/support/device_only_communicator.h"
#include "tests/support/dist_testing.h"

namespace bareyolo::dist {
namespace {

using namespace std::chrono_literals;
using testing::DeviceOnly;
using testing::HostMemoryAsDevice;
using testing::kFakeGpu;
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

// The rolling check over NCCL's shape: the TCP ring, tags erased, taking device buffers only,
// with its host values staged through device memory that lags behind the host; `memory` is
// set to that memory (the communicator owns it).
WatchedCommunicator watched_device_only(ProcessGroup& group, HostMemoryAsDevice** memory) {
  auto lagging = std::make_unique<HostMemoryAsDevice>();
  lagging->lag();
  *memory = lagging.get();
  return WatchedCommunicator(
      with_host_staging(std::make_unique<DeviceOnly>(std::make_unique<TagEraser>(*group.comm)),
                        std::move(lagging)),
      DesyncCheck::per_step);
}

// Two buckets of equal size, named "bucket <first>" and "bucket <second>", all-reduced in that
// order; `buckets_on` the device their buffers are labelled with.
void buckets(Communicator& comm, int first, int second, Device buckets_on = Device::cpu()) {
  std::vector<float> values(size_t(2 * kBucketFloats), 1.0f);
  std::vector<WorkHandle> work;
  for (int k = 0; k < 2; ++k)
    work.push_back(
        comm.allreduce(CommBuffer::of(values.data() + k * kBucketFloats, kBucketFloats, buckets_on),
                       ReduceOp::avg, "bucket " + std::to_string(k == 0 ? first : second)));
  for (WorkHandle& w : work) w->wait();
}

// Buckets 3 and 4, in swapped order on the ranks listed.
void two_buckets(Communicator& comm, bool swap, Device buckets_on = Device::cpu()) {
  swap ? buckets(comm, 4, 3, buckets_on) : buckets(comm, 3, 4, buckets_on);
}

// One step: the two buckets, then its end.
void step(Communicator& comm, bool swap, Device buckets_on = Device::cpu()) {
  two_buckets(comm, swap, buckets_on);
  comm.end_step();
}

// A step recorded as a CUDA graph would be, on the CPU: between begin_recording and
// end_recording the watched communicator sees the two buckets issued (here they also run, on
// the ring); each replay then runs them on the ring underneath alone, as a graph's replay runs
// them without the host code that issued them.
RecordedCollectives record_two_buckets(WatchedCommunicator& comm, bool swap) {
  comm.begin_recording();
  two_buckets(comm, swap);
  return comm.end_recording();
}
void replay_two_buckets(WatchedCommunicator& comm, const RecordedCollectives& recording,
                        Communicator& ring) {
  comm.replay(recording, "the two buckets", [&] { two_buckets(ring, false); });
  comm.end_step();
}

// What every rank says when rank 1's collective #4 was bucket 4 where rank 0's was bucket 3.
constexpr const char* kBucketsSwappedAtFour =
    "rank 1 issued all_reduce #4 bucket 4 (1,000 floats) where rank 0 issued all_reduce #4 "
    "bucket 3 (1,000 floats)";

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
        // Its check is read kCheckLag steps later, at the last of these steps' ends.
        for (size_t s = 0; s < WatchedCommunicator::kCheckLag; ++s) step(comm, false);
        throw std::runtime_error("the desync went unnoticed");
      },
      60s);
  check_every_rank_says(results, kBucketsSwappedAtFour);
}

TEST_CASE("desync check: ranks that part at the last collective before a check are named there") {
  // Step 2's buckets are #4 and #5, its check #6: rank 1's #5 is bucket 5, rank 0's bucket 4.
  auto results = run_ranks(
      2,
      [](ProcessGroup& group) {
        WatchedCommunicator comm = watched_without_tags(group, DesyncCheck::per_step);
        step(comm, false);
        buckets(comm, 3, group.rank() == 1 ? 5 : 4);
        comm.end_step();
        for (size_t s = 0; s < WatchedCommunicator::kCheckLag; ++s) step(comm, false);
        throw std::runtime_error("the desync went unnoticed");
      },
      60s);
  check_every_rank_says(results,
                        "rank 1 issued all_reduce #5 bucket 5 (1,000 floats) where rank 0 issued "
                        "all_reduce #5 bucket 4 (1,000 floats)");
}

TEST_CASE(
    "desync check: over a device-only backend the rolling check never waits for a device that "
    "runs a step behind") {
  auto results = run_ranks(
      2,
      [](ProcessGroup& group) {
        HostMemoryAsDevice* memory = nullptr;
        WatchedCommunicator comm = watched_device_only(group, &memory);
        uint64_t queued_before_step = 0;
        std::vector<uint64_t> agreed;
        for (int s = 0; s < 8; ++s) {
          step(comm, false, kFakeGpu);
          // The device has run the previous steps, not this one's check.
          memory->run_device_through(queued_before_step);
          queued_before_step = memory->downloads;
          agreed.push_back(comm.agreed_through());
        }
        if (memory->host_waits != 0)
          throw std::runtime_error("the host waited for the device " +
                                   std::to_string(memory->host_waits) + " times");
        // Each step issues 3 collectives (2 buckets, its check): step s's check, read at the end
        // of step s + 3, saw the 3 (s + 1) - 1 before it.
        for (int s = 0; s < 8; ++s) {
          const uint64_t expected = s < 3 ? 0 : 3 * uint64_t(s - 3 + 1) - 1;
          if (agreed[size_t(s)] != expected)
            throw std::runtime_error("after step " + std::to_string(s) + " the check agreed on " +
                                     std::to_string(agreed[size_t(s)]) + " collectives, not " +
                                     std::to_string(expected));
        }
      },
      60s);
  testing::check_ranks_ok(results);
}

TEST_CASE("desync check: over a device-only backend, swapped buckets are still named") {
  auto results = run_ranks(
      2,
      [](ProcessGroup& group) {
        HostMemoryAsDevice* memory = nullptr;
        WatchedCommunicator comm = watched_device_only(group, &memory);
        step(comm, false, kFakeGpu);
        step(comm, group.rank() == 1, kFakeGpu);
        for (size_t s = 0; s < WatchedCommunicator::kCheckLag; ++s) {
          memory->run_device_through(memory->downloads);
          step(comm, false, kFakeGpu);
        }
        throw std::runtime_error("the desync went unnoticed");
      },
      60s);
  check_every_rank_says(results, kBucketsSwappedAtFour);
}

TEST_CASE("desync check: a recording's collectives are numbered again at each replay") {
  auto results = run_ranks(
      2,
      [](ProcessGroup& group) {
        WatchedCommunicator comm = watched_without_tags(group, DesyncCheck::per_step);
        step(comm, false);  // #1, #2 and its check #3
        const RecordedCollectives recording = record_two_buckets(comm, false);
        REQUIRE(recording.size() == 2);
        CHECK(recording[1].collective.tag == "bucket 4");
        // Replays 1-5: #4 #5 (check #6), #7 #8 (#9), ... #16 #17 (#18). The eager step's check
        // is read at the third replay's end, the first replay's at the fourth's and the
        // second's, which saw #1-#8, at the fifth's.
        for (int replay = 0; replay < 5; ++replay) replay_two_buckets(comm, recording, *group.comm);
        CHECK(comm.agreed_through() == 8);
        const std::vector<FlightRecord> records = comm.flight_records();
        auto record_of = [&](uint64_t sequence) {
          for (const FlightRecord& r : records)
            if (r.collective.sequence == sequence) return r;
          throw std::runtime_error("no record of collective #" + std::to_string(sequence));
        };
        CHECK(to_string(record_of(4).collective) == "all_reduce #4 bucket 3 (1,000 floats)");
        CHECK(record_of(5).finished_us.has_value());  // before an agreed check
        CHECK(to_string(record_of(17).collective) == "all_reduce #17 bucket 4 (1,000 floats)");
        CHECK_FALSE(record_of(17).finished_us.has_value());  // its check is still on its way
      },
      60s);
  testing::check_ranks_ok(results);
}

TEST_CASE("desync check: recordings that differ between the ranks are named at their replays") {
  auto results = run_ranks(
      2,
      [](ProcessGroup& group) {
        WatchedCommunicator comm = watched_without_tags(group, DesyncCheck::per_step);
        step(comm, false);
        // Rank 1 recorded its buckets in the other order: every replay of it goes astray.
        const RecordedCollectives recording = record_two_buckets(comm, group.rank() == 1);
        for (size_t replay = 0; replay <= WatchedCommunicator::kCheckLag; ++replay)
          replay_two_buckets(comm, recording, *group.comm);
        throw std::runtime_error("the desync went unnoticed");
      },
      60s);
  check_every_rank_says(results, kBucketsSwappedAtFour);
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

TEST_CASE("flight record: a failed collective names the rank that never reached it, only it") {
  const std::string folder =
      (std::filesystem::temp_directory_path() / ("bareyolo-flight-" + std::to_string(::getpid())))
          .string();
  std::filesystem::remove_all(folder);
  // Rank 2 stops after #1; ranks 0 and 1 both issue #2 and wait in it.
  auto results = run_ranks(
      3,
      [&](ProcessGroup& group) {
        REQUIRE_FALSE(group.watched == nullptr);
        group.watched->record_flights_in(folder);
        std::vector<float> values(16, 1.0f);
        group.comm->allreduce(CommBuffer::of(values.data(), 16), ReduceOp::sum, "bucket 0")->wait();
        if (group.rank() == 2) {
          std::this_thread::sleep_for(2500ms);  // its heartbeat publishes #1 meanwhile
          std::_Exit(0);                        // gone without a word, as a crash
        }
        group.comm->allreduce(CommBuffer::of(values.data(), 16), ReduceOp::sum, "bucket 1")->wait();
      },
      60s);
  const RankResult& rank0 = results[0];
  INFO(rank0.describe());
  CHECK(rank0.exit_code == 1);
  CHECK(rank0.output.find("rank 2 never reached collective #2 (its last: all_reduce #1 bucket 0 "
                          "(16 floats))") != std::string::npos);
  CHECK(rank0.output.find("rank 1 never reached") == std::string::npos);
  CHECK(rank0.output.find(folder + "/rank0.json") != std::string::npos);
  const FlightFile flight = read_flight_record(folder + "/rank0.json");
  CHECK(flight.rank == 0);
  CHECK(flight.world_size == 3);
  REQUIRE(flight.records.size() >= 2);
  CHECK(to_string(flight.records.back().collective) == "all_reduce #2 bucket 1 (16 floats)");
  CHECK_FALSE(flight.records.back().finished_us.has_value());
  CHECK(flight.records.front().finished_us.has_value());
  std::filesystem::remove_all(folder);
}

}  // namespace
}  // namespace bareyolo::dist
