// tools/selftest/bn_silu_checks.cpp — the fused BatchNorm + SiLU in float against the double
// reference (see selftest.h; tolerances: the top of selftest.cpp). On a GPU each op is one fused
// kernel; on the CPU (and in the reference) it is its definition, the composition of the ops it
// fuses (kernels/cpu/batchnorm_silu.cpp). The apply on yolov5n-like maps, the four backward ops on
// a small map, and the ConvBnSilu layer, which fuses BN with SiLU on a GPU (forward: one apply
// pass; backward: SiLU's gradient computed inside BN's reduce and apply), train and eval, alone and
// as SyncBatchNorm over one rank.
#include <array>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/distributed/comm/communicator.h"
#include "engine/layers/conv_bn_silu.h"
#include "kernels/ops.h"
#include "tools/selftest/checks.h"

namespace bareyolo::selftest {

namespace {

constexpr ops::BatchNormParams kBatchNorm{.eps = 1e-3, .momentum = 0.03};  // YOLOv5's

// ---- the apply, on the BatchNorm checks' maps --------------------------------------------------

double check_apply(const Device& dut) {
  Random random(84);
  double worst = 0;
  for (const Shape4 s :
       {Shape4{2, 16, 33, 31}, Shape4{4, 32, 20, 20}, Shape4{1, 8, 7, 5}, Shape4{3, 64, 1, 1}}) {
    const Tensor x = random.uniform(s, -2, 3);
    const Tensor mean = random.per_channel(s.c, -0.5, 0.5),
                 invstd = random.per_channel(s.c, 0.5, 2);
    const Tensor gamma = random.per_channel(s.c, 0.5, 1.5), beta = random.per_channel(s.c, -1, 1);
    worst =
        std::max(worst, compare_with_reference(dut, {x, mean, invstd, gamma, beta}, {poisoned(s)},
                                               []<class T>(Tensors& in, Tensors& out) {
                                                 ops::batchnorm_silu_apply<T>(
                                                     as<T>(in[0]), ptr<T>(in[1]), ptr<T>(in[2]),
                                                     ptr<T>(in[3]), ptr<T>(in[4]), as<T>(out[0]));
                                               }));
  }
  return worst;
}

// ---- the backward ops, on two images of odd sizes
// ------------------------------------------------

constexpr Shape4 kMap{2, 6, 9, 7};
constexpr Shape4 kChannels{1, kMap.c, 1, 1};
constexpr int64_t kPerChannel = kMap.n * kMap.h * kMap.w;

// What the ops read, in the ranges training sees, and the initial values of the per-channel
// gradients they add to (dx they write).
struct BnInputs {
  Tensor x, dy, mean, invstd, gamma, beta, running_mean, running_var, sum_dy, sum_dy_xhat;
  Tensor workspace, dgamma, dbeta;
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
  b.workspace = random.uniform(kMap, -1, 1);
  b.dgamma = random.per_channel(kMap.c, -1, 1);
  b.dbeta = random.per_channel(kMap.c, -1, 1);
  return b;
}

// SyncBatchNorm's two phases share dx as a workspace (kernels/ops.h): reduce gets one, and apply
// runs after a reduce on the same dx (whose local sums, in[8] and in[9], it does not use: it
// gets the sums of all ranks).
double check_backward_reduce(const Device& dut) {
  const BnInputs b = bn_inputs(31);
  return compare_with_reference(
      dut, {b.x, b.dy, b.mean, b.invstd, b.gamma, b.beta, b.workspace},
      {poisoned(kChannels), poisoned(kChannels)}, []<class T>(Tensors& in, Tensors& out) {
        ops::batchnorm_silu_backward_reduce<T>(as<T>(in[0]), as<T>(in[1]), ptr<T>(in[2]),
                                               ptr<T>(in[3]), ptr<T>(in[4]), ptr<T>(in[5]),
                                               ptr<T>(out[0]), ptr<T>(out[1]), as<T>(in[6]));
      });
}

double check_backward_apply(const Device& dut) {
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

// The fused backward ops write dx (kernels/ops.h), so it starts as NaN; dgamma and dbeta add up.
double check_backward_train(const Device& dut) {
  const BnInputs b = bn_inputs(33);
  return compare_with_reference(
      dut, {b.x, b.dy, b.gamma, b.beta, b.mean, b.invstd}, {poisoned(kMap), b.dgamma, b.dbeta},
      []<class T>(Tensors& in, Tensors& out) {
        ops::batchnorm_silu_backward_train<T>(as<T>(in[0]), as<T>(in[1]), ptr<T>(in[2]),
                                              ptr<T>(in[3]), ptr<T>(in[4]), ptr<T>(in[5]),
                                              as<T>(out[0]), ptr<T>(out[1]), ptr<T>(out[2]));
      });
}

double check_backward_eval(const Device& dut) {
  const BnInputs b = bn_inputs(34);
  return compare_with_reference(
      dut, {b.x, b.dy, b.gamma, b.beta, b.running_mean, b.running_var},
      {poisoned(kMap), b.dgamma, b.dbeta}, []<class T>(Tensors& in, Tensors& out) {
        ops::batchnorm_silu_backward_eval<T>(
            as<T>(in[0]), as<T>(in[1]), ptr<T>(in[2]), ptr<T>(in[3]), ptr<T>(in[4]), ptr<T>(in[5]),
            kBatchNorm, as<T>(out[0]), ptr<T>(out[1]), ptr<T>(out[2]));
      });
}

// ---- the ConvBnSilu layer: its forward and backward on the DUT against the layer in double ---

// 5 -> 6 channels, 3x3 stride 2, weights from seed 7, on `device` in `dtype`; SyncBatchNorm
// over `sync` where given.
std::unique_ptr<ConvBnSilu> conv_bn_silu(const Device& device, DType dtype,
                                         dist::Communicator* sync) {
  std::mt19937_64 init(7);
  auto block = std::make_unique<ConvBnSilu>(5, 6, 3, 2, -1, kBatchNorm, init, device, dtype);
  if (sync)
    block->for_each_child([&](Module& child) {
      if (auto* bn = dynamic_cast<BatchNorm2d*>(&child)) bn->set_sync(sync);
    });
  return block;
}

// One forward (output poisoned first) and backward of `block`; returns the output and the
// input's gradient.
std::array<Tensor, 2> forward_backward(ConvBnSilu& block, const Tensor& input,
                                       const Tensor& grad_output, Mode mode) {
  const Shape4 in_shape = input.shape();
  Tensor output =
      poisoned(block.output_shape(std::array{in_shape}), input.dtype()).to(input.device());
  block.forward(std::span(&input, 1), output, mode);
  Tensor grad_input = Tensor::zeros(in_shape, input.device(), input.dtype());
  block.backward(std::span(&input, 1), output, grad_output, std::span(&grad_input, 1),
                 ops::GradientWrite::add);
  return {output, grad_input};
}

double check_conv_bn_silu(const Device& dut, bool synced) {
  const std::unique_ptr<dist::Communicator> one_rank = dist::make_single_rank_communicator();
  dist::Communicator* sync = synced ? one_rank.get() : nullptr;
  double worst = 0;
  for (Mode mode : {Mode::train, Mode::eval}) {
    const std::unique_ptr<ConvBnSilu> block = conv_bn_silu(dut, DType::f32, sync);
    const std::unique_ptr<ConvBnSilu> reference = conv_bn_silu(Device::cpu(), DType::f64, sync);
    std::vector<StateEntry> state, reference_state;
    block->collect_state("", state);
    reference->collect_state("", reference_state);
    // Running statistics away from their initial 0 and 1, so that eval uses them; the reference
    // starts from the DUT's values.
    Random statistics(87);
    for (StateEntry& e : state)
      if (e.name == "bn.running_mean")
        e.value->copy_from(statistics.uniform(e.value->shape(), -0.3, 0.3));
      else if (e.name == "bn.running_var")
        e.value->copy_from(statistics.uniform(e.value->shape(), 0.5, 2));
    for (size_t i = 0; i < state.size(); ++i)
      if (state[i].value->dtype() == DType::f32)
        reference_state[i].value->copy_from(in_double(*state[i].value));

    const Shape4 in_shape{3, 5, 11, 9};
    const Tensor x = Random(86).uniform(in_shape, -2, 2);
    const Tensor grad_output = Random(88).uniform(block->output_shape(std::array{in_shape}), -1, 1);
    const std::array<Tensor, 2> got =
        forward_backward(*block, x.to(dut), grad_output.to(dut), mode);
    const std::array<Tensor, 2> want =
        forward_backward(*reference, in_double(x), in_double(grad_output), mode);
    for (size_t k = 0; k < got.size(); ++k)
      worst = std::max(worst, max_error(got[k].to_doubles(), want[k].to_doubles()));
    // Every parameter, its gradient, and the buffers (running statistics, the batch counter).
    for (size_t i = 0; i < state.size(); ++i) {
      worst = std::max(
          worst, max_error(state[i].value->to_doubles(), reference_state[i].value->to_doubles()));
      if (state[i].grad)
        worst = std::max(
            worst, max_error(state[i].grad->to_doubles(), reference_state[i].grad->to_doubles()));
    }
  }
  return worst;
}

}  // namespace

std::vector<Check> bn_silu_checks() {
  return {
      {"bn+silu", "batchnorm_silu_apply", kFloatSums, check_apply},
      {"bn+silu", "batchnorm_silu_backward_reduce", kFloatSums, check_backward_reduce},
      {"bn+silu", "batchnorm_silu_backward_apply", kFloatSums, check_backward_apply},
      {"bn+silu", "batchnorm_silu_backward_train", kFloatSums, check_backward_train},
      {"bn+silu", "batchnorm_silu_backward_eval", kFloatSums, check_backward_eval},
      {"bn+silu", "ConvBnSilu layer (train, eval)", kFloatSums,
       [](const Device& dut) { return check_conv_bn_silu(dut, false); }},
      {"bn+silu", "ConvBnSilu layer, SyncBN of one rank", kFloatSums,
       [](const Device& dut) { return check_conv_bn_silu(dut, true); }},
  };
}

}  // namespace bareyolo::selftest
