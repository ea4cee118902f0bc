// tests/cuda/conv2d.cpp — the CUDA convolution (both paths: cuDNN, and im2col + cuBLAS) against
// the CPU reference on random inputs, forward outputs poisoned with NaN first, on yolov5n's
// convolution shapes: the 6x6 stride-2 stem, 3x3 stride-2 downsamples, 3x3 bottlenecks, 1x1
// layers with and without bias, odd sizes, and channel-slice views (Concat's zero-copy form),
// the forward also with its output's BatchNorm moments; in float32, and again with TF32 on.
//
// Tolerance (float32, TF32 off, the default): the GPU sums the same products in another order.
// For an output that sums `terms` products of values in [-1, 1], float rounding leaves an error
// far below terms * eps * 16 (eps = 1.2e-7); the check allows 2e-6 * terms absolute plus 1e-4
// relative. A wrong index or a missed element errs by O(1) (or is NaN), far outside that.
//
// Tolerance with TF32 on (cuda::set_tf32(true): cuDNN and cuBLAS may use tensor cores): each
// operand is rounded to TF32's 10-bit mantissa, a relative error of at most 2^-11 when rounded
// to nearest and 2^-10 when truncated (as some kernels do), and the products are summed in
// float. A product of two rounded operands in [-1, 1] is then off by at most 2 * 2^-10 = 2^-9
// (about 2e-3 of 1), so a sum of `terms` of them by at most 2^-9 * terms; the check allows
// 2e-3 * terms absolute (which holds the float32 allowance too) plus 1e-4 relative. A wrong
// index still errs by O(1) per term in many outputs, beyond that; a small slip may hide in it,
// but the float32 cases, which run the same code with FMA math, catch those (and would fail
// if TF32 leaked into them: its rounding is far beyond their tolerance).
#include <string>

#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/runtime/allocator.h"
#include "kernels/ops.h"
#include "tests/cuda/cuda_testing.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {

// How a case runs the GPU convolutions, and the tolerance that allows (derived above).
struct Math {
  const char* name;
  bool tf32;
  double rtol, atol_per_term;
};
constexpr Math kFloat32{"fp32", false, 1e-4, 2e-6};
constexpr Math kTf32{"tf32", true, 1e-4, 2e-3};

// Sets TF32 as `math` says for a scope, and off again when it ends (also when a check throws):
// off is the default every other test expects.
class MathScope {
 public:
  explicit MathScope(const Math& math) { cuda::set_tf32(math.tf32); }
  ~MathScope() { cuda::set_tf32(false); }
  MathScope(const MathScope&) = delete;
  MathScope& operator=(const MathScope&) = delete;
};

struct ConvCase {
  const char* name;
  Shape4 x;
  int c_out, kernel, stride, pad;
  bool bias;
};

// yolov5n's convolutions (channels as in the model; maps small and of odd sizes).
const ConvCase kCases[] = {
    {"stem 6x6 stride 2", {2, 3, 67, 61}, 16, 6, 2, 2, false},
    {"3x3 stride 2", {2, 16, 33, 31}, 32, 3, 2, 1, false},
    {"3x3 stride 1", {3, 8, 17, 13}, 8, 3, 1, 1, false},
    {"1x1", {2, 32, 20, 20}, 16, 1, 1, 0, false},
    {"1x1 with bias (Detect)", {2, 64, 5, 7}, 24, 1, 1, 0, true},
    {"3x3 stride 2 on 1 image", {1, 8, 9, 9}, 16, 3, 2, 1, false},
};

const char* path_name(cuda::ConvPath path) {
  return path == cuda::ConvPath::gemm ? "gemm" : "cudnn";
}

Tensor uniform(Rng& rng, Shape4 shape) { return random_tensor(rng, shape, -1.0, 1.0); }

