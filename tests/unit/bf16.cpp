// tests/unit/bf16.cpp — float -> bf16 rounding against a reference computed in double (the
// nearest of the two bf16 neighbours, ties to the even one), the special values, and the
// conversion ops on strided views with poisoned outputs.
#include <cmath>
#include <cstring>
#include <limits>

#include "engine/tensor.h"
#include "kernels/bf16.h"
#include "kernels/ops.h"
#include "tests/support/testing.h"

using namespace bareyolo;
using namespace bareyolo::testing;

namespace {

// The nearest bf16 to a finite float by the definition: of the bf16 just below |x| (the float
// truncated to its top 16 bits) and the next one up, the closer; on a tie, the one whose last
// kept bit is 0. Distances in double are exact here (both are floats within 2^-7 of x).
uint16_t reference_bf16(float x) {
  const uint32_t bits = float_bits(x);
  const uint16_t below = uint16_t(bits >> 16), above = uint16_t(below + 1);
  const double to_below = std::fabs(double(x) - double(to_float({below})));
  const double to_above = std::fabs(double(to_float({above})) - double(x));
  if (to_below < to_above) return below;
  if (to_above < to_below) return above;
  return (below & 1) ? above : below;
}

}  // namespace

TEST_CASE("to_bf16 rounds every float to the nearest bf16, ties to even") {
  Rng rng(1601);
  std::uniform_int_distribution<uint32_t> any_bits;
  int checked = 0;
  for (int i = 0; i < 200000; ++i) {
    const float x = float_from_bits(any_bits(rng));
    if (!std::isfinite(x) || std::fabs(x) > 3.3e38f) continue;  // finite and not rounding to inf
    REQUIRE_MESSAGE(to_bf16(x).bits == reference_bf16(x), "x = " << x << " bits " << float_bits(x));
    ++checked;
  }
  CHECK(checked > 100000);
  // Exact ties: 1 + 2^-8 lies halfway between 1 (even) and 1 + 2^-7 (odd); 1 + 3 * 2^-8
  // halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even).
  CHECK(to_float(to_bf16(1.0f + 0x1p-8f)) == 1.0f);
  CHECK(to_float(to_bf16(1.0f + 3 * 0x1p-8f)) == 1.0f + 0x1p-6f);
  CHECK(to_float(to_bf16(-(1.0f + 3 * 0x1p-8f))) == -(1.0f + 0x1p-6f));
  // Just above a tie rounds up; every bf16 converts to itself.
  CHECK(to_float(to_bf16(std::nextafter(1.0f + 0x1p-8f, 2.0f))) == 1.0f + 0x1p-7f);
  for (float exact : {0.0f, -0.0f, 1.0f, -2.5f, 0x1p-126f, 0x1p-133f, 3.0e38f})
    CHECK(round_to_bf16(round_to_bf16(exact)) == round_to_bf16(exact));
  CHECK(round_to_bf16(-2.5f) == -2.5f);
}

TEST_CASE("to_bf16 keeps infinities and NaN and rounds an overflow to infinity") {
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(to_float(to_bf16(inf)) == inf);
  CHECK(to_float(to_bf16(-inf)) == -inf);
  CHECK(std::isnan(to_float(to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  // A NaN whose payload lies only in the dropped bits would truncate to infinity.
  CHECK(std::isnan(to_float(to_bf16(float_from_bits(0x7f800001u)))));
  CHECK(std::isnan(to_float(to_bf16(float_from_bits(0xff800001u)))));
  // FLT_MAX lies beyond the largest bf16 by more than half its spacing.
  CHECK(to_float(to_bf16(std::numeric_limits<float>::max())) == inf);
  CHECK(to_float(to_bf16(-std::numeric_limits<float>::max())) == -inf);
  CHECK(std::signbit(to_float(to_bf16(-0.0f))));
}

TEST_CASE("bf16 conversion ops on a channel slice write only the slice") {
  Rng rng(1602);
  const Shape4 parent = {3, 6, 5, 7};
  Tensor x = Tensor::from_vector(random_vector<float>(rng, parent.numel(), -50, 50), parent);
  // bf16 output poisoned with a NaN pattern; the channels outside the slice must keep it.
  const bf16 poison{0x7fc1};
  Tensor narrow = Tensor::from_vector(std::vector<bf16>(size_t(parent.numel()), poison), parent);
  Tensor narrow_slice = narrow.channels(1, 4);
  ops::convert_to_bf16(x.channels(1, 4).view<float>(), narrow_slice.view<bf16>());
  const std::vector<float> values = x.to_vector<float>();
  const std::vector<bf16> narrowed = narrow.to_vector<bf16>();
  for (int64_t i = 0; i < parent.numel(); ++i) {
    const int64_t channel = (i / parent.plane()) % parent.c;
    const uint16_t expected =
        channel >= 1 && channel < 4 ? reference_bf16(values[size_t(i)]) : poison.bits;
    REQUIRE(narrowed[size_t(i)].bits == expected);
  }
  // Back to float: exact, into a NaN-poisoned float slice.
  Tensor wide = Tensor::from_vector(
      std::vector<float>(size_t(parent.numel()), std::numeric_limits<float>::quiet_NaN()), parent);
  Tensor wide_slice = wide.channels(1, 4);
  ops::convert_from_bf16(narrow_slice.view<bf16>(), wide_slice.view<float>());
  Tensor rounded = x.channels(1, 4).converted(DType::f32);
  ops::round_to_bf16_in_place(rounded.view<float>());
  const std::vector<float> back = wide_slice.to_vector<float>(),
                           expect = rounded.to_vector<float>();
  for (size_t i = 0; i < back.size(); ++i) {
    REQUIRE(back[i] == expect[i]);
    CHECK(back[i] == to_float({reference_bf16(x.channels(1, 4).to_vector<float>()[i])}));
  }
  CHECK(std::isnan(wide.channels(0, 1).to_vector<float>()[0]));
}

TEST_CASE("Tensor::converted: f32 to bf16 and back, and pairs it cannot convert") {
  Tensor x = Tensor::from_vector(std::vector<float>{1.0f, 1.0f + 0x1p-8f, -3.14159f, 1e-20f},
                                 {1, 1, 1, 4});
  Tensor narrow = x.converted(DType::bf16);
  CHECK(narrow.dtype() == DType::bf16);
  const std::vector<double> doubles = narrow.to_doubles();
  CHECK(doubles == std::vector<double>{1.0, 1.0, double(round_to_bf16(-3.14159f)),
                                       double(round_to_bf16(1e-20f))});
  CHECK(narrow.converted(DType::f32).to_vector<float>() ==
        std::vector<float>{1.0f, 1.0f, round_to_bf16(-3.14159f), round_to_bf16(1e-20f)});
  CHECK_THROWS_WITH_AS(x.converted(DType::i64), doctest::Contains("f32 <-> bf16 only"),
                       std::invalid_argument);
}
