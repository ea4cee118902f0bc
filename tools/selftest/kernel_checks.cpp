// tools/selftest/kernel_checks.cpp — the selftest's checks of the kernels' ops (see
// selftest.h; the tolerances are derived at the top of selftest.cpp): one small function each,
// then their half of the table.
#include <cmath>
#include <string>
#include <type_traits>
#include <utility>

#include "kernels/ops.h"
#include "kernels/settings.h"  // the convolution paths
#include "tools/selftest/checks.h"

namespace bareyolo::selftest {

namespace {

// ---- elementwise -----------------------------------------------------------------------------

double check_silu_forward(const Device& dut) {
  Random random(1);
  return compare_with_reference(dut, {random.uniform(kMap, -8, 8)}, {poisoned(kMap)},
                                []<class T>(Tensors& in, Tensors& out) {
                                  ops::silu_forward<T>(as<T>(in[0]), as<T>(out[0]));
                                });
}

double check_silu_backward(const Device& dut) {
  Random random(2);
  return compare_with_reference(dut, {random.uniform(kMap, -8, 8), random.uniform(kMap, -1, 1)},
                                {random.uniform(kMap, -1, 1)},
                                []<class T>(Tensors& in, Tensors& out) {
                                  ops::silu_backward<T>(as<T>(in[0]), as<T>(in[1]), as<T>(out[0]));
                                });
}

double check_add_forward(const Device& dut) {
  Random random(3);
  return compare_with_reference(dut, {random.uniform(kMap, -3, 3), random.uniform(kMap, -3, 3)},
                                {poisoned(kMap)}, []<class T>(Tensors& in, Tensors& out) {
                                  ops::add_forward<T>(as<T>(in[0]), as<T>(in[1]), as<T>(out[0]));
                                });
}

double check_add_backward(const Device& dut) {
  Random random(4);
  return compare_with_reference(dut, {random.uniform(kMap, -3, 3)},
                                {random.uniform(kMap, -3, 3), random.uniform(kMap, -3, 3)},
                                []<class T>(Tensors& in, Tensors& out) {
                                  ops::add_backward<T>(as<T>(in[0]), as<T>(out[0]), as<T>(out[1]));
                                });
}

double check_sigmoid_forward(const Device& dut) {
  Random random(5);
  return compare_with_reference(dut, {random.uniform(kMap, -30, 30)}, {poisoned(kMap)},
                                []<class T>(Tensors& in, Tensors& out) {
                                  ops::sigmoid_forward<T>(as<T>(in[0]), as<T>(out[0]));
                                });
}

double check_sigmoid_backward(const Device& dut) {
  Random random(6);
  return compare_with_reference(
      dut, {random.uniform(kMap, 0, 1), random.uniform(kMap, -1, 1)}, {random.uniform(kMap, -1, 1)},
      []<class T>(Tensors& in, Tensors& out) {
        ops::sigmoid_backward<T>(as<T>(in[0]), as<T>(in[1]), as<T>(out[0]));
      });
}

// Logits up to |30|, where a naive log(sigmoid(x)) overflows; soft targets; YOLOv5's pos_weight
// is a hyperparameter, so not 1.
constexpr double kPosWeight = 1.3;

double check_bce_forward(const Device& dut) {
  Random random(7);
  return compare_with_reference(dut, {random.uniform(kMap, -30, 30), random.uniform(kMap, 0, 1)},
                                {poisoned(kMap)}, []<class T>(Tensors& in, Tensors& out) {
                                  ops::bce_with_logits_forward<T>(as<T>(in[0]), as<T>(in[1]),
                                                                  T(kPosWeight), as<T>(out[0]));
                                });
}

double check_bce_backward(const Device& dut) {
  Random random(8);
  return compare_with_reference(
      dut, {random.uniform(kMap, -30, 30), random.uniform(kMap, 0, 1), random.uniform(kMap, -1, 1)},
      {random.uniform(kMap, -1, 1)}, []<class T>(Tensors& in, Tensors& out) {
        ops::bce_with_logits_backward<T>(as<T>(in[0]), as<T>(in[1]), T(kPosWeight), as<T>(in[2]),
                                         as<T>(out[0]));
      });
}

// ---- convolution -----------------------------------------------------------------------------

struct ConvCase {
  Shape4 x;
  int c_out, kernel, stride, pad;
  bool bias;
};
// A 3x3 stride-2 downsample on odd sizes (padding and stride meet both edges), and a 1x1 with
// bias (the Detect head's).
constexpr ConvCase kConvCases[] = {{{2, 8, 13, 11}, 16, 3, 2, 1, false},
                                   {{2, 16, 7, 9}, 12, 1, 1, 0, true}};

struct ConvShapes {
  ops::Conv2dParams params;
  Shape4 x, weight, bias, y;
};
ConvShapes conv_shapes(const ConvCase& c) {
  return {{c.stride, c.stride, c.pad, c.pad},
          c.x,
          {c.c_out, c.x.c, c.kernel, c.kernel},
          {1, c.c_out, 1, 1},
          {c.x.n, c.c_out, ops::conv_out_size(c.x.h, c.kernel, c.stride, c.pad),
           ops::conv_out_size(c.x.w, c.kernel, c.stride, c.pad)}};
}

double check_conv2d_forward(const Device& dut) {
  Random random(10);
  return worst_over(kConvCases, [&](const ConvCase& c) {
    const ConvShapes s = conv_shapes(c);
    return compare_with_reference(dut,
                                  {random.uniform(s.x, -1, 1), random.uniform(s.weight, -1, 1),
                                   random.uniform(s.bias, -1, 1)},
                                  {poisoned(s.y)}, [&]<class T>(Tensors& in, Tensors& out) {
                                    ops::conv2d_forward<T>(as<T>(in[0]), as<T>(in[1]),
                                                           c.bias ? ptr<T>(in[2]) : nullptr,
                                                           s.params, as<T>(out[0]));
                                  });
  });
}

double check_conv2d_backward_data(const Device& dut) {
  Random random(11);
  return worst_over(kConvCases, [&](const ConvCase& c) {
    const ConvShapes s = conv_shapes(c);
    return compare_with_reference(
        dut, {random.uniform(s.y, -1, 1), random.uniform(s.weight, -1, 1)},
        {random.uniform(s.x, -1, 1)}, [&]<class T>(Tensors& in, Tensors& out) {
          ops::conv2d_backward_data<T>(as<T>(in[0]), as<T>(in[1]), s.params, as<T>(out[0]));
        });
  });
}

double check_conv2d_backward_weight(const Device& dut) {
  Random random(12);
  return worst_over(kConvCases, [&](const ConvCase& c) {
    const ConvShapes s = conv_shapes(c);
    return compare_with_reference(dut, {random.uniform(s.x, -1, 1), random.uniform(s.y, -1, 1)},
                                  {random.uniform(s.weight, -1, 1), random.uniform(s.bias, -1, 1)},
                                  [&]<class T>(Tensors& in, Tensors& out) {
                                    ops::conv2d_backward_weight<T>(
                                        as<T>(in[0]), as<T>(in[1]), s.params, as<T>(out[0]),
                                        c.bias ? ptr<T>(out[1]) : nullptr);
                                  });
  });
}

// The two CUDA convolutions (cuDNN, and im2col + cuBLAS): a check runs with the one it names
// chosen and puts the previous choice back after. The CPU has one convolution, which both rows
// run (the choice only steers CUDA convolutions).
double on_conv_path(const Device& dut, ops::GpuConvolutionPath path,
                    double (*check)(const Device&)) {
  struct Restore {
    ops::GpuConvolutionPath path;
    ~Restore() { ops::set_gpu_convolution_path(path); }
  } restore{ops::gpu_convolution_path()};
  ops::set_gpu_convolution_path(path);
  return check(dut);
}

// ---- batch normalisation ---------------------------------------------------------------------

// What the BatchNorm ops read, in the ranges training sees, and the initial values of the
// gradients their backward ops add into. Each check passes the ones its op takes.
struct BnInputs {
  Tensor x, dy;  // maps: the input, the output's gradient
  Tensor mean, invstd, gamma, beta, running_mean, running_var, sum_dy, sum_dy_xhat;
  Tensor dx, dgamma, dbeta;
};

BnInputs bn_inputs(uint64_t seed) {
  Random random(seed);
  BnInputs b;
  b.x = random.uniform(kMap, -2, 3);
  b.dy = random.uniform(kMap, -1, 1);
  b.mean = random.per_channel(kMap.c, -0.5, 0.5);
  b.invstd = random.per_channel(kMap.c, 0.5, 2);
  b.gamma = random.per_channel(kMap.c, 0.5, 1.5);
  b.beta = random.per_channel(kMap.c, -1, 1);
  b.running_mean = random.per_channel(kMap.c, -0.5, 0.5);
  b.running_var = random.per_channel(kMap.c, 0.5, 2);
  b.sum_dy = random.per_channel(kMap.c, -5, 5);
  b.sum_dy_xhat = random.per_channel(kMap.c, -5, 5);
  b.dx = random.uniform(kMap, -1, 1);
  b.dgamma = random.per_channel(kMap.c, -1, 1);
  b.dbeta = random.per_channel(kMap.c, -1, 1);
  return b;
}

double check_bn_moments(const Device& dut) {
  const BnInputs b = bn_inputs(20);
  return compare_with_reference(dut, {b.x}, {poisoned(kChannels), poisoned(kChannels)},
                                []<class T>(Tensors& in, Tensors& out) {
                                  ops::batchnorm_moments<T>(as<T>(in[0]), ptr<T>(out[0]),
                                                            ptr<T>(out[1]));
                                });
}

double check_bn_apply(const Device& dut) {
  const BnInputs b = bn_inputs(21);
  return compare_with_reference(dut, {b.x, b.mean, b.invstd, b.gamma, b.beta}, {poisoned(kMap)},
                                []<class T>(Tensors& in, Tensors& out) {
                                  ops::batchnorm_apply<T>(as<T>(in[0]), ptr<T>(in[1]),
                                                          ptr<T>(in[2]), ptr<T>(in[3]),
                                                          ptr<T>(in[4]), as<T>(out[0]));
                                });
}

double check_bn_backward_reduce(const Device& dut) {
  const BnInputs b = bn_inputs(22);
  return compare_with_reference(
      dut, {b.x, b.dy, b.mean, b.invstd}, {poisoned(kChannels), poisoned(kChannels)},
      []<class T>(Tensors& in, Tensors& out) {
        ops::batchnorm_backward_reduce<T>(as<T>(in[0]), as<T>(in[1]), ptr<T>(in[2]), ptr<T>(in[3]),
                                          ptr<T>(out[0]), ptr<T>(out[1]));
      });
}

double check_bn_backward_apply(const Device& dut) {
  const BnInputs b = bn_inputs(23);
  return compare_with_reference(
      dut, {b.x, b.dy, b.mean, b.invstd, b.gamma, b.sum_dy, b.sum_dy_xhat}, {b.dx},
      []<class T>(Tensors& in, Tensors& out) {
        ops::batchnorm_backward_apply<T>(as<T>(in[0]), as<T>(in[1]), ptr<T>(in[2]), ptr<T>(in[3]),
                                         ptr<T>(in[4]), ptr<T>(in[5]), ptr<T>(in[6]), kPerChannel,
                                         as<T>(out[0]));
      });
}

double check_bn_forward_train(const Device& dut) {
  const BnInputs b = bn_inputs(24);
  // The running statistics are updated in place; y and the saved statistics are overwritten.
  return compare_with_reference(
      dut, {b.x, b.gamma, b.beta},
      {poisoned(kMap), b.running_mean, b.running_var, poisoned(kChannels), poisoned(kChannels)},
      []<class T>(Tensors& in, Tensors& out) {
        ops::batchnorm_forward_train<T>(as<T>(in[0]), ptr<T>(in[1]), ptr<T>(in[2]), kBatchNorm,
                                        ptr<T>(out[1]), ptr<T>(out[2]), ptr<T>(out[3]),
                                        ptr<T>(out[4]), as<T>(out[0]));
      });
}

double check_bn_backward_train(const Device& dut) {
  const BnInputs b = bn_inputs(25);
  return compare_with_reference(dut, {b.x, b.dy, b.gamma, b.mean, b.invstd},
                                {b.dx, b.dgamma, b.dbeta}, []<class T>(Tensors& in, Tensors& out) {
                                  ops::batchnorm_backward_train<T>(
                                      as<T>(in[0]), as<T>(in[1]), ptr<T>(in[2]), ptr<T>(in[3]),
                                      ptr<T>(in[4]), as<T>(out[0]), ptr<T>(out[1]), ptr<T>(out[2]));
                                });
}

double check_bn_forward_eval(const Device& dut) {
  const BnInputs b = bn_inputs(26);
  return compare_with_reference(dut, {b.x, b.gamma, b.beta, b.running_mean, b.running_var},
                                {poisoned(kMap)}, []<class T>(Tensors& in, Tensors& out) {
                                  ops::batchnorm_forward_eval<T>(
                                      as<T>(in[0]), ptr<T>(in[1]), ptr<T>(in[2]), ptr<T>(in[3]),
                                      ptr<T>(in[4]), kBatchNorm, as<T>(out[0]));
                                });
}

double check_bn_backward_eval(const Device& dut) {
  const BnInputs b = bn_inputs(27);
  return compare_with_reference(dut, {b.x, b.dy, b.gamma, b.running_mean, b.running_var},
                                {b.dx, b.dgamma, b.dbeta}, []<class T>(Tensors& in, Tensors& out) {
                                  ops::batchnorm_backward_eval<T>(
                                      as<T>(in[0]), as<T>(in[1]), ptr<T>(in[2]), ptr<T>(in[3]),
                                      ptr<T>(in[4]), kBatchNorm, as<T>(out[0]), ptr<T>(out[1]),
                                      ptr<T>(out[2]));
                                });
}

// ---- fused BN + SiLU -------------------------------------------------------------------------

// On a GPU each op is one fused kernel; on the CPU (and in the double reference) it runs its
// definition, the composition of the ops it fuses (kernels/cpu/batchnorm_silu.cpp).

double check_bn_silu_apply(const Device& dut) {
  const BnInputs b = bn_inputs(30);
  return compare_with_reference(dut, {b.x, b.mean, b.invstd, b.gamma, b.beta}, {poisoned(kMap)},
                                []<class T>(Tensors& in, Tensors& out) {
                                  ops::batchnorm_silu_apply<T>(as<T>(in[0]), ptr<T>(in[1]),
                                                               ptr<T>(in[2]), ptr<T>(in[3]),
                                                               ptr<T>(in[4]), as<T>(out[0]));
                                });
}

// SyncBatchNorm's two phases share dx as a workspace (kernels/ops.h): reduce gets one (in[6]
// here), and apply runs after a reduce on the same dx (whose local sums, in[8] and in[9], it
// does not use: it gets the sums of all ranks).
double check_bn_silu_backward_reduce(const Device& dut) {
  const BnInputs b = bn_inputs(31);
  return compare_with_reference(
      dut, {b.x, b.dy, b.mean, b.invstd, b.gamma, b.beta, b.dx},
      {poisoned(kChannels), poisoned(kChannels)}, []<class T>(Tensors& in, Tensors& out) {
        ops::batchnorm_silu_backward_reduce<T>(as<T>(in[0]), as<T>(in[1]), ptr<T>(in[2]),
                                               ptr<T>(in[3]), ptr<T>(in[4]), ptr<T>(in[5]),
                                               ptr<T>(out[0]), ptr<T>(out[1]), as<T>(in[6]));
      });
}

double check_bn_silu_backward_apply(const Device& dut) {
  const BnInputs b = bn_inputs(32);
  return compare_with_reference(
      dut,
      {b.x, b.dy, b.mean, b.invstd, b.gamma, b.beta, b.sum_dy, b.sum_dy_xhat, poisoned(kChannels),
       poisoned(kChannels)},
      {poisoned(kMap)}, []<class T>(Tensors& in, Tensors& out) {
        ops::batchnorm_silu_backward_reduce<T>(as<T>(in[0]), as<T>(in[1]), ptr<T>(in[2]),
                                               ptr<T>(in[3]), ptr<T>(in[4]), ptr<T>(in[5]),
                                               ptr<T>(in[8]), ptr<T>(in[9]), as<T>(out[0]));
        ops::batchnorm_silu_backward_apply<T>(
            as<T>(in[0]), as<T>(in[1]), ptr<T>(in[2]), ptr<T>(in[3]), ptr<T>(in[4]), ptr<T>(in[5]),
            ptr<T>(in[6]), ptr<T>(in[7]), kPerChannel, as<T>(out[0]));
      });
}

double check_bn_silu_backward_train(const Device& dut) {
  const BnInputs b = bn_inputs(33);
  return compare_with_reference(dut, {b.x, b.dy, b.gamma, b.beta, b.mean, b.invstd},
                                {b.dx, b.dgamma, b.dbeta}, []<class T>(Tensors& in, Tensors& out) {
                                  ops::batchnorm_silu_backward_train<T>(
                                      as<T>(in[0]), as<T>(in[1]), ptr<T>(in[2]), ptr<T>(in[3]),
                                      ptr<T>(in[4]), ptr<T>(in[5]), as<T>(out[0]), ptr<T>(out[1]),
                                      ptr<T>(out[2]));
                                });
}

double check_bn_silu_backward_eval(const Device& dut) {
  const BnInputs b = bn_inputs(34);
  return compare_with_reference(dut, {b.x, b.dy, b.gamma, b.beta, b.running_mean, b.running_var},
                                {b.dx, b.dgamma, b.dbeta}, []<class T>(Tensors& in, Tensors& out) {
                                  ops::batchnorm_silu_backward_eval<T>(
                                      as<T>(in[0]), as<T>(in[1]), ptr<T>(in[2]), ptr<T>(in[3]),
                                      ptr<T>(in[4]), ptr<T>(in[5]), kBatchNorm, as<T>(out[0]),
                                      ptr<T>(out[1]), ptr<T>(out[2]));
                                });
}

// ---- pooling and upsampling ------------------------------------------------------------------

// SPPF's pool, and a stride-2 pool whose windows cross the padding.
constexpr ops::Pool2dParams kPools[] = {{5, 1, 2}, {3, 2, 1}};
constexpr ops::Pool2dParams kSppf{5, 1, 2};

Shape4 pooled(ops::Pool2dParams p) {
  return {kMap.n, kMap.c, ops::conv_out_size(kMap.h, p.kernel, p.stride, p.pad),
          ops::conv_out_size(kMap.w, p.kernel, p.stride, p.pad)};
}

double check_maxpool_forward(const Device& dut) {
  Random random(40);
  return worst_over(kPools, [&](const ops::Pool2dParams& p) {
    return compare_with_reference(dut, {random.uniform(kMap, -3, 3)}, {poisoned(pooled(p))},
                                  [&]<class T>(Tensors& in, Tensors& out) {
                                    ops::maxpool2d_forward<T>(as<T>(in[0]), p, as<T>(out[0]));
                                  });
  });
}

double check_maxpool_backward(const Device& dut) {
  Random random(41);
  return worst_over(kPools, [&](const ops::Pool2dParams& p) {
    return compare_with_reference(
        dut, {random.uniform(kMap, -3, 3), random.uniform(pooled(p), -1, 1)},
        {random.uniform(kMap, -1, 1)}, [&]<class T>(Tensors& in, Tensors& out) {
          ops::maxpool2d_backward<T>(as<T>(in[0]), as<T>(in[1]), p, as<T>(out[0]));
        });
  });
}

double check_sppf_chain(const Device& dut) {
  Random random(42);
  return compare_with_reference(
      dut, {random.uniform(kMap, -3, 3)}, {poisoned(kMap), poisoned(kMap), poisoned(kMap)},
      []<class T>(Tensors& in, Tensors& out) {
        ops::maxpool2d_chain3_forward<T>(as<T>(in[0]), kSppf, as<T>(out[0]), as<T>(out[1]),
                                         as<T>(out[2]));
      });
}

constexpr Shape4 kUpsampled{kMap.n, kMap.c, 2 * kMap.h, 2 * kMap.w};

double check_upsample_forward(const Device& dut) {
  Random random(43);
  return compare_with_reference(dut, {random.uniform(kMap, -3, 3)}, {poisoned(kUpsampled)},
                                []<class T>(Tensors& in, Tensors& out) {
                                  ops::upsample_nearest2x_forward<T>(as<T>(in[0]), as<T>(out[0]));
                                });
}

double check_upsample_backward(const Device& dut) {
  Random random(44);
  return compare_with_reference(dut, {random.uniform(kUpsampled, -1, 1)},
                                {random.uniform(kMap, -1, 1)},
                                []<class T>(Tensors& in, Tensors& out) {
                                  ops::upsample_nearest2x_backward<T>(as<T>(in[0]), as<T>(out[0]));
                                });
}

// ---- optimizer -------------------------------------------------------------------------------

// Random parameter groups for an arena pass: the group index of each element, on the DUT and
// (for the double reference) on the host.
struct GroupIndex {
  Tensor on_dut, on_host;
  template <class T>
  View<const uint8_t> view() {
    return std::is_same_v<T, float> ? on_dut.view<uint8_t>() : on_host.view<uint8_t>();
  }
};
GroupIndex random_groups(Random& random, const Device& dut) {
  std::vector<uint8_t> groups(size_t(kFlat.numel()));
  for (uint8_t& g : groups) g = uint8_t(random.value(0, 3));
  const Tensor on_host = Tensor::from_vector(groups, kFlat);
  return {on_host.to(dut), on_host};
}

double check_sgd_step(const Device& dut) {
  Random random(50);
  GroupIndex groups = random_groups(random, dut);
  // Parameters and momentum buffers are updated in place; each group its own settings.
  return compare_with_reference(
      dut, {random.uniform(kFlat, -1, 1)},
      {random.uniform(kFlat, -1, 1), random.uniform(kFlat, -1, 1)},
      [&]<class T>(Tensors& in, Tensors& out) {
        const ops::SgdParams settings[] = {{.lr = 0.1, .momentum = 0.8},
                                           {.lr = 0.01, .momentum = 0.937, .weight_decay = 5e-4},
                                           {.lr = 0.03, .momentum = 0.9, .nesterov = false}};
        ops::sgd_step<T>(as<T>(out[0]), as<T>(in[0]), as<T>(out[1]), groups.view<T>(), settings);
      });
}

double check_ema_update(const Device& dut) {
  Random random(51);
  return compare_with_reference(dut, {random.uniform(kFlat, -1, 1)}, {random.uniform(kFlat, -1, 1)},
                                []<class T>(Tensors& in, Tensors& out) {
                                  ops::ema_update<T>(as<T>(out[0]), as<T>(in[0]), 0.999);
                                });
}

// Gradient clipping's two halves on the device: the sum of squares into one double there, and
// the scale it implies (the norm of these values is far above max_norm, so it does scale).
double check_clip_to_norm(const Device& dut) {
  Random random(52);
  return compare_with_reference(
      dut, {}, {random.uniform(kFlat, -1, 1)}, []<class T>(Tensors&, Tensors& out) {
        Tensor sum = Tensor::empty({1, 1, 1, 1}, out[0].device(), DType::f64);
        ops::sum_of_squares<T>(as<T>(out[0]), sum.view<double>());
        ops::clip_to_norm<T>(as<T>(out[0]), sum.view<double>(), 10.0);
      });
}

double check_sum_of_squares(const Device& dut) {
  const Tensor x = Random(53).uniform(kFlat, -2, 2);
  Tensor on_dut = x.to(dut), reference = in_double(x);
  Tensor got = Tensor::empty({1, 1, 1, 1}, dut, DType::f64);
  Tensor want = Tensor::empty({1, 1, 1, 1}, Device::cpu(), DType::f64);
  ops::sum_of_squares<float>(as<float>(on_dut), got.view<double>());
  ops::sum_of_squares<double>(as<double>(reference), want.view<double>());
  return max_error(got.to_doubles(), want.to_doubles());
}

}  // namespace

std::vector<Check> kernel_checks() {
  std::vector<Check> checks = {
      {"elementwise", "silu_forward", 1e-5, check_silu_forward},
      {"elementwise", "silu_backward", 1e-5, check_silu_backward},
      {"elementwise", "add_forward", 1e-6, check_add_forward},
      {"elementwise", "add_backward", 1e-6, check_add_backward},
      {"elementwise", "sigmoid_forward", 1e-5, check_sigmoid_forward},
      {"elementwise", "sigmoid_backward", 1e-5, check_sigmoid_backward},
      {"elementwise", "bce_with_logits_forward", 1e-5, check_bce_forward},
      {"elementwise", "bce_with_logits_backward", 1e-5, check_bce_backward},
  };
  const std::pair<ops::GpuConvolutionPath, const char*> paths[] = {
      {ops::GpuConvolutionPath::cudnn, " [cudnn]"}, {ops::GpuConvolutionPath::gemm, " [gemm]"}};
  const std::pair<double (*)(const Device&), const char*> convs[] = {
      {check_conv2d_forward, "conv2d_forward"},
      {check_conv2d_backward_data, "conv2d_backward_data"},
      {check_conv2d_backward_weight, "conv2d_backward_weight+bias"}};
  for (const auto& [path, label] : paths)
    for (const auto& [check, name] : convs)
      checks.push_back(
          {"convolution", std::string(name) + label, 1e-4,
           [path, check](const Device& dut) { return on_conv_path(dut, path, check); }});
  const Check rest[] = {
      {"batchnorm", "batchnorm_moments (SyncBN)", 1e-4, check_bn_moments},
      {"batchnorm", "batchnorm_apply (SyncBN)", 1e-4, check_bn_apply},
      {"batchnorm", "batchnorm_backward_reduce (SyncBN)", 1e-4, check_bn_backward_reduce},
      {"batchnorm", "batchnorm_backward_apply (SyncBN)", 1e-4, check_bn_backward_apply},
      {"batchnorm", "batchnorm_forward_train", 1e-4, check_bn_forward_train},
      {"batchnorm", "batchnorm_backward_train", 1e-4, check_bn_backward_train},
      {"batchnorm", "batchnorm_forward_eval", 1e-4, check_bn_forward_eval},
      {"batchnorm", "batchnorm_backward_eval", 1e-4, check_bn_backward_eval},
      {"bn+silu", "batchnorm_silu_apply", 1e-4, check_bn_silu_apply},
      {"bn+silu", "batchnorm_silu_backward_reduce", 1e-4, check_bn_silu_backward_reduce},
      {"bn+silu", "batchnorm_silu_backward_apply", 1e-4, check_bn_silu_backward_apply},
      {"bn+silu", "batchnorm_silu_backward_train", 1e-4, check_bn_silu_backward_train},
      {"bn+silu", "batchnorm_silu_backward_eval", 1e-4, check_bn_silu_backward_eval},
      {"pool+upsample", "maxpool2d_forward", 0, check_maxpool_forward},
      {"pool+upsample", "maxpool2d_backward", 1e-5, check_maxpool_backward},
      {"pool+upsample", "maxpool2d_chain3_forward (SPPF)", 0, check_sppf_chain},
      {"pool+upsample", "upsample_nearest2x_forward", 0, check_upsample_forward},
      {"pool+upsample", "upsample_nearest2x_backward", 1e-5, check_upsample_backward},
      {"optimizer", "sgd_step (three groups)", 1e-6, check_sgd_step},
      {"optimizer", "ema_update", 1e-6, check_ema_update},
      {"optimizer", "sum_of_squares", 1e-6, check_sum_of_squares},
      {"optimizer", "clip_to_norm", 1e-6, check_clip_to_norm},
  };
  checks.insert(checks.end(), std::begin(rest), std::end(rest));
  return checks;
}

}  // namespace bareyolo::selftest
