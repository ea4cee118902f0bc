// tools/selftest/convolution_checks.cpp — the float convolutions against their double reference
// (see selftest.h; tolerances: the top of selftest.cpp), formerly tests/cuda/conv2d.cpp: on
// yolov5n's convolution shapes (the 6x6 stride-2 stem, 3x3 stride-2 downsamples, 3x3
// bottlenecks, 1x1 layers with and without bias, odd sizes, one image), the forward also with
// its output's BatchNorm moments (ConvBnSilu's training forward), and on channel slices (Concat
// without copies); each on both CUDA paths (cuDNN, and im2col + cuBLAS), in float and again with
// TF32 on (tensor-core math). Each check sets its path and TF32 and puts both back after
// (convolution_settings.h).
#include <string>
#include <vector>

#include "kernels/ops.h"
#include "tools/selftest/checks.h"
#include "tools/selftest/convolution_settings.h"

namespace bareyolo::selftest {

namespace {

struct ConvCase {
  Shape4 x;
  int c_out, kernel, stride, pad;
  bool bias;
};

// yolov5n's convolutions (channels as in the model; maps small and of odd sizes).
constexpr ConvCase kYolov5nCases[] = {
    {{2, 3, 67, 61}, 16, 6, 2, 2, false},   // the stem, 6x6 stride 2
    {{2, 16, 33, 31}, 32, 3, 2, 1, false},  // 3x3 stride 2
    {{3, 8, 17, 13}, 8, 3, 1, 1, false},    // 3x3 stride 1
    {{2, 32, 20, 20}, 16, 1, 1, 0, false},  // 1x1
    {{2, 64, 5, 7}, 24, 1, 1, 0, true},     // 1x1 with bias (Detect)
    {{1, 8, 9, 9}, 16, 3, 2, 1, false},     // 3x3 stride 2 on one image
};

// One case's shapes and values: the forward's inputs, the output's gradient, and the initial
// values of the backward's outputs, which they add to.
struct ConvTensors {
  ConvCase shape;
  ops::Conv2dParams params;
  Tensor x, weight, bias, dy, dx, dweight, dbias;
};

Shape4 output_shape(const ConvCase& c) {
  return {c.x.n, c.c_out, ops::conv_out_size(c.x.h, c.kernel, c.stride, c.pad),
          ops::conv_out_size(c.x.w, c.kernel, c.stride, c.pad)};
}

// The yolov5n cases of one path: the former test drew the cuDNN path's cases, then the GEMM
// path's, from one stream (seed 71 in float, 74 with TF32).
std::vector<ConvTensors> yolov5n_tensors(ops::GpuConvolutionPath path, bool tf32) {
  Random random(tf32 ? 74 : 71);
  std::vector<ConvTensors> cases;
  for (ops::GpuConvolutionPath drawn_for : kConvPaths)
    for (const ConvCase& c : kYolov5nCases) {
      const Shape4 weight{c.c_out, c.x.c, c.kernel, c.kernel}, bias{1, c.c_out, 1, 1};
      ConvTensors t;
      t.shape = c;
      t.params = {c.stride, c.stride, c.pad, c.pad};
      t.x = random.uniform(c.x, -1, 1);
      t.weight = random.uniform(weight, -1, 1);
      t.bias = random.uniform(bias, -1, 1);
      t.dy = random.uniform(output_shape(c), -1, 1);
      t.dx = random.uniform(c.x, -1, 1);
      t.dweight = random.uniform(weight, -1, 1);
      t.dbias = random.uniform(bias, -1, 1);
      if (drawn_for == path) cases.push_back(t);
    }
  return cases;
}

double forward(const Device& dut, const ConvTensors& t) {
  return compare_with_reference(dut, {t.x, t.weight, t.bias}, {poisoned(output_shape(t.shape))},
                                [&]<class T>(Tensors& in, Tensors& out) {
                                  ops::conv2d_forward<T>(as<T>(in[0]), as<T>(in[1]),
                                                         t.shape.bias ? ptr<T>(in[2]) : nullptr,
                                                         t.params, as<T>(out[0]));
                                });
}

// y and, per channel, the mean and M2 of y, all overwritten.
double forward_with_moments(const Device& dut, const ConvTensors& t) {
  const Shape4 per_channel{1, t.shape.c_out, 1, 1};
  return compare_with_reference(
      dut, {t.x, t.weight},
      {poisoned(output_shape(t.shape)), poisoned(per_channel), poisoned(per_channel)},
      [&]<class T>(Tensors& in, Tensors& out) {
        ops::conv2d_forward<T>(as<T>(in[0]), as<T>(in[1]), nullptr, t.params, as<T>(out[0]),
                               ptr<T>(out[1]), ptr<T>(out[2]));
      });
}

// dx += conv-transpose(dy, w); written over (`overwrite`) dx starts poisoned, so that a value
// not written fails.
double backward_data_as(const Device& dut, const ConvTensors& t, ops::GradientWrite write) {
  const Tensor dx = write == ops::GradientWrite::add ? t.dx : poisoned(t.dx.shape());
  return compare_with_reference(
      dut, {t.dy, t.weight}, {dx}, [&]<class T>(Tensors& in, Tensors& out) {
        ops::conv2d_backward_data<T>(as<T>(in[0]), as<T>(in[1]), t.params, as<T>(out[0]), write);
      });
}
double backward_data(const Device& dut, const ConvTensors& t) {
  return backward_data_as(dut, t, ops::GradientWrite::add);
}
double backward_data_overwrite(const Device& dut, const ConvTensors& t) {
  return backward_data_as(dut, t, ops::GradientWrite::overwrite);
}

double backward_weight(const Device& dut, const ConvTensors& t) {
  return compare_with_reference(
      dut, {t.x, t.dy}, {t.dweight, t.dbias}, [&]<class T>(Tensors& in, Tensors& out) {
        ops::conv2d_backward_weight<T>(as<T>(in[0]), as<T>(in[1]), t.params, as<T>(out[0]),
                                       t.shape.bias ? ptr<T>(out[1]) : nullptr);
      });
}

// ---- channel slices: a 3x3 convolution from input channels 3..10 of a 16-channel map into
// output channels 8..15 of a 24-channel Concat buffer, and back (float only) -------------------

struct SliceTensors {
  Tensor x, weight, dy, dx, dweight;
};
SliceTensors slice_tensors(ops::GpuConvolutionPath path) {
  Random random(72);
  const Shape4 parent_x{2, 16, 11, 9}, parent_y{2, 24, 11, 9}, weight{8, 8, 3, 3};
  SliceTensors t;
  t.x = random.uniform(parent_x, -1, 1);
  t.weight = random.uniform(weight, -1, 1);
  t.dy = random.uniform(parent_y, -1, 1);
  for (ops::GpuConvolutionPath drawn_for :
       kConvPaths) {  // one stream, the cuDNN path's draws first
    Tensor dx = random.uniform(parent_x, -1, 1), dweight = random.uniform(weight, -1, 1);
    if (drawn_for == path) t.dx = dx, t.dweight = dweight;
  }
  return t;
}
constexpr ops::Conv2dParams kSliceParams{1, 1, 1, 1};

double slice_forward(const Device& dut, const SliceTensors& t) {
  return compare_with_reference(
      dut, {t.x, t.weight}, {poisoned(t.dy.shape())}, []<class T>(Tensors& in, Tensors& out) {
        ops::conv2d_forward<T>(as<T>(in[0].channels(3, 11)), as<T>(in[1]), nullptr, kSliceParams,
                               as<T>(out[0].channels(8, 16)));
        // Channels other producers own: zero on both sides.
        out[0].channels(0, 8).zero();
        out[0].channels(16, 24).zero();
      });
}

double slice_backward_data_as(const Device& dut, const SliceTensors& t, ops::GradientWrite write) {
  // Written over, the slice starts poisoned; the other channels keep their values either way.
  const Tensor dx = write == ops::GradientWrite::add ? t.dx : poisoned_channels(t.dx, 3, 11);
  return compare_with_reference(
      dut, {t.dy, t.weight}, {dx}, [&]<class T>(Tensors& in, Tensors& out) {
        ops::conv2d_backward_data<T>(as<T>(in[0].channels(8, 16)), as<T>(in[1]), kSliceParams,
                                     as<T>(out[0].channels(3, 11)), write);
      });
}
double slice_backward_data(const Device& dut, const SliceTensors& t) {
  return slice_backward_data_as(dut, t, ops::GradientWrite::add);
}
double slice_backward_data_overwrite(const Device& dut, const SliceTensors& t) {
  return slice_backward_data_as(dut, t, ops::GradientWrite::overwrite);
}

double slice_backward_weight(const Device& dut, const SliceTensors& t) {
  return compare_with_reference(
      dut, {t.x, t.dy}, {t.dweight}, []<class T>(Tensors& in, Tensors& out) {
        ops::conv2d_backward_weight<T>(as<T>(in[0].channels(3, 11)), as<T>(in[1].channels(8, 16)),
                                       kSliceParams, as<T>(out[0]), nullptr);
      });
}

// ---- the table: each op on each path, in float (with the slices) and with TF32 ----------------

using CaseCheck = double (*)(const Device&, const ConvTensors&);
using SliceCheck = double (*)(const Device&, const SliceTensors&);

Check convolution_check(const std::string& name, ops::GpuConvolutionPath path, bool tf32,
                        CaseCheck case_check, SliceCheck slice_check) {
  const std::string variant = std::string(" [") + path_name(path) + (tf32 ? ", tf32]" : "]");
  return {"convolution", name + variant, tf32 ? kTf32 : kFloatSums, [=](const Device& dut) {
            const ConvolutionSettings settings(path, tf32);
            double worst = worst_over(yolov5n_tensors(path, tf32),
                                      [&](const ConvTensors& t) { return case_check(dut, t); });
            if (slice_check) worst = std::max(worst, slice_check(dut, slice_tensors(path)));
            return worst;
          }};
}

}  // namespace

std::vector<Check> convolution_checks() {
  std::vector<Check> checks;
  for (bool tf32 : {false, true})
    for (ops::GpuConvolutionPath path : kConvPaths) {
      // The slices ran in float only.
      const auto slices = [tf32](SliceCheck check) { return tf32 ? nullptr : check; };
      checks.push_back(
          convolution_check("conv2d_forward", path, tf32, forward, slices(slice_forward)));
      checks.push_back(
          convolution_check("conv2d_forward+moments", path, tf32, forward_with_moments, nullptr));
      checks.push_back(convolution_check("conv2d_backward_data", path, tf32, backward_data,
                                         slices(slice_backward_data)));
      checks.push_back(convolution_check("conv2d_backward_data write", path, tf32,
                                         backward_data_overwrite,
                                         slices(slice_backward_data_overwrite)));
      checks.push_back(convolution_check("conv2d_backward_weight", path, tf32, backward_weight,
                                         slices(slice_backward_weight)));
    }
  return checks;
}

}  // namespace bareyolo::selftest
