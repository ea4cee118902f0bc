// tests/unit/conv2d.cpp — conv2d forward against the 7-loop definition of a convolution,
// the backwards against finite differences (double) and the float backward against the
// double one, on shapes that reach every path: 1x1 without im2col, 1x1 with stride or
// padding, the 6x6 stride-2 stem, non-square kernels and images, batch 1, strided views,
// and every 3x3 stride-1 case again by Winograd F(2x2, 3x3); and the BatchNorm moments the
// forward can gather as it writes.
#include <cmath>
#include <limits>
#include <stdexcept>
#include <type_traits>

#include "kernels/cpu/cache_sizes.h"
#include "kernels/ops.h"
#include "tests/support/testing.h"
#include "tests/support/winograd_use.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {

struct ConvCase {
  Shape4 x;
  int64_t c_out, kernel_h, kernel_w;
  ops::Conv2dParams params;  // stride_h, stride_w, pad_h, pad_w
  bool bias;

  Shape4 weight() const { return {c_out, x.c, kernel_h, kernel_w}; }
  Shape4 y() const {
    return {x.n, c_out, ops::conv_out_size(x.h, kernel_h, params.stride_h, params.pad_h),
            ops::conv_out_size(x.w, kernel_w, params.stride_w, params.pad_w)};
  }
};

const std::vector<ConvCase> kCases = {
    {{1, 3, 7, 5}, 4, 3, 3, {1, 1, 1, 1}, true},     // batch 1, odd non-square image
    {{2, 4, 6, 7}, 3, 1, 1, {1, 1, 0, 0}, false},    // 1x1 stride 1: no im2col
    {{1, 5, 6, 6}, 6, 1, 1, {1, 1, 0, 0}, true},     // Detect's 1x1 with bias, batch 1
    {{3, 3, 13, 11}, 4, 6, 6, {2, 2, 2, 2}, false},  // YOLOv5's stem
    {{2, 3, 9, 8}, 5, 3, 3, {2, 2, 1, 1}, true},     // downsampling 3x3
    {{2, 2, 8, 9}, 3, 5, 5, {1, 1, 2, 2}, false},    // padding 2
    {{2, 3, 7, 6}, 2, 1, 1, {2, 2, 1, 1}, false},    // 1x1 with stride and padding
    {{2, 2, 9, 7}, 3, 3, 1, {2, 1, 1, 0}, true},     // non-square kernel, stride, padding
    {{2, 3, 12, 37}, 3, 3, 3, {2, 2, 1, 1}, false},  // downsampling, rows long enough for SIMD
    {{2, 2, 5, 6}, 2, 3, 3, {1, 1, 0, 0}, false},    // no padding
    {{1, 2, 4, 3}, 3, 5, 5, {1, 1, 2, 2}, true},     // kernel larger than the image
    // larger batches and maps: backward weight's partial sums per image group (conv2d.cpp;
    // batch 10 makes groups of two images) and products the GEMM splits over the pool
    {{5, 3, 16, 16}, 4, 3, 3, {1, 1, 1, 1}, false},
    {{10, 2, 6, 6}, 3, 3, 3, {1, 1, 1, 1}, false},
    {{6, 4, 12, 12}, 3, 1, 1, {1, 1, 0, 0}, true},
    {{3, 2, 24, 24}, 2, 3, 3, {1, 1, 1, 1}, false},
    // column matrices over conv2d.cpp's band size: processed in bands of output rows, the
    // last one shorter
    {{1, 16, 40, 40}, 2, 3, 3, {1, 1, 1, 1}, true},
    {{1, 3, 130, 130}, 2, 6, 6, {2, 2, 2, 2}, false},
    // shaped for Winograd F(2x2, 3x3) (kernels/cpu/winograd.h), which every 3x3 stride-1 case
    // also runs (for_each_case): odd maps (clipped tiles), paddings 0, 1 and 2, a bias, a
    // batch of groups, and a map of several bands of tile rows
    {{2, 8, 9, 11}, 8, 3, 3, {1, 1, 1, 1}, true},
    {{1, 9, 6, 7}, 8, 3, 3, {1, 1, 0, 0}, false},
    {{2, 8, 5, 6}, 10, 3, 3, {1, 1, 2, 2}, true},
    {{10, 8, 4, 4}, 8, 3, 3, {1, 1, 1, 1}, false},
    {{1, 16, 30, 130}, 8, 3, 3, {1, 1, 1, 1}, false},
};

