// engine/distributed/comm/watched_communicator.cpp — see watched_communicator.h.
#include "engine/distributed/comm/watched_communicator.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <stdexcept>
#include <utility>

namespace bareyolo::dist {
namespace {

// One fingerprint as eight int64 (what all-gather moves): sequence, op and dtype, count, the
// tag's hash, and the tag's first 32 bytes to name it in a message.
constexpr size_t kPackedWords = 8;
constexpr size_t kTagBytes = 32;
using Packed = std::array<int64_t, kPackedWords>;
// The fingerprints one rolling check can compare; more collectives than this between two
// checks (a long accumulation) compare the newest ones.
constexpr size_t kCheckWindow = 1024;

uint64_t fnv1a(const void* data, size_t bytes, uint64_t hash = 14695981039346656037ull) {
  const auto* byte = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) hash = (hash ^ byte[i]) * 1099511628211ull;
  return hash;
}

Packed pack(const CollectiveFingerprint& collective) {
  Packed packed{};
  packed[0] = int64_t(collective.sequence);
  packed[1] = int64_t(collective.op) | int64_t(collective.dtype) << 8;
  packed[2] = collective.count;
  packed[3] = int64_t(fnv1a(collective.tag.data(), collective.tag.size()));
  std::memcpy(&packed[4], collective.tag.data(), std::min(collective.tag.size(), kTagBytes));
  return packed;
}

CollectiveFingerprint unpack(const int64_t* packed) {
  CollectiveFingerprint collective{.sequence = uint64_t(packed[0]),
                                   .op = CollectiveOp(packed[1] & 0xff),
                                   .dtype = DType((packed[1] >> 8) & 0xff),
                                   .count = packed[2]};
  char tag[kTagBytes + 1] = {};
  std::memcpy(tag, &packed[4], kTagBytes);
  collective.tag = tag;
  return collective;
}

std::string rank_name(int rank) { return "rank " + std::to_string(rank); }

// `recorder`: where the collective finishes; null for one issued into a recording, which runs
// only when replayed (and is recorded then).
class WatchedWork final : public Work {
 public:
  WatchedWork(WorkHandle inner, WatchedCommunicator* owner, FlightRecorder* recorder,
              uint64_t sequence)
      : inner_(std::move(inner)), owner_(owner), recorder_(recorder), sequence_(sequence) {}

  void wait() override {
    try {
      const WaitingForPeers waiting;
      inner_->wait();
    } catch (const std::exception& error) {
      throw std::runtime_error(owner_->explain_failure(sequence_, error.what()));
    }
    if (!recorder_) return;
    note_collective_finished(sequence_);
    recorder_->finished(sequence_);
  }
  bool completed() override { return inner_->completed(); }
  std::optional<std::chrono::steady_clock::time_point> finished_at() const override {
    return inner_->finished_at();
  }

 private:
  WorkHandle inner_;
  WatchedCommunicator* owner_;
  FlightRecorder* recorder_;
  const uint64_t sequence_;
};

}  // namespace

const char* to_string(DesyncCheck check) {
  switch (check) {
    case DesyncCheck::off:
      return "off";
    case DesyncCheck::per_step:
      return "once per step";
    case DesyncCheck::per_collective:
      return "every collective";
  }
  return "?";
}

DesyncCheck desync_check_for(Backend backend, const char* value) {
  if (value == nullptr || *value == '\0')
    return backend == Backend::nccl ? DesyncCheck::per_step : DesyncCheck::off;
  const std::string text = value;
  if (text == "0") return DesyncCheck::off;
  if (text == "step") return DesyncCheck::per_step;
  if (text == "1") return DesyncCheck::per_collective;
  throw std::runtime_error("BAREYOLO_DESYNC_CHECK=" + text +
                           " is not one of 0 (no check), step (once per optimizer step) or 1 "
                           "(before every collective)");
}

WatchedCommunicator::WatchedCommunicator(std::unique_ptr<Communicator> inner, DesyncCheck check,
                                         ProgressBoard* peers)
    : inner_(std::move(inner)), check_(check), peers_(peers), chain_hash_(fnv1a(nullptr, 0)) {}

