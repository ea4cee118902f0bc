// engine/distributed/comm/progress_board.cpp — see progress_board.h.
#include "engine/distributed/comm/progress_board.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <sstream>
#include <stdexcept>

#include "engine/distributed/comm/store.h"

namespace bareyolo::dist {
namespace {

// ---- this process's counters ----

std::atomic<uint64_t> g_progress{0};
std::atomic<uint64_t> g_issued{0};
std::atomic<uint64_t> g_finished{0};
std::atomic<uint64_t> g_waiting{0};
std::atomic<uint64_t> g_beats{0};
std::mutex g_last_mutex;
CollectiveFingerprint g_last;  // the last collective issued
ProgressBoard* g_inherited_board = nullptr;
int g_inherited_rank = 0;

}  // namespace

RankProgress own_progress();

namespace {

// On the launcher's shared board a record costs a few stores, so each collective publishes it
// as it is issued: a peer that fails names exactly what this rank last issued, not what it
// had issued at its last heartbeat. (Waits and completions reach the board with the beats.)
void publish_now() {
  if (g_inherited_board) g_inherited_board->publish(g_inherited_rank, own_progress());
}

// ---- the shared page ----

constexpr size_t kTagBytes = 64;

// One rank's slot. `version` is a seqlock: odd while the writer is inside, so a reader that
// sees the same even version before and after copying has a whole record. The last collective
// is kept as its fields (formatted by whoever reads it): publishing stays a few stores.
struct Slot {
  std::atomic<uint64_t> version;
  std::atomic<uint64_t> beats, progress, issued, finished, waiting;
  std::atomic<uint64_t> last_sequence, last_op_dtype;
  std::atomic<int64_t> last_count;
  char last_tag[kTagBytes];
};

class SharedProgressBoard final : public ProgressBoard {
 public:
  SharedProgressBoard(int first_rank, int ranks) : first_rank_(first_rank), ranks_(ranks) {
    bytes_ = sizeof(Slot) * size_t(std::max(ranks, 1));
    void* page = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED)
      throw std::runtime_error("cannot map the ranks' progress board (" + std::to_string(bytes_) +
                               " bytes): " + std::strerror(errno));
    slots_ = static_cast<Slot*>(page);  // zero-filled by mmap: every field starts at 0
  }
  ~SharedProgressBoard() override { ::munmap(slots_, bytes_); }

  void publish(int rank, const RankProgress& record) override {
    Slot* slot = slot_of(rank);
    if (!slot) return;
    // The seqlock has one writer at a time: this process's heartbeat and its collectives
    // take turns (the mutex is this process's own; each worker writes only its slot).
    const std::lock_guard lock(write_mutex_);
    const uint64_t version = slot->version.load(std::memory_order_relaxed);
    slot->version.store(version + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    slot->beats.store(record.beats, std::memory_order_relaxed);
    slot->progress.store(record.progress, std::memory_order_relaxed);
    slot->issued.store(record.issued, std::memory_order_relaxed);
    slot->finished.store(record.finished, std::memory_order_relaxed);
    slot->waiting.store(record.waiting, std::memory_order_relaxed);
    slot->last_sequence.store(record.last.sequence, std::memory_order_relaxed);
    slot->last_op_dtype.store(uint64_t(record.last.op) | uint64_t(record.last.dtype) << 8,
                              std::memory_order_relaxed);
    slot->last_count.store(record.last.count, std::memory_order_relaxed);
    const size_t length = std::min(record.last.tag.size(), kTagBytes - 1);
    std::memcpy(slot->last_tag, record.last.tag.data(), length);
    slot->last_tag[length] = '\0';
    slot->version.store(version + 2, std::memory_order_release);
  }

  std::vector<std::optional<RankProgress>> read() override {
    std::vector<std::optional<RankProgress>> records(size_t(first_rank_ + ranks_));
    for (int local = 0; local < ranks_; ++local) {
      const Slot& slot = slots_[local];
      for (int attempt = 0; attempt < 1000; ++attempt) {  // a writer holds it for nanoseconds
        const uint64_t before = slot.version.load(std::memory_order_acquire);
        if (before % 2 == 1) continue;
        RankProgress record{.beats = slot.beats.load(std::memory_order_relaxed),
                            .progress = slot.progress.load(std::memory_order_relaxed),
                            .issued = slot.issued.load(std::memory_order_relaxed),
                            .finished = slot.finished.load(std::memory_order_relaxed),
                            .waiting = slot.waiting.load(std::memory_order_relaxed),
                            .last = {}};
        const uint64_t op_dtype = slot.last_op_dtype.load(std::memory_order_relaxed);
        record.last.sequence = slot.last_sequence.load(std::memory_order_relaxed);
        record.last.op = CollectiveOp(op_dtype & 0xff);
        record.last.dtype = DType((op_dtype >> 8) & 0xff);
        record.last.count = slot.last_count.load(std::memory_order_relaxed);
        char tag[kTagBytes];
        std::memcpy(tag, slot.last_tag, kTagBytes);
        std::atomic_thread_fence(std::memory_order_acquire);
        if (slot.version.load(std::memory_order_relaxed) != before) continue;
        if (before == 0) break;  // never published
        tag[kTagBytes - 1] = '\0';
        record.last.tag = tag;
        records[size_t(first_rank_ + local)] = std::move(record);
        break;
      }
    }
    return records;
  }

 private:
  Slot* slot_of(int rank) {
    const int local = rank - first_rank_;
    return local >= 0 && local < ranks_ ? &slots_[local] : nullptr;
  }

  const int first_rank_, ranks_;
  size_t bytes_ = 0;
  Slot* slots_ = nullptr;
  std::mutex write_mutex_;
};

// ---- the store's keys ----

std::string heartbeat_key(int rank) { return "heartbeat/" + std::to_string(rank); }

// "beats progress issued finished waiting last.sequence last.op last.dtype last.count\n<tag>"
std::string encode(const RankProgress& record) {
  std::string text;
  for (uint64_t number : {record.beats, record.progress, record.issued, record.finished,
                          record.waiting, record.last.sequence, uint64_t(record.last.op),
                          uint64_t(record.last.dtype), uint64_t(record.last.count)})
    text += std::to_string(number) + " ";
  return text + "\n" + record.last.tag;
}

std::optional<RankProgress> decode(const std::string& text) {
  std::istringstream in(text);
  RankProgress record;
  uint64_t op = 0, dtype = 0;
  if (!(in >> record.beats >> record.progress >> record.issued >> record.finished >>
        record.waiting >> record.last.sequence >> op >> dtype >> record.last.count))
    return std::nullopt;
  record.last.op = CollectiveOp(op);
  record.last.dtype = DType(dtype);
  in.ignore(2);  // " \n"
  std::getline(in, record.last.tag, '\0');
  return record;
}

class StoreProgressBoard final : public ProgressBoard {
 public:
  StoreProgressBoard(Store& store, int world_size) : store_(store), world_size_(world_size) {}