// Gaps between images of the activation views: odd cases have strided inputs, cases
// not divisible by three strided outputs.
int64_t x_gap(size_t case_index) { return case_index % 2 ? 7 : 0; }
int64_t y_gap(size_t case_index) { return case_index % 3 ? 5 : 0; }

// The definition: y[n][o][r][c] = bias[o] + sum over (i, kr, kc) of
// x[n][i][r*sh - ph + kr][c*sw - pw + kc] * w[o][i][kr][kc], out-of-image x being 0.
std::vector<double> direct_conv2d(const std::vector<double>& x, const std::vector<double>& w,
                                  const std::vector<double>& bias, const ConvCase& cc) {
  const Shape4 xs = cc.x, ys = cc.y();
  const auto& p = cc.params;
  std::vector<double> y(static_cast<size_t>(ys.numel()));
  for (int64_t n = 0; n < ys.n; ++n)
    for (int64_t o = 0; o < ys.c; ++o)
      for (int64_t r = 0; r < ys.h; ++r)
        for (int64_t c = 0; c < ys.w; ++c) {
          double sum = cc.bias ? bias[o] : 0.0;
          for (int64_t i = 0; i < xs.c; ++i)
            for (int64_t kr = 0; kr < cc.kernel_h; ++kr)
              for (int64_t kc = 0; kc < cc.kernel_w; ++kc) {
                int64_t ir = r * p.stride_h - p.pad_h + kr, ic = c * p.stride_w - p.pad_w + kc;
                if (ir < 0 || ir >= xs.h || ic < 0 || ic >= xs.w) continue;
                sum += x[((n * xs.c + i) * xs.h + ir) * xs.w + ic] *
                       w[((o * xs.c + i) * cc.kernel_h + kr) * cc.kernel_w + kc];
              }
          y[((n * ys.c + o) * ys.h + r) * ys.w + c] = sum;
        }
  return y;
}

// per_case(case, k) for every case by im2col + GEMM, then again by Winograd for the cases it
// applies to (whatever the measured rule would pick for their small maps).
template <class PerCase>
void for_each_case(PerCase per_case) {
  for (cpu::WinogradUse use : {cpu::WinogradUse::kNever, cpu::WinogradUse::kAlways}) {
    ScopedWinogradUse scope(use);
    const std::string path = use == cpu::WinogradUse::kAlways ? "Winograd" : "im2col + GEMM";
    for (size_t k = 0; k < kCases.size(); ++k) {
      const ConvCase& cc = kCases[k];
      const Shape4 y = cc.y();
      const cpu::ConvGeometry g{cc.x.c,
                                cc.x.h,
                                cc.x.w,
                                cc.kernel_h,
                                cc.kernel_w,
                                cc.params.stride_h,
                                cc.params.stride_w,
                                cc.params.pad_h,
                                cc.params.pad_w,
                                y.h,
                                y.w};
      if (use == cpu::WinogradUse::kAlways && !cpu::winograd_applies(g)) continue;
      CAPTURE(k);
      CAPTURE(path);
      per_case(cc, k);
    }
  }
}

template <class T>
constexpr double forward_tolerance() {
  return std::is_same_v<T, float> ? 2e-5 : 1e-12;
}

}  // namespace

TEST_CASE_TEMPLATE("conv2d forward matches the direct loop on strided and poisoned views", T, float,
                   double) {
  Rng rng(101);
  for_each_case([&](const ConvCase& cc, size_t k) {
    StridedBuffer<T> x(cc.x, x_gap(k), rng), y(cc.y(), y_gap(k), rng);
    y.poison();
    std::vector<double> w = random_vector(rng, cc.weight().numel());
    std::vector<double> bias = random_vector(rng, cc.c_out);
    std::vector<T> w_t = convert<T>(w), bias_t = convert<T>(bias);

    ops::conv2d_forward<T>(x.view(), dense_view<const T>(w_t.data(), cc.weight()),
                           cc.bias ? bias_t.data() : nullptr, cc.params, y.view());
    std::vector<double> expected =
        direct_conv2d(x.values(), convert<double>(w_t), convert<double>(bias_t), cc);
    check_close(y.values(), expected, forward_tolerance<T>(), forward_tolerance<T>(),
                "conv2d forward y");
  });
}

