// tools/selftest/batchnorm_checks.cpp — the float BatchNorm ops against their double reference
// (see selftest.h; tolerances: the top of selftest.cpp): SyncBatchNorm's four phases (moments,
// apply, backward reduce and apply), the training and evaluation forward and backward, on
// yolov5n-like maps (odd sizes, few and many channels, a batch of one, 1x1 maps) and on channel
// slices, and the moments of a batch whose mean dwarfs its spread. The fused BN + SiLU ops and the
// ConvBnSilu layer: bn_silu_checks.cpp.
#include <vector>

#include "kernels/ops.h"
#include "tools/selftest/checks.h"

namespace bareyolo::selftest {

namespace {

constexpr Shape4 kShapes[] = {{2, 16, 33, 31}, {4, 32, 20, 20}, {1, 8, 7, 5}, {3, 64, 1, 1}};
constexpr ops::BatchNormParams kBatchNorm{.eps = 1e-3, .momentum = 0.03};  // YOLOv5's

Shape4 per_channel(const Tensor& t) { return {1, t.shape().c, 1, 1}; }
int64_t per_channel_count(const Tensor& t) { return t.shape().n * t.shape().plane(); }

// An op's outputs that a case does not compare, like `t` in the op's type: gradients it adds to
// start from zero; statistics it writes, empty.
template <class T>
Tensor zeros_like(const Tensor& t) {
  return Tensor::zeros(t.shape(), t.device(), dtype_of<T>());
}
template <class T>
Tensor empty_like(const Tensor& t) {
  return Tensor::empty(t.shape(), t.device(), dtype_of<T>());
}

// ---- SyncBatchNorm's phases --------------------------------------------------------------------

struct PhaseCase {
  Tensor x, dy, mean, invstd, gamma, beta, sum_dy, sum_dy_xhat, dx;
};
std::vector<PhaseCase> phase_cases() {
  Random random(81);
  std::vector<PhaseCase> cases;
  for (const Shape4& s : kShapes) {
    PhaseCase c;
    c.x = random.uniform(s, -2, 3);
    c.dy = random.uniform(s, -1, 1);
    c.mean = random.per_channel(s.c, -0.5, 0.5);
    c.invstd = random.per_channel(s.c, 0.5, 2);
    c.gamma = random.per_channel(s.c, 0.5, 1.5);
    c.beta = random.per_channel(s.c, -1, 1);
    c.sum_dy = random.per_channel(s.c, -5, 5);
    c.sum_dy_xhat = random.per_channel(s.c, -5, 5);
    c.dx = random.uniform(s, -3, 3);
    cases.push_back(c);
  }
  return cases;
}

double check_moments(const Device& dut) {
  return worst_over(phase_cases(), [&](const PhaseCase& c) {
    return compare_with_reference(
        dut, {c.x}, {poisoned(per_channel(c.x)), poisoned(per_channel(c.x))},
        []<class T>(Tensors& in, Tensors& out) {
          ops::batchnorm_moments<T>(as<T>(in[0]), ptr<T>(out[0]), ptr<T>(out[1]));
        });
  });
}

double check_apply(const Device& dut) {
  return worst_over(phase_cases(), [&](const PhaseCase& c) {
    return compare_with_reference(dut, {c.x, c.mean, c.invstd, c.gamma, c.beta},
                                  {poisoned(c.x.shape())}, []<class T>(Tensors& in, Tensors& out) {
                                    ops::batchnorm_apply<T>(as<T>(in[0]), ptr<T>(in[1]),
                                                            ptr<T>(in[2]), ptr<T>(in[3]),
                                                            ptr<T>(in[4]), as<T>(out[0]));
                                  });
  });
}

double check_backward_reduce(const Device& dut) {
  return worst_over(phase_cases(), [&](const PhaseCase& c) {
    return compare_with_reference(dut, {c.x, c.dy, c.mean, c.invstd},
                                  {poisoned(per_channel(c.x)), poisoned(per_channel(c.x))},
                                  []<class T>(Tensors& in, Tensors& out) {
                                    ops::batchnorm_backward_reduce<T>(
                                        as<T>(in[0]), as<T>(in[1]), ptr<T>(in[2]), ptr<T>(in[3]),
                                        ptr<T>(out[0]), ptr<T>(out[1]));
                                  });
  });
}

double check_backward_apply(const Device& dut) {
  return worst_over(phase_cases(), [&](const PhaseCase& c) {
    const int64_t count = per_channel_count(c.x);
    return compare_with_reference(
        dut, {c.x, c.dy, c.mean, c.invstd, c.gamma, c.sum_dy, c.sum_dy_xhat}, {c.dx},
        [count]<class T>(Tensors& in, Tensors& out) {
          ops::batchnorm_backward_apply<T>(as<T>(in[0]), as<T>(in[1]), ptr<T>(in[2]), ptr<T>(in[3]),
                                           ptr<T>(in[4]), ptr<T>(in[5]), ptr<T>(in[6]), count,
                                           as<T>(out[0]));
        });
  });
}

// x = 1000 + noise of variance ~1: a float sum of squares minus count * mean^2 would cancel to
// garbage (its rounding, ~1000^2 * count * eps, exceeds the true M2 ~ count); Welford/Chan
// keeps M2 close, x's own rounding being 6e-5.
double check_moments_large_mean(const Device& dut) {
  Random random(86);
  const Shape4 s{8, 4, 40, 40};
  std::vector<float> values = random.floats(s.numel(), -1.7, 1.7);
  for (float& v : values) v += 1000.0f;
  const Tensor x = Tensor::from_vector(values, s);
  return compare_with_reference(dut, {x}, {poisoned(per_channel(x)), poisoned(per_channel(x))},
                                []<class T>(Tensors& in, Tensors& out) {
                                  ops::batchnorm_moments<T>(as<T>(in[0]), ptr<T>(out[0]),
                                                            ptr<T>(out[1]));
                                });
}

// ---- training: forward, and backward from the statistics the forward saves -------------------

// What every training and evaluation case draws first, in this order.
struct BatchNormInputs {
  Tensor x, dy, gamma, beta, running_mean, running_var;
};
BatchNormInputs draw_inputs(Random& random, const Shape4& s) {
  BatchNormInputs in;
  in.x = random.uniform(s, -2, 3);
  in.dy = random.uniform(s, -1, 1);
  in.gamma = random.per_channel(s.c, 0.5, 1.5);
  in.beta = random.per_channel(s.c, -1, 1);
  in.running_mean = random.per_channel(s.c, -0.5, 0.5);
  in.running_var = random.per_channel(s.c, 0.5, 2);
  return in;
}

struct TrainCase : BatchNormInputs {
  Tensor save_mean = {}, save_invstd = {};  // the CPU's float forward's, the backward's inputs
  Tensor dx = {}, dgamma = {}, dbeta = {};  // the backward's initial values
};
std::vector<TrainCase> train_cases() {
  Random random(82);
  std::vector<TrainCase> cases;
  for (const Shape4& s : kShapes) {
    TrainCase c{draw_inputs(random, s)};
    random.skip(s);  // y, save_mean and save_invstd: poisoned instead
    random.skip(per_channel(c.x));
    random.skip(per_channel(c.x));
    c.save_mean = Tensor::empty(per_channel(c.x));
    c.save_invstd = Tensor::empty(per_channel(c.x));
    Tensor y = Tensor::empty(s), running_mean = c.running_mean.to(Device::cpu()),
           running_var = c.running_var.to(Device::cpu());
    ops::batchnorm_forward_train<float>(c.x.view<float>(), ptr<float>(c.gamma), ptr<float>(c.beta),
                                        kBatchNorm, ptr<float>(running_mean),
                                        ptr<float>(running_var), ptr<float>(c.save_mean),
                                        ptr<float>(c.save_invstd), y.view<float>());
    c.dx = random.uniform(s, -3, 3);
    c.dgamma = random.uniform(per_channel(c.x), -3, 3);
    c.dbeta = random.uniform(per_channel(c.x), -3, 3);
    cases.push_back(c);
  }
  return cases;
}

// Channel slices of a 3 x 24 x 9 x 13 map: BN of channels 4..11 of x into channels 16..23 of y
// (from zeroed running statistics), and its backward from dy's channels 16..23 into dx's 1..8.
struct SliceCase {
  Tensor x, dy, gamma, beta, save_mean, save_invstd, y, dx;
};
SliceCase slice_case() {
  Random random(85);
  const Shape4 parent{3, 24, 9, 13};
  SliceCase c;
  c.x = random.uniform(parent, -2, 3);
  c.dy = random.uniform(parent, -1, 1);
  c.gamma = random.per_channel(8, 0.5, 1.5);
  c.beta = random.per_channel(8, -1, 1);
  c.save_mean = random.per_channel(8, -0.5, 0.5);
  c.save_invstd = random.per_channel(8, 0.5, 2);
  c.y = poisoned_channels(random.uniform(parent, -3, 3), 16, 24);
  c.dx = random.uniform(parent, -3, 3);
  return c;
}

double check_forward_train(const Device& dut) {
  const double maps = worst_over(train_cases(), [&](const TrainCase& c) {
    // y and the saved statistics are overwritten; the running statistics updated in place.
    return compare_with_reference(dut, {c.x, c.gamma, c.beta},
                                  {poisoned(c.x.shape()), c.running_mean, c.running_var,
                                   poisoned(per_channel(c.x)), poisoned(per_channel(c.x))},
                                  []<class T>(Tensors& in, Tensors& out) {
                                    ops::batchnorm_forward_train<T>(
                                        as<T>(in[0]), ptr<T>(in[1]), ptr<T>(in[2]), kBatchNorm,
                                        ptr<T>(out[1]), ptr<T>(out[2]), ptr<T>(out[3]),
                                        ptr<T>(out[4]), as<T>(out[0]));
                                  });
  });
  const SliceCase c = slice_case();
  const Tensor running_stats = Tensor::zeros(per_channel(c.gamma));
  const double slices = compare_with_reference(
      dut, {c.x, c.gamma, c.beta}, {c.y, running_stats, running_stats},
      []<class T>(Tensors& in, Tensors& out) {
        Tensor mean = empty_like<T>(in[1]), invstd = empty_like<T>(in[1]);
        ops::batchnorm_forward_train<T>(as<T>(in[0].channels(4, 12)), ptr<T>(in[1]), ptr<T>(in[2]),
                                        kBatchNorm, ptr<T>(out[1]), ptr<T>(out[2]), ptr<T>(mean),
                                        ptr<T>(invstd), as<T>(out[0].channels(16, 24)));
      });
  return std::max(maps, slices);
}

// dx, and dgamma with dbeta, each in a run of its own (the other outputs from zero).
double check_backward_train(const Device& dut) {
  const double maps = worst_over(train_cases(), [&](const TrainCase& c) {
    const Tensors inputs = {c.x, c.dy, c.gamma, c.save_mean, c.save_invstd};
    const double dx =
        compare_with_reference(dut, inputs, {c.dx}, []<class T>(Tensors& in, Tensors& out) {
          Tensor dgamma = zeros_like<T>(in[2]), dbeta = zeros_like<T>(in[2]);
          ops::batchnorm_backward_train<T>(as<T>(in[0]), as<T>(in[1]), ptr<T>(in[2]), ptr<T>(in[3]),
                                           ptr<T>(in[4]), as<T>(out[0]), ptr<T>(dgamma),
                                           ptr<T>(dbeta));
        });
    const double dgamma_dbeta = compare_with_reference(
        dut, inputs, {c.dgamma, c.dbeta}, []<class T>(Tensors& in, Tensors& out) {
          Tensor dx = zeros_like<T>(in[0]);
          ops::batchnorm_backward_train<T>(as<T>(in[0]), as<T>(in[1]), ptr<T>(in[2]), ptr<T>(in[3]),
                                           ptr<T>(in[4]), as<T>(dx), ptr<T>(out[0]),
                                           ptr<T>(out[1]));
        });
    return std::max(dx, dgamma_dbeta);
  });
  const SliceCase c = slice_case();
  const double slices =
      compare_with_reference(dut, {c.x, c.dy, c.gamma, c.save_mean, c.save_invstd}, {c.dx},
                             []<class T>(Tensors& in, Tensors& out) {
                               Tensor dgamma = zeros_like<T>(in[2]), dbeta = zeros_like<T>(in[2]);
                               ops::batchnorm_backward_train<T>(
                                   as<T>(in[0].channels(4, 12)), as<T>(in[1].channels(16, 24)),
                                   ptr<T>(in[2]), ptr<T>(in[3]), ptr<T>(in[4]),
                                   as<T>(out[0].channels(1, 9)), ptr<T>(dgamma), ptr<T>(dbeta));
                             });
  return std::max(maps, slices);
}

// ---- evaluation: the running statistics ------------------------------------------------------

struct EvalCase : BatchNormInputs {
  Tensor dx = {}, dgamma = {}, dbeta = {};
};
std::vector<EvalCase> eval_cases() {
  Random random(83);
  std::vector<EvalCase> cases;
  for (const Shape4& s : kShapes) {
    EvalCase c{draw_inputs(random, s)};
    c.dx = random.uniform(s, -3, 3);
    c.dgamma = random.per_channel(s.c, -3, 3);
    c.dbeta = random.per_channel(s.c, -3, 3);
    cases.push_back(c);
  }
  return cases;
}

double check_forward_eval(const Device& dut) {
  return worst_over(eval_cases(), [&](const EvalCase& c) {
    return compare_with_reference(dut, {c.x, c.gamma, c.beta, c.running_mean, c.running_var},
                                  {poisoned(c.x.shape())}, []<class T>(Tensors& in, Tensors& out) {
                                    ops::batchnorm_forward_eval<T>(
                                        as<T>(in[0]), ptr<T>(in[1]), ptr<T>(in[2]), ptr<T>(in[3]),
                                        ptr<T>(in[4]), kBatchNorm, as<T>(out[0]));
                                  });
  });
}

double check_backward_eval(const Device& dut) {
  return worst_over(eval_cases(), [&](const EvalCase& c) {
    const Tensors inputs = {c.x, c.dy, c.gamma, c.running_mean, c.running_var};
    const double dx =
        compare_with_reference(dut, inputs, {c.dx}, []<class T>(Tensors& in, Tensors& out) {
          Tensor dgamma = zeros_like<T>(in[2]), dbeta = zeros_like<T>(in[2]);
          ops::batchnorm_backward_eval<T>(as<T>(in[0]), as<T>(in[1]), ptr<T>(in[2]), ptr<T>(in[3]),
                                          ptr<T>(in[4]), kBatchNorm, as<T>(out[0]), ptr<T>(dgamma),
                                          ptr<T>(dbeta));
        });
    const double dgamma_dbeta = compare_with_reference(
        dut, inputs, {c.dgamma, c.dbeta}, []<class T>(Tensors& in, Tensors& out) {
          Tensor dx = zeros_like<T>(in[0]);
          ops::batchnorm_backward_eval<T>(as<T>(in[0]), as<T>(in[1]), ptr<T>(in[2]), ptr<T>(in[3]),
                                          ptr<T>(in[4]), kBatchNorm, as<T>(dx), ptr<T>(out[0]),
                                          ptr<T>(out[1]));
        });
    return std::max(dx, dgamma_dbeta);
  });
}

}  // namespace

std::vector<Check> batchnorm_checks() {
  return {
      {"batchnorm", "batchnorm_moments (SyncBN)", kFloatSums, check_moments},
      {"batchnorm", "batchnorm_moments, mean 1000x spread", kLargeMeanMoments,
       check_moments_large_mean},
      {"batchnorm", "batchnorm_apply (SyncBN)", kFloatSums, check_apply},
      {"batchnorm", "batchnorm_backward_reduce (SyncBN)", kFloatSums, check_backward_reduce},
      {"batchnorm", "batchnorm_backward_apply (SyncBN)", kFloatSums, check_backward_apply},
      {"batchnorm", "batchnorm_forward_train (+ slices)", kFloatSums, check_forward_train},
      {"batchnorm", "batchnorm_backward_train (+ slices)", kFloatSums, check_backward_train},
      {"batchnorm", "batchnorm_forward_eval", kFloatSums, check_forward_eval},
      {"batchnorm", "batchnorm_backward_eval", kFloatSums, check_backward_eval},
  };
}

}  // namespace bareyolo::selftest
