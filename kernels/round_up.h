// kernels/round_up.h — integer division rounded up, and the next multiple of a size: the
// counts of tiles and blocks, and where an aligned slot, page or buffer begins or ends.
#pragma once

#include <concepts>
#include <type_traits>

namespace bareyolo {

// a / b rounded up, for a >= 0 and b > 0 (b converted to a's type).
template <std::integral T>
constexpr T ceil_div(T a, std::type_identity_t<T> b) {
  return (a + b - 1) / b;
}

// The smallest multiple of `multiple` that is >= a, for a >= 0 and multiple > 0.
template <std::integral T>
constexpr T round_up(T a, std::type_identity_t<T> multiple) {
  return ceil_div(a, multiple) * multiple;
}

}  // namespace bareyolo
