// tools/selftest/bf16_checks.cpp — mixed precision's bf16 storage on the DUT against the CPU's
// bf16 ops (see selftest.h; tolerances: the top of selftest.cpp). A bf16 op has no double form: by
// definition (kernels/ops.h) it is its float op on the widened operands, each stored result rounded
// to bf16, which the CPU runs; a GPU computes the same float values up to the order of its float
// operations, so a result near the midpoint of two bf16 neighbours may round to either. The
// conversions, bit for bit; the activation ops (SiLU, add, upsampling, pooling and SPPF's chain) on
// channel-slice views where the graph has them; the convolutions on both CUDA paths. BatchNorm:
// bf16_batchnorm_checks.cpp.
#include <cmath>
#include <string>
#include <vector>

#include "kernels/ops.h"
#include "tools/selftest/checks.h"
#include "tools/selftest/convolution_settings.h"

namespace bareyolo::selftest {

namespace {

// ---- conversions: random floats of every magnitude, on channel slices -------------------------

Tensor every_magnitude() {
  Random random(1603);
  const Shape4 parent{3, 6, 17, 9};
  std::vector<float> values = random.floats(parent.numel(), -1, 1);
  for (float& v : values) v = std::ldexp(v, random.integer(-120, 120));
  return Tensor::from_vector(values, parent);
}

// Channels 2..4 of x into a bf16 tensor whose other channels must stay as they were (zero).
double check_convert_to_bf16(const Device& dut) {
  const Tensor x = every_magnitude();
  const Tensor narrow =
      poisoned_channels(Tensor::zeros(x.shape(), Device::cpu(), DType::bf16), 2, 5);
  return compare_with_cpu(dut, {x}, {narrow}, [](Tensors& in, Tensors& out) {
    ops::convert_to_bf16(as<float>(in[0].channels(2, 5)), as<bf16>(out[0].channels(2, 5)));
  });
}

double check_convert_from_bf16(const Device& dut) {
  const Tensor x = every_magnitude();
  return compare_with_cpu(dut, {x}, {poisoned(x.shape())}, [](Tensors& in, Tensors& out) {
    const Tensor narrow = in[0].converted(DType::bf16);
    ops::convert_from_bf16(as<bf16>(narrow), as<float>(out[0]));
  });
}

// Channels 1..3 rounded in place, the others untouched.
double check_round_to_bf16_in_place(const Device& dut) {
  return compare_with_cpu(dut, {}, {every_magnitude()}, [](Tensors&, Tensors& out) {
    ops::round_to_bf16_in_place(as<float>(out[0].channels(1, 4)));
  });
}

// ---- the activation ops: one stream of bf16 maps, as the former test drew them ----------------

constexpr Shape4 kParent{3, 8, 9, 11}, kMap{3, 4, 9, 11}, kSmall{3, 4, 5, 6}, kLarge{3, 4, 10, 12};
constexpr ops::Pool2dParams kPools[] = {{5, 1, 2}, {3, 2, 1}};  // SPPF's, and a strided one

Shape4 pooled(ops::Pool2dParams p) {
  return {kMap.n, kMap.c, ops::conv_out_size(kMap.h, p.kernel, p.stride, p.pad),
          ops::conv_out_size(kMap.w, p.kernel, p.stride, p.pad)};
}

struct ActivationInputs {
  Tensor x, dy;  // x: kParent, read through channel slices (strided views)
  Tensor silu_dx, add_b, add_da, add_db;
  Tensor small, large, upsample_dx;  // upsampling: small to large and back
  Tensor pool_dx[2], pool_dy[2];     // per pool of kPools
};
ActivationInputs activation_inputs() {
  Random random(1611);
  ActivationInputs a;
  a.x = random.uniform_bf16(kParent, -3, 3);
  a.dy = random.uniform_bf16(kMap, -3, 3);
  a.silu_dx = random.uniform_bf16(kParent, -3, 3);
  a.add_b = random.uniform_bf16(kMap, -3, 3);
  a.add_da = random.uniform_bf16(kMap, -3, 3);
  a.add_db = random.uniform_bf16(kParent, -3, 3);
  a.small = random.uniform_bf16(kSmall, -3, 3);
  a.large = random.uniform_bf16(kLarge, -3, 3);
  a.upsample_dx = random.uniform_bf16(kSmall, -3, 3);
  for (size_t k = 0; k < 2; ++k) {
    a.pool_dx[k] = random.uniform_bf16(kMap, -3, 3);
    a.pool_dy[k] = random.uniform_bf16(pooled(kPools[k]), -3, 3);
  }
  return a;
}

double check_silu_forward(const Device& dut) {
  const ActivationInputs a = activation_inputs();
  return compare_with_cpu(dut, {a.x}, {poisoned(kMap, DType::bf16)}, [](Tensors& in, Tensors& out) {
    ops::silu_forward<bf16>(as<bf16>(in[0].channels(2, 6)), as<bf16>(out[0]));
  });
}

double check_silu_backward(const Device& dut) {
  const ActivationInputs a = activation_inputs();
  return compare_with_cpu(dut, {a.x, a.dy}, {a.silu_dx}, [](Tensors& in, Tensors& out) {
    ops::silu_backward<bf16>(as<bf16>(in[0].channels(2, 6)), as<bf16>(in[1]),
                             as<bf16>(out[0].channels(2, 6)));
  });
}

double check_add_forward(const Device& dut) {
  const ActivationInputs a = activation_inputs();
  return compare_with_cpu(
      dut, {a.x, a.add_b}, {poisoned(kMap, DType::bf16)}, [](Tensors& in, Tensors& out) {
        ops::add_forward<bf16>(as<bf16>(in[0].channels(4, 8)), as<bf16>(in[1]), as<bf16>(out[0]));
      });
}

double check_add_backward(const Device& dut) {
  const ActivationInputs a = activation_inputs();
  return compare_with_cpu(dut, {a.dy}, {a.add_da, a.add_db}, [](Tensors& in, Tensors& out) {
    ops::add_backward<bf16>(as<bf16>(in[0]), as<bf16>(out[0]), as<bf16>(out[1].channels(0, 4)));
  });
}

double check_upsample_forward(const Device& dut) {
  const ActivationInputs a = activation_inputs();
  return compare_with_cpu(
      dut, {a.small}, {poisoned(kLarge, DType::bf16)}, [](Tensors& in, Tensors& out) {
        ops::upsample_nearest2x_forward<bf16>(as<bf16>(in[0]), as<bf16>(out[0]));
      });
}

// Added into dx, or written over it (`overwrite`: dx starts poisoned).
double check_upsample_backward_as(const Device& dut, ops::GradientWrite write) {
  const ActivationInputs a = activation_inputs();
  const Tensor dx =
      write == ops::GradientWrite::add ? a.upsample_dx : poisoned(kSmall, DType::bf16);
  return compare_with_cpu(dut, {a.large}, {dx}, [&](Tensors& in, Tensors& out) {
    ops::upsample_nearest2x_backward<bf16>(as<bf16>(in[0]), as<bf16>(out[0]), write);
  });
}
double check_upsample_backward(const Device& dut) {
  return check_upsample_backward_as(dut, ops::GradientWrite::add);
}
double check_upsample_backward_overwrite(const Device& dut) {
  return check_upsample_backward_as(dut, ops::GradientWrite::overwrite);
}

double check_maxpool_forward(const Device& dut) {
  const ActivationInputs a = activation_inputs();
  double worst = 0;
  for (const ops::Pool2dParams& p : kPools)
    worst =
        std::max(worst, compare_with_cpu(dut, {a.x}, {poisoned(pooled(p), DType::bf16)},
                                         [&](Tensors& in, Tensors& out) {
                                           ops::maxpool2d_forward<bf16>(
                                               as<bf16>(in[0].channels(2, 6)), p, as<bf16>(out[0]));
                                         }));
  return worst;
}

double check_maxpool_backward(const Device& dut) {
  const ActivationInputs a = activation_inputs();
  double worst = 0;
  for (size_t k = 0; k < 2; ++k)
    worst = std::max(
        worst,
        compare_with_cpu(dut, {a.x, a.pool_dy[k]}, {a.pool_dx[k]}, [&](Tensors& in, Tensors& out) {
          ops::maxpool2d_backward<bf16>(as<bf16>(in[0].channels(2, 6)), as<bf16>(in[1]), kPools[k],
                                        as<bf16>(out[0]));
        }));
  return worst;
}

// SPPF writes its three pools into channel slices of one tensor.
double check_sppf_chain(const Device& dut) {
  const ActivationInputs a = activation_inputs();
  constexpr int64_t c = kMap.c;
  return compare_with_cpu(
      dut, {a.x}, {poisoned({kMap.n, 3 * c, kMap.h, kMap.w}, DType::bf16)},
      [](Tensors& in, Tensors& out) {
        ops::maxpool2d_chain3_forward<bf16>(
            as<bf16>(in[0].channels(2, 6)), kPools[0], as<bf16>(out[0].channels(0, c)),
            as<bf16>(out[0].channels(c, 2 * c)), as<bf16>(out[0].channels(2 * c, 3 * c)));
      });
}

// ---- the convolutions: a 3x3 convolution of channels 2..9 of a 12-channel map, stride 1 and 2,
// on each CUDA path ------------------------------------------------------------------------------

constexpr Shape4 kConvParent{3, 12, 20, 18}, kConvWeight{16, 8, 3, 3}, kConvChannels{1, 16, 1, 1};
constexpr ops::Conv2dParams kStrides[] = {{1, 1, 1, 1}, {2, 2, 1, 1}};

struct ConvInputs {
  ops::Conv2dParams params;
  Tensor x, weight, dy, bias;  // x, weight and dy in bf16; the bias in float
  Tensor dx, dweight, dbias;   // the backward's initial values: dx in bf16, the others float
};
Shape4 conv_output(ops::Conv2dParams p) {
  return {kConvParent.n, kConvWeight.n, ops::conv_out_size(kConvParent.h, 3, p.stride_h, 1),
          ops::conv_out_size(kConvParent.w, 3, p.stride_w, 1)};
}

// The cases of one path, both strides: the former test drew the cuDNN path's, then the GEMM
// path's, from one stream.
std::vector<ConvInputs> conv_inputs(ops::GpuConvolutionPath path) {
  Random random(1613);
  std::vector<ConvInputs> cases;
  for (ops::GpuConvolutionPath drawn_for : kConvPaths)
    for (const ops::Conv2dParams& p : kStrides) {
      ConvInputs c;
      c.params = p;
      c.x = random.uniform_bf16(kConvParent, -1, 1);
      c.weight = random.uniform_bf16(kConvWeight, -1, 1);
      c.dy = random.uniform_bf16(conv_output(p), -1, 1);
      c.bias = random.uniform(kConvChannels, -1, 1);
      c.dx = random.uniform_bf16(kConvParent, -1, 1);
      // Small starting values, so that a bf16 step is relative to the product's size.
      c.dweight = random.uniform(kConvWeight, -0.01, 0.01);
      c.dbias = random.uniform(kConvChannels, -3, 3);
      if (drawn_for == path) cases.push_back(c);
    }
  return cases;
}

// The forward of channels 2..9 of x, with the bias when in[2] is given; it always gathers the
// BatchNorm moments of the stored y, which out[1] and out[2] receive when given.
void conv_forward(ops::Conv2dParams p, Tensors& in, Tensors& out) {
  Tensor mean = Tensor::empty(kConvChannels, out[0].device()),
         m2 = Tensor::empty(kConvChannels, out[0].device());
  ops::conv2d_forward<bf16>(as<bf16>(in[0].channels(2, 10)), as<bf16>(in[1]),
                            in.size() > 2 ? ptr<float>(in[2]) : nullptr, p, as<bf16>(out[0]),
                            ptr<float>(mean), ptr<float>(m2));
  if (out.size() == 3) {
    out[1].copy_from(mean);
    out[2].copy_from(m2);
  }
}

double check_conv_forward(const Device& dut, ops::GpuConvolutionPath path) {
  const ConvolutionSettings settings(path, false);
  return worst_over(conv_inputs(path), [&](const ConvInputs& c) {
    return compare_with_cpu(dut, {c.x, c.weight}, {poisoned(conv_output(c.params), DType::bf16)},
                            [&](Tensors& in, Tensors& out) { conv_forward(c.params, in, out); });
  });
}

// With a bias (cuDNN rounds the convolution to bf16 before adding it), and the moments.
double check_conv_forward_bias(const Device& dut, ops::GpuConvolutionPath path) {
  const ConvolutionSettings settings(path, false);
  return worst_over(conv_inputs(path), [&](const ConvInputs& c) {
    return compare_with_cpu(dut, {c.x, c.weight, c.bias},
                            {poisoned(conv_output(c.params), DType::bf16), poisoned(kConvChannels),
                             poisoned(kConvChannels)},
                            [&](Tensors& in, Tensors& out) { conv_forward(c.params, in, out); });
  });
}

// dx (a gradient other layers added to, in bf16) into channels 2..9; or written over
// (`overwrite`: those channels start poisoned, the others keep their values).
double check_conv_backward_data_as(const Device& dut, ops::GpuConvolutionPath path,
                                   ops::GradientWrite write) {
  const ConvolutionSettings settings(path, false);
  const bool overwrite = write == ops::GradientWrite::overwrite;
  return worst_over(conv_inputs(path), [&](const ConvInputs& c) {
    const Tensor dx = overwrite ? poisoned_channels(c.dx, 2, 10) : c.dx;
    return compare_with_cpu(dut, {c.dy, c.weight}, {dx}, [&](Tensors& in, Tensors& out) {
      ops::conv2d_backward_data<bf16>(as<bf16>(in[0]), as<bf16>(in[1]), c.params,
                                      as<bf16>(out[0].channels(2, 10)), write);
    });
  });
}
double check_conv_backward_data(const Device& dut, ops::GpuConvolutionPath path) {
  return check_conv_backward_data_as(dut, path, ops::GradientWrite::add);
}
double check_conv_backward_data_overwrite(const Device& dut, ops::GpuConvolutionPath path) {
  return check_conv_backward_data_as(dut, path, ops::GradientWrite::overwrite);
}

double check_conv_backward_weight(const Device& dut, ops::GpuConvolutionPath path) {
  const ConvolutionSettings settings(path, false);
  return worst_over(conv_inputs(path), [&](const ConvInputs& c) {
    return compare_with_cpu(dut, {c.x, c.dy}, {c.dweight, c.dbias}, [&](Tensors& in, Tensors& out) {
      ops::conv2d_backward_weight<bf16>(as<bf16>(in[0].channels(2, 10)), as<bf16>(in[1]), c.params,
                                        as<float>(out[0]), ptr<float>(out[1]));
    });
  });
}

}  // namespace

std::vector<Check> bf16_checks() {
  std::vector<Check> checks = {
      {"bf16", "convert_to_bf16 (every magnitude)", kExact, check_convert_to_bf16},
      {"bf16", "convert_from_bf16", kExact, check_convert_from_bf16},
      {"bf16", "round_to_bf16_in_place", kExact, check_round_to_bf16_in_place},
      {"bf16", "silu_forward bf16", kBf16Step, check_silu_forward},
      {"bf16", "silu_backward bf16", kBf16Step, check_silu_backward},
      {"bf16", "add_forward bf16", kBf16Step, check_add_forward},
      {"bf16", "add_backward bf16", kBf16Step, check_add_backward},
      {"bf16", "upsample_nearest2x_forward bf16", kExact, check_upsample_forward},
      {"bf16", "upsample_nearest2x_backward bf16", kBf16Step, check_upsample_backward},
      {"bf16", "upsample_nearest2x_backward write bf16", kBf16Step,
       check_upsample_backward_overwrite},
      {"bf16", "maxpool2d_forward bf16", kExact, check_maxpool_forward},
      {"bf16", "maxpool2d_backward bf16", kBf16Step, check_maxpool_backward},
      {"bf16", "maxpool2d_chain3_forward bf16", kExact, check_sppf_chain},
  };
  using PathCheck = double (*)(const Device&, ops::GpuConvolutionPath);
  const struct {
    const char* name;
    double tolerance;
    PathCheck check;
  } convolutions[] = {
      {"conv2d_forward bf16", kBf16Step, check_conv_forward},
      {"conv2d_forward+bias bf16", kBf16TwoSteps, check_conv_forward_bias},
      {"conv2d_backward_data bf16", kBf16Step, check_conv_backward_data},
      {"conv2d_backward_data write bf16", kBf16Step, check_conv_backward_data_overwrite},
      {"conv2d_backward_weight bf16", kBf16Step, check_conv_backward_weight},
  };
  for (ops::GpuConvolutionPath path : kConvPaths)
    for (const auto& [name, tolerance, check] : convolutions)
      checks.push_back({"bf16", std::string(name) + " [" + path_name(path) + "]", tolerance,
                        [path, check = check](const Device& dut) { return check(dut, path); }});
  for (Check& check : bf16_batchnorm_checks()) checks.push_back(std::move(check));
  return checks;
}

}  // namespace bareyolo::selftest