TEST_CASE("conv2d backward data and weight pass the gradient check") {
  Rng rng(102);
  for_each_case([&](const ConvCase& cc, size_t) {
    const Shape4 xs = cc.x, ws = cc.weight(), ys = cc.y();
    std::vector<double> x = random_vector(rng, xs.numel());
    std::vector<double> w = random_vector(rng, ws.numel());
    std::vector<double> bias = random_vector(rng, cc.c_out);
    GradCheck check;
    check.inputs = {&x, &w};
    check.names = {"x", "weight"};
    if (cc.bias) {
      check.inputs.push_back(&bias);
      check.names.push_back("bias");
    }
    check.max_checks_per_input = 60;
    // The loss is linear in each input, so central differences are exact at any step; a large
    // one keeps the rounding of a loss summed over the 31200 outputs of the largest case (about
    // 1e-11) from showing, which at the default 1e-6 it did, by 2e-6.
    check.step = 1e-2;
    check.forward = [&] {
      std::vector<double> y(static_cast<size_t>(ys.numel()));
      ops::conv2d_forward<double>(
          dense_view<const double>(x.data(), xs), dense_view<const double>(w.data(), ws),
          cc.bias ? bias.data() : nullptr, cc.params, dense_view(y.data(), ys));
      return y;
    };
    check.backward = [&](const std::vector<double>& dy, std::vector<std::vector<double>>& d) {
      ops::conv2d_backward_data<double>(dense_view(dy.data(), ys),
                                        dense_view<const double>(w.data(), ws), cc.params,
                                        dense_view(d[0].data(), xs));
      ops::conv2d_backward_weight<double>(
          dense_view<const double>(x.data(), xs), dense_view(dy.data(), ys), cc.params,
          dense_view(d[1].data(), ws), cc.bias ? d[2].data() : nullptr);
    };
    check.run(rng);
  });
}

namespace {

// dx, dweight and dbias (added onto fixed starting values) for one case in precision T,
// with x, dy and dx in strided views; the data depends only on the case index.
template <class T>
std::vector<std::vector<double>> conv2d_gradients(const ConvCase& cc, size_t k) {
  const uint64_t seed = 1000 + k;
  StridedBuffer<T> x = StridedBuffer<T>::seeded(cc.x, x_gap(k), seed);
  StridedBuffer<T> dx = StridedBuffer<T>::seeded(cc.x, y_gap(k), seed + 1);
  StridedBuffer<T> dy = StridedBuffer<T>::seeded(cc.y(), x_gap(k) + 2, seed + 2);
  Rng rng(seed + 3);
  std::vector<T> w = random_vector<T>(rng, cc.weight().numel());
  std::vector<T> dw = random_vector<T>(rng, cc.weight().numel());
  std::vector<T> dbias = random_vector<T>(rng, cc.c_out);

  ops::conv2d_backward_data<T>(dy.view(), dense_view<const T>(w.data(), cc.weight()), cc.params,
                               dx.view());
  ops::conv2d_backward_weight<T>(x.view(), dy.view(), cc.params, dense_view(dw.data(), cc.weight()),
                                 dbias.data());
  return {dx.values(), convert<double>(dw), convert<double>(dbias)};
}

}  // namespace