void check_case(const ConvCase& c, cuda::ConvPath path, const Math& math, Rng& rng) {
  cuda::set_conv_path(path);
  const MathScope scope(math);
  const ops::Conv2dParams p{c.stride, c.stride, c.pad, c.pad};
  const Shape4 w_shape{c.c_out, c.x.c, c.kernel, c.kernel};
  const Shape4 y_shape{c.x.n, c.c_out, ops::conv_out_size(c.x.h, c.kernel, c.stride, c.pad),
                       ops::conv_out_size(c.x.w, c.kernel, c.stride, c.pad)};
  const std::string label = std::string(c.name) + " [" + path_name(path) + ", " + math.name + "] ";
  Tensor x = uniform(rng, c.x), w = uniform(rng, w_shape), b = uniform(rng, {1, c.c_out, 1, 1});
  Tensor dy = uniform(rng, y_shape);

  const int64_t k = c.x.c * c.kernel * c.kernel;
  compare_cuda_with_cpu(
      {x, w, b}, {Tensor::empty(y_shape)},
      [&](auto& in, auto& out) {
        ops::conv2d_forward<float>(in[0].template view<float>(), in[1].template view<float>(),
                                   c.bias ? in[2].template view<float>().data : nullptr, p,
                                   out[0].template view<float>());
      },
      (label + "forward").c_str(), true, math.rtol, math.atol_per_term * double(k));

  // With y's BatchNorm moments (ConvBnSilu's training forward), poisoned first: y again, and
  // per channel the mean and M2 over `count` values (M2 ~ count; the GPU sums in float).
  const int64_t count = y_shape.n * y_shape.plane();
  const Shape4 per_channel{1, c.c_out, 1, 1};
  compare_cuda_with_cpu(
      {x, w}, {Tensor::empty(y_shape), Tensor::empty(per_channel), Tensor::empty(per_channel)},
      [&](auto& in, auto& out) {
        ops::conv2d_forward<float>(in[0].template view<float>(), in[1].template view<float>(),
                                   nullptr, p, out[0].template view<float>(),
                                   out[1].template view<float>().data,
                                   out[2].template view<float>().data);
      },
      (label + "forward with moments").c_str(), true, 10 * math.rtol,
      math.atol_per_term * double(k) * double(count));

  // Backward outputs start random: the ops add into them, so they are not poisoned.
  compare_cuda_with_cpu(
      {dy, w}, {uniform(rng, c.x)},
      [&](auto& in, auto& out) {
        ops::conv2d_backward_data<float>(in[0].template view<float>(), in[1].template view<float>(),
                                         p, out[0].template view<float>());
      },
      (label + "backward data").c_str(), false, math.rtol,
      math.atol_per_term * double(c.c_out * c.kernel * c.kernel));

  compare_cuda_with_cpu(
      {x, dy}, {uniform(rng, w_shape), uniform(rng, {1, c.c_out, 1, 1})},
      [&](auto& in, auto& out) {
        ops::conv2d_backward_weight<float>(
            in[0].template view<float>(), in[1].template view<float>(), p,
            out[0].template view<float>(), c.bias ? out[1].template view<float>().data : nullptr);
      },
      (label + "backward weight and bias").c_str(), false, math.rtol,
      math.atol_per_term * double(count));
}

const cuda::ConvPath kPaths[] = {cuda::ConvPath::cudnn, cuda::ConvPath::gemm};

}  // namespace

TEST_CASE("cuda conv2d forward and backward equal the cpu on yolov5n shapes, both paths") {
  Rng rng(71);
  for (cuda::ConvPath path : kPaths)
    for (const ConvCase& c : kCases) check_case(c, path, kFloat32, rng);
}

TEST_CASE("cuda conv2d with TF32 on is within TF32 rounding of the cpu, both paths") {
  Rng rng(74);
  for (cuda::ConvPath path : kPaths)
    for (const ConvCase& c : kCases) check_case(c, path, kTf32, rng);
  CHECK_FALSE(cuda::tf32_enabled());  // restored for the tests that follow
}

