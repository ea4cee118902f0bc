// tests/unit/vector_math.cpp — the 8-lane exp behind the float SiLU/sigmoid: its error in ulp
// against double exp over the whole float range, and the ops' behaviour at extreme inputs.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/cpu/vector_math.h"
#include "kernels/ops.h"
#include "tests/support/testing.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {

// The op on a (1, 1, 1, n) view of `in`.
template <class Op>
std::vector<float> apply(Op op, const std::vector<float>& in) {
  std::vector<float> out(in.size());
  const Shape4 s{1, 1, 1, static_cast<int64_t>(in.size())};
  op(dense_view<const float>(in.data(), s), dense_view<float>(out.data(), s));
  return out;
}

}  // namespace

#ifdef BAREYOLO_VECTOR_EXP
TEST_CASE("vector exp is within 2 ulp of exp over the float range") {
  double worst_ulp = 0;
  for (float x = -86.5f; x < 88.7f; x += 0.0007f) {
    float lanes[8];
    for (int i = 0; i < 8; ++i) lanes[i] = std::nextafter(x, 100.0f) + float(i) * 1e-5f;
    float got[8];
    _mm256_storeu_ps(got, cpu::exp8(_mm256_loadu_ps(lanes)));
    for (int i = 0; i < 8; ++i) {
      const double want = std::exp(static_cast<double>(lanes[i]));
      const double ulp = std::ldexp(1.0, std::ilogb(want) - 23);
      worst_ulp = std::max(worst_ulp, std::fabs(got[i] - want) / ulp);
    }
  }
  MESSAGE("max error of exp8: " << worst_ulp << " ulp");
  CHECK(worst_ulp < 2.0);
}

TEST_CASE("vector exp saturates to inf and zero and keeps NaN") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  float in[8] = {89.0f, 1000.0f, -90.0f, -1000.0f, nan, 0.0f, 88.72f, -inf};
  float got[8];
  _mm256_storeu_ps(got, cpu::exp8(_mm256_loadu_ps(in)));
  CHECK(std::isinf(got[0]));
  CHECK(std::isinf(got[1]));
  CHECK(got[2] == 0.0f);
  CHECK(got[3] == 0.0f);
  CHECK(std::isnan(got[4]));
  CHECK(got[5] == 1.0f);
  CHECK(got[6] == doctest::Approx(std::exp(double(in[6]))).epsilon(1e-6));
  CHECK(got[7] == 0.0f);
}
#endif

TEST_CASE("float silu and sigmoid stay finite at extreme inputs") {
  const std::vector<float> x = {-1000.0f, -100.0f, -20.0f, 0.0f,   20.0f, 100.0f,
                                1000.0f,  -88.9f,  88.9f,  -87.0f, 87.0f};
  const std::vector<float> silu =
      apply([](View<const float> in, View<float> out) { ops::silu_forward(in, out); }, x);
  const std::vector<float> sig =
      apply([](View<const float> in, View<float> out) { ops::sigmoid_forward(in, out); }, x);
  std::vector<float> grad(x.size(), 0.0f);
  const std::vector<float> ones(x.size(), 1.0f);
  const Shape4 s{1, 1, 1, static_cast<int64_t>(x.size())};
  ops::silu_backward(dense_view<const float>(x.data(), s), dense_view<const float>(ones.data(), s),
                     dense_view<float>(grad.data(), s));
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i], sd = 1 / (1 + std::exp(-v));
    INFO("x = " << v);
    CHECK(std::isfinite(silu[i]));
    CHECK(std::isfinite(sig[i]));
    CHECK(std::isfinite(grad[i]));
    CHECK(silu[i] == doctest::Approx(v * sd).epsilon(1e-6));
    CHECK(sig[i] == doctest::Approx(sd).epsilon(1e-6));
    CHECK(grad[i] == doctest::Approx(sd * (1 + v * (1 - sd))).epsilon(1e-6));
  }
  CHECK(sig[0] == 0.0f);
  CHECK(sig[6] == 1.0f);
}
