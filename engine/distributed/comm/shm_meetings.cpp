// engine/distributed/comm/shm_meetings.cpp — see shm_meetings.h.
#include "engine/distributed/comm/shm_meetings.h"

#include <linux/futex.h>
#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstring>
#include <thread>

namespace bareyolo::dist {
namespace {

using namespace std::chrono_literals;

// A waiter first spins on the peer's counter for kPauseTime (a peer that is about to arrive costs
// no system call), then yields the core between checks until kSpinTime, as the TCP ring polls
// (its other threads, or a peer rank that shares it on a loaded machine, still run), and only
// then sleeps: a thread woken from a futex starts tens of microseconds late.
constexpr auto kPauseTime = std::chrono::microseconds(5);
constexpr auto kSpinTime = std::chrono::microseconds(200);
// How long it sleeps at a time before it checks the abort record, the peer's life and the deadline.
constexpr auto kSleepSlice = 2ms;

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Sleeps while `*word == expected`, at most `duration` (futexes on shared mappings work across
// processes: not FUTEX_PRIVATE).
void futex_wait(std::atomic<uint32_t>& word, uint32_t expected, std::chrono::nanoseconds duration) {
  const timespec relative{time_t(duration.count() / 1000000000),
                          long(duration.count() % 1000000000)};
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT, expected, &relative, nullptr,
            0);
}

void futex_wake_all(std::atomic<uint32_t>& word) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE, INT_MAX, nullptr, nullptr,
            0);
}

// Whether counter `step` has reached `target`, modulo 2^32.
bool reached(uint32_t step, uint32_t target) { return int32_t(step - target) >= 0; }

// FNV-1a: the same on every rank, unlike std::hash across builds.
uint64_t tag_hash(std::string_view tag) {
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : tag) hash = (hash ^ c) * 1099511628211ull;
  return hash;
}

void record(ShmFingerprint& to, const CollectiveFingerprint& from) {
  to.sequence = from.sequence;
  to.count = from.count;
  to.tag_hash = tag_hash(from.tag);
  to.tag_bytes = uint32_t(from.tag.size());
  to.op = uint8_t(from.op);
  to.dtype = uint8_t(from.dtype);
  const size_t kept = std::min(from.tag.size(), kShmTagBytes);
  std::memcpy(to.tag, from.tag.data(), kept);
}

bool same(const ShmFingerprint& a, const ShmFingerprint& b) {
  return a.sequence == b.sequence && a.count == b.count && a.tag_hash == b.tag_hash &&
         a.tag_bytes == b.tag_bytes && a.op == b.op && a.dtype == b.dtype;
}

// For messages: the tag as far as the segment holds it.
CollectiveFingerprint fingerprint_of(const ShmFingerprint& in) {
  std::string tag(in.tag, std::min<size_t>(in.tag_bytes, kShmTagBytes));
  if (in.tag_bytes > kShmTagBytes) tag += "...";
  return {.sequence = in.sequence,
          .op = CollectiveOp(in.op),
          .dtype = DType(in.dtype),
          .count = in.count,
          .tag = std::move(tag)};
}

// An fd that becomes readable when process `pid` ends; empty where the kernel has no pidfds.
Fd open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  return Fd(int(::syscall(SYS_pidfd_open, pid, 0)));
#else
  return Fd();
#endif
}

bool process_ended(const Fd& pidfd, pid_t pid) {
  if (pidfd) {
    pollfd ended{pidfd.get(), POLLIN, 0};
    return ::poll(&ended, 1, 0) > 0;
  }
  return ::kill(pid, 0) != 0 && errno == ESRCH;
}

}  // namespace

ShmMeetings::ShmMeetings(ShmSegment& segment, int rank, std::chrono::milliseconds timeout)
    : segment_(segment),
      rank_(rank),
      world_size_(segment.world_size()),
      timeout_(timeout),
      pidfds_(size_t(segment.world_size())) {
  segment_.rank_block(rank_).pid.store(int32_t(::getpid()));
  try {
    meet_first({.sequence = 0, .op = CollectiveOp::barrier, .tag = "joining the shm segment"},
               Clock::now() + timeout);
  } catch (const ShmFailure& failure) {
    throw std::runtime_error(abort(failure));  // the others fail at once too
  }
  // Every peer has published its pid and reached this meeting. Its pidfd is opened now, not
  // later: once the peer has ended and been reaped, its pid may name another process.
  for (int peer = 0; peer < world_size_; ++peer) {
    Fd& pidfd = pidfds_[size_t(peer)];
    if (peer != rank_ && !pidfd) pidfd = open_pidfd(segment_.rank_block(peer).pid.load());
  }
  joined_ = true;
}

ShmMeetings::~ShmMeetings() {
  if (failed_) return;
  ShmRankBlock& mine = segment_.rank_block(rank_);
  mine.left.store(1);
  futex_wake_all(mine.step);
}

void ShmMeetings::meet_first(const CollectiveFingerprint& collective, Clock::time_point deadline) {
  record(segment_.rank_block(rank_).issued[collective.sequence % 2], collective);
  meet(collective, deadline);
  check_same_collective(collective.sequence);
}

