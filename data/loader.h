// data/loader.h — builds one epoch's batches ahead of the trainer on K threads of its own.
//
// Each worker takes the next step number and builds that whole batch (decode, augment,
// collate); finished batches wait in a bounded queue and come out in step order. A worker
// starts step s only while s < (next step to hand out) + queue_batches, which bounds memory.
// Every sample's randomness comes from SampleRng(seed, epoch, position) (sample.h), so a
// batch's content does not depend on the worker count, on which worker built it, or on the
// world size. workers = 0 builds each batch in next() on the calling thread.
//
// An exception in a worker (an image deleted since verification, ...) is rethrown by next().
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "data/augment_hyp.h"
#include "data/batch.h"
#include "data/dataset.h"
#include "data/sampler.h"

namespace bareyolo::data {

struct LoaderOptions {
  int imgsz = 640;
  bool augment = true;  // training pipeline; false: validation letterbox
  AugmentHyp hyp;       // used when augment
  uint64_t seed = 0;
  int workers = 0;        // --workers
  int queue_batches = 0;  // batches built ahead; 0 means max(2, workers)
};

class Loader {
 public:
  Loader(const Dataset& dataset, std::vector<Step> plan, int64_t epoch,
         const LoaderOptions& options);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  int64_t steps() const { return int64_t(plan_.size()); }
  // The next batch in step order, or nothing at the end of the epoch.
  std::optional<Batch> next();

 private:
  Batch build(const Step& step) const;
  void worker_loop();

  const Dataset& dataset_;
  std::vector<Step> plan_;
  int64_t epoch_;
  LoaderOptions options_;
  int queue_batches_;

  std::mutex mutex_;
  std::condition_variable space_;  // a consumer took a batch, or stopping
  std::condition_variable ready_;  // a batch (or an error) arrived
  size_t next_to_build_ = 0;
  size_t next_to_hand_out_ = 0;
  std::map<size_t, Batch> finished_;
  std::exception_ptr error_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace bareyolo::data
