// data/loader.cpp — the threaded batch loader (see loader.h).
#include "data/loader.h"

#include <algorithm>
#include <optional>

#include "data/rng.h"
#include "engine/distributed/comm/progress_board.h"

namespace bareyolo::data {

Loader::Loader(const Dataset& dataset, std::vector<Step> plan, int64_t epoch,
               const LoaderOptions& options)
    : dataset_(dataset),
      plan_(std::move(plan)),
      epoch_(epoch),
      options_(options),
      queue_batches_(options.queue_batches > 0 ? options.queue_batches
                                               : std::max(2, options.workers)) {
  for (int i = 0; i < options.workers; ++i) workers_.emplace_back([this] { worker_loop(); });
}

Loader::~Loader() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  space_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

Sample Loader::build_sample(const Step& step, size_t i) const {
  dist::note_progress();  // for the stall watch (progress_board.h)
  if (!options_.augment)
    return make_val_sample(dataset_, step.indices[i], options_.imgsz, step.width, step.height);
  SampleRng rng(options_.seed, uint64_t(epoch_), uint64_t(step.positions[i]));
  const std::optional<ImageSize> rect_canvas =
      options_.rect ? std::optional<ImageSize>({step.width, step.height}) : std::nullopt;
  return make_train_sample(dataset_, step.indices[i], options_.imgsz, options_.hyp, rng,
                           rect_canvas);
}

Batch Loader::build(const Step& step) const {
  std::vector<Sample> samples;
  samples.reserve(step.indices.size());
  for (size_t i = 0; i < step.indices.size(); ++i) samples.push_back(build_sample(step, i));
  return finish(step, samples);
}

Batch Loader::finish(const Step& step, std::vector<Sample>& samples) const {
  Batch batch = collate(step, samples);
  if (options_.match_targets) batch.matched = options_.match_targets(batch);
  return batch;
}

void Loader::worker_loop() {
  while (true) {
    size_t step, i;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      space_.wait(lock, [&] {
        return stopping_ || error_ || next_step_ >= plan_.size() ||
               next_step_ < next_to_hand_out_ + size_t(queue_batches_);
      });
      if (stopping_ || error_ || next_step_ >= plan_.size()) return;
      step = next_step_, i = next_sample_;
      const size_t size = plan_[step].indices.size();
      if (i == 0) assembling_[step] = {std::vector<Sample>(size), size};
      if (++next_sample_ >= size) ++next_step_, next_sample_ = 0;
    }
    try {
      const Step& s = plan_[step];
      std::optional<Sample> sample;  // none for a step without samples
      if (i < s.indices.size()) sample = build_sample(s, i);
      std::vector<Sample> complete;  // taken by the worker that adds a batch's last sample
      {
        std::lock_guard<std::mutex> lock(mutex_);
        Assembly& assembly = assembling_.at(step);
        if (sample) assembly.samples[i] = std::move(*sample), --assembly.missing;
        if (assembly.missing > 0) continue;
        complete = std::move(assembly.samples);
        assembling_.erase(step);
      }
      Batch batch = finish(s, complete);
      std::lock_guard<std::mutex> lock(mutex_);
      finished_.emplace(step, std::move(batch));
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
    ready_.notify_all();
  }
}

std::optional<Batch> Loader::next() {
  if (next_to_hand_out_ >= plan_.size()) return std::nullopt;
  if (workers_.empty()) return build(plan_[next_to_hand_out_++]);
  std::unique_lock<std::mutex> lock(mutex_);
  ready_.wait(lock, [&] { return error_ || finished_.count(next_to_hand_out_) > 0; });
  if (error_) std::rethrow_exception(error_);
  Batch batch = std::move(finished_.at(next_to_hand_out_));
  finished_.erase(next_to_hand_out_);
  ++next_to_hand_out_;
  lock.unlock();
  space_.notify_all();
  return batch;
}

}  // namespace bareyolo::data
