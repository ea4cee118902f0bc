// tests/unit/optim_ops.cpp — SGD (Nesterov, weight decay), EMA, sum of squares and scaling
// over flat buffers, against PyTorch's update rules written out per element.
#include <cmath>

#include "kernels/ops.h"
#include "tests/support/testing.h"

using namespace bareyolo;
using namespace bareyolo::testing;

TEST_CASE("sgd_step follows PyTorch's SGD over several steps") {
  Rng rng(111);
  const int64_t n = 1000;
  for (bool nesterov : {true, false}) {
    std::vector<double> w = random_vector(rng, n), v(n, 0.0), w_ref = w, v_ref(n, 0.0);
    const ops::SgdParams p{.lr = 0.05, .momentum = 0.9, .weight_decay = 5e-4, .nesterov = nesterov};
    for (int step = 0; step < 3; ++step) {
      std::vector<double> g = random_vector(rng, n);
      ops::sgd_step<double>(flat_view(w.data(), n), flat_view<const double>(g.data(), n),
                            flat_view(v.data(), n), p);
      for (int64_t i = 0; i < n; ++i) {  // torch.optim.SGD, written out
        double d = g[size_t(i)] + p.weight_decay * w_ref[size_t(i)];
        v_ref[size_t(i)] = step == 0 ? d : p.momentum * v_ref[size_t(i)] + d;
        w_ref[size_t(i)] -=
            p.lr * (nesterov ? d + p.momentum * v_ref[size_t(i)] : v_ref[size_t(i)]);
      }
    }
    check_close(w, w_ref, 1e-14, 1e-15, "sgd weights");
    check_close(v, v_ref, 1e-14, 1e-15, "sgd velocity");
  }
}

TEST_CASE("ema_update sum_of_squares and scale_inplace") {
  Rng rng(112);
  const int64_t n = 70000;  // several chunks
  std::vector<float> average = random_vector<float>(rng, n), value = random_vector<float>(rng, n);
  std::vector<double> expected(n);
  for (int64_t i = 0; i < n; ++i)
    expected[size_t(i)] = 0.25 * average[size_t(i)] + 0.75 * value[size_t(i)];
  ops::ema_update<float>(flat_view(average.data(), n), flat_view<const float>(value.data(), n),
                         0.25);
  check_close(average, expected, 1e-6, 1e-7, "ema");

  double squares = 0;
  for (float v : value) squares += double(v) * v;
  CHECK(ops::sum_of_squares<float>(flat_view<const float>(value.data(), n)) ==
        doctest::Approx(squares).epsilon(1e-12));
  ops::scale_inplace<float>(flat_view(value.data(), n), -2.0);
  CHECK(ops::sum_of_squares<float>(flat_view<const float>(value.data(), n)) ==
        doctest::Approx(4 * squares).epsilon(1e-6));
}
