// tests/unit/winograd.cpp — Winograd F(2x2, 3x3)'s float error against the direct convolution's,
// both measured against the direct convolution in double, on YOLOv5's 3x3 stride-1 shapes, for
// the forward, the data gradient and the weight gradient; and the rule and switch that choose
// it. (Its exactness in double and its gradients: the Winograd cases of tests/unit/conv2d.cpp.)
#include <algorithm>
#include <cmath>

#include "kernels/cpu/winograd.h"
#include "kernels/ops.h"
#include "tests/support/testing.h"
#include "tests/support/winograd_use.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {

cpu::ConvGeometry geometry(Shape4 x, int64_t kernel, int64_t stride, int64_t pad) {
  const int64_t out_h = ops::conv_out_size(x.h, kernel, stride, pad);
  const int64_t out_w = ops::conv_out_size(x.w, kernel, stride, pad);
  return {x.c, x.h, x.w, kernel, kernel, stride, stride, pad, pad, out_h, out_w};
}

// y, dx and dweight of a 3x3 stride-1 padding-1 convolution in precision T, from fixed data.
template <class T>
std::vector<std::vector<double>> passes(Shape4 xs, int64_t c_out) {
  const Shape4 ws{c_out, xs.c, 3, 3}, ys{xs.n, c_out, xs.h, xs.w};
  const ops::Conv2dParams same{1, 1, 1, 1};
  Rng rng(7);
  std::vector<T> x = random_vector<T>(rng, xs.numel()), w = random_vector<T>(rng, ws.numel());
  std::vector<T> dy = random_vector<T>(rng, ys.numel());
  std::vector<T> y(ys.numel(), T(NAN)), dx(xs.numel(), T(0)), dw(ws.numel(), T(0));
  ops::conv2d_forward<T>(dense_view<const T>(x.data(), xs), dense_view<const T>(w.data(), ws),
                         nullptr, same, dense_view(y.data(), ys));
  ops::conv2d_backward_data<T>(dense_view<const T>(dy.data(), ys),
                               dense_view<const T>(w.data(), ws), same, dense_view(dx.data(), xs));
  ops::conv2d_backward_weight<T>(dense_view<const T>(x.data(), xs),
                                 dense_view<const T>(dy.data(), ys), same,
                                 dense_view(dw.data(), ws), nullptr);
  return {convert<double>(y), convert<double>(dx), convert<double>(dw)};
}

// max |actual - reference| / max |reference|.
double relative_error(const std::vector<double>& actual, const std::vector<double>& reference) {
  double error = 0, scale = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    error = std::max(error, std::fabs(actual[i] - reference[i]));
    scale = std::max(scale, std::fabs(reference[i]));
  }
  return error / scale;
}

}  // namespace

TEST_CASE("Winograd's float error stays within four times the direct convolution's") {
  // yolov5n's bottleneck shapes at 320 (channels, map), batch 2.
  const Shape4 shapes[] = {{2, 16, 80, 80}, {2, 32, 40, 40}, {2, 64, 20, 20}, {2, 128, 10, 10}};
  const char* pass_names[] = {"forward", "data gradient", "weight gradient"};
  for (const Shape4& xs : shapes) {
    CAPTURE(xs.str());
    const auto reference = [&] {
      ScopedWinogradUse direct(cpu::WinogradUse::kNever);
      return passes<double>(xs, xs.c);
    }();
    const auto direct = [&] {
      ScopedWinogradUse direct(cpu::WinogradUse::kNever);
      return passes<float>(xs, xs.c);
    }();
    ScopedWinogradUse always(cpu::WinogradUse::kAlways);
    const auto winograd = passes<float>(xs, xs.c);
    for (int pass = 0; pass < 3; ++pass) {
      const double e_direct = relative_error(direct[pass], reference[pass]);
      const double e_winograd = relative_error(winograd[pass], reference[pass]);
      MESSAGE(xs.str() << " " << std::string(pass_names[pass]) << ": float error direct "
                       << e_direct << ", Winograd " << e_winograd);
      CHECK(e_winograd > 0);  // it computed in float, not a copy of the reference
      CHECK(e_winograd <= 4 * e_direct + 1e-7);
      CHECK(e_winograd < 1e-5);
    }
  }
}

TEST_CASE("Winograd runs only where it applies and where the measured rule picks it") {
  using cpu::ConvPass;
  const ConvPass all[] = {ConvPass::kForward, ConvPass::kDataGradient, ConvPass::kWeightGradient};
  const Shape4 x{1, 32, 20, 20};
  ScopedWinogradUse rule(cpu::WinogradUse::kMeasuredRule);
  for (ConvPass pass : all) {
    CAPTURE(static_cast<int>(pass));
    CHECK(cpu::winograd_chosen(geometry(x, 3, 1, 1), 32, pass));
    CHECK(cpu::winograd_chosen(geometry(x, 3, 1, 2), 32, pass));        // a 22x22 output
    CHECK_FALSE(cpu::winograd_chosen(geometry(x, 3, 2, 1), 32, pass));  // stride 2
    CHECK_FALSE(cpu::winograd_chosen(geometry(x, 1, 1, 0), 32, pass));  // 1x1
    CHECK_FALSE(cpu::winograd_chosen(geometry(x, 5, 1, 2), 32, pass));  // 5x5
    CHECK_FALSE(cpu::winograd_chosen(geometry(x, 3, 1, 3), 32, pass));  // padding 3
    CHECK_FALSE(cpu::winograd_chosen(geometry({1, 3, 20, 20}, 3, 1, 1), 32, pass));     // 3 in
    CHECK_FALSE(cpu::winograd_chosen(geometry({1, 128, 10, 10}, 3, 1, 1), 128, pass));  // map
    CHECK_FALSE(cpu::winograd_chosen(geometry({1, 64, 19, 40}, 3, 1, 1), 64, pass));    // rows
  }
  // 16 channels: the forward and data gradient, not the weight gradient's small GEMMs.
  const cpu::ConvGeometry narrow = geometry({1, 16, 80, 80}, 3, 1, 1);
  CHECK(cpu::winograd_chosen(narrow, 16, ConvPass::kForward));
  CHECK(cpu::winograd_chosen(narrow, 16, ConvPass::kDataGradient));
  CHECK_FALSE(cpu::winograd_chosen(narrow, 16, ConvPass::kWeightGradient));
  {
    ScopedWinogradUse always(cpu::WinogradUse::kAlways);
    CHECK(cpu::winograd_chosen(narrow, 16, ConvPass::kWeightGradient));
    CHECK(cpu::winograd_chosen(geometry({1, 3, 4, 4}, 3, 1, 0), 1, ConvPass::kForward));
    CHECK_FALSE(cpu::winograd_chosen(geometry(x, 3, 2, 1), 32, ConvPass::kForward));
    // A stride of 2 on either axis alone (F(2,3) steps 1 on both).
    for (const bool rows : {true, false}) {
      CAPTURE(rows);
      cpu::ConvGeometry one_axis = geometry(x, 3, 1, 1);
      (rows ? one_axis.stride_h : one_axis.stride_w) = 2;
      (rows ? one_axis.out_h : one_axis.out_w) = 10;
      CHECK_FALSE(cpu::winograd_chosen(one_axis, 32, ConvPass::kForward));
    }
  }
  ScopedWinogradUse never(cpu::WinogradUse::kNever);
  for (ConvPass pass : all) CHECK_FALSE(cpu::winograd_chosen(geometry(x, 3, 1, 1), 32, pass));
}