// ConvBnSilu's forward in training: the convolution also gives its output's BatchNorm moments,
// taken image by image on the GEMM path and after the whole output on Winograd's.
TEST_CASE_TEMPLATE("conv2d forward's moments are batchnorm_moments of its output, bit for bit", T,
                   float, double) {
  Rng rng(102);
  for_each_case([&](const ConvCase& cc, size_t k) {
    StridedBuffer<T> x(cc.x, x_gap(k), rng);
    const std::vector<T> w = convert<T>(random_vector(rng, cc.weight().numel()));
    const std::vector<T> bias = convert<T>(random_vector(rng, cc.c_out));
    const View<const T> wv = dense_view<const T>(w.data(), cc.weight());
    const T* b = cc.bias ? bias.data() : nullptr;
    StridedBuffer<T> y_alone(cc.y(), y_gap(k), rng);
    ops::conv2d_forward<T>(x.view(), wv, b, cc.params, y_alone.view());
    std::vector<T> mean_ref(cc.c_out), m2_ref(cc.c_out);
    ops::batchnorm_moments<T>(View<const T>(y_alone.view()), mean_ref.data(), m2_ref.data());
    for (int threads : {1, 2}) {
      CAPTURE(threads);
      const PoolThreads pool(threads);
      StridedBuffer<T> y(cc.y(), y_gap(k), rng);
      y.poison();
      std::vector<T> mean(cc.c_out, std::numeric_limits<T>::quiet_NaN()), m2 = mean;
      ops::conv2d_forward<T>(x.view(), wv, b, cc.params, y.view(), mean.data(), m2.data());
      check_close(y.values(), y_alone.values(), 0, 0, "y with moments");
      check_close(mean, mean_ref, 0, 0, "the convolution's mean");
      check_close(m2, m2_ref, 0, 0, "the convolution's M2");
    }
  });
}

TEST_CASE("conv2d float backward matches the double backward on strided views") {
  for_each_case([](const ConvCase& cc, size_t k) {
    auto single = conv2d_gradients<float>(cc, k);
    auto reference = conv2d_gradients<double>(cc, k);
    check_close(single[0], reference[0], 1e-4, 1e-4, "conv2d float dx");
    check_close(single[1], reference[1], 1e-4, 1e-4, "conv2d float dweight");
    check_close(single[2], reference[2], 1e-4, 1e-4, "conv2d float dbias");
  });
}

TEST_CASE("conv2d backward gives identical bits on one two and three threads") {
  for_each_case([&](const ConvCase& cc, size_t k) {
    std::vector<std::vector<std::vector<double>>> results;
    for (int threads : {1, 2, 3}) {
      const PoolThreads pool(threads);
      results.push_back(conv2d_gradients<float>(cc, k));
    }
    for (size_t t = 1; t < results.size(); ++t) CHECK(results[t] == results[0]);
  });
}

