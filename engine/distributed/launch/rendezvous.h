// engine/distributed/launch/rendezvous.h — joining a job, a wait of its own.
//
// A rank joining a job waits for the others: for rank 0's store to answer (rank 0 may start
// later), for the job's store token (derives_local_token, process_group.h), then for every rank
// to announce itself in the store. These waits share one deadline, the rendezvous timeout
// (--rendezvous-timeout, 10 minutes by default: torchrun's order of magnitude), which is not
// the collective timeout that bounds the waits of a running job (3 hours, as NCCL's): a rank
// whose peers never come gives up after minutes, not hours. While it waits it says, every
// progress interval (10 s), what it waits for and at which address; at the deadline it gives
// up naming what never came.
//
// JoinWait is that deadline and that voice, the one place a joining wait reports through: each
// wait loop asks it how long one attempt may take (next_check) and tells it what is still
// missing (still_waiting_for). A liveness check of running ranks can grow from here.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "engine/distributed/comm/socket.h"
#include "engine/distributed/comm/store.h"
#include "engine/distributed/launch/env.h"

namespace bareyolo::dist {

inline constexpr std::chrono::milliseconds kDefaultRendezvousTimeout = std::chrono::minutes(10);

struct RendezvousOptions {
  std::chrono::milliseconds timeout = kDefaultRendezvousTimeout;
  std::chrono::milliseconds progress_interval = std::chrono::seconds(10);
};

using ProgressLog = std::function<void(const std::string&)>;

class JoinWait {
 public:
  // Starts the clock: the deadline is options.timeout from now. Progress lines go to `log`
  // (by default to stderr, where a rank's other messages go).
  JoinWait(const LaunchEnv& env, const RendezvousOptions& options, ProgressLog log = {});

  // When the current attempt should stop and report: the next progress line, or the deadline.
  Clock::time_point next_check() const;
  // A wait that has not got `what` yet ("rank 0's store at 10.0.0.1:29500"): says so once per
  // progress interval, and throws std::runtime_error once the deadline has passed, naming
  // `what`, the timeout and what to do. `what` is called only then (it may ask the store).
  void still_waiting_for(const std::function<std::string()>& what);

 private:
  int rank_, world_size_;
  RendezvousOptions options_;
  ProgressLog log_;
  Clock::time_point start_, deadline_, next_report_;
};

// "127.0.0.1:29500": where this job's store listens (MASTER_ADDR and the store's port).
std::string store_address(const LaunchEnv& env);

// A connection to rank 0's store, retried until it answers or `wait` gives up. `timeout`
// bounds every later call of the Store. A listener that is not bareyolo's store fails at once
// (store.h) — but under bareyolo's launcher, which bound the port itself before rank 0 could
// serve it, a listener that has not answered yet is rank 0 still starting.
std::unique_ptr<Store> connect_to_store(const LaunchEnv& env, const std::string& token,
                                        std::chrono::milliseconds timeout, JoinWait& wait);

// Announces this rank in the store and returns once every rank of the job has announced
// itself, or throws when `wait` gives up (naming the ranks that never came).
void wait_for_every_rank(Store& store, const LaunchEnv& env, JoinWait& wait);

// "rank 2", "ranks 2, 3 and 5": for messages.
std::string ranks_text(const std::vector<int>& ranks);

}  // namespace bareyolo::dist
