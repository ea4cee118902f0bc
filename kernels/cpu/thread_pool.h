// kernels/cpu/thread_pool.h — the CPU kernels' execution resource: a fixed set of worker
// threads that split a loop [0, n) into chunks.
//
// Rules that keep results reproducible and the pool deadlock-free:
//  - a loop is cut into chunks by n and the grain alone, never by the thread count, so a
//    kernel that reduces per chunk and combines the chunks in order gives the same bits for
//    any number of threads;
//  - the calling thread works too, and a parallel_for issued from inside a running loop
//    (a GEMM inside a per-image convolution loop) runs serially on the thread that issued it;
//  - every thread has a share of each loop's chunks, the caller the first of num_threads()
//    consecutive runs and worker i the (i+1)-th: it claims its own share front to back, then
//    helps with what is left of the others' (one atomic increment per chunk, on a counter
//    per share, each on its own cache line). A loop over a batch thus gives a thread the
//    same images op after op, and the activations it wrote for them are still in its core's
//    caches when the next op reads them; from one shared counter the images changed threads
//    from loop to loop, and half of every op's input came from the other core. (A yolov5n
//    step at 2 threads, in turns with the shared counter in one process: 1.005-1.08x faster
//    over ten runs, about 1.03x in the median; the bits never depend on who runs a chunk.)
//  - a thread that runs out of work spins briefly (kSpinBeforeSleep) before it sleeps: a
//    training step runs ~700 loops, many of them under a millisecond, and waking a sleeping
//    thread (a futex wake, through the hypervisor on a VM) costs tens of microseconds each
//    time. The spin (500 us) outlasts most of the serial work between a step's loops (at
//    50 us, a worker slept before ~100 of yolov5n's 453 loops a step and woke 50-100 us late;
//    a waiting caller too); it is bounded, so an idle pool sleeps and gives its cores back;
//  - fork-safe: a forked child (the launcher's workers) has none of the parent's threads, so
//    every pool forgets its workers and its locks in the child (a pthread_atfork handler) and
//    starts fresh workers at the child's first parallel loop.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace bareyolo {

class ThreadPool {
 public:
  using RangeFn = std::function<void(int64_t begin, int64_t end)>;

  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // The process-wide pool. Its size is $BAREYOLO_THREADS when set, else the number of cores.
  static ThreadPool& global();

  int num_threads() const { return wanted_workers_ + 1; }
  // Replaces the workers; must not be called while a loop is running.
  void resize(int num_threads);

  // Whether a parallel_for called now from this thread would run all its chunks on it, one
  // after another: inside another loop, or with no workers. (A GEMM then cuts fewer tasks.)
  bool runs_inline() const;

  // Calls fn(begin, end) on consecutive chunks of [0, n) of `grain` elements (the last one
  // shorter) and returns when all are done. An exception thrown by fn is rethrown here.
  void parallel_for(int64_t n, int64_t grain, const RangeFn& fn);

  // How long a thread spins for new work, or for the loop's last chunks, before it sleeps.
  static constexpr std::chrono::microseconds kSpinBeforeSleep{500};

  // Run in a forked child by the pthread_atfork handler this file installs (nobody else needs
  // to call it): every live pool forgets the parent's threads and starts its own at its next
  // loop.
  static void forget_every_pool_after_fork();

 private:
  void start_workers(int count);
  void stop_workers();
  void worker_loop(int thread_index);
  // A loop: fn over [0, n) in `chunks` chunks of `grain` elements.
  struct Job {
    const RangeFn* fn = nullptr;
    int64_t n = 0, grain = 1, chunks = 0;
    bool timed = false;  // the op profile is on: each thread times its run_chunks
  };
  // Claims and runs chunks, its own share's first, until none are left (thread_index: 0 for
  // the caller, i for worker i).
  void run_chunks(const Job& job, int thread_index);
  void run_chunk(const Job& job, int64_t chunk);
  // In a forked child: drops the parent's threads and locks without touching them.
  void forget_workers_after_fork();

  int wanted_workers_ = 0;  // workers_ may be fewer only in a forked child, until its next loop
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  // Written under mutex_; atomic so that a spinning thread may read them without it.
  std::atomic<uint64_t> generation_{0};  // bumped per loop; workers wait for a new one
  std::atomic<bool> stopping_{false};
  std::atomic<int> busy_workers_{0};  // workers that joined the current loop and are in it
  // The loop being run (valid while busy_workers_ > 0 or the caller is in it), guarded by
  // mutex_: a worker copies it when it joins, so one that joins after the loop ended (a
  // copy with no chunks) never touches cursors_, which the next loop may be resetting.
  Job job_;
  // Per share (thread), the next chunk to claim in it, by fetch_add; at or past the share's
  // end when none are left; and, in a timed loop, how long that thread ran chunks. Sized
  // num_threads() whenever workers start.
  struct alignas(64) ShareCursor {
    std::atomic<int64_t> next{0};
    double busy_seconds = 0;
  };
  std::unique_ptr<ShareCursor[]> cursors_;
  std::atomic<bool> failed_{false};  // a chunk threw: claim no more
  std::exception_ptr error_;         // guarded by mutex_
  std::mutex call_mutex_;            // one loop at a time from outside the pool
};

// Shorthand for ThreadPool::global().parallel_for.
inline void parallel_for(int64_t n, int64_t grain, const ThreadPool::RangeFn& fn) {
  ThreadPool::global().parallel_for(n, grain, fn);
}

}  // namespace bareyolo
