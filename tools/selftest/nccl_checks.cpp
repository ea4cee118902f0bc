// tools/selftest/nccl_checks.cpp — see nccl_checks.h.
#include "tools/selftest/nccl_checks.h"

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <thread>

#include "engine/distributed/launch/launcher.h"
#include "engine/distributed/launch/process_group.h"

namespace bareyolo::selftest {

namespace {

using dist::CommBuffer;
using dist::ReduceOp;

const int64_t kCounts[] = {0, 1, 7, (int64_t(1) << 20) + 3};
constexpr double kMaxInput = 1000;
// Bounds the rendezvous, NCCL's set-up and every collective: a rank that hangs fails the check.
constexpr std::chrono::seconds kTimeout{120};

// Rank `rank`'s element i of the buffer of check `seed`: a multiple of 1/8 in [-1000, 1000]
// (13 significant bits), so sums over up to 2^10 ranks are exact in float.
template <class T>
std::vector<T> inputs_of(uint64_t seed, int rank, int64_t count) {
  std::vector<T> values(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    const uint64_t mixed = uint64_t(i) * 2654435761u + uint64_t(rank) * 40503u + seed * 97u;
    values[size_t(i)] = T(double(int64_t(mixed % 16001) - 8000) / 8);
  }
  return values;
}

template <class T>
Tensor tensor_of(const std::vector<T>& values, const Device& device) {
  return Tensor::from_vector(values, {1, 1, 1, int64_t(values.size())}, device);
}

// Throws naming `what`, the first element more than `tolerance` off, and both values.
template <class T>
void expect(const std::vector<T>& got, const std::vector<T>& want, double tolerance,
            const std::string& what) {
  for (size_t i = 0; i < want.size(); ++i)
    if (!(std::fabs(double(got[i]) - double(want[i])) <= tolerance)) {
      char values[96];
      std::snprintf(values, sizeof values, " is %.17g, expected %.17g", double(got[i]),
                    double(want[i]));
      throw std::runtime_error(what + ": element " + std::to_string(i) + " of " +
                               std::to_string(want.size()) + values);
    }
}

// The allreduce, broadcast and allgather checks of one dtype; returns how many ran. `seed`
// counts the checks, alike on every rank, so that each has inputs of its own.
template <class T>
int check_dtype(dist::Communicator& comm, const Device& device, uint64_t& seed) {
  const int world = comm.world_size(), rank = comm.rank();
  int checked = 0;
  for (int64_t count : kCounts) {
    const std::string of = " of " + std::to_string(count) + " " + dtype_name(dtype_of<T>());
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max}) {
      ++seed;
      Tensor buffer = tensor_of(inputs_of<T>(seed, rank, count), device);
      comm.allreduce(CommBuffer::of(buffer), op)->wait();
      std::vector<T> want = inputs_of<T>(seed, 0, count);
      for (int other = 1; other < world; ++other) {
        const std::vector<T> theirs = inputs_of<T>(seed, other, count);
        for (size_t i = 0; i < want.size(); ++i)
          want[i] = op == ReduceOp::max ? std::max(want[i], theirs[i]) : want[i] + theirs[i];
      }
      if (op == ReduceOp::avg)
        for (T& value : want) value /= T(world);
      // NCCL averages floats as sum(x_r * fl(1 / world)): a rounding per rank.
      const double tolerance =
          op == ReduceOp::avg ? world * std::numeric_limits<T>::epsilon() * kMaxInput : 0;
      expect(buffer.to_vector<T>(), want, tolerance,
             std::string("allreduce ") + dist::to_string(op) + of);
      ++checked;
    }
    for (int root : world > 1 ? std::vector<int>{0, world - 1} : std::vector<int>{0}) {
      ++seed;
      Tensor buffer = tensor_of(inputs_of<T>(seed, rank, count), device);
      comm.broadcast(CommBuffer::of(buffer), root)->wait();
      expect(buffer.to_vector<T>(), inputs_of<T>(seed, root, count), 0,
             "broadcast from rank " + std::to_string(root) + of);
      ++checked;
    }
    ++seed;
    Tensor send = tensor_of(inputs_of<T>(seed, rank, count), device);
    Tensor receive = tensor_of(std::vector<T>(size_t(count * world), T(-1)), device);
    comm.allgather(CommBuffer::of(send), CommBuffer::of(receive))->wait();
    std::vector<T> want;
    for (int other = 0; other < world; ++other) {
      const std::vector<T> theirs = inputs_of<T>(seed, other, count);
      want.insert(want.end(), theirs.begin(), theirs.end());
    }
    expect(receive.to_vector<T>(), want, 0, "allgather" + of);
    ++checked;
  }
  return checked;
}

