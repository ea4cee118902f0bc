// tests/unit/pool.cpp — max pooling: the forward against a direct window loop on strided and
// poisoned views, the backward against finite differences (double, on values without ties)
// and, on values full of ties, against a direct loop that routes each dy to the first
// maximum of its window.
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "kernels/ops.h"
#include "tests/support/testing.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {

struct PoolCase {
  Shape4 x;
  ops::Pool2dParams params;  // kernel, stride, pad

  Shape4 y() const {
    const auto& p = params;
    return {x.n, x.c, ops::conv_out_size(x.h, p.kernel, p.stride, p.pad),
            ops::conv_out_size(x.w, p.kernel, p.stride, p.pad)};
  }
};

const std::vector<PoolCase> kCases = {
    {{2, 3, 7, 9}, {5, 1, 2}},  // SPPF
    {{1, 2, 8, 8}, {5, 1, 2}},  // SPPF, batch 1
    {{2, 2, 7, 6}, {3, 2, 1}}, {{1, 3, 6, 9}, {2, 2, 0}}, {{2, 1, 5, 5}, {3, 1, 0}},
    {{1, 2, 9, 7}, {3, 3, 1}}, {{2, 2, 5, 3}, {2, 2, 1}},  // padding on the last row and column
                                                           // only
};

int64_t gap_of(size_t case_index) { return case_index % 2 ? 0 : 4; }

// Row-major index of the first maximum of the window of output (n, c, r, col), found
// directly; `dense` holds x without gaps.
int64_t first_maximum(const std::vector<double>& dense, const PoolCase& pc, int64_t n, int64_t c,
                      int64_t r, int64_t col) {
  const Shape4 s = pc.x;
  const auto& p = pc.params;
  int64_t best = -1;
  for (int64_t i = r * p.stride - p.pad; i < r * p.stride - p.pad + p.kernel; ++i)
    for (int64_t j = col * p.stride - p.pad; j < col * p.stride - p.pad + p.kernel; ++j) {
      if (i < 0 || i >= s.h || j < 0 || j >= s.w) continue;  // padding: -infinity
      const int64_t at = ((n * s.c + c) * s.h + i) * s.w + j;
      if (best < 0 || dense[at] > dense[best]) best = at;
    }
  return best;
}

// Calls visit(index of the output in y, index of its window's first maximum in x).
template <class Visit>
void for_each_output(const std::vector<double>& x, const PoolCase& pc, Visit visit) {
  const Shape4 ys = pc.y();
  for (int64_t n = 0; n < ys.n; ++n)
    for (int64_t c = 0; c < ys.c; ++c)
      for (int64_t r = 0; r < ys.h; ++r)
        for (int64_t col = 0; col < ys.w; ++col)
          visit(((n * ys.c + c) * ys.h + r) * ys.w + col, first_maximum(x, pc, n, c, r, col));
}

}  // namespace

TEST_CASE_TEMPLATE("maxpool2d forward matches the direct window loop", T, float, double) {
  Rng rng(401);
  for (size_t k = 0; k < kCases.size(); ++k) {
    CAPTURE(k);
    const PoolCase& pc = kCases[k];
    StridedBuffer<T> x(pc.x, gap_of(k), rng), y(pc.y(), gap_of(k + 1), rng);
    y.poison();
    ops::maxpool2d_forward<T>(x.view(), pc.params, y.view());
    const std::vector<double> xs = x.values();
    std::vector<double> expected(static_cast<size_t>(pc.y().numel()));
    for_each_output(xs, pc, [&](int64_t out, int64_t argmax) { expected[out] = xs[argmax]; });
    check_close(y.values(), expected, 0, 0, "maxpool2d y");
  }
}

TEST_CASE("maxpool2d backward passes the gradient check") {
  Rng rng(402);
  for (size_t k = 0; k < kCases.size(); ++k) {
    CAPTURE(k);
    const PoolCase& pc = kCases[k];
    const Shape4 xs = pc.x, ys = pc.y();
    // Distinct values 1/count apart: no finite-difference step can swap a window's maximum.
    std::vector<double> x(static_cast<size_t>(xs.numel()));
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<double>(i) / x.size();
    std::shuffle(x.begin(), x.end(), rng);
    GradCheck check;
    check.inputs = {&x};
    check.names = {"x"};
    check.max_checks_per_input = 150;
    check.forward = [&] {
      std::vector<double> y(static_cast<size_t>(ys.numel()));
      ops::maxpool2d_forward<double>(dense_view<const double>(x.data(), xs), pc.params,
                                     dense_view(y.data(), ys));
      return y;
    };
    check.backward = [&](const std::vector<double>& dy, std::vector<std::vector<double>>& d) {
      ops::maxpool2d_backward<double>(dense_view<const double>(x.data(), xs),
                                      dense_view(dy.data(), ys), pc.params,
                                      dense_view(d[0].data(), xs));
    };
    check.run(rng);
  }
}

TEST_CASE_TEMPLATE("maxpool2d backward routes ties to the first maximum of each window", T, float,
                   double) {
  Rng rng(403);
  for (size_t k = 0; k < kCases.size(); ++k) {
    CAPTURE(k);
    const PoolCase& pc = kCases[k];
    StridedBuffer<T> x(pc.x, gap_of(k), rng), dy(pc.y(), gap_of(k + 1), rng);
    StridedBuffer<T> dx(pc.x, 3, rng);    // random start: the backward must add onto it
    for (int64_t n = 0; n < pc.x.n; ++n)  // values in {0, 1, 2}: ties everywhere
      for (int64_t j = 0; j < pc.x.image_numel(); ++j)
        x.view().image(n)[j] = static_cast<T>(random_int(rng, 0, 2));
    const std::vector<double> xs = x.values(), dys = dy.values();
    std::vector<double> expected = dx.values();
    ops::maxpool2d_backward<T>(x.view(), dy.view(), pc.params, dx.view());
    for_each_output(xs, pc, [&](int64_t out, int64_t argmax) { expected[argmax] += dys[out]; });
    check_close(dx.values(), expected, 1e-6, 1e-6, "maxpool2d dx");
  }
}

TEST_CASE("maxpool2d rejects mismatched shapes and bad windows") {
  std::vector<float> x(2 * 3 * 8 * 8), y(x.size());
  auto forward = [&](Shape4 y_shape, ops::Pool2dParams p) {
    ops::maxpool2d_forward<float>(dense_view<const float>(x.data(), {2, 3, 8, 8}), p,
                                  dense_view(y.data(), y_shape));
  };
  CHECK_NOTHROW(forward({2, 3, 8, 8}, {5, 1, 2}));
  CHECK_NOTHROW(forward({2, 3, 4, 4}, {2, 2, 0}));
  CHECK_THROWS_AS(forward({2, 3, 8, 7}, {5, 1, 2}), std::invalid_argument);
  CHECK_THROWS_AS(forward({2, 3, 10, 10}, {3, 1, 2}), std::invalid_argument);  // pad > k/2
  CHECK_THROWS_AS(forward({2, 3, 8, 8}, {5, 0, 2}), std::invalid_argument);
}
