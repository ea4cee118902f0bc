// data/loader.h — builds the batches of one epoch, or of several in turn, ahead of the trainer
// on K threads of its own.
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
// A loader of several epochs (the trainer's) goes on into the next epoch's batches while the
// trainer finishes one (its last steps, validation, checkpoints): the first batches of an epoch
// are ready when it starts, instead of a loader's start-up each epoch.
//
// With a target matcher (the trainer's: the labels matched to the model's grids), the worker
// that collates a batch also matches its targets, so the training step finds them done.
//
// An exception in a worker (an image deleted since verification, ...) is rethrown by next().
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
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

// The epochs a loader builds, one after the other: epochs first .. end - 1, epoch e's steps
// plan(e), asked for (on a worker) when the loader reaches e.
struct EpochPlans {
  int64_t first = 0, end = 0;
  std::function<std::vector<Step>(int64_t epoch)> plan;
};

class Loader {
 public:
  Loader(const Dataset& dataset, EpochPlans epochs, const LoaderOptions& options);
  // The steps `plan` of epoch `epoch` alone.
  Loader(const Dataset& dataset, std::vector<Step> plan, int64_t epoch,
         const LoaderOptions& options);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // The next batch of the epoch being handed out, in step order, or nothing at its end; the
  // call after that starts the next epoch.
  std::optional<Batch> next();

 private:
  struct PlannedStep {
    Step step;
    int64_t epoch = 0;
  };
  Sample build_sample(const PlannedStep& planned, size_t i) const;
  Batch build(const PlannedStep& planned) const;  // on the calling thread (workers = 0)
  // collate(), then the targets matched when there is a matcher.
  Batch finish(const Step& step, std::vector<Sample>& samples) const;
  // Plans the epochs up to the one holding step `index`, if there are; true when plan_ holds
  // it. Called with mutex_ held.
  bool planned(size_t index);
  void worker_loop();

  const Dataset& dataset_;
  EpochPlans epochs_;
  LoaderOptions options_;
  int queue_batches_;

  // The steps planned and not yet handed out: plan_[i] is step next_to_hand_out_ + i, steps
  // counted over all the loader's epochs (a deque: appending keeps the references to the steps
  // the workers are building valid).
  std::deque<PlannedStep> plan_;
  int64_t next_epoch_to_plan_;
  std::deque<size_t> epoch_ends_;  // per planned epoch not yet ended: the index after its last

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