  void publish(int rank, const RankProgress& record) override {
    store_.set(heartbeat_key(rank), encode(record));
  }

  std::vector<std::optional<RankProgress>> read() override {
    std::vector<std::optional<RankProgress>> records(static_cast<size_t>(world_size_));
    for (int rank = 0; rank < world_size_; ++rank)
      if (store_.check(heartbeat_key(rank)))
        records[size_t(rank)] = decode(store_.get(heartbeat_key(rank)));
    return records;
  }

 private:
  Store& store_;
  const int world_size_;
};

}  // namespace

std::unique_ptr<ProgressBoard> make_shared_progress_board(int first_rank, int ranks) {
  return std::make_unique<SharedProgressBoard>(first_rank, ranks);
}

std::unique_ptr<ProgressBoard> make_store_progress_board(Store& store, int world_size) {
  return std::make_unique<StoreProgressBoard>(store, world_size);
}

void note_progress() { g_progress.fetch_add(1, std::memory_order_relaxed); }

void note_collective_issued(const CollectiveFingerprint& collective) {
  {
    const std::lock_guard lock(g_last_mutex);
    g_last = collective;
  }
  g_issued.store(collective.sequence, std::memory_order_relaxed);
  note_progress();
  publish_now();
}

void note_collective_finished(uint64_t sequence) {
  uint64_t seen = g_finished.load(std::memory_order_relaxed);
  while (seen < sequence && !g_finished.compare_exchange_weak(seen, sequence)) {
  }
  note_progress();
}

WaitingForPeers::WaitingForPeers() {
  g_waiting.fetch_add(1, std::memory_order_relaxed);
  note_progress();
}

WaitingForPeers::~WaitingForPeers() {
  g_waiting.fetch_sub(1, std::memory_order_relaxed);
  note_progress();
}

RankProgress own_progress() {
  RankProgress record{.beats = g_beats.load(std::memory_order_relaxed),
                      .progress = g_progress.load(std::memory_order_relaxed),
                      .issued = g_issued.load(std::memory_order_relaxed),
                      .finished = g_finished.load(std::memory_order_relaxed),
                      .waiting = g_waiting.load(std::memory_order_relaxed),
                      .last = {}};
  const std::lock_guard lock(g_last_mutex);
  record.last = g_last;
  return record;
}

ProgressBoard* inherited_progress_board() { return g_inherited_board; }
void set_inherited_progress_board(ProgressBoard* board, int rank) {
  g_inherited_board = board;
  g_inherited_rank = rank;
}

// ---- the heartbeat ----

Heartbeat::Heartbeat(ProgressBoard& board, int rank, std::chrono::milliseconds period)
    : board_(board), rank_(rank), thread_(period, [this] { beat(); }) {}

void Heartbeat::beat() {
  g_beats.fetch_add(1, std::memory_order_relaxed);
  try {
    board_.publish(rank_, own_progress());
  } catch (const std::exception&) {
    // The store is unreachable for now (rank 0 busy or gone): the next beat tries again;
    // losing the store is the communicator's to report, not the heartbeat's.
  }
}

}  // namespace bareyolo::dist