// Backward weight where dW is large (over conv2d.cpp's kMaxPartialWeights = 65536 values: the
// deep layers), where the images' column matrices are written together and summed by one
// gemm_sum per chunk of max_chunk_bytes() (two L2s: the chunkings named here are those of a
// 1 MB L2, 2 MB chunks; another L2 cuts the same shapes otherwise): a 1x1 (no column matrix,
// the whole batch one sum), a 3x3 whose images fill one chunk each (three chunks), a 3x3 of
// several images per chunk with stride 2, and a 3x3 whose one image is over a chunk (band by
// band). dW starts random (it is added to), x and dy are strided views; checked against the
// definition in double, float and double, and for the same bits on one, two and three threads.
TEST_CASE("conv2d backward weight of a large dW matches the definition on every chunking") {
  ScopedWinogradUse scope(cpu::WinogradUse::kNever);
  // And, on any L2, 3 images of which two fill a chunk in double (each 0.8 of an L2): the last
  // chunk holds one image.
  const int64_t side =
      std::llround(std::sqrt(0.8 * double(cpu::cache_sizes().l2) / (64 * 9 * sizeof(double))));
  const ConvCase cases[] = {
      {{3, 128, 5, 4}, 600, 1, 1, {1, 1, 0, 0}, true},
      {{3, 64, 22, 21}, 128, 3, 3, {1, 1, 1, 1}, false},
      {{5, 64, 11, 12}, 128, 3, 3, {2, 2, 1, 1}, true},
      {{2, 64, 32, 31}, 128, 3, 3, {1, 1, 1, 1}, false},
      {{3, 64, side, side}, 128, 3, 3, {1, 1, 1, 1}, false},
  };
  for (size_t index = 0; index < std::size(cases); ++index) {
    const ConvCase& cc = cases[index];
    CAPTURE(index);
    REQUIRE(cc.weight().numel() > 65536);
    // dW = start + sum over (n, r, c) of dy[n][o][r][c] * x at the tap, and dbias likewise.
    const size_t k = 100 + index;
    StridedBuffer<double> x = StridedBuffer<double>::seeded(cc.x, x_gap(k), 1000 + k);
    StridedBuffer<double> dy = StridedBuffer<double>::seeded(cc.y(), x_gap(k) + 2, 1002 + k);
    Rng rng(1003 + k);
    random_vector(rng, cc.weight().numel());  // the weight, drawn first by conv2d_gradients
    std::vector<double> expected = random_vector(rng, cc.weight().numel());
    const Shape4 ys = cc.y();
    const auto& p = cc.params;
    for (int64_t o = 0; o < cc.c_out; ++o)
      for (int64_t i = 0; i < cc.x.c; ++i)
        for (int64_t kr = 0; kr < cc.kernel_h; ++kr)
          for (int64_t kc = 0; kc < cc.kernel_w; ++kc) {
            double sum = 0;
            for (int64_t n = 0; n < ys.n; ++n)
              for (int64_t r = 0; r < ys.h; ++r)
                for (int64_t c = 0; c < ys.w; ++c) {
                  const int64_t ir = r * p.stride_h - p.pad_h + kr;
                  const int64_t ic = c * p.stride_w - p.pad_w + kc;
                  if (ir >= 0 && ir < cc.x.h && ic >= 0 && ic < cc.x.w)
                    sum += dy.at(n, o, r, c) * x.at(n, i, ir, ic);
                }
            expected[((o * cc.x.c + i) * cc.kernel_h + kr) * cc.kernel_w + kc] += sum;
          }
    std::vector<std::vector<double>> float_results;
    for (int threads : {1, 2, 3}) {
      const PoolThreads pool(threads);
      float_results.push_back(conv2d_gradients<float>(cc, k)[1]);
    }
    // conv2d_gradients makes the same x, dy and starting dW from the same seeds.
    check_close(conv2d_gradients<double>(cc, k)[1], expected, 1e-12, 1e-12, "double dweight");
    check_close(float_results[0], expected, 1e-4, 1e-4, "float dweight");
    for (size_t t = 1; t < float_results.size(); ++t)
      CHECK_MESSAGE(float_results[t] == float_results[0],
                    "float dweight differs on " << t + 1 << " threads");
  }
}

TEST_CASE("conv2d rejects mismatched shapes and CUDA views") {
  std::vector<float> x(2 * 3 * 5 * 5), w(4 * 3 * 3 * 3), y(2 * 4 * 5 * 5);
  const Shape4 xs{2, 3, 5, 5}, ws{4, 3, 3, 3}, ys{2, 4, 5, 5};
  const ops::Conv2dParams same{1, 1, 1, 1};
  auto forward = [&](Shape4 x_shape, Shape4 w_shape, Shape4 y_shape, Device device) {
    View<const float> xv = dense_view<const float>(x.data(), x_shape, device);
    ops::conv2d_forward<float>(xv, dense_view<const float>(w.data(), w_shape, device), nullptr,
                               same, dense_view(y.data(), y_shape, device));
  };
  CHECK_NOTHROW(forward(xs, ws, ys, Device::cpu()));
  CHECK_THROWS_AS(forward({2, 2, 5, 5}, ws, ys, Device::cpu()), std::invalid_argument);
  CHECK_THROWS_AS(forward(xs, ws, {2, 4, 4, 5}, Device::cpu()), std::invalid_argument);
  CHECK_THROWS_AS(forward(xs, ws, {2, 3, 5, 5}, Device::cpu()), std::invalid_argument);
  CHECK_THROWS_AS(forward(xs, ws, ys, Device::cuda(0)), std::runtime_error);
  std::vector<float> mean(4);  // a mean without its M2
  CHECK_THROWS_AS(ops::conv2d_forward<float>(dense_view<const float>(x.data(), xs),
                                             dense_view<const float>(w.data(), ws), nullptr, same,
                                             dense_view(y.data(), ys), mean.data()),
                  std::invalid_argument);
  View<float> dx = dense_view(x.data(), {2, 3, 5, 4});
  CHECK_THROWS_AS(ops::conv2d_backward_data<float>(dense_view<const float>(y.data(), ys),
                                                   dense_view<const float>(w.data(), ws), same, dx),
                  std::invalid_argument);
}
