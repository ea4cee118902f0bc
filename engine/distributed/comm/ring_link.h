// engine/distributed/comm/ring_link.h — one rank's two TCP connections in the ring, the framing on
// them, and the failure protocol. The TCP ring communicator (tcp_ring.h) describes each collective
// as a RingPlan of frames to send and receive; this file moves them and knows nothing about
// reductions.
//
// Topology: rank r connects to its next neighbour (r + 1) % N and accepts a connection from
// its previous one (r - 1 + N) % N; addresses go through the rendezvous store under
// "ring/<rank>". Data flows one way round the ring: r sends on `to_next`, receives on
// `from_prev` — for a large collective each on its own thread, so both directions run at once
// (on two cores when there are). The reverse direction of each socket carries only abort notices,
// so while a collective runs both neighbours are watched and a lost one is seen at once (EOF or
// reset). A cut link is found within kLinkLossTimeout by keepalive (socket.h, watch_link) on
// the rank that receives over it (its own side of that socket is idle, so it probes); the rank
// that sends over it may have data in flight, which keepalive does not probe past, and hears of
// the loss round the ring. (TCP_USER_TIMEOUT would end the sender's wait too, but it also ends
// one for a neighbour that is only stopped or busy: Linux applies it to a shut window.)
//
// Wire format (ring_frame.h): every payload travels in frames of at most kFrameBytes, each
// behind a header that names its collective by its fingerprint (collective_fingerprint.h). A
// rank checks every frame it receives against the collective it runs itself, so a neighbour
// that issued another collective (out of order, with another tag, count or dtype) is named with
// both collectives instead of its bytes being reduced into the wrong buffer. An abort notice is
// a header naming the lost rank, then its text; a rank that leaves cleanly sends a goodbye
// header both ways, so a neighbour that is done with it too does not take the closing
// connection for a death.
//
// Failure protocol: the first error a rank sees (a neighbour's EOF or reset, a timeout, a
// frame of another collective, an abort notice) is a RingFailure naming the lost rank. The rank
// then sends an abort notice that names the same lost rank to both neighbours (completing a
// half-sent frame first so the notice is read as a frame; a dead neighbour just refuses it),
// and shuts its sockets. A notice received is forwarded the same way, so the cascade round
// the ring carries the original cause: every rank's error names the rank that died. A
// timeout is the one cause a rank can misjudge (its neighbour may itself be waiting): a rank
// blamed by a timeout notice while it waits for its previous neighbour passes the blame on.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "engine/distributed/comm/collective_fingerprint.h"
#include "engine/distributed/comm/ring_frame.h"
#include "engine/distributed/comm/socket.h"
#include "engine/distributed/comm/store.h"

namespace bareyolo::dist {

// Sub-chunk size: large enough that the per-frame syscalls vanish, small enough that a
// received frame is reduced while the next one arrives (and stays in L2 while it is).
inline constexpr size_t kFrameBytes = size_t{512} << 10;

// A broken ring: `lost_rank` is the rank that died, stalled or misbehaved (this rank's own
// number when the fault is local), named in what().
class RingFailure : public std::runtime_error {
 public:
  RingFailure(int lost_rank, const std::string& message)
      : std::runtime_error(message), lost_rank(lost_rank) {}
  int lost_rank;
};

// One collective's traffic on this rank, as two streams of frames: `out` to the next rank,
// `in` from the previous one. No bytes still make one (empty) frame, so that every collective
// a rank sends or receives anything in has its fingerprint checked. The ring is one pipeline: what
// a rank receives (and reduces) at one step is what it sends at the next, so an outgoing frame may
// wait for an incoming one
// (`after`), and goes out as soon as that one has arrived and been consumed — while it is still
// in cache, and without a pause between steps.
struct RingPlan {
  struct Out {
    const char* data;
    size_t bytes;
    size_t after;  // sendable once incoming frames [0, after) are done
  };
  struct In {
    char* data;
    size_t bytes;
  };
  std::vector<Out> out;
  std::vector<In> in;
  // Called with the index of each incoming frame once it is wholly received (the reduction
  // runs here, while the kernel keeps receiving the next frame).
  std::function<void(size_t frame)> on_received = nullptr;

  // Adds `bytes` from `data` to send, ready at once.
  void send(const char* data, size_t bytes);
  // Adds `bytes` from `data` to send, frame k once incoming frame `first_in + k` is done: the
  // bytes that frame brought (or that its on_received produced) go on round the ring.
  void forward(const char* data, size_t bytes, size_t first_in);
  // Adds `bytes` to receive, frame k landing at data + k * kFrameBytes — or at `data` itself
  // for every frame when `one_frame_buffer` (each consumed by on_received before the next).
  // Returns the index of its first frame.
  size_t receive(char* data, size_t bytes, bool one_frame_buffer = false);
};

class RingLink {
 public:
  // Publishes this rank's listening address in `store`, connects to the next rank, accepts
  // the previous one (proving and checking knowledge of `token` over a challenge, token_proof.h). N
  // >= 2.
  RingLink(Store& store, int rank, int world_size, const std::string& master_addr,
           const std::string& token, std::chrono::milliseconds timeout);

