// tools/selftest/checks.h — what the selftest's checks share: the tolerances (derived at the top
// of selftest.cpp), the reference's double copies, seeded inputs, and the table's parts, one
// function per group file. Internal to tools/selftest/*.cpp; the interface is selftest.h.
//
// Most checks were CUDA test cases before the selftest was the one harness; they keep those
// cases' seeds and draw their inputs in the same order, so a GPU runs the same ops on the same
// values as it did then (a former comparer evaluated its arguments right to left, GCC's order:
// its outputs' initial values were drawn before its inputs, which the draws below repeat).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/ops.h"
#include "models/loss/loss.h"
#include "models/yolo/yolo_model.h"
#include "tools/selftest/selftest.h"

namespace bareyolo::selftest {

inline constexpr double kInfinity = std::numeric_limits<double>::infinity();

// ---- tolerances: each derived at the top of selftest.cpp -------------------------------------

inline constexpr double kExact = 0;                // moves, comparisons; the CPU's op in bf16/float
inline constexpr double kFewRoundings = 1e-6;      // a few float roundings per element
inline constexpr double kTranscendental = 1e-5;    // expf, log1pf and the formulas chaining them
inline constexpr double kFloatSums = 1e-4;         // float sums over many terms in another order
inline constexpr double kLargeMeanMoments = 1e-3;  // moments of values 1000 x their spread
inline constexpr double kDoubleSums = 1e-12;       // double sums of exact terms in another order
inline constexpr double kDoubleLoss = 1e-10;    // the loss's values: double formulas on both sides
inline constexpr double kBf16Step = 1.0 / 128;  // one bf16 step, 2^-7
inline constexpr double kBf16TwoSteps = 1.0 / 64;  // a bias added after cuDNN's bf16 rounding
inline constexpr double kTf32 = 1.0 / 32;          // operands rounded to TF32's 10-bit mantissa
inline constexpr double kTinyGradients = 1e-2;     // a step of the tiny model: ~25 layers and back
inline constexpr double kTinyLosses = 1e-3;        // three Solver steps of the tiny model

// ---- tensors ---------------------------------------------------------------------------------

// A dense double copy on the host: the reference's form of a float input.
inline Tensor in_double(const Tensor& t) { return Tensor::from_vector(t.to_doubles(), t.shape()); }

// A tensor's view in the kernels' element type; a channel slice may be passed as it is made
// (the view shares the sliced tensor's storage, which the caller's tensor keeps alive).
template <class T>
View<T> as(Tensor t) {
  return t.view<T>();
}
template <class T>
T* ptr(Tensor t) {
  return t.view<T>().data;
}

// `t` with channels [begin, end) of every image set to NaN: the initial value of an output of
// which the op overwrites only that slice (the rest must keep its values, which are compared).
Tensor poisoned_channels(const Tensor& t, int64_t begin, int64_t end);

// ---- inputs ----------------------------------------------------------------------------------

// Seeded uniform values in [lo, hi) with lo < hi, so never all zeros; a fixed seed per check
// makes a failure reproducible. Each draw takes the engine's next values in order, as the former
// CUDA tests' generators did (std::uniform_*_distribution over one std::mt19937_64).
class Random {
 public:
  explicit Random(uint64_t seed) : engine_(seed) {}
  double value(double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(engine_);
  }
  int integer(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(engine_); }
  std::vector<double> values(int64_t count, double lo, double hi) {
    std::vector<double> drawn(static_cast<size_t>(count));
    for (double& v : drawn) v = value(lo, hi);
    return drawn;
  }
  std::vector<float> floats(int64_t count, double lo, double hi) {
    if (!(lo < hi))
      throw std::invalid_argument("selftest inputs in [" + std::to_string(lo) + ", " +
                                  std::to_string(hi) + "): the range must not be empty");
    std::vector<float> drawn(static_cast<size_t>(count));
    for (float& v : drawn) v = float(value(lo, hi));
    return drawn;
  }
  Tensor uniform(Shape4 shape, double lo, double hi) {
    return Tensor::from_vector(floats(shape.numel(), lo, hi), shape);
  }
  // uniform() rounded to bf16: the inputs of the bf16 ops.
  Tensor uniform_bf16(Shape4 shape, double lo, double hi) {
    return uniform(shape, lo, hi).converted(DType::bf16);
  }
  Tensor per_channel(int64_t channels, double lo, double hi) {
    return uniform({1, channels, 1, 1}, lo, hi);
  }
  // Values from {0, 1, 2} (rarely 3): maps full of ties, where "the first maximum" of a pooling
  // window decides every gradient.
  Tensor tied(Shape4 shape) {
    std::vector<float> drawn = floats(shape.numel(), 0, 3);
    for (float& v : drawn) v = std::floor(v);
    return Tensor::from_vector(drawn, shape);
  }
  // Draws what a former test drew for an output that now starts as NaN instead (poisoned()), so
  // that the draws after it, and the inputs they make, stay the same.
  void skip(Shape4 shape) { floats(shape.numel(), -1, 1); }
  std::mt19937_64& engine() { return engine_; }

 private:
  std::mt19937_64 engine_;
};

// The worst of check(item) over `items`: a check with several cases.
template <class Items, class CaseCheck>
double worst_over(const Items& items, const CaseCheck& check) {
  double worst = 0;
  for (const auto& item : items) worst = std::max(worst, check(item));
  return worst;
}

// ---- the tiny model (models/yolov5-tiny.yaml): its head for decode and loss, its training -----

inline constexpr int kTinyClasses = 2, kTinyImageSize = 64;
models::ModelConfig tiny_config();
// Random raw head outputs of `model` for `images` images of kTinyImageSize pixels.
std::vector<Tensor> random_head(const models::DetectionModel& model, Random& random, int64_t images,
                                double lo, double hi);
// Labels spread over the images and classes (normalised centres and sizes, YOLOv5's rows).
std::vector<models::LabelRow> random_labels(Random& random, int images, int count);
models::LossOptions tiny_loss_options();
std::vector<Tensor> on_device(const std::vector<Tensor>& tensors, const Device& device);

// ---- the table's parts, in the report's order; one file each (<group>_checks.cpp) -------------

std::vector<Check> elementwise_checks();
std::vector<Check> convolution_checks();
std::vector<Check> batchnorm_checks();
std::vector<Check> bn_silu_checks();
std::vector<Check> pool_checks();
std::vector<Check> optimizer_checks();
std::vector<Check> bf16_checks();  // bf16_checks.cpp and bf16_batchnorm_checks.cpp
std::vector<Check> bf16_batchnorm_checks();
std::vector<Check> detect_checks();
std::vector<Check> loss_checks();
std::vector<Check> training_checks();

}  // namespace bareyolo::selftest
