// data/val_batches.cpp — square or rectangular validation batches (see val_batches.h).
#include "data/val_batches.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace bareyolo::data {

namespace {

int stride_multiple(double ratio, const ValBatchOptions& o) {
  return static_cast<int>(std::ceil(ratio * o.imgsz / o.stride + o.pad)) * o.stride;
}

void set_rect_shape(const Dataset& dataset, Step& step, const ValBatchOptions& options) {
  double min_ar = INFINITY, max_ar = 0;
  for (int64_t index : step.indices) {
    const ImageRecord& r = dataset.record(index);
    double ar = double(r.height) / r.width;
    min_ar = std::min(min_ar, ar), max_ar = std::max(max_ar, ar);
  }
  double h = 1, w = 1;
  if (max_ar < 1)
    h = max_ar;
  else if (min_ar > 1)
    w = 1 / min_ar;
  step.height = stride_multiple(h, options);
  step.width = stride_multiple(w, options);
}

}  // namespace

std::vector<Step> validation_plan(const Dataset& dataset, const ValBatchOptions& options) {
  if (options.batch < 1) throw std::invalid_argument("validation batch must be >= 1");
  std::vector<int64_t> order(static_cast<size_t>(dataset.size()));
  std::iota(order.begin(), order.end(), 0);
  if (options.rect)
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      const ImageRecord &ra = dataset.record(a), &rb = dataset.record(b);
      return double(ra.height) / ra.width < double(rb.height) / rb.width;
    });
  std::vector<Step> plan;
  for (size_t start = 0; start < order.size(); start += size_t(options.batch)) {
    Step step;
    step.step = int64_t(plan.size());
    for (size_t i = start; i < std::min(order.size(), start + size_t(options.batch)); ++i) {
      step.indices.push_back(order[i]);
      step.positions.push_back(int64_t(i));
    }
    step.width = step.height = options.imgsz;
    if (options.rect) set_rect_shape(dataset, step, options);
    plan.push_back(std::move(step));
  }
  return plan;
}

}  // namespace bareyolo::data
