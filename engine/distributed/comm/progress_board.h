// engine/distributed/comm/progress_board.h — where each rank says, about once a second, that it is
// alive and how far it got, so that a watcher can tell a stalled rank from a busy one.
//
// A rank that stops making progress — stopped (SIGSTOP, a debugger), deadlocked, stuck in I/O —
// otherwise shows only when a peer's collective times out: three hours by default. So every
// rank keeps a RankProgress: `beats`, advanced by a heartbeat thread while the process runs, and
// `progress`, advanced by the work itself (each collective issued and finished, each batch
// loaded or trained, each image cached). A watcher (the launcher, or rank 0 under torchrun;
// stall_monitor.h) reads every rank's record and calls a rank stalled when its beats stop (the
// process is stopped or hung whole) or when its progress stops while it is not waiting inside a
// collective (a rank waiting for a stalled peer is its victim, not the cause).
//
// Where the records live:
//   - bareyolo's launcher maps one shared page before forking (SharedProgressBoard): each
//     worker writes its slot, the launcher and every worker read all of them, and nothing
//     depends on the store, whose server lives in rank 0 and stops when rank 0 does;
//   - under torchrun, SLURM or mpirun the heartbeat thread writes the record into the store
//     (StoreProgressBoard) as key "heartbeat/<rank>", where rank 0 reads them.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/distributed/comm/collective_fingerprint.h"
#include "engine/distributed/comm/periodic_thread.h"

namespace bareyolo::dist {

class Store;

// One rank's record, as a watcher reads it.
struct RankProgress {
  uint64_t beats = 0;          // heartbeats so far
  uint64_t progress = 0;       // units of work so far
  uint64_t issued = 0;         // collectives issued (the last one's number)
  uint64_t finished = 0;       // the newest collective this rank saw complete
  uint64_t waiting = 0;        // threads blocked now in a collective's wait(): waiting for peers
  CollectiveFingerprint last;  // the last one issued (sequence 0: none yet)

  bool in_collective() const { return waiting > 0; }
  // The last collective as to_string names it; "" when none was issued.
  std::string last_collective() const { return last.sequence == 0 ? "" : to_string(last); }
};

// Every rank's record, by global rank.
class ProgressBoard {
 public:
  virtual ~ProgressBoard() = default;
  virtual void publish(int rank, const RankProgress& record) = 0;
  // Each rank's last published record, by global rank; nullopt for a rank that published
  // none (yet) or that this board cannot see.
  virtual std::vector<std::optional<RankProgress>> read() = 0;
};

// The board bareyolo's launcher shares with the workers it forks: `ranks` slots for global
// ranks first_rank .. first_rank + ranks - 1 (one node's workers), in a MAP_SHARED anonymous
// mapping made before fork, so parent and children see the same bytes. Writes are seqlocked:
// a reader never sees half a record.
std::unique_ptr<ProgressBoard> make_shared_progress_board(int first_rank, int ranks);

// The board in the rendezvous store, for `world_size` ranks ("heartbeat/<rank>"); `store` is a
// connection of the caller's thread (Store is not thread-safe).
std::unique_ptr<ProgressBoard> make_store_progress_board(Store& store, int world_size);

// ---- this process's own record ------------------------------------------------------------
// A process is one rank; what it has done is counted in process-wide atomics, so that code
// anywhere (the loader, the loss, the communicator) reports progress with one relaxed add.

// One unit of work done: call it in every loop that may run for long (a batch, an image
// cached, a label file read). Costs one relaxed atomic add.
void note_progress();
// The communicator's side: a collective was issued, or seen complete.
void note_collective_issued(const CollectiveFingerprint& collective);
void note_collective_finished(uint64_t sequence);

// While one lives, this thread waits for its peers — in a collective, or for a key another rank
// sets in the store (joining the job, rank 0's run directory) — and the rank is their victim,
// not stalled (stall_monitor.h). Entering and leaving count as progress.
class WaitingForPeers {
 public:
  WaitingForPeers();
  ~WaitingForPeers();
  WaitingForPeers(const WaitingForPeers&) = delete;
  WaitingForPeers& operator=(const WaitingForPeers&) = delete;
};
// This process's record now (beats as the heartbeat thread last counted them).
RankProgress own_progress();

// Publishes this process's record as `rank` on `board` every `period` from a thread of its
// own, advancing `beats` each time, until destroyed. The board must outlive it.
class Heartbeat {
 public:
  Heartbeat(ProgressBoard& board, int rank,
            std::chrono::milliseconds period = std::chrono::seconds(1));

 private:
  void beat();

  ProgressBoard& board_;
  const int rank_;
  PeriodicThread thread_;  // last: it beats as soon as it starts
};

// The board this process inherited from bareyolo's launcher as global rank `rank` (a worker of
// it), or null. The collectives publish to it as they happen, the heartbeat once a second.
ProgressBoard* inherited_progress_board();
void set_inherited_progress_board(ProgressBoard* board, int rank);

}  // namespace bareyolo::dist
