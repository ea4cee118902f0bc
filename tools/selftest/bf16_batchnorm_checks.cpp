// tools/selftest/bf16_batchnorm_checks.cpp — BatchNorm and BatchNorm + SiLU on bf16 maps on the
// DUT against the CPU's bf16 ops (see bf16_checks.cpp and selftest.h; tolerances: the top of
// selftest.cpp): SyncBatchNorm's phases, the training and
// evaluation forward and backward, plain and fused, every per-channel value in float.
#include <vector>

#include "kernels/ops.h"
#include "tools/selftest/checks.h"

namespace bareyolo::selftest {

namespace {

constexpr ops::BatchNormParams kBatchNorm{.eps = 1e-3, .momentum = 0.03};  // YOLOv5's

// One map's inputs, drawn as the former test drew them: the maps in bf16, the per-channel values
// in float, and the initial values of the outputs the ops add to.
struct Bf16BnCase {
  Shape4 shape, channels;
  int64_t count = 0;  // values per channel
  Tensor x, dy, mean, invstd, gamma, beta, sum_dy, sum_dy_xhat, running_mean, running_var;
  Tensor apply_dx;                // batchnorm_backward_apply's
  Tensor save_mean, save_invstd;  // the CPU's training statistics, the backward's inputs
  Tensor train_dx, train_dgamma[2], train_dbeta[2];  // per op: plain, fused (which writes dx)
  Tensor eval_dx, eval_dgamma[2], eval_dbeta[2];
};

std::vector<Bf16BnCase> bf16_bn_cases() {
  Random random(1612);
  std::vector<Bf16BnCase> cases;
  for (const Shape4 s : {Shape4{2, 16, 33, 31}, Shape4{1, 8, 7, 5}}) {
    Bf16BnCase b;
    b.shape = s;
    b.channels = {1, s.c, 1, 1};
    b.count = s.n * s.plane();
    b.x = random.uniform_bf16(s, -2, 3);
    b.dy = random.uniform_bf16(s, -1, 1);
    b.mean = random.per_channel(s.c, -0.5, 0.5);
    b.invstd = random.per_channel(s.c, 0.5, 2);
    b.gamma = random.per_channel(s.c, 0.5, 1.5);
    b.beta = random.per_channel(s.c, -1, 1);
    b.sum_dy = random.per_channel(s.c, -5, 5);
    b.sum_dy_xhat = random.per_channel(s.c, -5, 5);
    b.running_mean = random.per_channel(s.c, -0.5, 0.5);
    b.running_var = random.per_channel(s.c, 0.5, 2);
    b.apply_dx = random.uniform_bf16(s, -3, 3);
    random.skip(s);  // the training forward's y, save_mean and save_invstd: poisoned instead
    random.skip(b.channels);
    random.skip(b.channels);
    b.save_mean = Tensor::empty(b.channels);
    b.save_invstd = Tensor::empty(b.channels);
    Tensor running_mean = b.running_mean.to(Device::cpu()),
           running_var = b.running_var.to(Device::cpu());
    ops::batchnorm_train_statistics<bf16>(b.x.view<bf16>(), kBatchNorm, ptr<float>(running_mean),
                                          ptr<float>(running_var), ptr<float>(b.save_mean),
                                          ptr<float>(b.save_invstd));
    for (int fused = 0; fused < 2; ++fused) {
      if (fused)
        random.skip(s);  // the fused op writes dx: poisoned instead
      else
        b.train_dx = random.uniform_bf16(s, -3, 3);
      b.train_dgamma[fused] = random.per_channel(s.c, -1, 1);
      b.train_dbeta[fused] = random.per_channel(s.c, -1, 1);
    }
    for (int fused = 0; fused < 2; ++fused) {
      if (fused)
        random.skip(s);
      else
        b.eval_dx = random.uniform_bf16(s, -3, 3);
      b.eval_dgamma[fused] = random.per_channel(s.c, -1, 1);
      b.eval_dbeta[fused] = random.per_channel(s.c, -1, 1);
    }
    cases.push_back(b);
  }
  return cases;
}

// A check over both maps: compare_with_cpu of what `check` makes of each.
template <class CaseCheck>
double over_cases(const CaseCheck& check) {
  return worst_over(bf16_bn_cases(), check);
}

double check_moments(const Device& dut) {
  return over_cases([&](const Bf16BnCase& b) {
    return compare_with_cpu(
        dut, {b.x}, {poisoned(b.channels), poisoned(b.channels)}, [](Tensors& in, Tensors& out) {
          ops::batchnorm_moments<bf16>(as<bf16>(in[0]), ptr<float>(out[0]), ptr<float>(out[1]));
        });
  });
}

double check_apply(const Device& dut, bool fused) {
  return over_cases([&](const Bf16BnCase& b) {
    return compare_with_cpu(dut, {b.x, b.mean, b.invstd, b.gamma, b.beta},
                            {poisoned(b.shape, DType::bf16)}, [fused](Tensors& in, Tensors& out) {
                              const auto apply = fused ? ops::batchnorm_silu_apply<bf16>
                                                       : ops::batchnorm_apply<bf16>;
                              apply(as<bf16>(in[0]), ptr<float>(in[1]), ptr<float>(in[2]),
                                    ptr<float>(in[3]), ptr<float>(in[4]), as<bf16>(out[0]));
                            });
  });
}

double check_backward_reduce(const Device& dut) {
  return over_cases([&](const Bf16BnCase& b) {
    return compare_with_cpu(dut, {b.x, b.dy, b.mean, b.invstd},
                            {poisoned(b.channels), poisoned(b.channels)},
                            [](Tensors& in, Tensors& out) {
                              ops::batchnorm_backward_reduce<bf16>(
                                  as<bf16>(in[0]), as<bf16>(in[1]), ptr<float>(in[2]),
                                  ptr<float>(in[3]), ptr<float>(out[0]), ptr<float>(out[1]));
                            });
  });
}

// SyncBatchNorm's two phases share dx as a workspace (kernels/ops.h): reduce gets one (in[6]),
// and apply runs after a reduce on the same dx, whose local sums (in[8], in[9]) it does not use.
double check_silu_backward_reduce(const Device& dut) {
  return over_cases([&](const Bf16BnCase& b) {
    return compare_with_cpu(
        dut, {b.x, b.dy, b.mean, b.invstd, b.gamma, b.beta, poisoned(b.shape, DType::bf16)},
        {poisoned(b.channels), poisoned(b.channels)}, [](Tensors& in, Tensors& out) {
          ops::batchnorm_silu_backward_reduce<bf16>(
              as<bf16>(in[0]), as<bf16>(in[1]), ptr<float>(in[2]), ptr<float>(in[3]),
              ptr<float>(in[4]), ptr<float>(in[5]), ptr<float>(out[0]), ptr<float>(out[1]),
              as<bf16>(in[6]));
        });
  });
}

double check_backward_apply(const Device& dut) {
  return over_cases([&](const Bf16BnCase& b) {
    const int64_t count = b.count;
    return compare_with_cpu(dut, {b.x, b.dy, b.mean, b.invstd, b.gamma, b.sum_dy, b.sum_dy_xhat},
                            {b.apply_dx}, [count](Tensors& in, Tensors& out) {
                              ops::batchnorm_backward_apply<bf16>(
                                  as<bf16>(in[0]), as<bf16>(in[1]), ptr<float>(in[2]),
                                  ptr<float>(in[3]), ptr<float>(in[4]), ptr<float>(in[5]),
                                  ptr<float>(in[6]), count, as<bf16>(out[0]));
                            });
  });
}

double check_silu_backward_apply(const Device& dut) {
  return over_cases([&](const Bf16BnCase& b) {
    const int64_t count = b.count;
    return compare_with_cpu(dut,
                            {b.x, b.dy, b.mean, b.invstd, b.gamma, b.beta, b.sum_dy, b.sum_dy_xhat,
                             poisoned(b.channels), poisoned(b.channels)},
                            {poisoned(b.shape, DType::bf16)}, [count](Tensors& in, Tensors& out) {
                              ops::batchnorm_silu_backward_reduce<bf16>(
                                  as<bf16>(in[0]), as<bf16>(in[1]), ptr<float>(in[2]),
                                  ptr<float>(in[3]), ptr<float>(in[4]), ptr<float>(in[5]),
                                  ptr<float>(in[8]), ptr<float>(in[9]), as<bf16>(out[0]));
                              ops::batchnorm_silu_backward_apply<bf16>(
                                  as<bf16>(in[0]), as<bf16>(in[1]), ptr<float>(in[2]),
                                  ptr<float>(in[3]), ptr<float>(in[4]), ptr<float>(in[5]),
                                  ptr<float>(in[6]), ptr<float>(in[7]), count, as<bf16>(out[0]));
                            });
  });
}

// y, the running statistics (updated in place), save_mean and save_invstd.
double check_forward_train(const Device& dut) {
  return over_cases([&](const Bf16BnCase& b) {
    return compare_with_cpu(dut, {b.x, b.gamma, b.beta},
                            {poisoned(b.shape, DType::bf16), b.running_mean, b.running_var,
                             poisoned(b.channels), poisoned(b.channels)},
                            [](Tensors& in, Tensors& out) {
                              ops::batchnorm_forward_train<bf16>(
                                  as<bf16>(in[0]), ptr<float>(in[1]), ptr<float>(in[2]), kBatchNorm,
                                  ptr<float>(out[1]), ptr<float>(out[2]), ptr<float>(out[3]),
                                  ptr<float>(out[4]), as<bf16>(out[0]));
                            });
  });
}

// The backward ops from the statistics the CPU's forward leaves: the plain op adds into dx, the
// fused one writes it; both add into dgamma and dbeta.
double check_backward_train(const Device& dut, bool fused) {
  return over_cases([&](const Bf16BnCase& b) {
    const Tensor dx = fused ? poisoned(b.shape, DType::bf16) : b.train_dx;
    return compare_with_cpu(
        dut, {b.x, b.dy, b.gamma, b.beta, b.save_mean, b.save_invstd},
        {dx, b.train_dgamma[fused], b.train_dbeta[fused]}, [fused](Tensors& in, Tensors& out) {
          if (fused)
            ops::batchnorm_silu_backward_train<bf16>(
                as<bf16>(in[0]), as<bf16>(in[1]), ptr<float>(in[2]), ptr<float>(in[3]),
                ptr<float>(in[4]), ptr<float>(in[5]), as<bf16>(out[0]), ptr<float>(out[1]),
                ptr<float>(out[2]));
          else
            ops::batchnorm_backward_train<bf16>(
                as<bf16>(in[0]), as<bf16>(in[1]), ptr<float>(in[2]), ptr<float>(in[4]),
                ptr<float>(in[5]), as<bf16>(out[0]), ptr<float>(out[1]), ptr<float>(out[2]));
        });
  });
}

double check_forward_eval(const Device& dut) {
  return over_cases([&](const Bf16BnCase& b) {
    return compare_with_cpu(dut, {b.x, b.gamma, b.beta, b.running_mean, b.running_var},
                            {poisoned(b.shape, DType::bf16)}, [](Tensors& in, Tensors& out) {
                              ops::batchnorm_forward_eval<bf16>(
                                  as<bf16>(in[0]), ptr<float>(in[1]), ptr<float>(in[2]),
                                  ptr<float>(in[3]), ptr<float>(in[4]), kBatchNorm,
                                  as<bf16>(out[0]));
                            });
  });
}

double check_backward_eval(const Device& dut, bool fused) {
  return over_cases([&](const Bf16BnCase& b) {
    const Tensor dx = fused ? poisoned(b.shape, DType::bf16) : b.eval_dx;
    return compare_with_cpu(
        dut, {b.x, b.dy, b.gamma, b.beta, b.running_mean, b.running_var},
        {dx, b.eval_dgamma[fused], b.eval_dbeta[fused]}, [fused](Tensors& in, Tensors& out) {
          if (fused)
            ops::batchnorm_silu_backward_eval<bf16>(
                as<bf16>(in[0]), as<bf16>(in[1]), ptr<float>(in[2]), ptr<float>(in[3]),
                ptr<float>(in[4]), ptr<float>(in[5]), kBatchNorm, as<bf16>(out[0]),
                ptr<float>(out[1]), ptr<float>(out[2]));
          else
            ops::batchnorm_backward_eval<bf16>(as<bf16>(in[0]), as<bf16>(in[1]), ptr<float>(in[2]),
                                               ptr<float>(in[4]), ptr<float>(in[5]), kBatchNorm,
                                               as<bf16>(out[0]), ptr<float>(out[1]),
                                               ptr<float>(out[2]));
        });
  });
}

}  // namespace

std::vector<Check> bf16_batchnorm_checks() {
  // The per-channel float sums (moments, the backward's reduce) as the float BatchNorm's; a check
  // with a bf16 output, one bf16 step (its float sums, compared in the same check, are far inside).
  return {
      {"bf16", "batchnorm_moments bf16", kFloatSums, check_moments},
      {"bf16", "batchnorm_apply bf16", kBf16Step,
       [](const Device& dut) { return check_apply(dut, false); }},
      {"bf16", "batchnorm_silu_apply bf16", kBf16Step,
       [](const Device& dut) { return check_apply(dut, true); }},
      {"bf16", "batchnorm_backward_reduce bf16", kFloatSums, check_backward_reduce},
      {"bf16", "batchnorm_silu_backward_reduce bf16", kFloatSums, check_silu_backward_reduce},
      {"bf16", "batchnorm_backward_apply bf16", kBf16Step, check_backward_apply},
      {"bf16", "batchnorm_silu_backward_apply bf16", kBf16Step, check_silu_backward_apply},
      {"bf16", "batchnorm_forward_train bf16", kBf16Step, check_forward_train},
      {"bf16", "batchnorm_backward_train bf16", kBf16Step,
       [](const Device& dut) { return check_backward_train(dut, false); }},
      {"bf16", "batchnorm_silu_backward_train bf16", kBf16Step,
       [](const Device& dut) { return check_backward_train(dut, true); }},
      {"bf16", "batchnorm_forward_eval bf16", kBf16Step, check_forward_eval},
      {"bf16", "batchnorm_backward_eval bf16", kBf16Step,
       [](const Device& dut) { return check_backward_eval(dut, false); }},
      {"bf16", "batchnorm_silu_backward_eval bf16", kBf16Step,
       [](const Device& dut) { return check_backward_eval(dut, true); }},
  };
}

}  // namespace bareyolo::selftest
