// tests/unit/shape_ops.cpp — concat and nearest upsampling: forwards against index formulas,
// backwards against finite differences, strided (channel-slice) views included.
#include <cmath>

#include "kernels/ops.h"
#include "tests/support/testing.h"

using namespace bareyolo;
using namespace bareyolo::testing;

TEST_CASE("concat forward places each input in its channel range") {
  Rng rng(21);
  const int64_t n = 2, h = 3, w = 5;
  StridedBuffer<float> a({n, 2, h, w}, 4, rng), b({n, 3, h, w}, 1, rng);
  StridedBuffer<float> y({n, 5, h, w}, 6, rng);
  y.poison();
  ops::concat_forward<float>({a.view(), b.view()}, y.view());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < 5; ++c)
      for (int64_t r = 0; r < h; ++r)
        for (int64_t s = 0; s < w; ++s) {
          float expected = c < 2 ? a.at(i, c, r, s) : b.at(i, c - 2, r, s);
          REQUIRE(y.at(i, c, r, s) == expected);
        }
}

TEST_CASE("concat backward matches finite differences") {
  Rng rng(22);
  const Shape4 sa = {2, 3, 2, 3}, sb = {2, 1, 2, 3}, sy = {2, 4, 2, 3};
  std::vector<double> a = random_vector(rng, sa.numel()), b = random_vector(rng, sb.numel());
  GradCheck check{
      {&a, &b},
      {"a", "b"},
      [&] {
        std::vector<double> y(static_cast<size_t>(sy.numel()));
        ops::concat_forward<double>(
            {dense_view<const double>(a.data(), sa), dense_view<const double>(b.data(), sb)},
            dense_view(y.data(), sy));
        return y;
      },
      [&](const std::vector<double>& dy, std::vector<std::vector<double>>& d) {
        ops::concat_backward<double>(dense_view(dy.data(), sy),
                                     {dense_view(d[0].data(), sa), dense_view(d[1].data(), sb)});
      }};
  check.run(rng);
}

TEST_CASE("concat rejects parts that do not add up") {
  std::vector<float> a(12), y(12);
  CHECK_THROWS_WITH_AS(ops::concat_forward<float>({dense_view<const float>(a.data(), {1, 2, 2, 3})},
                                                  dense_view(y.data(), {1, 3, 2, 2})),
                       doctest::Contains("concat_forward: part (1,2,2,3) does not match"),
                       std::invalid_argument);
  // Fewer channels than the concatenation's (its last channel would stay unwritten), and more.
  CHECK_THROWS_WITH_AS(ops::concat_forward<float>({dense_view<const float>(a.data(), {1, 2, 2, 2})},
                                                  dense_view(y.data(), {1, 3, 2, 2})),
                       "concat_forward: parts have 2 channels in all but the concatenation has 3",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(ops::concat_forward<float>({dense_view<const float>(a.data(), {1, 3, 2, 2})},
                                                  dense_view(y.data(), {1, 2, 2, 2})),
                       "concat_forward: parts have 3 channels in all but the concatenation has 2",
                       std::invalid_argument);
}

TEST_CASE("upsample nearest x2 forward copies each pixel to a 2x2 block") {
  Rng rng(23);
  for (int trial = 0; trial < 4; ++trial) {
    Shape4 s = {random_int(rng, 1, 2), random_int(rng, 1, 3), random_int(rng, 1, 5),
                random_int(rng, 1, 6)};
    StridedBuffer<float> x(s, 2, rng), y({s.n, s.c, 2 * s.h, 2 * s.w}, 3, rng);
    y.poison();
    ops::upsample_nearest2x_forward<float>(x.view(), y.view());
    for (int64_t i = 0; i < s.n; ++i)
      for (int64_t c = 0; c < s.c; ++c)
        for (int64_t r = 0; r < 2 * s.h; ++r)
          for (int64_t q = 0; q < 2 * s.w; ++q)
            REQUIRE(y.at(i, c, r, q) == x.at(i, c, r / 2, q / 2));
  }
}

TEST_CASE("upsample nearest x2 backward matches finite differences") {
  Rng rng(24);
  const Shape4 s = {2, 2, 3, 4}, big = {2, 2, 6, 8};
  std::vector<double> x = random_vector(rng, s.numel());
  GradCheck check{{&x},
                  {"x"},
                  [&] {
                    std::vector<double> y(static_cast<size_t>(big.numel()));
                    ops::upsample_nearest2x_forward<double>(dense_view<const double>(x.data(), s),
                                                            dense_view(y.data(), big));
                    return y;
                  },
                  [&](const std::vector<double>& dy, std::vector<std::vector<double>>& dx) {
                    ops::upsample_nearest2x_backward<double>(dense_view(dy.data(), big),
                                                             dense_view(dx[0].data(), s));
                  }};
  check.run(rng);
}
