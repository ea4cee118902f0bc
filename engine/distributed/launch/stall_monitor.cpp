// engine/distributed/launch/stall_monitor.cpp — see stall_monitor.h.
#include "engine/distributed/launch/stall_monitor.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

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

struct StallWatch::State {
  Options options;
  std::mutex mutex;
  std::condition_variable wake;
  bool stop = false;
  std::thread thread;

  void run() {
    using namespace std::chrono_literals;
    StallMonitor monitor(options.stall_timeout);
    std::unique_ptr<Store> store;
    std::unique_lock lock(mutex);
    while (!wake.wait_for(lock, 1s, [this] { return stop; })) {
      lock.unlock();
      try {
        if (!store) store = std::make_unique<Store>(options.host, options.port, options.token, 10s);
        monitor.observe(make_store_progress_board(*store, options.world_size)->read(),
                        StallMonitor::Clock::now());
      } catch (const std::exception&) {
        store.reset();  // the store is busy or going away: read again at the next tick
      }
      for (const Stall& stall : monitor.stalled()) {
        std::fprintf(stderr, "error: %s: ending the job (rank 0 exits; --stall-timeout %lld s)\n",
                     stall.message().c_str(),
                     static_cast<long long>(options.stall_timeout.count() / 1000));
        std::fflush(stderr);
        ::_exit(1);
      }
      lock.lock();
    }
  }
};

StallWatch::StallWatch(Options options) : state_(std::make_unique<State>()) {
  state_->options = std::move(options);
  state_->thread = std::thread([state = state_.get()] { state->run(); });
}

StallWatch::~StallWatch() {
  {
    const std::lock_guard lock(state_->mutex);
    state_->stop = true;
  }
  state_->wake.notify_all();
  state_->thread.join();
}

}  // namespace bareyolo::dist
