// engine/distributed/launch/rendezvous.cpp — see rendezvous.h.
#include "engine/distributed/launch/rendezvous.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <thread>
#include <vector>

#include "engine/distributed/comm/progress_board.h"

namespace bareyolo::dist {
namespace {

// How often a joining rank asks the store whether the rank it waits for has come.
constexpr auto kPollInterval = std::chrono::milliseconds(50);

std::string join_key(int rank) { return "rendezvous/joined/" + std::to_string(rank); }

}  // namespace

JoinWait::JoinWait(const LaunchEnv& env, const RendezvousOptions& options, ProgressLog log)
    : rank_(env.rank),
      world_size_(env.world_size),
      options_(options),
      log_(std::move(log)),
      start_(Clock::now()),
      deadline_(start_ + options_.timeout),
      next_report_(start_ + options_.progress_interval) {
  if (options_.progress_interval <= Clock::duration::zero())
    throw std::invalid_argument("the rendezvous's progress interval must be positive, not " +
                                seconds_text(options_.progress_interval));
  if (!log_) log_ = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
}

Clock::time_point JoinWait::next_check() const { return std::min(next_report_, deadline_); }

void JoinWait::still_waiting_for(const std::function<std::string()>& what) {
  const Clock::time_point now = Clock::now();
  const std::string rank = "rank " + std::to_string(rank_);
  if (now >= deadline_)
    throw std::runtime_error(
        rank + " gave up joining the job after " + seconds_text(options_.timeout) +
        " (the rendezvous timeout, --rendezvous-timeout): still waiting for " + what() +
        ". Start every rank with the same MASTER_ADDR, MASTER_PORT and WORLD_SIZE (" +
        std::to_string(world_size_) + "), or give them more time with --rendezvous-timeout");
  if (now < next_report_) return;
  const auto waited = std::chrono::duration_cast<std::chrono::seconds>(now - start_);
  log_(rank + ": waiting for " + what() + " (" + std::to_string(waited.count()) +
       " s of the rendezvous timeout, " + seconds_text(options_.timeout) + ")");
  while (next_report_ <= now) next_report_ += options_.progress_interval;
}

std::string store_address(const LaunchEnv& env) {
  return env.master_addr + ":" + std::to_string(env.store_port());
}

std::unique_ptr<Store> connect_to_store(const LaunchEnv& env, const std::string& token,
                                        std::chrono::milliseconds timeout, JoinWait& wait) {
  // bareyolo's launcher bound the store's port before forking the workers, so the listener is
  // rank 0's even while rank 0 is still starting (initialising CUDA can take seconds) and
  // answers nothing yet; anywhere else a listener that does not answer at once is a stranger.
  const std::chrono::milliseconds handshake_timeout =
      env.spawned_by_bareyolo ? timeout : kHandshakeTimeout;
  const WaitingForPeers waiting;  // for rank 0's store: not a stall (progress_board.h)
  while (true) {
    try {
      return std::make_unique<Store>(env.master_addr, env.store_port(), token, timeout,
                                     wait.next_check(), handshake_timeout);
    } catch (const StoreUnreachable&) {
      wait.still_waiting_for([&] { return "rank 0's store at " + store_address(env); });
    }
  }
}

// Each poll asks only about the first rank not seen yet (one CHECK, whatever the world size);
// the full list of missing ranks is asked for only when a message names it.
void wait_for_every_rank(Store& store, const LaunchEnv& env, JoinWait& wait) {
  store.set(join_key(env.rank), "1");
  int seen = 0;  // ranks 0 .. seen-1 have joined
  while (true) {
    while (seen < env.world_size && store.check(join_key(seen))) ++seen;
    if (seen == env.world_size) return;
    wait.still_waiting_for([&] {
      std::vector<int> missing;
      for (int rank = seen; rank < env.world_size; ++rank)
        if (!store.check(join_key(rank))) missing.push_back(rank);
      return ranks_text(missing) + " of " + std::to_string(env.world_size) +
             " to join the job at " + store_address(env);
    });
    std::this_thread::sleep_for(
        std::clamp<Clock::duration>(wait.next_check() - Clock::now(), {}, kPollInterval));
  }
}

std::string ranks_text(const std::vector<int>& ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) text += i + 1 == ranks.size() ? " and " : ", ";
    text += std::to_string(ranks[i]);
  }
  return text;
}

}  // namespace bareyolo::dist
