// data/multi_scale.cpp — YOLOv5's multi-scale sizes and shapes (see multi_scale.h).
#include "data/multi_scale.h"

#include <algorithm>
#include <cmath>

#include "data/rng.h"

namespace bareyolo::data {

namespace {

// The draw's half-open interval [low, high), before rounding down to the stride.
struct DrawInterval {
  int low = 0, high = 0;
};
DrawInterval draw_interval(int imgsz, int stride) {
  return {int(imgsz * 0.5), int(imgsz * 1.5) + stride};
}

}  // namespace

SizeRange multi_scale_range(int imgsz, int stride) {
  const DrawInterval d = draw_interval(imgsz, stride);
  return {d.low / stride * stride, (d.high - 1) / stride * stride};
}

int multi_scale_size(uint64_t seed, int64_t iteration, int imgsz, int stride) {
  const DrawInterval d = draw_interval(imgsz, stride);
  SampleRng rng(seed, uint64_t(iteration), kMultiScaleStream);
  const int drawn = d.low + int(rng.below(uint64_t(d.high - d.low)));
  return drawn / stride * stride;
}

ImageSize multi_scale_shape(ImageSize batch, int size, int stride) {
  // In double, in YOLOv5's order of operations (side * factor / stride): see the header.
  const double factor = double(size) / std::max(batch.width, batch.height);
  if (factor == 1) return batch;
  auto scaled = [&](int side) { return int(std::ceil(side * factor / stride)) * stride; };
  return {scaled(batch.width), scaled(batch.height)};
}

}  // namespace bareyolo::data
