// engine/distributed/launch/stall_monitor.cpp — see stall_monitor.h.
#include "engine/distributed/launch/stall_monitor.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "engine/distributed/comm/periodic_thread.h"
#include "engine/distributed/comm/store.h"

namespace bareyolo::dist {

std::string Stall::message() const {
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(still_for).count();
  std::string text = "rank " + std::to_string(rank) + " stalled: no progress for " +
                     std::to_string(seconds) + " s";
  if (no_heartbeat) text += " and no heartbeat either (the process is stopped or hung)";
  text += last_collective.empty() ? "; it has issued no collective yet"
                                  : "; its last collective: " + last_collective;
  return text;
}

void StallMonitor::observe(const std::vector<std::optional<RankProgress>>& records,
                           Clock::time_point now) {
  now_ = now;
  if (seen_.size() < records.size()) seen_.resize(records.size());
  for (size_t rank = 0; rank < records.size(); ++rank) {
    if (!records[rank]) continue;
    const RankProgress& record = *records[rank];
    std::optional<Seen>& seen = seen_[rank];
    if (!seen) {
      seen = Seen{record, now, now};
      continue;
    }
    if (record.beats != seen->record.beats) seen->beat_moved = now;
    // Issuing, entering or leaving a collective counts as progress too (progress_board.cpp).
    if (record.progress != seen->record.progress) seen->progress_moved = now;
    seen->record = record;
  }
}

std::vector<Stall> StallMonitor::stalled() const {
  std::vector<Stall> stalls;
  if (timeout_.count() <= 0) return stalls;
  for (size_t rank = 0; rank < seen_.size(); ++rank) {
    if (!seen_[rank]) continue;
    const Seen& seen = *seen_[rank];
    // Progress published by the collectives is a sign of life too: a process stopped just
    // after a collective beat last up to a second before it stopped moving.
    const auto silent = now_ - std::max(seen.beat_moved, seen.progress_moved);
    const auto idle = now_ - seen.progress_moved;
    const bool no_heartbeat = silent >= timeout_;
    const bool stuck_outside = idle >= timeout_ && !seen.record.in_collective();
    if (!no_heartbeat && !stuck_outside) continue;
    std::string last = seen.record.last_collective();
    if (!last.empty()) last += seen.record.in_collective() ? ", not finished" : ", finished";
    stalls.push_back({.rank = int(rank),
                      .still_for = std::chrono::duration_cast<std::chrono::milliseconds>(idle),
                      .no_heartbeat = no_heartbeat,
                      .last_collective = last});
  }
  return stalls;
}

// ---- rank 0's watch over the store ----

// Reads the board every second on its own store connection (made again after a failure), judges
// it, and ends the process at the first stall.
struct StallWatch::State {
  explicit State(Options given)
      : options(std::move(given)),
        monitor(options.stall_timeout),
        thread(std::chrono::seconds(1), [this] { tick(); }) {}

  void tick() {
    using namespace std::chrono_literals;
    try {
      if (!store) {
        store = std::make_unique<Store>(options.host, options.port, options.token, 10s);
        board = make_store_progress_board(*store, options.world_size);
      }
      monitor.observe(board->read(), StallMonitor::Clock::now());
    } catch (const std::exception&) {
      board.reset();  // the store is busy or going away: read again at the next tick
      store.reset();
    }
    for (const Stall& stall : monitor.stalled()) {
      std::fprintf(stderr, "error: %s: ending the job (rank 0 exits; --stall-timeout %lld s)\n",
                   stall.message().c_str(),
                   static_cast<long long>(options.stall_timeout.count() / 1000));
      std::fflush(stderr);
      ::_exit(1);
    }
  }

  const Options options;
  StallMonitor monitor;
  std::unique_ptr<Store> store;
  std::unique_ptr<ProgressBoard> board;
  PeriodicThread thread;  // last: it ticks as soon as it starts
};

StallWatch::StallWatch(Options options) : state_(std::make_unique<State>(std::move(options))) {}

StallWatch::~StallWatch() = default;

}  // namespace bareyolo::dist
