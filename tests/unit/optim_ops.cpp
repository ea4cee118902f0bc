// tests/unit/optim_ops.cpp — SGD (Nesterov, weight decay, per-element groups), EMA, the sum of
// squares and clipping to a norm over flat buffers, against PyTorch's update rules written out
// per element.
#include <cmath>
#include <span>

#include "kernels/ops.h"
#include "kernels/optim_update.h"
#include "tests/support/testing.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {

// Each element's group, at random among `groups`.
std::vector<uint8_t> random_groups(Rng& rng, int64_t n, int groups) {
  std::vector<uint8_t> group_of(static_cast<size_t>(n));
  for (uint8_t& g : group_of) g = uint8_t(random_int(rng, 0, groups - 1));
  return group_of;
}

}  // namespace

TEST_CASE("sgd_step follows PyTorch's SGD over several steps, each element with its group's") {
  Rng rng(111);
  const int64_t n = 1000;
  const ops::SgdParams groups[] = {
      {.lr = 0.05, .momentum = 0.9, .weight_decay = 5e-4, .nesterov = true},
      {.lr = 0.2, .momentum = 0.5, .weight_decay = 0, .nesterov = true},
      {.lr = 0.01, .momentum = 0.99, .weight_decay = 1e-2, .nesterov = false}};
  const std::vector<uint8_t> group_of = random_groups(rng, n, 3);
  std::vector<ops::SgdFactors<double>> factors;
  for (const ops::SgdParams& p : groups) factors.push_back(ops::SgdFactors<double>::of(p));
  std::vector<double> w = random_vector(rng, n), v(n, 0.0), w_ref = w, v_ref(n, 0.0);
  for (int step = 0; step < 3; ++step) {
    std::vector<double> g = random_vector(rng, n);
    ops::sgd_step<double>(flat_view(w.data(), n), flat_view<const double>(g.data(), n),
                          flat_view(v.data(), n), flat_view(group_of.data(), n), factors.data(),
                          int(factors.size()));
    for (int64_t i = 0; i < n; ++i) {  // torch.optim.SGD, written out
      const ops::SgdParams& p = groups[group_of[size_t(i)]];
      double d = g[size_t(i)] + p.weight_decay * w_ref[size_t(i)];
      v_ref[size_t(i)] = step == 0 ? d : p.momentum * v_ref[size_t(i)] + d;
      w_ref[size_t(i)] -=
          p.lr * (p.nesterov ? d + p.momentum * v_ref[size_t(i)] : v_ref[size_t(i)]);
    }
  }
  check_close(w, w_ref, 1e-14, 1e-15, "sgd weights");
  check_close(v, v_ref, 1e-14, 1e-15, "sgd velocity");
}

TEST_CASE("sgd_step refuses a group index or group count it cannot honour") {
  std::vector<float> w(4), g(4), v(4);
  const std::vector<uint8_t> group_of = {0, 1, 2, 1};
  const ops::SgdFactors<float> two[] = {{}, {}};
  CHECK_THROWS_AS(
      ops::sgd_step<float>(flat_view(w.data(), 4), flat_view<const float>(g.data(), 4),
                           flat_view(v.data(), 4), flat_view(group_of.data(), 4), two, 2),
      std::out_of_range);
  CHECK_THROWS_AS(
      ops::sgd_step<float>(flat_view(w.data(), 4), flat_view<const float>(g.data(), 4),
                           flat_view(v.data(), 4), flat_view(group_of.data(), 4), two, 0),
      std::invalid_argument);
  CHECK_THROWS_AS(ops::sgd_step<float>(flat_view(w.data(), 4), flat_view<const float>(g.data(), 4),
                                       flat_view(v.data(), 4), flat_view(group_of.data(), 4), two,
                                       ops::kMaxParameterGroups + 1),
                  std::invalid_argument);
}

TEST_CASE("ema_update, sum_of_squares and clip_to_norm") {
  Rng rng(112);
  const int64_t n = 70000;  // several chunks
  std::vector<float> average = random_vector<float>(rng, n), value = random_vector<float>(rng, n);
  std::vector<double> expected(n);
  for (int64_t i = 0; i < n; ++i)
    expected[size_t(i)] = 0.25 * average[size_t(i)] + 0.75 * value[size_t(i)];
  const ops::EmaFactors<float> quarter = ops::EmaFactors<float>::of(0.25);
  ops::ema_update<float>(flat_view(average.data(), n), flat_view<const float>(value.data(), n),
                         &quarter);
  check_close(average, expected, 1e-6, 1e-7, "ema");

  double squares = 0;
  for (float v : value) squares += double(v) * v;
  double sum = 0;
  ops::sum_of_squares<float>(flat_view<const float>(value.data(), n), flat_view(&sum, 1));
  CHECK(sum == doctest::Approx(squares).epsilon(1e-12));
  // A norm above the limit is scaled to it; within it, nothing changes.
  const double norm = std::sqrt(sum);
  const std::vector<float> before = value;
  ops::clip_to_norm<float>(flat_view(value.data(), n), flat_view<const double>(&sum, 1), 2 * norm);
  CHECK(value == before);
  ops::clip_to_norm<float>(flat_view(value.data(), n), flat_view<const double>(&sum, 1), norm / 4);
  ops::sum_of_squares<float>(flat_view<const float>(value.data(), n), flat_view(&sum, 1));
  CHECK(std::sqrt(sum) == doctest::Approx(norm / 4 * norm / (norm + 1e-6)).epsilon(1e-6));
  CHECK_THROWS_AS(ops::sum_of_squares<float>(flat_view<const float>(value.data(), n),
                                             flat_view(expected.data(), 2)),
                  std::invalid_argument);
}
