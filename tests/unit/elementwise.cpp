// tests/unit/elementwise.cpp — SiLU, add, sigmoid and BCE-with-logits: forwards against
// their formulas written out directly, backwards against finite differences.
#include <cmath>
#include <stdexcept>

#include "kernels/ops.h"
#include "tests/support/testing.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {

Shape4 random_shape(Rng& rng) {
  return {random_int(rng, 1, 3), random_int(rng, 1, 5), random_int(rng, 1, 7),
          random_int(rng, 1, 9)};
}

// Runs a unary forward on strided views (NaN gaps, output poisoned) and compares with `expect`
// applied element by element.
template <class Forward, class Expect>
void check_unary_forward(Forward forward, Expect expect, const char* what) {
  Rng rng(11);
  for (int trial = 0; trial < 6; ++trial) {
    Shape4 s = random_shape(rng);
    StridedBuffer<float> x(s, 3, rng), y(s, 5, rng);
    y.poison();
    forward(View<const float>(x.view()), y.view());
    std::vector<double> expected;
    for (float v : x.values()) expected.push_back(expect(static_cast<double>(v)));
    check_close(y.values(), expected, 1e-6, 1e-7, what);
  }
}

}  // namespace

TEST_CASE("silu forward matches x * sigmoid(x) on strided views") {
  check_unary_forward([](View<const float> x, View<float> y) { ops::silu_forward(x, y); },
                      [](double v) { return v / (1 + std::exp(-v)); }, "silu");
}

TEST_CASE("sigmoid forward matches 1 / (1 + exp(-x)) on strided views") {
  check_unary_forward([](View<const float> x, View<float> y) { ops::sigmoid_forward(x, y); },
                      [](double v) { return 1 / (1 + std::exp(-v)); }, "sigmoid");
}

TEST_CASE("silu and sigmoid backward match finite differences") {
  Rng rng(12);
  for (int trial = 0; trial < 4; ++trial) {
    Shape4 s = random_shape(rng);
    std::vector<double> x = random_vector(rng, s.numel(), -4, 4);
    GradCheck silu{
        {&x},
        {"x"},
        [&] {
          std::vector<double> y(x.size());
          ops::silu_forward<double>(dense_view<const double>(x.data(), s), dense_view(y.data(), s));
          return y;
        },
        [&](const std::vector<double>& dy, std::vector<std::vector<double>>& dx) {
          ops::silu_backward<double>(dense_view<const double>(x.data(), s),
                                     dense_view(dy.data(), s), dense_view(dx[0].data(), s));
        }};
    silu.run(rng);
    GradCheck sigmoid{{&x},
                      {"x"},
                      [&] {
                        std::vector<double> y(x.size());
                        ops::sigmoid_forward<double>(dense_view<const double>(x.data(), s),
                                                     dense_view(y.data(), s));
                        return y;
                      },
                      [&](const std::vector<double>& dy, std::vector<std::vector<double>>& dx) {
                        std::vector<double> y(x.size());
                        ops::sigmoid_forward<double>(dense_view<const double>(x.data(), s),
                                                     dense_view(y.data(), s));
                        ops::sigmoid_backward<double>(dense_view<const double>(y.data(), s),
                                                      dense_view(dy.data(), s),
                                                      dense_view(dx[0].data(), s));
                      }};
    sigmoid.run(rng);
  }
}

TEST_CASE("add forward and backward on strided views") {
  Rng rng(13);
  Shape4 s = {3, 4, 5, 6};
  StridedBuffer<double> a(s, 7, rng), b(s, 2, rng), y(s, 1, rng);
  y.poison();
  ops::add_forward<double>(a.view(), b.view(), y.view());
  std::vector<double> sum = a.values();
  for (size_t i = 0; i < sum.size(); ++i) sum[i] += b.values()[i];
  check_close(y.values(), sum, 0, 0, "add forward");

  std::vector<double> ad = a.values(), bd = b.values();
  GradCheck check{{&ad, &bd},
                  {"a", "b"},
                  [&] {
                    std::vector<double> out(ad.size());
                    ops::add_forward<double>(dense_view<const double>(ad.data(), s),
                                             dense_view<const double>(bd.data(), s),
                                             dense_view(out.data(), s));
                    return out;
                  },
                  [&](const std::vector<double>& dy, std::vector<std::vector<double>>& d) {
                    ops::add_backward<double>(dense_view(dy.data(), s), dense_view(d[0].data(), s),
                                              dense_view(d[1].data(), s));
                  }};
  check.run(rng);
}

TEST_CASE("bce with logits is stable for large logits and matches its definition") {
  Rng rng(14);
  const int64_t count = 64;
  std::vector<double> x = random_vector(rng, count, -30, 30), t = random_vector(rng, count, 0, 1);
  x[0] = 800;  // exp(800) overflows a double: the stable form must not
  x[1] = -800;
  for (double pos_weight : {1.0, 2.5}) {
    std::vector<double> loss(count);
    ops::bce_with_logits_forward<double>(flat_view<const double>(x.data(), count),
                                         flat_view<const double>(t.data(), count), pos_weight,
                                         flat_view(loss.data(), count));
    std::vector<double> expected(count);
    for (int64_t i = 0; i < count; ++i) {
      // -(w t log s + (1-t) log(1-s)) with log s = -log1p(e^-x), log(1-s) = -x - log1p(e^-x)
      double log1p_exp =
          x[i] > 0 ? std::log1p(std::exp(-x[i])) : -x[i] + std::log1p(std::exp(x[i]));
      expected[i] = pos_weight * t[i] * log1p_exp + (1 - t[i]) * (x[i] + log1p_exp);
    }
    check_close(loss, expected, 1e-12, 1e-12, "bce forward");
  }
}

TEST_CASE("bce with logits backward matches finite differences") {
  Rng rng(15);
  const int64_t count = 40;
  std::vector<double> x = random_vector(rng, count, -6, 6), t = random_vector(rng, count, 0, 1);
  for (double pos_weight : {1.0, 3.0}) {
    GradCheck check{
        {&x},
        {"logits"},
        [&] {
          std::vector<double> loss(count);
          ops::bce_with_logits_forward<double>(flat_view<const double>(x.data(), count),
                                               flat_view<const double>(t.data(), count), pos_weight,
                                               flat_view(loss.data(), count));
          return loss;
        },
        [&](const std::vector<double>& dloss, std::vector<std::vector<double>>& dx) {
          ops::bce_with_logits_backward<double>(
              flat_view<const double>(x.data(), count), flat_view<const double>(t.data(), count),
              pos_weight, flat_view(dloss.data(), count), flat_view(dx[0].data(), count));
        }};
    check.run(rng);
  }
}

TEST_CASE("elementwise ops reject mismatched shapes with a message") {
  std::vector<float> a(6), b(8);
  CHECK_THROWS_WITH_AS(
      ops::silu_forward<float>(flat_view<const float>(a.data(), 6), flat_view(b.data(), 8)),
      doctest::Contains("silu_forward"), std::invalid_argument);
}
