// data/loader.cpp — the threaded batch loader (see loader.h).
#include "data/loader.h"

#include <algorithm>
#include <optional>

#include "data/rng.h"
#include "engine/distributed/comm/progress_board.h"

namespace bareyolo::data {

Loader::Loader(const Dataset& dataset, EpochPlans epochs, const LoaderOptions& options)
    : dataset_(dataset),
      epochs_(std::move(epochs)),
      options_(options),
      queue_batches_(options.queue_batches > 0 ? options.queue_batches
                                               : std::max(2, options.workers)),
      next_epoch_to_plan_(epochs_.first) {
  for (int i = 0; i < options.workers; ++i) workers_.emplace_back([this] { worker_loop(); });
}

Loader::Loader(const Dataset& dataset, std::vector<Step> plan, int64_t epoch,
               const LoaderOptions& options)
    : Loader(dataset, {epoch, epoch + 1, [plan = std::move(plan)](int64_t) { return plan; }},
             options) {}

Loader::~Loader() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  space_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

Sample Loader::build_sample(const PlannedStep& planned, size_t i) const {
  const Step& step = planned.step;
  dist::note_progress();  // for the stall watch (progress_board.h)
  if (!options_.augment)
    return make_val_sample(dataset_, step.indices[i], options_.imgsz, step.width, step.height);
  SampleRng rng(options_.seed, uint64_t(planned.epoch), uint64_t(step.positions[i]));
  const std::optional<ImageSize> rect_canvas =
      options_.rect ? std::optional<ImageSize>({step.width, step.height}) : std::nullopt;
  return make_train_sample(dataset_, step.indices[i], options_.imgsz, options_.hyp, rng,
                           rect_canvas);
}

Batch Loader::build(const PlannedStep& planned) const {
  std::vector<Sample> samples;
  samples.reserve(planned.step.indices.size());
  for (size_t i = 0; i < planned.step.indices.size(); ++i)
    samples.push_back(build_sample(planned, i));
  return finish(planned.step, samples);
}

Batch Loader::finish(const Step& step, std::vector<Sample>& samples) const {
  Batch batch = collate(step, samples);
  if (options_.match_targets) batch.matched = options_.match_targets(batch);
  return batch;
}

bool Loader::planned(size_t index) {
  while (index >= next_to_hand_out_ + plan_.size() && next_epoch_to_plan_ < epochs_.end) {
    const int64_t epoch = next_epoch_to_plan_++;
    for (Step& step : epochs_.plan(epoch)) plan_.push_back({std::move(step), epoch});
    epoch_ends_.push_back(next_to_hand_out_ + plan_.size());
  }
  return index < next_to_hand_out_ + plan_.size();
}

void Loader::worker_loop() {
  while (true) {
    size_t step = 0, i = 0;
    const PlannedStep* planned_step = nullptr;  // stays valid until its batch is handed out
    try {
      std::unique_lock<std::mutex> lock(mutex_);
      space_.wait(lock, [&] {
        return stopping_ || error_ || next_step_ < next_to_hand_out_ + size_t(queue_batches_);
      });
      if (stopping_ || error_ || !planned(next_step_)) return;
      step = next_step_, i = next_sample_;
      planned_step = &plan_[step - next_to_hand_out_];
      const size_t size = planned_step->step.indices.size();
      if (i == 0) assembling_[step] = {std::vector<Sample>(size), size};
      if (++next_sample_ >= size) ++next_step_, next_sample_ = 0;
    } catch (...) {  // the next epoch's plan failed
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) error_ = std::current_exception();
      ready_.notify_all();
      return;
    }
    try {
      std::optional<Sample> sample;  // none for a step without samples
      if (i < planned_step->step.indices.size()) sample = build_sample(*planned_step, i);
      std::vector<Sample> complete;  // taken by the worker that adds a batch's last sample
      {
        std::lock_guard<std::mutex> lock(mutex_);
        Assembly& assembly = assembling_.at(step);
        if (sample) assembly.samples[i] = std::move(*sample), --assembly.missing;
        if (assembly.missing > 0) continue;
        complete = std::move(assembly.samples);
        assembling_.erase(step);
      }
      Batch batch = finish(planned_step->step, complete);
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
  std::unique_lock<std::mutex> lock(mutex_);
  const bool more = planned(next_to_hand_out_);
  if (!epoch_ends_.empty() && epoch_ends_.front() == next_to_hand_out_) {
    epoch_ends_.pop_front();  // the end of the epoch being handed out
    return std::nullopt;
  }
  if (!more) return std::nullopt;  // every epoch handed out
  if (workers_.empty()) {
    const PlannedStep planned_step = std::move(plan_.front());
    plan_.pop_front();
    ++next_to_hand_out_;
    lock.unlock();
    return build(planned_step);
  }
  ready_.wait(lock, [&] { return error_ || finished_.count(next_to_hand_out_) > 0; });
  if (error_) std::rethrow_exception(error_);
  Batch batch = std::move(finished_.at(next_to_hand_out_));
  finished_.erase(next_to_hand_out_);
  plan_.pop_front();
  ++next_to_hand_out_;
  lock.unlock();
  space_.notify_all();
  return batch;
}

}  // namespace bareyolo::data
