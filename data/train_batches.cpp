// data/train_batches.cpp — square, rectangular and multi-scale training batches (see
// train_batches.h).
#include "data/train_batches.h"

#include <algorithm>
#include <span>

#include "data/multi_scale.h"
#include "data/rect_batches.h"

namespace bareyolo::data {

std::vector<int64_t> training_order(const Dataset& dataset, bool rect) {
  return rect ? aspect_ratio_order(dataset) : std::vector<int64_t>{};
}

std::vector<Step> training_plan(const Dataset& dataset, const DistributedSampler& sampler,
                                int64_t epoch, const TrainBatchOptions& options) {
  std::vector<Step> plan = sampler.plan_epoch(epoch, options.imgsz);
  if (options.rect) {
    // Global batch t is positions [t B, (t + 1) B) of the epoch's sequence; those past the
    // dataset's size repeat its first images and take no part in the shape.
    const std::vector<int64_t> sequence = sampler.epoch_sequence(epoch);
    const size_t batch = size_t(sampler.global_batch()), images = size_t(sampler.dataset_size());
    for (Step& step : plan) {
      const size_t begin = size_t(step.step) * batch;
      const size_t end = std::min(begin + batch, images);
      const ImageSize canvas =
          rect_batch_shape(dataset, std::span(sequence).subspan(begin, end - begin),
                           {.imgsz = options.imgsz, .stride = options.stride, .pad = 0.0});
      step.width = canvas.width, step.height = canvas.height;
    }
  }
  if (options.multi_scale)
    for (Step& step : plan) {
      const int64_t iteration = epoch * sampler.steps_per_epoch() + step.step;
      const int size = multi_scale_size(options.seed, iteration, options.imgsz, options.stride);
      const ImageSize input = multi_scale_shape({step.width, step.height}, size, options.stride);
      step.input_width = input.width, step.input_height = input.height;
    }
  return plan;
}

}  // namespace bareyolo::data
