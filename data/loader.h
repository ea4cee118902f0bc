// data/loader.h — builds one epoch's batches ahead of the trainer on K threads of its own.
//
// The unit of work is one sample (decode, augment): each worker takes the next sample of the
// earliest batch not yet handed out to a worker, so all K threads build a batch together and
// the first batch of an epoch is ready in 1/K of the time one thread would take (at 640 px and
// batch 64 one thread needs about a second for a batch: an epoch boundary stalled a GPU that
// long). The worker that finishes a batch's last sample collates it; finished batches wait in
// a bounded queue and come out in step order. Samples of step s are started only while
// s < (next step to hand out) + queue_batches, which bounds memory.
// Every sample's randomness comes from SampleRng(seed, epoch, position) (sample.h), so a
// batch's content does not depend on the worker count, on which worker built it, or on the
// world size. workers = 0 builds each batch in next() on the calling thread.
//
// With a target matcher (the trainer's: the labels matched to the model's grids), the worker
// that collates a batch also matches its targets, so the training step finds them done.
//
// An exception in a worker (an image deleted since verification, ...) is rethrown by next().
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
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
  bool rect = false;    // with augment: no mosaic, each sample letterboxed to its step's size
  uint64_t seed = 0;
  int workers = 0;        // --workers
  int queue_batches = 0;  // batches built ahead; 0 means max(2, workers)
  // When set: Batch::matched of every batch, made on the thread that collates it. Called from
  // several threads at once, so it must not touch what the trainer changes meanwhile.
  std::function<MatchedTargets(const Batch&)> match_targets = {};
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
  Sample build_sample(const Step& step, size_t i) const;
  Batch build(const Step& step) const;  // on the calling thread (workers = 0)
  // collate(), then the targets matched when there is a matcher.
  Batch finish(const Step& step, std::vector<Sample>& samples) const;
  void worker_loop();

  const Dataset& dataset_;
  std::vector<Step> plan_;
  int64_t epoch_;
  LoaderOptions options_;
  int queue_batches_;

  std::mutex mutex_;
  std::condition_variable space_;  // a consumer took a batch, or stopping
  std::condition_variable ready_;  // a batch (or an error) arrived
  // A batch whose samples are being built: the samples, and how many are still missing.
  struct Assembly {
    std::vector<Sample> samples;
    size_t missing = 0;
  };
  size_t next_step_ = 0, next_sample_ = 0;  // the next sample a worker takes
  size_t next_to_hand_out_ = 0;
  std::map<size_t, Assembly> assembling_;
  std::map<size_t, Batch> finished_;
  std::exception_ptr error_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace bareyolo::data
