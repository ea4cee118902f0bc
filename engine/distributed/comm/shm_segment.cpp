// engine/distributed/comm/shm_segment.cpp — see shm_segment.h.
#include "engine/distributed/comm/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>
#include <stdexcept>
#include <thread>

#include "engine/distributed/comm/token_proof.h"
#include "kernels/round_up.h"

namespace bareyolo::dist {
namespace {

constexpr char kMagic[8] = {'b', 'y', 'o', 'l', 'o', 's', 'h', 'm'};
constexpr uint32_t kLayoutVersion = 1;
constexpr size_t kPageBytes = 4096;
// The data slots of all ranks, both sets, take at most this much (a slot at most 1 MB, at
// least 64 KB): 4 MB for 2 ranks. On the shared 2-core development VM, 2 ranks spent the same
// CPU time on a 64 MB allreduce with 128 KB .. 1 MB slots (16-23 ms a call, within the noise);
// larger slots mean fewer meetings, each a point where a descheduled rank stalls the others.
constexpr size_t kSlotsBudgetBytes = size_t{32} << 20;
constexpr size_t kMaxSlotBytes = size_t{1} << 20, kMinSlotBytes = size_t{64} << 10;

// The shm communicators this process made: the generation of the next one.
std::atomic<uint64_t> communicators_made{0};

size_t slot_bytes_for(int world_size) {
  const size_t share = kSlotsBudgetBytes / (2 * size_t(world_size));
  return round_up(std::clamp(share, kMinSlotBytes, kMaxSlotBytes), kPageBytes);
}

size_t blocks_offset() { return round_up(sizeof(ShmHeader), kCacheLine); }
size_t slots_offset(int world_size) {
  return round_up(blocks_offset() + size_t(world_size) * sizeof(ShmRankBlock), kPageBytes);
}

std::string errno_text(int error) { return std::strerror(error); }

}  // namespace

std::string shm_segment_name(const std::string& token, int store_port, uint64_t generation) {
  const std::string port = std::to_string(store_port);
  return "/bareyolo-" + token_proof(token, "shm segment", port, "").substr(0, 16) + "-" + port +
         "-" + std::to_string(generation);
}

ShmSegment::ShmSegment(Store& store, int rank, int world_size, const std::string& token,
                       int store_port, std::chrono::milliseconds timeout)
    : rank_(rank), world_size_(world_size) {
  const uint64_t generation = communicators_made.fetch_add(1);
  name_ = shm_segment_name(token, store_port, generation);
  if (rank == 0)
    create(store, generation, random_nonce());
  else
    open_announced(store, generation, timeout);
}

ShmSegment::~ShmSegment() {
  if (named_) unlink_name();
  if (base_) ::munmap(base_, total_bytes_);
}

void ShmSegment::unlink_name() {
  ::shm_unlink(name_.c_str());
  named_ = false;
}

ShmRankBlock& ShmSegment::rank_block(int rank) const {
  return reinterpret_cast<ShmRankBlock*>(base_ + blocks_offset())[rank];
}

char* ShmSegment::slot(int set, int rank) const {
  return base_ + slots_offset(world_size_) +
         (size_t(set) * size_t(world_size_) + size_t(rank)) * slot_bytes_;
}

void ShmSegment::map(int fd, size_t bytes) {
  void* mapped = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (mapped == MAP_FAILED)
    throw std::runtime_error("cannot map the shared-memory segment /dev/shm" + name_ + " (" +
                             std::to_string(bytes >> 10) + " KB): " + errno_text(errno));
  base_ = static_cast<char*>(mapped);
  total_bytes_ = bytes;
}

void ShmSegment::create(Store& store, uint64_t generation, const std::string& nonce) {
  slot_bytes_ = slot_bytes_for(world_size_);
  const size_t total = slots_offset(world_size_) + 2 * size_t(world_size_) * slot_bytes_;
  int fd = ::shm_open(name_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0 && errno == EEXIST) {  // left by a job killed while it was joining
    ::shm_unlink(name_.c_str());
    fd = ::shm_open(name_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  }
  if (fd < 0)
    throw std::runtime_error("cannot create the shared-memory segment /dev/shm" + name_ + ": " +
                             errno_text(errno) + " (use --backend tcp)");
  named_ = true;
  // Reserved now, so that a /dev/shm too small fails here with a message instead of a SIGBUS
  // at the first touch of a page it has no room for.
  const int reserved = ::posix_fallocate(fd, 0, off_t(total));
  if (reserved != 0) {
    ::close(fd);
    throw std::runtime_error("no room in /dev/shm for the shared-memory segment " + name_ + " (" +
                             std::to_string(total >> 10) + " KB): " + errno_text(reserved) +
                             "; enlarge /dev/shm (docker run --shm-size) or use --backend tcp");
  }
  try {
    map(fd, total);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  // The file is all zeros: every atomic starts at 0, no rank has arrived anywhere.
  ShmHeader& head = *new (base_) ShmHeader{};
  std::memcpy(head.magic, kMagic, sizeof kMagic);
  head.layout_version = kLayoutVersion;
  head.world_size = world_size_;
  head.generation = generation;
  std::memcpy(head.nonce, nonce.data(), std::min(nonce.size(), sizeof head.nonce));
  head.slot_bytes = slot_bytes_;
  head.total_bytes = total;
  for (int rank = 0; rank < world_size_; ++rank) new (&rank_block(rank)) ShmRankBlock{};
  store.set("shm/" + std::to_string(generation), name_ + " " + nonce);
}

void ShmSegment::open_announced(Store& store, uint64_t generation,
                                std::chrono::milliseconds timeout) {
  const std::string announced = store.get("shm/" + std::to_string(generation));
  const std::string nonce = announced.substr(announced.find(' ') + 1);
  if (announced.substr(0, announced.find(' ')) != name_)
    throw std::runtime_error("rank 0 announced the shared-memory segment " + announced +
                             " where this rank expected " + name_ +
                             ": do all ranks make their communicators in the same order?");
  const auto deadline = Clock::now() + timeout;
  std::string why;
  while (true) {
    const int fd = ::shm_open(name_.c_str(), O_RDWR | O_CLOEXEC, 0);
    struct stat info {};
    if (fd < 0) {
      why = "cannot open it: " + errno_text(errno) +
            " (are all ranks on one host, in one IPC namespace? else use --backend tcp)";
    } else if (::fstat(fd, &info) != 0 || info.st_uid != ::getuid() || (info.st_mode & 077)) {
      why = "it belongs to another user or others may read it";
    } else if (size_t(info.st_size) < sizeof(ShmHeader)) {
      why = "it is shorter than its header";  // rank 0 is still sizing a new one
    } else {
      map(fd, size_t(info.st_size));
      const ShmHeader& head = header();
      if (std::memcmp(head.magic, kMagic, sizeof kMagic) != 0 ||
          head.layout_version != kLayoutVersion || head.generation != generation ||
          head.world_size != world_size_ || head.total_bytes != total_bytes_ ||
          std::string(head.nonce, sizeof head.nonce) != nonce) {
        why = "it belongs to another job (its identity differs from what rank 0 announced)";
        ::munmap(base_, total_bytes_);
        base_ = nullptr;
      } else {
        slot_bytes_ = head.slot_bytes;
        ::close(fd);
        return;
      }
    }
    if (fd >= 0) ::close(fd);
    if (Clock::now() >= deadline)
      throw std::runtime_error("rank " + std::to_string(rank_) +
                               " could not join the shared-memory segment /dev/shm" + name_ +
                               " that rank 0 announced: " + why);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace bareyolo::dist