WatchedCommunicator::~WatchedCommunicator() {
  // The last steps' checks may still be moving into their buffers: let them land first.
  for (PendingCheck& check : pending_checks_) try {
      check.work->wait();
    } catch (const std::exception&) {
    }
}

void WatchedCommunicator::record_flights_in(std::string folder) {
  flight_folder_ = std::move(folder);
}

template <class Issue>
WorkHandle WatchedCommunicator::issue(CollectiveOp op, const CommBuffer& buffer,
                                      std::string_view tag, const Issue& call) {
  // Under the per-collective check, the check's all-gather goes first and takes a number.
  const uint64_t sequence = issued_ + (check_ == DesyncCheck::per_collective ? 2 : 1);
  CollectiveFingerprint collective{.sequence = sequence,
                                   .op = op,
                                   .dtype = buffer.dtype,
                                   .count = op == CollectiveOp::barrier ? 0 : buffer.count,
                                   .tag = std::string(tag)};
  if (check_ == DesyncCheck::per_collective) compare_fingerprint_before_issuing(collective);
  const uint64_t hash_before = chain_hash_;
  count_issued(collective, buffer.bytes());  // numbered `sequence` again
  if (recording_) recorded_.push_back({collective, buffer.bytes()});
  // A backend may run a small collective to completion inside the call (the TCP ring does):
  // then this rank waits for its peers here, not in wait().
  WorkHandle work;
  try {
    const WaitingForPeers waiting;
    work = call();
  } catch (const std::invalid_argument&) {
    // Refused before it was issued (a root beyond the ranks, a buffer too small): the backend
    // numbered nothing, and the next collective takes this number.
    issued_ = sequence - 1;
    chain_hash_ = hash_before;
    if (recording_) recorded_.pop_back();
    throw;
  } catch (const std::exception& error) {
    throw std::runtime_error(explain_failure(sequence, error.what()));
  }
  return std::make_shared<WatchedWork>(std::move(work), this, recording_ ? nullptr : &recorder_,
                                       sequence);
}

// (A collective issued into a recording is numbered, to be rolled back, but not recorded: it
// runs only when replayed.)
void WatchedCommunicator::count_issued(CollectiveFingerprint& collective, int64_t bytes) {
  collective.sequence = ++issued_;
  const Packed packed = pack(collective);
  chain_hash_ = fnv1a(packed.data(), sizeof packed, chain_hash_);
  if (recording_) return;
  recorder_.issued(collective, bytes);
  note_collective_issued(collective);
}

void WatchedCommunicator::begin_recording() {
  recording_ = true;
  issued_before_recording_ = issued_;
  hash_before_recording_ = chain_hash_;
  inner_->begin_recording();
}

// The recorded collectives did not run: the counters go back to where they were, and each
// replay takes the numbers from there on (the first replay the same ones, in the recorder too).
RecordedCollectives WatchedCommunicator::end_recording() {
  inner_->end_recording();
  recording_ = false;
  issued_ = issued_before_recording_;
  chain_hash_ = hash_before_recording_;
  return std::exchange(recorded_, {});
}

void WatchedCommunicator::replay(const RecordedCollectives& recording, std::string_view what,
                                 const std::function<void()>& launch) {
  if (!failure_.empty()) throw std::runtime_error(failure_);
  // Kept to be marked finished by a rolling check, where one runs; the recorder holds the
  // newest capacity() collectives, so no older one needs marking.
  const bool checked = check_ == DesyncCheck::per_step && world_size() > 1;
  for (const RecordedCollective& recorded : recording) {
    CollectiveFingerprint collective = recorded.collective;
    count_issued(collective, recorded.bytes);
    if (checked) replayed_unfinished_.push_back(collective.sequence);
  }
  while (replayed_unfinished_.size() > recorder_.capacity()) replayed_unfinished_.pop_front();
  try {
    inner_->replay(recording, what, launch);
  } catch (const std::exception& error) {
    throw std::runtime_error(explain_failure(issued_, error.what()));
  }
}

