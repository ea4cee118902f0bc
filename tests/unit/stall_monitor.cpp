// tests/unit/stall_monitor.cpp — the stall watch's judgement (stall_monitor.h) on made-up
// readings, the launcher's shared progress board across fork(), and the flight recorder's ring,
// files and summary.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "engine/distributed/comm/flight_recorder.h"
#include "engine/distributed/comm/flight_summary.h"
#include "engine/distributed/comm/progress_board.h"
#include "engine/distributed/comm/watched_communicator.h"
#include "engine/distributed/launch/stall_monitor.h"
#include "tests/support/data_fixtures.h"

namespace bareyolo::dist {
namespace {

using namespace std::chrono_literals;
using Clock = StallMonitor::Clock;
using Records = std::vector<std::optional<RankProgress>>;

RankProgress record(uint64_t beats, uint64_t progress, bool waiting, uint64_t last = 7) {
  return {.beats = beats,
          .progress = progress,
          .issued = last,
          .finished = waiting ? last - 1 : last,
          .waiting = waiting ? 1u : 0u,
          .last = {.sequence = last,
                   .op = CollectiveOp::all_reduce,
                   .dtype = DType::f32,
                   .count = 10,
                   .tag = "bucket 2"}};
}

TEST_CASE("stall monitor: who is stalled, and who only waits for them") {
  const Clock::time_point t0 = Clock::now();
  StallMonitor monitor(10s);
  // Rank 0 waits inside a collective with its heartbeat going; rank 1 is stopped (nothing
  // moves); rank 2 is alive but stuck outside any collective; rank 3 works.
  for (int second = 0; second <= 12; ++second) {
    const auto beat = uint64_t(second);
    monitor.observe({record(beat, 5, true), record(3, 5, false), record(beat, 9, false),
                     record(beat, beat * 10, false)},
                    t0 + std::chrono::seconds(second));
    if (second == 9) CHECK(monitor.stalled().empty());  // nobody before the limit
  }
  const std::vector<Stall> stalls = monitor.stalled();
  REQUIRE(stalls.size() == 2);
  CHECK(stalls[0].rank == 1);
  CHECK(stalls[0].no_heartbeat);
  CHECK(stalls[0].still_for == 12s);
  CHECK(stalls[0].message() ==
        "rank 1 stalled: no progress for 12 s and no heartbeat either (the process is stopped "
        "or hung); its last collective: all_reduce #7 bucket 2 (10 floats), finished");
  CHECK(stalls[1].rank == 2);
  CHECK_FALSE(stalls[1].no_heartbeat);
}

TEST_CASE("stall monitor: a rank that moves again before the limit starts over") {
  const Clock::time_point t0 = Clock::now();
  StallMonitor monitor(10s);
  monitor.observe({record(1, 1, false)}, t0);
  monitor.observe({record(1, 1, false)}, t0 + 9s);   // stopped for 9 s ...
  monitor.observe({record(2, 2, false)}, t0 + 10s);  // ... then continued
  monitor.observe({record(3, 2, false)}, t0 + 19s);
  CHECK(monitor.stalled().empty());
  monitor.observe({record(4, 2, false)}, t0 + 20s);
  REQUIRE(monitor.stalled().size() == 1);  // 10 s without progress, outside a collective
  CHECK(monitor.stalled()[0].still_for == 10s);
}

TEST_CASE("stall monitor: a rank not yet on the board, or a zero limit, is never judged") {
  const Clock::time_point t0 = Clock::now();
  StallMonitor monitor(10s), off(0s);
  for (StallMonitor* m : {&monitor, &off}) {
    m->observe({std::nullopt, record(1, 1, false)}, t0);
    m->observe({std::nullopt, record(1, 1, false)}, t0 + 60s);
  }
  REQUIRE(monitor.stalled().size() == 1);
  CHECK(monitor.stalled()[0].rank == 1);
  CHECK(off.stalled().empty());
}

TEST_CASE("progress board: a forked worker's record reaches the parent whole") {
  auto board = make_shared_progress_board(2, 2);  // global ranks 2 and 3
  CHECK_FALSE(board->read()[3].has_value());
  const pid_t child = ::fork();
  if (child == 0) {
    for (uint64_t i = 1; i <= 2000; ++i) board->publish(3, record(i, i * 2, i % 2 == 1, i));
    ::_exit(0);
  }
  // Every record read while the child writes is one it wrote whole.
  bool torn = false;
  for (int i = 0; i < 2000; ++i) {
    const Records seen = board->read();
    if (!seen[3]) continue;
    torn = torn || seen[3]->progress != seen[3]->beats * 2 ||
           seen[3]->last_collective() !=
               "all_reduce #" + std::to_string(seen[3]->beats) + " bucket 2 (10 floats)";
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK_FALSE(torn);
  const Records last = board->read();
  REQUIRE(last.size() == 4);
  CHECK_FALSE(last[2].has_value());
  REQUIRE(last[3].has_value());
  CHECK(last[3]->beats == 2000);
  CHECK(last[3]->last_collective() == "all_reduce #2000 bucket 2 (10 floats)");
  CHECK_FALSE(last[3]->in_collective());
}

CollectiveFingerprint bucket(uint64_t sequence, const std::string& tag = "bucket 1") {
  return {.sequence = sequence,
          .op = CollectiveOp::all_reduce,
          .dtype = DType::f32,
          .count = 10,
          .tag = tag};
}

TEST_CASE("flight recorder: keeps the newest collectives, in order, with what finished") {
  FlightRecorder recorder(4);
  for (uint64_t s = 1; s <= 6; ++s) recorder.issued(bucket(s), 40);
  recorder.finished(2);  // overwritten already: ignored
  recorder.finished(5);
  const std::vector<FlightRecord> kept = recorder.records();
  REQUIRE(kept.size() == 4);
  for (size_t i = 0; i < kept.size(); ++i) CHECK(kept[i].collective.sequence == 3 + i);
  CHECK(kept[2].finished_us.has_value());
  CHECK_FALSE(kept[3].finished_us.has_value());
}

TEST_CASE("flight recorder: the ranks' files read back, and the summary says where they part") {
  const std::string folder =
      (std::filesystem::temp_directory_path() / ("bareyolo-flights-" + std::to_string(::getpid())))
          .string();
  std::filesystem::remove_all(folder);
  FlightRecorder rank0, rank1;
  for (uint64_t s = 1; s <= 3; ++s) rank0.issued(bucket(s, "bucket " + std::to_string(s)), 40);
  rank0.finished(1);
  rank1.issued(bucket(1, "bucket 1"), 40);
  rank1.issued(bucket(2, "bucket 3"), 40);  // rank 1 went astray at #2
  write_flight_record(folder, 0, 3, "lost rank 2", rank0.records());
  write_flight_record(folder, 1, 3, "lost rank 2", rank1.records());
  const std::vector<FlightFile> files = read_flight_folder(folder);
  REQUIRE(files.size() == 2);
  CHECK(files[0].records.size() == 3);
  CHECK(files[0].records[0].finished_us.has_value());
  CHECK(files[1].records[1].collective == bucket(2, "bucket 3"));
  const std::vector<std::string> lines = summarize_flights(files);
  auto has = [&](const std::string& text) {
    return std::any_of(lines.begin(), lines.end(), [&](const std::string& line) {
      return line.find(text) != std::string::npos;
    });
  };
  CHECK(has("flight records of 2 of 3 ranks"));
  CHECK(has("rank 2: no record"));
  CHECK(has("rank 1 never reached collective #3 (its last was #2)"));
  CHECK(
      has("the ranks part at collective #2: rank 1 issued all_reduce #2 bucket 3 (10 floats) "
          "where rank 0 issued all_reduce #2 bucket 2 (10 floats)"));
  std::filesystem::remove_all(folder);
  CHECK_THROWS_WITH(read_flight_folder(folder), doctest::Contains("holds no flight record"));
}

TEST_CASE("flight records: every kind of collective reads back as it was written") {
  const testing::TempDir folder;
  const std::vector<CollectiveFingerprint> issued = {
      {.sequence = 1, .op = CollectiveOp::all_reduce, .dtype = DType::bf16, .count = 8, .tag = "a"},
      {.sequence = 2, .op = CollectiveOp::broadcast, .dtype = DType::i64, .count = 3, .tag = "b"},
      {.sequence = 3, .op = CollectiveOp::all_gather, .dtype = DType::f64, .count = 2, .tag = ""},
      {.sequence = 4, .op = CollectiveOp::barrier, .dtype = DType::f32, .count = 0, .tag = "end"}};
  FlightRecorder recorder;
  for (const CollectiveFingerprint& collective : issued) recorder.issued(collective, 10);
  const FlightFile file =
      read_flight_record(write_flight_record(folder.path().string(), 0, 1, "", recorder.records()));
  REQUIRE(file.records.size() == issued.size());
  for (size_t i = 0; i < issued.size(); ++i) CHECK(file.records[i].collective == issued[i]);
}

TEST_CASE("flight records: a damaged file is refused, and a large world's gaps are ranges") {
  // Before: a file claiming world_size 2^31 made the summary a line per rank (2^31 of them),
  // and its numbers were cast as found.
  const auto record = [](const std::string& rank, const std::string& world) {
    return R"({"rank":)" + rank + R"(,"world_size":)" + world +
           R"(,"reason":"lost rank 2","written_us":9,"collectives":[]})";
  };
  const FlightFile file = parse_flight_record(record("5", "2147483647"), "rank5.json");
  CHECK(file.world_size == 2147483647);
  const std::vector<std::string> lines = summarize_flights({file});
  REQUIRE(lines.size() == 4);
  CHECK(lines[1].starts_with("ranks 0-4: no record"));
  CHECK(lines[2].starts_with("rank 5: issued no collective"));
  CHECK(lines[3].starts_with("ranks 6-2147483646: no record"));
  CHECK_THROWS_WITH(parse_flight_record(record("3", "3"), "rank3.json"),
                    doctest::Contains("rank3.json: \"rank\" is 3, not a whole number in [0, 2]"));
  CHECK_THROWS_WITH(parse_flight_record(record("0", "1e30"), "rank0.json"),
                    doctest::Contains("\"world_size\" is 1e+30"));
  CHECK_THROWS_WITH(parse_flight_record("{\"rank\":", "rank0.json"),
                    doctest::Contains("rank0.json is not a flight record bareyolo wrote"));
}

TEST_CASE("desync check: BAREYOLO_DESYNC_CHECK's values") {
  CHECK(desync_check_for(Backend::nccl, nullptr) == DesyncCheck::per_step);
  CHECK(desync_check_for(Backend::tcp, nullptr) == DesyncCheck::off);
  CHECK(desync_check_for(Backend::nccl, "0") == DesyncCheck::off);
  CHECK(desync_check_for(Backend::tcp, "step") == DesyncCheck::per_step);
  CHECK(desync_check_for(Backend::tcp, "1") == DesyncCheck::per_collective);
  CHECK_THROWS_WITH(desync_check_for(Backend::tcp, "yes"),
                    doctest::Contains("BAREYOLO_DESYNC_CHECK=yes is not one of"));
}

}  // namespace
}  // namespace bareyolo::dist