  int next() const { return (rank_ + 1) % world_size_; }
  int prev() const { return (rank_ + world_size_ - 1) % world_size_; }

  // Stops the receiving thread; the sockets close.
  ~RingLink();
  RingLink(const RingLink&) = delete;
  RingLink& operator=(const RingLink&) = delete;

  // Moves the frames of `collective` (every frame carries its fingerprint, and every frame
  // received must carry the same): the calling thread sends (and watches
  // the next rank) while the link's receiving thread receives and runs on_received — or, for
  // a small collective, the calling thread does both in one loop (polling its socket for a
  // moment before it sleeps in poll()).
  // Throws RingFailure on a lost or misbehaving neighbour or at `deadline`, and
  // std::runtime_error after interrupt().
  void run(const RingPlan& plan, const CollectiveFingerprint& collective,
           Clock::time_point deadline);

  // The failure protocol above: notify the surviving neighbours, then shut both sockets.
  void abort(const RingFailure& failure);

  // Tells both neighbours that this rank leaves cleanly (no collective in flight), so that
  // its closing connections are not taken for a death, and shuts the sockets.
  void say_goodbye();

  // Makes a running or later run() return at once (the communicator is being destroyed).
  void interrupt();

 private:
  struct SendState;
  struct RecvState;
  void handshake(Store& store, const std::string& master_addr, Clock::time_point deadline);
  // `collective`: the header of this rank's data frames (payload_bytes aside), data_header().
  void send_frames(const RingPlan& plan, const FrameHeader& collective, Clock::time_point deadline,
                   bool receive_here);
  bool try_send(SendState& state, const RingPlan& plan, const FrameHeader& collective,
                size_t frames_received);
  void wait_to_send(bool sending, bool send_ready, bool receiving_here,
                    const FrameHeader& collective, Clock::time_point deadline);
  // The receiving thread: serves one plan at a time, handed over by run().
  void serve_receiving();
  void receive_frames(const RingPlan& plan, const FrameHeader& collective,
                      Clock::time_point deadline);
  bool try_recv(RecvState& state, const RingPlan& plan, const FrameHeader& collective);
  // The neighbour's data frame `theirs` names another collective than this rank's `ours`.
  RingFailure desynchronised(const FrameHeader& theirs, const FrameHeader& ours) const;
  // `waiting_for`: the neighbour this rank is waiting for, when it is (-1: none).
  void read_from_next(bool still_sending, int waiting_for = -1);
  [[noreturn]] void throw_notice(int fd, int from_rank, uint32_t text_bytes, uint64_t lost_rank,
                                 int waiting_for = -1);
  void send_notice(int fd, const RingFailure& failure, Clock::time_point deadline);
  RingFailure timed_out(int waited_for, const FrameHeader& collective) const;
  // The neighbour `rank` (next or prev) was silent for kLinkLossTimeout: the link is gone.
  RingFailure link_lost(int rank) const;

  int rank_;
  int world_size_;
  std::string token_;
  std::chrono::milliseconds timeout_;
  Fd to_next_, from_prev_;
  std::string next_address_, prev_address_;  // the neighbours' listening addresses, for messages
  Fd wake_read_, wake_write_;
  // Why the next rank can take no more data (it said goodbye, or closed after it was done
  // with this rank); "" while it can.
  std::string next_gone_;
  // A frame this rank stopped sending half-way (its header, its size with the header, the
  // bytes already sent): abort() completes it with filler so that the notice after it is
  // read as a frame.
  char partial_header_[sizeof(FrameHeader)] = {};
  size_t partial_total_ = 0, partial_sent_ = 0;

  // Hand-over between run() and the receiving thread. The receiver publishes its progress in
  // `frames_received_` (release: the frames' bytes, reduced, are visible to the sender that
  // reads it with acquire) and writes `received_event_` (an eventfd) so a sender waiting in
  // poll() wakes; the sender writes `stop_receiving_` when it fails.
  std::mutex handover_mutex_;
  std::condition_variable handover_;
  const RingPlan* receiving_plan_ = nullptr;  // set by run(), cleared by the receiver when done
  const FrameHeader* receiving_collective_ = nullptr;  // run()'s, likewise
  Clock::time_point receiving_deadline_;
  std::exception_ptr receive_error_;
  bool closing_ = false;
  std::atomic<size_t> frames_received_ = 0;
  std::atomic<bool> receiver_done_ = true, receiver_failed_ = false;
  Fd received_event_, stop_receiving_;
  std::thread receiver_;  // last: starts once everything above exists
};

}  // namespace bareyolo::dist
