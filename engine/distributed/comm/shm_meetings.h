// engine/distributed/comm/shm_meetings.h — how the ranks sharing a segment (shm_segment.h) wait for
// each other, check that they are in the same collective, and fail together.
//
// Meetings. Each rank counts the meetings it has arrived at in its block's `step` (a 32-bit
// counter compared modulo 2^32). To meet, a rank increments its own step and waits until every
// rank's step has reached it: then every rank has written what it wrote before the meeting
// (release/acquire through the counters). A wait spins for kSpinTime (the peer is usually a few
// microseconds away), then sleeps in futex_wait on the peer's step in slices of kSleepSlice;
// a rank that arrives wakes the sleepers only when `sleepers` says there are some, so the fast
// path makes no system call. Between slices the waiter checks the abort record, whether the peer
// left or died (its process: a pidfd, which becomes readable when it ends, SIGKILL included),
// and the collective's deadline: no wait outlasts the timeout. Each is judged against the peer's
// step read after it: a peer that arrived and then went, at once, met this rank.
//
// Fingerprints. Before the first meeting of a collective every rank writes its fingerprint
// (collective_fingerprint.h) into its block, at the collective's sequence parity (a rank can
// be at most one collective ahead of another). After that meeting every rank compares all
// the ranks' fingerprints, before it reads any data, so no rank mixes the bytes of two
// collectives. The ranks walk the ring in the same order and name the first pair of
// neighbours that differ, so every rank reports the same "rank A issued X where rank B issued Y".
//
// Failure protocol. The first error a rank sees (a dead or departed peer, a timeout, a desync)
// is an ShmFailure naming the rank at fault. The rank writes it into its block's abort record
// and claims the header's `aborted_by` (the first claim wins), then wakes every sleeper. Every
// rank checks `aborted_by` at each meeting and while it waits, and fails with the first
// record's text: one cause, the same words on every rank.
#pragma once

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/distributed/comm/collective_fingerprint.h"
#include "engine/distributed/comm/shm_segment.h"
#include "engine/distributed/comm/socket.h"

namespace bareyolo::dist {

// A failed meeting: `lost_rank` is the rank that died, stalled, left or issued another collective
// (this rank's own number when the fault is local).
class ShmFailure : public std::runtime_error {
 public:
  ShmFailure(int lost_rank, const std::string& message)
      : std::runtime_error(message), lost_rank(lost_rank) {}
  int lost_rank;
};

class ShmMeetings {
 public:
  // Publishes this rank's process and waits, within `timeout`, until every rank has opened
  // `segment` (the joining meeting).
  ShmMeetings(ShmSegment& segment, int rank, std::chrono::milliseconds timeout);
  // A rank that leaves without a failure says so, so that a peer still waiting for it fails at
  // once instead of at the timeout.
  ~ShmMeetings();
  ShmMeetings(const ShmMeetings&) = delete;
  ShmMeetings& operator=(const ShmMeetings&) = delete;

  // The slot set the data written before the next meeting goes into.
  int next_set() const { return int((step_ + 1) % 2); }
  // The first meeting of `collective`: publish its fingerprint, meet, compare every rank's.
  void meet_first(const CollectiveFingerprint& collective, Clock::time_point deadline);
  // A later meeting of the same collective.
  void meet(const CollectiveFingerprint& collective, Clock::time_point deadline);

  // The failure protocol: record `failure` (unless a rank did before) and wake everyone.
  // Returns the text of the record that stands, the same on every rank.
  std::string abort(const ShmFailure& failure);

 private:
  void arrive();
  void wait_for(int peer, const CollectiveFingerprint& collective, Clock::time_point deadline);
  // The first failure a wait for `peer` sees: a rank's abort record, the peer gone, the deadline.
  std::optional<ShmFailure> failure_while_waiting(int peer, const CollectiveFingerprint& collective,
                                                  Clock::time_point deadline);
  std::optional<ShmFailure> abort_record() const;
  void check_same_collective(uint64_t sequence) const;

  ShmSegment& segment_;
  int rank_;
  int world_size_;
  std::chrono::milliseconds timeout_;
  uint32_t step_ = 0;
  // Per peer, opened by the end of the joining meeting; empty where the kernel has no pidfds or
  // the peer had ended already (then kill(pid, 0) asks).
  std::vector<Fd> pidfds_;
  bool joined_ = false;  // the joining meeting is over
  bool failed_ = false;
};

}  // namespace bareyolo::dist
