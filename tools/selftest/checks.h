// tools/selftest/checks.h — what the selftest's checks share (inputs, constants, the
// reference's double copies) and the two halves of its table: the kernels' ops
// (kernel_checks.cpp) and the model's (model_checks.cpp). Internal to
// tools/selftest/*.cpp; the interface is selftest.h.
#pragma once

#include <algorithm>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/ops.h"
#include "tools/selftest/selftest.h"

namespace bareyolo::selftest {

inline constexpr double kInfinity = std::numeric_limits<double>::infinity();

// A dense double copy on the host: the reference's form of an input.
inline Tensor in_double(const Tensor& t) { return Tensor::from_vector(t.to_doubles(), t.shape()); }

template <class T>
View<T> as(Tensor& t) {
  return t.view<T>();
}
template <class T>
T* ptr(Tensor& t) {
  return t.view<T>().data;
}

// ---- inputs ----------------------------------------------------------------------------------

// Seeded uniform float values in [lo, hi) with lo < hi, so never all zeros; a fixed seed per
// check makes a failure reproducible.
class Random {
 public:
  explicit Random(uint64_t seed) : engine_(seed) {}
  double value(double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(engine_);
  }
  Tensor uniform(Shape4 shape, double lo, double hi) {
    if (!(lo < hi))
      throw std::invalid_argument("selftest inputs in [" + std::to_string(lo) + ", " +
                                  std::to_string(hi) + "): the range must not be empty");
    std::vector<float> values(size_t(shape.numel()));
    for (float& v : values) v = float(value(lo, hi));
    return Tensor::from_vector(values, shape);
  }
  Tensor per_channel(int64_t channels, double lo, double hi) {
    return uniform({1, channels, 1, 1}, lo, hi);
  }

 private:
  std::mt19937_64 engine_;
};

// The maps of the elementwise, BatchNorm and pooling checks: two images, odd sizes.
inline constexpr Shape4 kMap{2, 6, 9, 7};
inline constexpr Shape4 kChannels{1, kMap.c, 1, 1};
inline constexpr Shape4 kFlat{1, 1, 1,
                              4099};  // the optimizer's flat buffers: not a multiple of a block
inline constexpr int64_t kPerChannel = kMap.n * kMap.h * kMap.w;
inline constexpr ops::BatchNormParams kBatchNorm{.eps = 1e-3, .momentum = 0.03};  // YOLOv5's

// The worst of check(item) over `items`: a check with several cases.
template <class Items, class CaseCheck>
double worst_over(const Items& items, const CaseCheck& check) {
  double worst = 0;
  for (const auto& item : items) worst = std::max(worst, check(item));
  return worst;
}

// The table's halves, in the report's order.
std::vector<Check>
kernel_checks();  // elementwise, convolution, batchnorm, bn+silu, pools, optimizer
std::vector<Check> model_checks();  // decode, NMS, the loss, training steps of the tiny model

}  // namespace bareyolo::selftest
