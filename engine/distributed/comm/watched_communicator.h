// engine/distributed/comm/watched_communicator.h — the communicator a training job holds: the
// backend's, with every collective numbered, kept in the flight recorder, counted as the rank's
// progress, and (where the backend cannot) checked for agreement between the ranks.
//
//   issue:   fingerprint = {number, op, dtype, count, tag}     (collective_fingerprint.h)
//            flight recorder <- fingerprint, bytes, time       (flight_recorder.h)
//            this rank's progress <- issued #number            (progress_board.h)
//            [per collective: all-gather the fingerprint, compare, then issue]
//   wait:    progress: waiting ... done; recorder: finished
//   failure: the error names the ranks that never arrived at the collective and what each last
//            did (from the progress board), and this rank's flight record is written
//   end_step (once per optimizer step):
//            [per step: compare the all-gather issued kCheckLag steps earlier, then issue one
//            of {collectives so far, hash of their fingerprints}]
//
// Desync check. The TCP ring compares fingerprints in every frame already; NCCL moves bytes
// without a header, so two ranks in different collectives of the same size mix them silently
// and of different sizes hang. The rolling check costs one 16-byte all-gather per step, read
// kCheckLag steps later: on a GPU the all-gather and the copy of its result back to the host
// are queued behind the step (host_staging.h), and the host, which runs ahead of the device,
// reads the result once the device has long produced it, so a step never waits for it. (Every
// rank reads it at the same step, not when it happens to arrive: what follows a mismatch is a
// collective too.) When the ranks' counts or hashes differ, one more all-gather of the
// fingerprints since the last check that agreed finds the first collective where they part,
// and every rank fails with the same message:
//   rank 1 issued all_reduce #5120 bucket 3 (1,234,560 floats) where rank 0 issued
//   all_reduce #5120 bucket 4 (1,234,560 floats)
// Per collective (BAREYOLO_DESYNC_CHECK=1) each collective's fingerprint is compared before it
// is issued: a mismatch is then caught before any byte mixes or any rank hangs, for the price
// of one small all-gather per collective.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/distributed/comm/communicator.h"
#include "engine/distributed/comm/flight_recorder.h"
#include "engine/distributed/comm/progress_board.h"

namespace bareyolo::dist {

enum class DesyncCheck { off, per_step, per_collective };
const char* to_string(DesyncCheck check);

// BAREYOLO_DESYNC_CHECK (`value`; nullptr when unset): unset, the rolling check on backends
// without fingerprints (NCCL) and none on the others; "0" none; "step" the rolling check; "1"
// every collective. Throws naming the variable for another value.
DesyncCheck desync_check_for(Backend backend, const char* value);

class WatchedCommunicator final : public Communicator {
 public:
  // `peers`: the board to read other ranks' progress from when a collective fails (may be
  // null: the error then names no peer's state). Must outlive this.
  WatchedCommunicator(std::unique_ptr<Communicator> inner, DesyncCheck check,
                      ProgressBoard* peers = nullptr);
  ~WatchedCommunicator() override;

  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  Backend backend() const override { return inner_->backend(); }

  WorkHandle allreduce(CommBuffer buffer, ReduceOp op, std::string_view tag) override;
  WorkHandle broadcast(CommBuffer buffer, int root, std::string_view tag) override;
  WorkHandle allgather(CommBuffer send, CommBuffer recv, std::string_view tag) override;
  WorkHandle barrier(std::string_view tag) override;
  void end_step() override;
  // Not with the per-collective check: it waits for an all-gather before each collective.
  bool records_in_cuda_graphs() const override {
    return check_ != DesyncCheck::per_collective && inner_->records_in_cuda_graphs();
  }
  // A recording's collectives are kept, not counted (none of them ran); each replay numbers
  // them again, folds them into the rolling hash and records them, as if issued one by one. A
  // replayed collective counts as finished once a rolling check that follows it agreed (where
  // no check runs, the flight record shows replayed collectives as issued only).
  void begin_recording() override;
  RecordedCollectives end_recording() override;
  void replay(const RecordedCollectives& recording, std::string_view what,
              const std::function<void()>& launch) override;

  // From now on the first failure writes this rank's flight record into `folder`
  // (<run>/flight): the run directory is known only after the job has joined.
  void record_flights_in(std::string folder);
  std::vector<FlightRecord> flight_records() const { return recorder_.records(); }
  DesyncCheck desync_check() const { return check_; }
  // The optimizer steps between a rolling check's all-gather and its reading. The host runs
  // about one step ahead of the device at most (the trainer reads each step's loss once it has
  // queued the next one, the Solver's losses last three steps, and ranks that record their
  // steps read a plan before each: models/train/solver.h), so by then the check's result is on
  // the host.
  static constexpr size_t kCheckLag = 3;
  // The last collective every rank was seen to agree on by the rolling check (0: none yet).
  uint64_t agreed_through() const { return agreed_; }

  // Called by a failing Work: the error to throw, once enriched (see the file comment).
  std::string explain_failure(uint64_t sequence, const std::string& error);

 private:
  template <class Issue>
  WorkHandle issue(CollectiveOp op, const CommBuffer& buffer, std::string_view tag,
                   const Issue& call);
  void compare_fingerprint_before_issuing(const CollectiveFingerprint& collective);
  // Numbers `collective` (its sequence is set here), folds it into the hash, records it.
  void count_issued(CollectiveFingerprint& collective, int64_t bytes);
  void compare_step_check();
  [[noreturn]] void fail_desync(const std::string& message);

  std::unique_ptr<Communicator> inner_;
  const DesyncCheck check_;
  ProgressBoard* peers_;
  FlightRecorder recorder_;
  uint64_t issued_ = 0;  // collectives issued, this rank's check ones included
  uint64_t chain_hash_;  // of every fingerprint issued, in order
  uint64_t agreed_ = 0;  // the last collective every rank agreed on (per step)
  std::string flight_folder_;
  // While a recording is issued: the counters at its start, and its collectives so far.
  bool recording_ = false;
  uint64_t issued_before_recording_ = 0, hash_before_recording_ = 0;
  RecordedCollectives recorded_;
  std::deque<uint64_t> replayed_unfinished_;  // replayed collectives not yet seen finished
  std::string failure_;                       // the enriched error, once there was one
  // The rolling checks in flight, oldest first: {collectives before it, their hash} of every
  // rank (a deque: the buffers stay where they are while their all-gather runs).
  struct PendingCheck {
    int64_t send[2];
    std::vector<int64_t> recv;
    WorkHandle work;
  };
  std::deque<PendingCheck> pending_checks_;
};

}  // namespace bareyolo::dist
