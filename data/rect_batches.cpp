// data/rect_batches.cpp — YOLOv5's rectangular batch shapes (see rect_batches.h).
#include "data/rect_batches.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace bareyolo::data {

namespace {

double aspect_ratio(const ImageRecord& record) { return double(record.height) / record.width; }

int stride_multiple(double side, const RectShapeOptions& o) {
  return int(std::ceil(side * o.imgsz / o.stride + o.pad)) * o.stride;
}

}  // namespace

std::vector<int64_t> aspect_ratio_order(const Dataset& dataset) {
  std::vector<int64_t> order(size_t(dataset.size()));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return aspect_ratio(dataset.record(a)) < aspect_ratio(dataset.record(b));
  });
  return order;
}

ImageSize rect_batch_shape(const Dataset& dataset, std::span<const int64_t> images,
                           const RectShapeOptions& options) {
  if (images.empty()) throw std::logic_error("rect_batch_shape: a batch without images");
  double min_ar = INFINITY, max_ar = 0;
  for (int64_t index : images) {
    const double ar = aspect_ratio(dataset.record(index));
    min_ar = std::min(min_ar, ar), max_ar = std::max(max_ar, ar);
  }
  double h = 1, w = 1;
  if (max_ar < 1)
    h = max_ar;
  else if (min_ar > 1)
    w = 1 / min_ar;
  return {stride_multiple(w, options), stride_multiple(h, options)};
}

}  // namespace bareyolo::data
