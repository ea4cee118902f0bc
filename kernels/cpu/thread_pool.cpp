// kernels/cpu/thread_pool.cpp — see thread_pool.h for the rules this keeps.
#include "kernels/cpu/thread_pool.h"

#include <immintrin.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <new>
#include <set>
#include <stdexcept>
#include <string>

#include "kernels/op_profile.h"

namespace bareyolo {

namespace {
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Set while a thread is executing chunks of some loop; nested loops then run inline.
thread_local bool tls_inside_loop = false;

int threads_from_environment() {
  if (const char* text = std::getenv("BAREYOLO_THREADS")) {
    char* end = nullptr;
    long value = std::strtol(text, &end, 10);
    if (end == text || *end != '\0' || value < 1 || value > 1024)
      throw std::invalid_argument("BAREYOLO_THREADS='" + std::string(text) +
                                  "' is not a thread count between 1 and 1024");
    return static_cast<int>(value);
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

// Waits awake until ready() or ThreadPool::kSpinBeforeSleep has passed; returns ready(). The
// first checks are a tight spin with the CPU's pause hint; after that the thread yields
// between checks, so that on a busy machine another thread can have the core meanwhile.
template <class Ready>
bool spin_until(Ready ready) {
  constexpr int kTightSpins = 256;
  const Clock::time_point deadline = Clock::now() + ThreadPool::kSpinBeforeSleep;
  for (int spins = 0;; ++spins) {
    if (ready()) return true;
    if (spins < kTightSpins) {
      _mm_pause();
      continue;
    }
    if (Clock::now() >= deadline) return ready();
    sched_yield();
  }
}

// Every live pool, so that a forked child can reset them all. The registry's lock is held
// across fork() (atfork prepare, released in the parent and the child), so no pool is being
// registered or removed while the child's copy of the registry is taken.
struct PoolRegistry {
  std::mutex mutex;
  std::set<ThreadPool*> pools;
};

PoolRegistry& registry();

void lock_registry() { registry().mutex.lock(); }
void unlock_registry() { registry().mutex.unlock(); }

PoolRegistry& registry() {
  static PoolRegistry* instance = [] {
    // Never destroyed: a pool destroyed during static destruction still finds it.
    auto* created = new PoolRegistry;
    pthread_atfork(lock_registry, unlock_registry, [] {
      ThreadPool::forget_every_pool_after_fork();
      unlock_registry();
    });
    return created;
  }();
  return *instance;
}

// Ends `object`'s lifetime without its destructor and constructs a fresh one in its storage
// (the standard allows reusing storage without calling a destructor whose side effects
// nobody depends on).
template <class T>
void recreate_in_place(T& object) {
  ::new (static_cast<void*>(&object)) T();
}
}  // namespace

ThreadPool::ThreadPool(int num_threads) : wanted_workers_(std::max(1, num_threads) - 1) {
  {
    std::lock_guard<std::mutex> lock(registry().mutex);
    registry().pools.insert(this);
  }
  start_workers(wanted_workers_);
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(registry().mutex);
    registry().pools.erase(this);
  }
  stop_workers();
}

void ThreadPool::forget_every_pool_after_fork() {
  tls_inside_loop = false;  // fork() from inside a loop: the child's loops start afresh
  for (ThreadPool* pool : registry().pools) pool->forget_workers_after_fork();
}

// The child has only the thread that called fork(). The worker threads these objects name and
// the waiters the mutexes and condition variables count exist only in the parent: joining
// them, or notifying a condition variable that counts them, would wait forever. So the
// objects are abandoned, not destroyed, and the next parallel_for starts new workers.
void ThreadPool::forget_workers_after_fork() {
  for (std::thread& worker : workers_) recreate_in_place(worker);
  workers_.clear();
  recreate_in_place(mutex_);
  recreate_in_place(wake_);
  recreate_in_place(done_);
  recreate_in_place(call_mutex_);
  generation_ = 0;
  stopping_ = false;
  job_ = {};
  busy_workers_ = 0;
  failed_ = false;
  error_ = nullptr;
}

ThreadPool& ThreadPool::global() {
  static ThreadPool pool(threads_from_environment());
  return pool;
}

void ThreadPool::resize(int num_threads) {
  std::lock_guard<std::mutex> one_caller(call_mutex_);
  stop_workers();
  wanted_workers_ = std::max(1, num_threads) - 1;
  start_workers(wanted_workers_);
}

void ThreadPool::start_workers(int count) {
  stopping_ = false;
  cursors_ = std::make_unique<ShareCursor[]>(static_cast<size_t>(num_threads()));
  for (int i = 0; i < count; ++i) {
    const int thread_index = static_cast<int>(workers_.size()) + 1;
    workers_.emplace_back([this, thread_index] { worker_loop(thread_index); });
  }
}

void ThreadPool::stop_workers() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& worker : workers_) worker.join();
  workers_.clear();
}