WorkHandle WatchedCommunicator::allreduce(CommBuffer buffer, ReduceOp op, std::string_view tag) {
  return issue(CollectiveOp::all_reduce, buffer, tag,
               [&] { return inner_->allreduce(buffer, op, tag); });
}
WorkHandle WatchedCommunicator::broadcast(CommBuffer buffer, int root, std::string_view tag) {
  return issue(CollectiveOp::broadcast, buffer, tag,
               [&] { return inner_->broadcast(buffer, root, tag); });
}
WorkHandle WatchedCommunicator::allgather(CommBuffer send, CommBuffer recv, std::string_view tag) {
  return issue(CollectiveOp::all_gather, send, tag,
               [&] { return inner_->allgather(send, recv, tag); });
}
WorkHandle WatchedCommunicator::barrier(std::string_view tag) {
  return issue(CollectiveOp::barrier, CommBuffer{}, tag, [&] { return inner_->barrier(tag); });
}

// Every rank sends the fingerprint it is about to issue; all must be rank 0's. The check's own
// all-gather is numbered and recorded like any collective (the backend numbers it too), but
// not folded into the rolling hash: it is the same on every rank by construction.
void WatchedCommunicator::compare_fingerprint_before_issuing(
    const CollectiveFingerprint& collective) {
  const int world = world_size();
  const Packed mine = pack(collective);
  std::vector<int64_t> all(kPackedWords * size_t(world));
  issued_ += 1;
  const CollectiveFingerprint check{.sequence = issued_,
                                    .op = CollectiveOp::all_gather,
                                    .dtype = DType::i64,
                                    .count = int64_t(kPackedWords),
                                    .tag = "desync check"};
  recorder_.issued(check, int64_t(sizeof mine));
  try {
    const WaitingForPeers waiting;
    inner_
        ->allgather(CommBuffer::of(const_cast<int64_t*>(mine.data()), int64_t(kPackedWords)),
                    CommBuffer::of(all.data(), int64_t(all.size())), check.tag)
        ->wait();
  } catch (const std::exception& error) {
    throw std::runtime_error(explain_failure(check.sequence, error.what()));
  }
  recorder_.finished(check.sequence);
  const int64_t* first = all.data();
  for (int rank = 1; rank < world; ++rank) {
    const int64_t* theirs = &all[kPackedWords * size_t(rank)];
    if (!std::equal(first, first + kPackedWords, theirs))
      fail_desync(issued_differently(rank, unpack(theirs), 0, unpack(first)));
  }
}

void WatchedCommunicator::end_step() {
  if (check_ != DesyncCheck::per_step || world_size() == 1) return;
  if (pending_checks_.size() == kCheckLag) compare_step_check();
  PendingCheck& check = pending_checks_.emplace_back();
  check.send[0] = int64_t(issued_);
  check.send[1] = int64_t(chain_hash_);
  check.recv.assign(2 * size_t(world_size()), 0);
  check.work =
      allgather(CommBuffer::of(check.send, 2),
                CommBuffer::of(check.recv.data(), int64_t(check.recv.size())), "desync check");
}

