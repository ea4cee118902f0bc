// engine/distributed/comm/shm_segment.h — the POSIX shared-memory segment the ranks of one host
// share for the shm communicator (shm_communicator.h): its name, its layout and its lifetime.
//
// Lifetime. Rank 0 creates /dev/shm/bareyolo-<hash>-<port>-<generation> (O_EXCL, mode 0600):
// <hash> is an HMAC of the job's store token (token_proof.h, so the name reveals nothing of it),
// <port> the store's port, <generation> the number of shm communicators this process made before
// (every rank makes its communicators in the same order, as it issues its collectives). Rank 0
// writes a random nonce — the job's identity — and the generation into the header, reserves the
// memory (a full /dev/shm fails here with a message, not with SIGBUS later), and announces the
// name and nonce in the store under "shm/<generation>". Every other rank opens the name and checks
// the header's magic, layout, generation, world size and nonce: a stale segment of a killed job
// never passes (its nonce differs), and the rank retries until the announced one is there or the
// timeout. Once every rank has opened it (the joining meeting, shm_meetings.h), rank 0 unlinks
// the name: the memory lives while it is mapped and the kernel frees it when the last rank exits,
// however it exits, so a SIGKILLed job leaves nothing in /dev/shm. Only a job killed while it
// was joining leaves its name behind; the next creation of that name removes it.
//
// Layout: the header, one control block per rank (shm_meetings.h), then two sets of one data
// slot per rank. Data written before a meeting goes into set (meeting number % 2) and is read
// before the next meeting: that set is free again once every rank has arrived at the meeting
// after, so the ranks never wait for each other only to reuse memory.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/distributed/comm/store.h"

namespace bareyolo::dist {

inline constexpr size_t kCacheLine = 64;

// A collective's fingerprint (collective_fingerprint.h) as it lies in the segment: the tag's
// first kShmTagBytes bytes for messages, and a hash of all of it for the comparison.
inline constexpr size_t kShmTagBytes = 160;
struct ShmFingerprint {
  uint64_t sequence;
  int64_t count;
  uint64_t tag_hash;
  uint32_t tag_bytes;  // the whole tag's length
  uint8_t op;
  uint8_t dtype;
  char tag[kShmTagBytes];
};

// What one rank publishes (shm_meetings.h). Each rank writes only its own block; `step` and
// `sleepers` are read by all, so they sit on a cache line of their own.
inline constexpr size_t kShmAbortBytes = 1024;
struct alignas(kCacheLine) ShmRankBlock {
  std::atomic<uint32_t> step;                    // meetings this rank has arrived at; a futex word
  std::atomic<uint32_t> sleepers;                // ranks asleep in futex_wait on `step`
  std::atomic<uint32_t> left;                    // 1 once its communicator was closed cleanly
  std::atomic<int32_t> pid;                      // its process, for the liveness check
  alignas(kCacheLine) ShmFingerprint issued[2];  // its current collective, by sequence parity
  int32_t abort_lost_rank;  // its abort record (read once `aborted_by` names it)
  char abort_text[kShmAbortBytes];
};

struct ShmHeader {
  char magic[8];
  uint32_t layout_version;
  int32_t world_size;
  uint64_t generation;
  char nonce[32];  // random_nonce() of rank 0: the job's identity
  uint64_t slot_bytes;
  uint64_t total_bytes;
  alignas(kCacheLine) std::atomic<int32_t> aborted_by;  // 0: none; else the first aborting rank + 1
};

static_assert(std::atomic<uint32_t>::is_always_lock_free &&
                  std::atomic<int32_t>::is_always_lock_free,
              "the segment's atomics must work across processes");

// The name of generation `generation`'s segment of the job with `token` and `store_port`.
std::string shm_segment_name(const std::string& token, int store_port, uint64_t generation);

class ShmSegment {
 public:
  // Rank 0 creates the segment and announces it; the others open it (see above). `token` and
  // `store_port` name it; `timeout` bounds the wait for the announcement. Throws
  // std::runtime_error naming the segment and what to do.
  ShmSegment(Store& store, int rank, int world_size, const std::string& token, int store_port,
             std::chrono::milliseconds timeout);
  // Unmaps it (rank 0 unlinks the name first if it has not yet).
  ~ShmSegment();
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  // Rank 0, once every rank has opened it: the name goes, the memory stays.
  void unlink_name();

  const std::string& name() const { return name_; }
  int world_size() const { return world_size_; }
  size_t slot_bytes() const { return slot_bytes_; }
  ShmHeader& header() const { return *reinterpret_cast<ShmHeader*>(base_); }
  ShmRankBlock& rank_block(int rank) const;
  // Rank `rank`'s data slot in set `set` (0 or 1), slot_bytes() long.
  char* slot(int set, int rank) const;

 private:
  void create(Store& store, uint64_t generation, const std::string& nonce);
  void open_announced(Store& store, uint64_t generation, std::chrono::milliseconds timeout);
  void map(int fd, size_t bytes);

  int rank_;
  int world_size_;
  std::string name_;
  size_t slot_bytes_ = 0;
  size_t total_bytes_ = 0;
  char* base_ = nullptr;
  bool named_ = false;  // rank 0: the name still exists
};

}  // namespace bareyolo::dist