TEST_CASE("cuda conv2d reads and writes channel slices (Concat without copies), both paths") {
  Rng rng(72);
  const ops::Conv2dParams p{1, 1, 1, 1};
  const Shape4 parent_x{2, 16, 11, 9}, parent_y{2, 24, 11, 9}, w_shape{8, 8, 3, 3};
  Tensor x = uniform(rng, parent_x), w = uniform(rng, w_shape), dy = uniform(rng, parent_y);
  const MathScope scope(kFloat32);
  const double rtol = kFloat32.rtol, atol_per_term = kFloat32.atol_per_term;
  for (cuda::ConvPath path : kPaths) {
    cuda::set_conv_path(path);
    const std::string label = std::string("slices [") + path_name(path) + "] ";
    // Input channels 3..10 of x; output channels 8..15 of a 24-channel Concat buffer.
    compare_cuda_with_cpu(
        {x, w}, {Tensor::empty(parent_y)},
        [&](auto& in, auto& out) {
          Tensor slice = out[0].channels(8, 16);
          ops::conv2d_forward<float>(in[0].channels(3, 11).template view<float>(),
                                     in[1].template view<float>(), nullptr, p,
                                     slice.template view<float>());
          out[0].channels(0, 8).zero();  // channels other producers own, zero on both devices
          out[0].channels(16, 24).zero();
        },
        (label + "forward").c_str(), true, rtol, atol_per_term * 72);
    compare_cuda_with_cpu(
        {dy, w}, {uniform(rng, parent_x)},
        [&](auto& in, auto& out) {
          Tensor slice = out[0].channels(3, 11);
          ops::conv2d_backward_data<float>(in[0].channels(8, 16).template view<float>(),
                                           in[1].template view<float>(), p,
                                           slice.template view<float>());
        },
        (label + "backward data").c_str(), false, rtol, atol_per_term * 72);
    compare_cuda_with_cpu(
        {x, dy}, {uniform(rng, w_shape)},
        [&](auto& in, auto& out) {
          ops::conv2d_backward_weight<float>(in[0].channels(3, 11).template view<float>(),
                                             in[1].channels(8, 16).template view<float>(), p,
                                             out[0].template view<float>(), nullptr);
        },
        (label + "backward weight").c_str(), false, rtol, atol_per_term * 2 * 99);
  }
}

TEST_CASE(
    "cuda conv2d repeats bit for bit, with no new device allocation after the first call, "
    "TF32 off and on") {
  Rng rng(73);
  const ops::Conv2dParams p{2, 2, 1, 1};
  const Shape4 x_shape{4, 16, 40, 40}, w_shape{32, 16, 3, 3}, y_shape{4, 32, 20, 20};
  const Device gpu = Device::cuda(0);
  Tensor x = uniform(rng, x_shape).to(gpu), w = uniform(rng, w_shape).to(gpu);
  Tensor dy = uniform(rng, y_shape).to(gpu);
  for (const Math& math : {kFloat32, kTf32})
    for (cuda::ConvPath path : kPaths) {
      CAPTURE(math.name);
      CAPTURE(path_name(path));
      cuda::set_conv_path(path);
      const MathScope scope(math);
      auto run = [&] {  // the three passes, from zeroed gradients
        Tensor y = Tensor::empty(y_shape, gpu), dx = Tensor::zeros(x_shape, gpu),
               dw = Tensor::zeros(w_shape, gpu);
        ops::conv2d_forward<float>(x.view<float>(), w.view<float>(), nullptr, p, y.view<float>());
        ops::conv2d_backward_data<float>(dy.view<float>(), w.view<float>(), p, dx.view<float>());
        ops::conv2d_backward_weight<float>(x.view<float>(), dy.view<float>(), p, dw.view<float>(),
                                           nullptr);
        return std::vector<std::vector<float>>{y.to_vector<float>(), dx.to_vector<float>(),
                                               dw.to_vector<float>()};
      };
      const auto first = run();  // chooses the algorithms, fills the cache
      const auto before = cuda::memory_stats(0);
      const auto second = run();
      const auto after = cuda::memory_stats(0);
      for (size_t i = 0; i < first.size(); ++i)
        check_close(second[i], first[i], 0.0, 0.0, "second run");
      CHECK(after.backing_allocations == before.backing_allocations);
      CHECK(after.cache_hits > before.cache_hits);
    }
}
