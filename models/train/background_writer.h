// models/train/background_writer.h — one thread that runs file writes in the order they were
// queued, off the thread that queued them, and hands back to that thread what they wrote and
// the first failure: the Checkpointer's writer (checkpointer.h), so that serialising and
// fsyncing a checkpoint does not hold up the next training step.
//
//   queue(write)      returns at once while fewer than `max_queued` writes are queued (the one
//                     running counts); otherwise waits for the writer to finish one
//   take_finished()   the paths written since the last call, and the failure, if any
//   wait()            until every queued write is done
//
// A write that throws stops the writer: the writes queued after it are dropped and later ones
// are not run, as a synchronous write's exception would have ended the caller there. Its
// exception stays in take_finished() from then on. The destructor runs every queued write
// before it returns (none is lost at a normal exit), and never throws.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace bareyolo::models {

class BackgroundWriter {
 public:
  // One write: it appends the path of each file it completes to `written`, in order.
  using Write = std::function<void(std::vector<std::string>& written)>;

  explicit BackgroundWriter(size_t max_queued);
  ~BackgroundWriter();
  BackgroundWriter(const BackgroundWriter&) = delete;
  BackgroundWriter& operator=(const BackgroundWriter&) = delete;

  // Does nothing once a write has failed (take_finished() gives the failure).
  void queue(Write write);
  void wait();

  struct Finished {
    std::vector<std::string> written;  // since the last call, in the order written
    std::exception_ptr failure;        // the write that stopped the writer; null while none did
  };
  Finished take_finished();

 private:
  void run();

  const size_t max_queued_;
  std::mutex mutex_;
  std::condition_variable changed_;  // a write queued or finished, or the destructor stopping
  std::deque<Write> queued_;         // the front one is running
  std::vector<std::string> written_;
  std::exception_ptr failure_;
  bool stopping_ = false;
  std::thread thread_;  // last: started once the members above exist
};

}  // namespace bareyolo::models