void ShmMeetings::meet(const CollectiveFingerprint& collective, Clock::time_point deadline) {
  if (std::optional<ShmFailure> aborted = abort_record()) throw *aborted;
  arrive();
  for (int peer = 0; peer < world_size_; ++peer)
    if (peer != rank_) wait_for(peer, collective, deadline);
}

void ShmMeetings::arrive() {
  ShmRankBlock& mine = segment_.rank_block(rank_);
  // seq_cst on both sides: either the waiter sees the new step when it checks again before it
  // sleeps, or this load sees the waiter counted in `sleepers` and wakes it.
  mine.step.store(++step_);
  if (mine.sleepers.load() > 0) futex_wake_all(mine.step);
}

void ShmMeetings::wait_for(int peer, const CollectiveFingerprint& collective,
                           Clock::time_point deadline) {
  ShmRankBlock& theirs = segment_.rank_block(peer);
  if (reached(theirs.step.load(), step_)) return;
  const auto started = Clock::now();
  for (int spins = 0;; ++spins) {
    if (reached(theirs.step.load(), step_)) return;
    if (spins % 64 != 63) {
      cpu_relax();
      continue;
    }
    const auto spun = Clock::now() - started;
    if (spun >= kSpinTime) break;
    if (spun >= kPauseTime) std::this_thread::yield();
  }
  while (true) {
    const std::optional<ShmFailure> failure = failure_while_waiting(peer, collective, deadline);
    // A peer may arrive just before it goes (its last collective's last meeting), before the
    // deadline passes, or before another rank fails in a later collective: then it met us. So
    // its step is read after the failure was seen (it stores its step before `left`, and an
    // ended process's stores are in the segment).
    if (reached(theirs.step.load(), step_)) return;
    if (failure) throw *failure;
    theirs.sleepers.fetch_add(1);
    const uint32_t seen = theirs.step.load();
    if (!reached(seen, step_))
      futex_wait(theirs.step, seen,
                 std::clamp<Clock::duration>(deadline - Clock::now(), {}, kSleepSlice));
    theirs.sleepers.fetch_sub(1);
    if (reached(theirs.step.load(), step_)) return;
  }
}

std::optional<ShmFailure> ShmMeetings::failure_while_waiting(
    int peer, const CollectiveFingerprint& collective, Clock::time_point deadline) {
  if (std::optional<ShmFailure> aborted = abort_record()) return aborted;
  const ShmRankBlock& theirs = segment_.rank_block(peer);
  auto lost = [&](const std::string& how) {
    return ShmFailure(peer, "lost rank " + std::to_string(peer) + ": " + how + " while rank " +
                                std::to_string(rank_) + " waited for it in " +
                                to_string(collective));
  };
  if (theirs.left.load() != 0) return lost("it closed its communicator");
  if (const pid_t pid = theirs.pid.load(); pid != 0) {  // 0: still joining
    Fd& pidfd = pidfds_[size_t(peer)];
    if (!pidfd && !joined_) pidfd = open_pidfd(pid);  // later, none (see the constructor)
    if (process_ended(pidfd, pid))
      return lost("its process " + std::to_string(pid) + " ended (killed, or exited)");
  }
  if (Clock::now() >= deadline)
    return ShmFailure(peer, "timed out waiting for rank " + std::to_string(peer) + ": rank " +
                                std::to_string(rank_) + " waited " + seconds_text(timeout_) +
                                " (the timeout) for it in " + to_string(collective) +
                                "; is it stalled?");
  return std::nullopt;
}

std::optional<ShmFailure> ShmMeetings::abort_record() const {
  const int32_t by = segment_.header().aborted_by.load();
  if (by == 0) return std::nullopt;
  const ShmRankBlock& block = segment_.rank_block(by - 1);
  return ShmFailure(block.abort_lost_rank,
                    std::string(block.abort_text, strnlen(block.abort_text, kShmAbortBytes)));
}

// Every rank compares the same fingerprints in the same order, so all name the same pair.
void ShmMeetings::check_same_collective(uint64_t sequence) const {
  for (int rank = 0; rank < world_size_; ++rank) {
    const int prev = (rank + world_size_ - 1) % world_size_;
    const ShmFingerprint& a = segment_.rank_block(prev).issued[sequence % 2];
    const ShmFingerprint& b = segment_.rank_block(rank).issued[sequence % 2];
    if (!same(a, b))
      throw ShmFailure(rank, issued_differently(prev, fingerprint_of(a), rank, fingerprint_of(b)));
  }
}

std::string ShmMeetings::abort(const ShmFailure& failure) {
  failed_ = true;
  ShmHeader& header = segment_.header();
  if (header.aborted_by.load() == 0) {
    ShmRankBlock& mine = segment_.rank_block(rank_);
    mine.abort_lost_rank = failure.lost_rank;
    const size_t kept = std::min(std::strlen(failure.what()), kShmAbortBytes - 1);
    std::memcpy(mine.abort_text, failure.what(), kept);
    mine.abort_text[kept] = '\0';
    int32_t none = 0;
    header.aborted_by.compare_exchange_strong(none, rank_ + 1);
  }
  for (int rank = 0; rank < world_size_; ++rank) futex_wake_all(segment_.rank_block(rank).step);
  const ShmRankBlock& first = segment_.rank_block(header.aborted_by.load() - 1);
  return std::string(first.abort_text, strnlen(first.abort_text, kShmAbortBytes));
}

}  // namespace bareyolo::dist
