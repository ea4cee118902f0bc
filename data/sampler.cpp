// data/sampler.cpp — the global-order distributed sampler (see sampler.h).
#include "data/sampler.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

#include "data/rng.h"

namespace bareyolo::data {

void require_divisible_batch(int batch, int world_size) {
  const int b = batch, w = world_size;
  if (b >= 1 && b % w == 0) return;
  const int lower = std::max(w, b / w * w);
  const int upper = std::max((b / w + 1) * w, lower + w);  // batch < world: world and 2 world
  throw std::invalid_argument(
      "batch=" + std::to_string(b) +
      " is the global batch and must be divisible by world_size=" + std::to_string(w) +
      " (each rank takes batch/world_size images); use batch=" + std::to_string(lower) +
      " or batch=" + std::to_string(upper));
}

DistributedSampler::DistributedSampler(const SamplerOptions& options) : options_(options) {
  const int b = options.global_batch, w = options.world_size;
  if (options.dataset_size <= 0)
    throw std::invalid_argument("the sampler needs a dataset with at least one image");
  if (w < 1 || options.rank < 0 || options.rank >= w)
    throw std::invalid_argument("rank=" + std::to_string(options.rank) +
                                " is not in [0, world_size=" + std::to_string(w) + ")");
  require_divisible_batch(b, w);
  if (!options.order.empty()) {
    std::vector<int64_t> sorted = options.order;
    std::sort(sorted.begin(), sorted.end());
    bool permutation = sorted.size() == size_t(options.dataset_size);
    for (size_t i = 0; permutation && i < sorted.size(); ++i) permutation = sorted[i] == int64_t(i);
    if (!permutation || options.shuffle)
      throw std::logic_error("DistributedSampler: `order` must be a permutation of the " +
                             std::to_string(options.dataset_size) +
                             " images, given without shuffling");
  }
  steps_ = options.drop_last ? options.dataset_size / b : (options.dataset_size + b - 1) / b;
  if (steps_ == 0)
    throw std::invalid_argument("drop_last with batch=" + std::to_string(b) + " and only " +
                                std::to_string(options.dataset_size) +
                                " images leaves no step; lower the batch or keep the remainder");
}

std::vector<int64_t> DistributedSampler::epoch_sequence(int64_t epoch) const {
  const int64_t n = options_.dataset_size;
  std::vector<int64_t> order = options_.order;
  if (order.empty()) {
    order.resize(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
  }
  if (options_.shuffle) {
    SampleRng rng(options_.seed, uint64_t(epoch), kShuffleStream);
    for (int64_t i = n - 1; i > 0; --i)
      std::swap(order[size_t(i)], order[rng.below(uint64_t(i) + 1)]);
  }
  std::vector<int64_t> sequence(static_cast<size_t>(steps_ * options_.global_batch));
  for (size_t i = 0; i < sequence.size(); ++i) sequence[i] = order[i % size_t(n)];
  return sequence;
}

std::vector<Step> DistributedSampler::plan_epoch(int64_t epoch, int imgsz) const {
  std::vector<int64_t> sequence = epoch_sequence(epoch);
  const int64_t b = options_.global_batch, share = per_rank_batch();
  std::vector<Step> plan(static_cast<size_t>(steps_));
  for (int64_t t = 0; t < steps_; ++t) {
    Step& step = plan[size_t(t)];
    step.step = t;
    step.width = step.height = imgsz;
    for (int64_t j = 0; j < share; ++j) {
      int64_t position = t * b + options_.rank * share + j;
      step.positions.push_back(position);
      step.indices.push_back(sequence[size_t(position)]);
    }
  }
  return plan;
}

}  // namespace bareyolo::data
