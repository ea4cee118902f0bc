// data/val_batches.cpp — square or rectangular validation batches (see val_batches.h).
#include "data/val_batches.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "data/rect_batches.h"

namespace bareyolo::data {

std::vector<Step> validation_plan(const Dataset& dataset, const ValBatchOptions& options) {
  if (options.batch < 1) throw std::invalid_argument("validation batch must be >= 1");
  std::vector<int64_t> order(static_cast<size_t>(dataset.size()));
  std::iota(order.begin(), order.end(), 0);
  if (options.rect) order = aspect_ratio_order(dataset);
  std::vector<Step> plan;
  for (size_t start = 0; start < order.size(); start += size_t(options.batch)) {
    Step step;
    step.step = int64_t(plan.size());
    for (size_t i = start; i < std::min(order.size(), start + size_t(options.batch)); ++i) {
      step.indices.push_back(order[i]);
      step.positions.push_back(int64_t(i));
    }
    step.width = step.height = options.imgsz;
    if (options.rect) {
      const ImageSize shape =
          rect_batch_shape(dataset, step.indices,
                           {.imgsz = options.imgsz, .stride = options.stride, .pad = options.pad});
      step.width = shape.width, step.height = shape.height;
    }
    plan.push_back(std::move(step));
  }
  return plan;
}

}  // namespace bareyolo::data