// No rank may leave a barrier before the last one entered it. The last rank enters 100 ms
// late; the ranks gather their entry and exit times (one steady clock, CLOCK_MONOTONIC: the
// workers share a machine) and compare them.
void check_barrier(dist::Communicator& comm, const Device& device) {
  using Clock = std::chrono::steady_clock;
  const int world = comm.world_size();
  comm.barrier()->wait();  // start together
  if (comm.rank() == world - 1) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const int64_t entered = Clock::now().time_since_epoch().count();
  comm.barrier()->wait();
  const int64_t left = Clock::now().time_since_epoch().count();
  Tensor mine = tensor_of(std::vector<int64_t>{entered, left}, device);
  Tensor everyone = tensor_of(std::vector<int64_t>(size_t(2 * world)), device);
  comm.allgather(CommBuffer::of(mine), CommBuffer::of(everyone))->wait();
  const std::vector<int64_t> times = everyone.to_vector<int64_t>();
  int64_t last_entry = 0;
  for (int rank = 0; rank < world; ++rank) last_entry = std::max(last_entry, times[2 * rank]);
  for (int rank = 0; rank < world; ++rank)
    if (times[2 * rank + 1] < last_entry)
      throw std::runtime_error("barrier: rank " + std::to_string(rank) + " left it " +
                               std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(
                                                  Clock::duration(last_entry - times[2 * rank + 1]))
                                                  .count()) +
                               " us before the last rank entered it");
}

// One report per worker in memory shared with the parent (anonymous and MAP_SHARED, mapped
// before the fork), so that the verdict can quote a worker's error in full. A worker writes its
// own slot once, before it exits; the parent reads the slots after every worker has exited.
class SharedReports {
 public:
  struct Slot {
    bool written, passed;
    char text[1022];
  };

  explicit SharedReports(size_t ranks) : bytes_(ranks * sizeof(Slot)) {
    void* memory =
        ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED)
      throw std::runtime_error("selftest: cannot map " + std::to_string(bytes_) +
                               " bytes of memory to share with the workers");
    slots_ = static_cast<Slot*>(memory);  // zero-filled: nothing written
  }
  ~SharedReports() { ::munmap(slots_, bytes_); }
  SharedReports(const SharedReports&) = delete;
  SharedReports& operator=(const SharedReports&) = delete;

  void write(int rank, bool passed, const std::string& text) {
    Slot& slot = slots_[rank];
    std::snprintf(slot.text, sizeof slot.text, "%s", text.c_str());
    slot.passed = passed;
    slot.written = true;
  }
  const Slot& at(int rank) const { return slots_[rank]; }

 private:
  size_t bytes_;
  Slot* slots_ = nullptr;
};

// A worker: join the group on its device, check, report.
int collectives_worker(const Device& device, dist::Backend backend, int local_rank,
                       SharedReports& reports) {
  bool passed = false;
  std::string text;
  try {
    const dist::LaunchEnv env = dist::read_launch_env(dist::process_environment());
    dist::ProcessGroup group =
        dist::init_process_group(env, {.backend = backend, .timeout = kTimeout, .device = device});
    text = std::to_string(check_collectives(*group.comm, device)) + " collectives correct";
    passed = true;
  } catch (const std::exception& error) {
    text = error.what();
  }
  reports.write(local_rank, passed, text);
  std::printf("%s on %s: %s%s\n", dist::to_string(backend), device.str().c_str(),
              passed ? "" : "FAILED: ", text.c_str());
  return passed ? 0 : 1;
}

}  // namespace

int check_collectives(dist::Communicator& comm, const Device& device) {
  uint64_t seed = 0;
  int checked = check_dtype<float>(comm, device, seed);
  checked += check_dtype<double>(comm, device, seed);
  check_barrier(comm, device);
  return checked + 1;
}

std::vector<CheckResult> run_collective_checks(const std::vector<Device>& devices,
                                               dist::Backend backend) {
  const int world = int(devices.size());
  dist::LaunchPlan plan;
  plan.nproc = world;
  for (const Device& device : devices)
    if (device.is_cuda()) plan.cuda_indices.push_back(device.index);
  SharedReports reports(devices.size());
  std::string launch_error;
  try {
    dist::launch_workers(plan, [&](int local_rank) {
      return collectives_worker(devices[size_t(local_rank)], backend, local_rank, reports);
    });
  } catch (const std::exception& error) {
    launch_error = std::string("the workers could not start: ") + error.what();
  }
  std::vector<CheckResult> results;
  for (int rank = 0; rank < world; ++rank) {
    const SharedReports::Slot& slot = reports.at(rank);
    CheckResult r;
    r.group = dist::to_string(backend);
    r.name = "collectives, rank " + std::to_string(rank) + " of " + std::to_string(world);
    r.device = devices[size_t(rank)];
    r.passed = slot.written && slot.passed;
    if (!slot.written)
      r.failure = !launch_error.empty()
                      ? launch_error
                      : "the worker ended without reporting: stopped when another rank failed, "
                        "or crashed (its output above says how)";
    else if (!slot.passed)
      r.failure = slot.text;
    results.push_back(std::move(r));
  }
  return results;
}

}  // namespace bareyolo::selftest
