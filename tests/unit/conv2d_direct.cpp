// tests/unit/conv2d_direct.cpp — the direct forward of few-input-channel convolutions gives the
// bits of im2col + GEMM (kernels/cpu/conv2d_direct.h), and runs only where it may.
// (Its values against the definition: tests/unit/conv2d.cpp's forward cases with 3 input
// channels and 4 outputs, which conv2d_forward now sends here.)
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cpu/conv2d_direct.h"
#include "kernels/cpu/gemm/gemm.h"
#include "kernels/cpu/im2col.h"
#include "tests/support/testing.h"

namespace bareyolo {
namespace {

struct DirectCase {
  int64_t channels, height, width, c_out, kernel, stride, pad;
  bool bias;

  cpu::ConvGeometry geometry() const {
    auto out = [&](int64_t size) { return (size + 2 * pad - kernel) / stride + 1; };
    return {channels, height, width, kernel,      kernel,    stride,
            stride,   pad,    pad,   out(height), out(width)};
  }
};

TEST_CASE("direct convolution gives the bits of im2col + GEMM") {
  const DirectCase cases[] = {
      {3, 40, 36, 16, 6, 2, 2, false},  // YOLOv5's stem: 18 output columns, a tile and 2 more
      {3, 13, 11, 8, 6, 2, 2, true},    // the stem on a map narrower than one tile, a bias
      {3, 10, 96, 8, 6, 2, 2, false},   // the stem at 48 columns, two whole tiles (96-px input)
      {3, 9, 33, 4, 3, 1, 1, false},    // 3x3 stride 1: one column phase
      {1, 7, 19, 12, 5, 2, 2, true},    // one channel, odd widths
      {4, 6, 8, 4, 1, 2, 1, false},     // 1x1 with stride and padding: rows of padding only
      {2, 5, 40, 8, 4, 1, 0, false},    // even kernel, no padding, 37 columns
  };
  testing::Rng rng(404);
  for (const DirectCase& dc : cases) {
    const cpu::ConvGeometry g = dc.geometry();
    REQUIRE(cpu::direct_conv_applies(g, dc.c_out));
    const int64_t taps = g.col_rows(), hw = g.col_cols();
    const std::vector<float> image =
        testing::random_vector<float>(rng, dc.channels * dc.height * dc.width);
    const std::vector<float> weight = testing::random_vector<float>(rng, dc.c_out * taps);
    const std::vector<float> bias = testing::random_vector<float>(rng, dc.c_out);
    const float* bias_or_null = dc.bias ? bias.data() : nullptr;

    std::vector<float> col(static_cast<size_t>(taps * hw)), expected(dc.c_out * hw);
    cpu::im2col(image.data(), g, 0, g.out_h, col.data());
    if (dc.bias)
      for (int64_t o = 0; o < dc.c_out; ++o)
        std::fill(expected.begin() + o * hw, expected.begin() + (o + 1) * hw, bias[o]);
    cpu::gemm<float>(false, false, dc.c_out, hw, taps, 1.0f, weight.data(), taps, col.data(), hw,
                     dc.bias ? 1.0f : 0.0f, expected.data(), hw);

    std::vector<float> actual(expected.size(), std::numeric_limits<float>::quiet_NaN());
    cpu::direct_conv_forward(image.data(), g, weight.data(), bias_or_null, dc.c_out, actual.data());
    const std::string what = "direct conv " + std::to_string(dc.channels) + "x" +
                             std::to_string(dc.height) + "x" + std::to_string(dc.width) + " k" +
                             std::to_string(dc.kernel) + " s" + std::to_string(dc.stride) + " p" +
                             std::to_string(dc.pad) + " -> " + std::to_string(dc.c_out);
    size_t first_difference = actual.size();
    for (size_t e = 0; e < actual.size() && first_difference == actual.size(); ++e)
      if (std::memcmp(&actual[e], &expected[e], sizeof(float)) != 0) first_difference = e;
    CHECK_MESSAGE(first_difference == actual.size(),
                  what << ": element " << first_difference << " differs from im2col + GEMM");
  }
}

TEST_CASE("direct convolution applies only to few input channels and one GEMM depth block") {
  const cpu::ConvGeometry stem{3, 64, 64, 6, 6, 2, 2, 2, 2, 32, 32};
  CHECK(cpu::direct_conv_applies(stem, 16));
  CHECK_FALSE(cpu::direct_conv_applies(stem, 18));  // c_out not a multiple of 4
  cpu::ConvGeometry wide = stem;
  wide.channels = 5;  // more than 4 input channels
  CHECK_FALSE(cpu::direct_conv_applies(wide, 16));
  cpu::ConvGeometry deep{4, 64, 64, 7, 7, 1, 1, 3, 3, 64, 64};  // 196 taps: two depth blocks
  CHECK_FALSE(cpu::direct_conv_applies(deep, 16));
  cpu::ConvGeometry stride3 = stem;
  stride3.stride_w = 3;
  CHECK_FALSE(cpu::direct_conv_applies(stride3, 16));
}

}  // namespace
}  // namespace bareyolo
