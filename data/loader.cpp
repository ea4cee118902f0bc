// data/loader.cpp — the threaded batch loader (see loader.h).
#include "data/loader.h"

#include <algorithm>

#include "data/rng.h"

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

Batch Loader::build(const Step& step) const {
  std::vector<Sample> samples;
  samples.reserve(step.indices.size());
  for (size_t i = 0; i < step.indices.size(); ++i) {
    if (options_.augment) {
      SampleRng rng(options_.seed, uint64_t(epoch_), uint64_t(step.positions[i]));
      samples.push_back(
          make_train_sample(dataset_, step.indices[i], options_.imgsz, options_.hyp, rng));
    } else {
      samples.push_back(
          make_val_sample(dataset_, step.indices[i], options_.imgsz, step.width, step.height));
    }
  }
  return collate(step.step, samples, step.width, step.height);
}

void Loader::worker_loop() {
  while (true) {
    size_t step;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      space_.wait(lock, [&] {
        return stopping_ || error_ || next_to_build_ >= plan_.size() ||
               next_to_build_ < next_to_hand_out_ + size_t(queue_batches_);
      });
      if (stopping_ || error_ || next_to_build_ >= plan_.size()) return;
      step = next_to_build_++;
    }
    try {
      Batch batch = build(plan_[step]);
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
