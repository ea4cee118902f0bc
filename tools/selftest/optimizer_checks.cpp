// tools/selftest/optimizer_checks.cpp — the optimizer's passes over flat buffers against their
// double reference (see selftest.h; tolerances: the top of selftest.cpp): SGD over three parameter
// groups in one pass (Nesterov and plain, with weight decay), the EMA, clipping to a norm whose sum
// of squares stays on the device, and the sum of squares itself (dense and strided, and the same
// bits when repeated), on buffers of one element, of sizes that do not divide a GPU's grid, and of
// a million elements.
#include <string>
#include <vector>

#include "engine/step_scalars.h"
#include "kernels/ops.h"
#include "kernels/optim_update.h"
#include "tools/selftest/checks.h"

namespace bareyolo::selftest {

namespace {

constexpr int64_t kSizes[] = {1, 1000, 1 << 20, (1 << 20) + 37};

Shape4 flat(int64_t count) { return {1, 1, 1, count}; }

// ---- SGD -----------------------------------------------------------------------------------

struct SgdCase {
  Tensor param, velocity, grad, groups;  // groups: each element's parameter group (u8)
};
std::vector<SgdCase> sgd_cases() {
  Random random(81);
  std::vector<SgdCase> cases;
  for (int64_t count : kSizes) {
    SgdCase c;
    c.param = random.uniform(flat(count), -3, 3);
    c.velocity = random.uniform(flat(count), -3, 3);
    c.grad = random.uniform(flat(count), -3, 3);
    std::vector<uint8_t> groups(static_cast<size_t>(count));
    for (uint8_t& g : groups) g = uint8_t(random.integer(0, 2));
    c.groups = Tensor::from_vector(groups, flat(count));
    cases.push_back(c);
  }
  return cases;
}

double check_sgd_step(const Device& dut) {
  return worst_over(sgd_cases(), [&](const SgdCase& c) {
    // Parameters and momentum buffers are updated in place; each group with its own settings.
    return compare_with_reference(
        dut, {c.grad, c.groups}, {c.param, c.velocity}, []<class T>(Tensors& in, Tensors& out) {
          const ops::SgdParams groups[] = {
              {0.1, 0.8, 0.0, true}, {0.01, 0.937, 5e-4, true}, {0.03, 0.9, 1e-3, false}};
          StepScalars block(out[0].device());  // where the optimizer keeps them
          ops::sgd_step<T>(as<T>(out[0]), as<T>(in[0]), as<T>(out[1]), as<uint8_t>(in[1]),
                           block.place<ops::SgdFactors<T>>(groups), 3);
        });
  });
}

// ---- Adam and AdamW: the same cases, the velocity buffer as exp_avg and a second moment -----

double check_adam_step(const Device& dut) {
  Random random(84);
  return worst_over(sgd_cases(), [&](const SgdCase& c) {
    // The second moment is non-negative, as Adam keeps it; groups 0 and 1 are AdamW's (one at
    // its third step), group 2 Adam's L2 decay.
    const Tensor exp_avg_sq = random.uniform(c.param.shape(), 0, 2);
    return compare_with_reference(
        dut, {c.grad, c.groups}, {c.param, c.velocity, exp_avg_sq},
        []<class T>(Tensors& in, Tensors& out) {
          const ops::AdamParams groups[] = {{0.01, 0.9, 0.999, 1e-8, 0.0, 1, true},
                                            {0.001, 0.937, 0.999, 1e-8, 5e-4, 3, true},
                                            {0.003, 0.8, 0.99, 1e-8, 1e-2, 2, false}};
          StepScalars block(out[0].device());
          ops::adam_step<T>(as<T>(out[0]), as<T>(in[0]), as<T>(out[1]), as<T>(out[2]),
                            as<uint8_t>(in[1]), block.place<ops::AdamFactors<T>>(groups), 3);
        });
  });
}

// ---- EMA and clipping, from one stream --------------------------------------------------------

struct EmaClipCase {
  Tensor average, value, clipped;
};
std::vector<EmaClipCase> ema_clip_cases() {
  Random random(82);
  std::vector<EmaClipCase> cases;
  for (int64_t count : kSizes) {
    EmaClipCase c;
    c.average = random.uniform(flat(count), -3, 3);
    c.value = random.uniform(flat(count), -3, 3);
    c.clipped = random.uniform(flat(count), -3, 3);
    cases.push_back(c);
  }
  return cases;
}

double check_ema_update(const Device& dut) {
  return worst_over(ema_clip_cases(), [&](const EmaClipCase& c) {
    return compare_with_reference(
        dut, {c.value}, {c.average}, []<class T>(Tensors& in, Tensors& out) {
          const double decay[] = {0.9999};
          StepScalars block(out[0].device());
          ops::ema_update<T>(as<T>(out[0]), as<T>(in[0]), block.place<ops::EmaFactors<T>>(decay));
        });
  });
}

// Gradient clipping's two halves on the device: the sum of squares into one double there, and
// the scale it implies (the norm of values in [-3, 3] is above 1, so the scaling happens).
double check_clip_to_norm(const Device& dut) {
  return worst_over(ema_clip_cases(), [&](const EmaClipCase& c) {
    return compare_with_reference(dut, {}, {c.clipped}, []<class T>(Tensors&, Tensors& out) {
      Tensor sum = Tensor::empty({1, 1, 1, 1}, out[0].device(), DType::f64);
      ops::sum_of_squares<T>(as<T>(out[0]), sum.view<double>());
      ops::clip_to_norm<T>(as<T>(out[0]), sum.view<double>(), 1.0);
    });
  });
}

// ---- the sum of squares: into a double on the device, deterministically ------------------------

// The sum of squares of `x` (or of its channels 2..5, a strided view) on the DUT, twice: a
// device must give the same bits again (the clip scale, and so training, depends on it).
double sum_of_squares_case(const Device& dut, const Tensor& x, bool channel_slice) {
  const auto view_of = [channel_slice](const Tensor& t) {
    return channel_slice ? t.channels(2, 6) : t;
  };
  return compare_with_reference(
      dut, {x}, {poisoned({1, 1, 1, 1}, DType::f64)},
      [&](Tensors& in, Tensors& out) {
        Tensor again = Tensor::empty({1, 1, 1, 1}, dut, DType::f64);
        ops::sum_of_squares<float>(as<float>(view_of(in[0])), as<double>(out[0]));
        ops::sum_of_squares<float>(as<float>(view_of(in[0])), as<double>(again));
        const double first = out[0].to_vector<double>()[0], second = again.to_vector<double>()[0];
        if (first != second)
          throw std::runtime_error("sum_of_squares on " + dut.str() + " of the same " +
                                   std::to_string(x.numel()) + " values gave " +
                                   std::to_string(first) + ", then " + std::to_string(second) +
                                   ": not deterministic");
      },
      [&](Tensors& in, Tensors& out) {
        ops::sum_of_squares<double>(as<double>(view_of(in[0])), as<double>(out[0]));
      });
}

double check_sum_of_squares(const Device& dut) {
  Random random(83);
  double worst = 0;
  for (int64_t count : kSizes)
    worst = std::max(worst, sum_of_squares_case(dut, random.uniform(flat(count), -3, 3), false));
  return std::max(worst, sum_of_squares_case(dut, random.uniform({5, 7, 9, 11}, -3, 3), true));
}

}  // namespace

std::vector<Check> optimizer_checks() {
  return {
      {"optimizer", "sgd_step (three groups)", kFewRoundings, check_sgd_step},
      {"optimizer", "adam_step (Adam and AdamW groups)", kTranscendental, check_adam_step},
      {"optimizer", "ema_update", kFewRoundings, check_ema_update},
      {"optimizer", "clip_to_norm", kFewRoundings, check_clip_to_norm},
      {"optimizer", "sum_of_squares (dense, strided, twice)", kDoubleSums, check_sum_of_squares},
  };
}

}  // namespace bareyolo::selftest