void ThreadPool::worker_loop(int thread_index) {
  uint64_t seen_generation = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    // The next loop usually comes within microseconds: look for it before sleeping. Joining
    // still happens under the lock, so the caller's bookkeeping below is unchanged.
    lock.unlock();
    spin_until([&] { return stopping_ || generation_ != seen_generation; });
    lock.lock();
    wake_.wait(lock, [&] { return stopping_ || generation_ != seen_generation; });
    if (stopping_) return;
    seen_generation = generation_;
    const Job job = job_;
    ++busy_workers_;
    lock.unlock();
    if (job.chunks > 0) run_chunks(job, thread_index);
    lock.lock();
    if (--busy_workers_ == 0) done_.notify_all();
  }
}

void ThreadPool::run_chunk(const Job& job, int64_t chunk) {
  const int64_t begin = chunk * job.grain;
  try {
    (*job.fn)(begin, std::min(job.n, begin + job.grain));
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!error_) error_ = std::current_exception();
    failed_ = true;
  }
}

// Share s of T = num_threads() holds the chunks [s * chunks / T, (s + 1) * chunks / T).
void ThreadPool::run_chunks(const Job& job, int thread_index) {
  tls_inside_loop = true;
  const int shares = num_threads();
  const Clock::time_point start = job.timed ? Clock::now() : Clock::time_point{};
  for (int k = 0; k < shares; ++k) {
    const int share = (thread_index + k) % shares;
    const int64_t end = (share + 1) * job.chunks / shares;
    for (;;) {
      if (failed_.load(std::memory_order_relaxed)) break;
      const int64_t chunk = cursors_[share].next.fetch_add(1);
      if (chunk >= end) break;
      run_chunk(job, chunk);
    }
  }
  if (job.timed) cursors_[thread_index].busy_seconds = seconds_since(start);
  tls_inside_loop = false;
}

bool ThreadPool::runs_inline() const { return tls_inside_loop || wanted_workers_ == 0; }

void ThreadPool::parallel_for(int64_t n, int64_t grain, const RangeFn& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  int64_t chunks = (n + grain - 1) / grain;
  if (runs_inline() || chunks == 1) {
    // Same chunk boundaries as the parallel path, so reductions give the same bits.
    for (int64_t begin = 0; begin < n; begin += grain) fn(begin, std::min(n, begin + grain));
    return;
  }
  std::lock_guard<std::mutex> one_caller(call_mutex_);
  const Job job{&fn, n, grain, chunks, op_profile::enabled()};
  const int shares = num_threads();
  // Fewer workers than wanted only in a forked child that has not run a loop yet.
  if (static_cast<int>(workers_.size()) < wanted_workers_)
    start_workers(wanted_workers_ - static_cast<int>(workers_.size()));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = job;
    for (int share = 0; share < shares; ++share) {
      cursors_[share].next = share * chunks / shares;
      cursors_[share].busy_seconds = 0;
    }
    failed_ = false;
    error_ = nullptr;
    ++generation_;
  }
  const Clock::time_point start = job.timed ? Clock::now() : Clock::time_point{};
  wake_.notify_all();
  run_chunks(job, 0);
  // The workers still in the loop are finishing their last chunks: wait for them awake.
  spin_until([&] { return busy_workers_ == 0; });
  std::exception_ptr error;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    // Workers that woke late find no chunk left and leave at once; wait for all of them
    // so that none still holds job_ when this call returns.
    done_.wait(lock, [&] { return busy_workers_ == 0; });
    // A worker that wakes only now must find nothing to claim, also when an error left
    // chunks unclaimed: it would call job_, which is about to dangle.
    job_ = {};
    error = error_;
    error_ = nullptr;
  }
  if (job.timed) {
    // The loop offered `shares` threads for its wall time; what they did not spend running
    // chunks they spent waiting (kernels/op_profile.h).
    const double wall = seconds_since(start);
    double busy = 0;
    for (int share = 0; share < shares; ++share) busy += cursors_[share].busy_seconds;
    op_profile::add_pool_loop(wall, std::max(0.0, shares * wall - busy));
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace bareyolo
