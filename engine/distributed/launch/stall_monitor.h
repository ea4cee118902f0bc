// engine/distributed/launch/stall_monitor.h — the judge of the ranks' heartbeats: which rank, if
// any, has stalled the job (progress_board.h says what the ranks publish).
//
// A rank is stalled when, for `stall_timeout` by the watcher's own clock:
//   - its heartbeat has not advanced: the process is stopped (SIGSTOP, a debugger) or hung
//     whole — it may be inside a collective, but its peers wait for it there in vain; or
//   - its progress has not advanced while it is outside every collective: alive, but stuck
//     (a deadlock, a hung read of a network file system).
// A rank inside a collective whose heartbeat goes on is waiting for a peer: that peer, not the
// waiting rank, is named. A rank that moves again before the limit is not stalled, and its
// clock starts over. Only the watcher's clock counts: the ranks' clocks may differ (other
// machines), so the monitor times how long each record has stayed the same.
//
// Watchers: bareyolo's launcher (every node's, for its own workers; launcher.h) and, under
// torchrun/SLURM/mpirun, rank 0 (watch_for_stalls below), which reads the store.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/distributed/comm/progress_board.h"

namespace bareyolo::dist {

struct Stall {
  int rank = 0;
  std::chrono::milliseconds still_for{0};  // how long it has not moved
  bool no_heartbeat = false;               // its heartbeat stopped too
  std::string last_collective;             // the last collective it issued ("" none)

  // "rank 1 stalled: no progress for 30 s (no heartbeat either: the process is stopped or
  // hung); its last collective: all_reduce #57 bucket 3 (1,234 floats), not finished"
  std::string message() const;
};

class StallMonitor {
 public:
  using Clock = std::chrono::steady_clock;
  explicit StallMonitor(std::chrono::milliseconds stall_timeout) : timeout_(stall_timeout) {}

  // One reading of the board at `now` (nullopt: that rank has published nothing yet, and a
  // rank still starting is not judged).
  void observe(const std::vector<std::optional<RankProgress>>& records, Clock::time_point now);
  // The ranks stalled as of the last reading.
  std::vector<Stall> stalled() const;

 private:
  struct Seen {
    RankProgress record;
    Clock::time_point beat_moved, progress_moved;
  };
  std::chrono::milliseconds timeout_;
  Clock::time_point now_;
  std::vector<std::optional<Seen>> seen_;
};

// Rank 0's watch under torchrun, SLURM or mpirun: every second reads the ranks' heartbeats from
// the store (its own connection to host:port with `token`) and, when a rank has stalled,
// prints its message to stderr and ends this process with exit status 1, which ends the job:
// the peers lose rank 0, and the launcher's agent stops the rest.
class StallWatch {
 public:
  struct Options {
    std::string host;
    int port = 0;
    std::string token;
    int world_size = 1;
    std::chrono::milliseconds stall_timeout{0};
  };
  explicit StallWatch(Options options);
  ~StallWatch();
  StallWatch(const StallWatch&) = delete;
  StallWatch& operator=(const StallWatch&) = delete;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace bareyolo::dist