// The oldest check, kCheckLag steps old: its result has arrived (the host waits here only if
// the device is that far behind).
void WatchedCommunicator::compare_step_check() {
  PendingCheck& oldest = pending_checks_.front();
  oldest.work->wait();
  const uint64_t mine_through = uint64_t(oldest.send[0]);
  const std::vector<int64_t> received = std::move(oldest.recv);
  pending_checks_.pop_front();
  const int world = world_size();
  bool agree = true;
  for (int rank = 1; rank < world; ++rank)
    agree = agree && received[2 * size_t(rank)] == received[0] &&
            received[2 * size_t(rank) + 1] == received[1];
  const uint64_t checked_through = uint64_t(received[0]);
  if (agree) {
    agreed_ = checked_through;
    // Every rank's collectives up to the check ran: the replayed ones among them finished.
    while (!replayed_unfinished_.empty() && replayed_unfinished_.front() <= checked_through) {
      recorder_.finished(replayed_unfinished_.front());
      note_collective_finished(replayed_unfinished_.front());
      replayed_unfinished_.pop_front();
    }
    return;
  }
  // Where do they part? Every rank sends its fingerprints since the last agreement (up to
  // kCheckWindow of them, up to its own count at the check) and all compare them in order.
  std::vector<FlightRecord> records = recorder_.records();
  std::vector<int64_t> window(kCheckWindow * kPackedWords + 1, 0);
  int64_t kept = 0;
  for (const FlightRecord& record : records) {
    const uint64_t sequence = record.collective.sequence;
    if (sequence <= agreed_ || sequence > mine_through) continue;
    if (size_t(kept) == kCheckWindow) break;
    const Packed packed = pack(record.collective);
    std::copy(packed.begin(), packed.end(), window.begin() + 1 + kept * int64_t(kPackedWords));
    ++kept;
  }
  window[0] = kept;
  std::vector<int64_t> all(window.size() * size_t(world));
  allgather(CommBuffer::of(window.data(), int64_t(window.size())),
            CommBuffer::of(all.data(), int64_t(all.size())), "desync check fingerprints")
      ->wait();
  auto fingerprints_of = [&](int rank) { return &all[window.size() * size_t(rank)]; };
  const int64_t* first = fingerprints_of(0);
  for (int64_t i = 0; i < int64_t(kCheckWindow); ++i) {
    for (int rank = 1; rank < world; ++rank) {
      const int64_t* theirs = fingerprints_of(rank);
      const bool mine_has = i < first[0], theirs_has = i < theirs[0];
      if (!mine_has && !theirs_has) continue;
      const int64_t* a = first + 1 + i * int64_t(kPackedWords);
      const int64_t* b = theirs + 1 + i * int64_t(kPackedWords);
      if (mine_has && theirs_has) {
        if (!std::equal(a, a + kPackedWords, b))
          fail_desync(issued_differently(rank, unpack(b), 0, unpack(a)));
        continue;
      }
      // One rank issued more before the check than the other.
      const std::string ours = mine_has ? to_string(unpack(a)) : "nothing more";
      const std::string their = theirs_has ? to_string(unpack(b)) : "nothing more";
      fail_desync(rank_name(rank) + " issued " + their + " where rank 0 issued " + ours +
                  kSameCollectivesRule);
    }
  }
  fail_desync("the ranks issued different collectives before the check after collective #" +
              std::to_string(agreed_) + ", beyond the last " + std::to_string(kCheckWindow) +
              " this check compares (rank 0 had issued " + std::to_string(checked_through) + ")" +
              kSameCollectivesRule);
}

void WatchedCommunicator::fail_desync(const std::string& message) {
  throw std::runtime_error(explain_failure(issued_, "collectives out of step: " + message));
}

std::string WatchedCommunicator::explain_failure(uint64_t sequence, const std::string& error) {
  if (!failure_.empty()) return failure_;
  std::string text = error;
  if (peers_) {
    try {
      const std::vector<std::optional<RankProgress>> records = peers_->read();
      for (size_t rank = 0; rank < records.size(); ++rank) {
        if (int(rank) == this->rank() || !records[rank]) continue;
        const RankProgress& peer = *records[rank];
        if (peer.issued >= sequence) continue;
        text += "; " + rank_name(int(rank)) + " never reached collective #" +
                std::to_string(sequence) + " (its last: " +
                (peer.last.sequence == 0 ? std::string("none") : peer.last_collective()) +
                (peer.in_collective() ? ", waiting in it)" : ")");
      }
    } catch (const std::exception&) {
      // The board is the store, and it is gone with rank 0: name no peers.
    }
  }
  if (!flight_folder_.empty()) {
    try {
      const std::string path =
          write_flight_record(flight_folder_, rank(), world_size(), error, recorder_.records());
      text += "; this rank's last collectives: " + path + " (all ranks': bareyolo trace-summary " +
              flight_folder_ + ")";
    } catch (const std::exception& write_error) {
      text += std::string("; its flight record could not be written: ") + write_error.what();
    }
  }
  failure_ = text;
  return failure_;
}

}  // namespace bareyolo::dist
