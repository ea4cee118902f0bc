// kernels/bf16.h — bfloat16: the top 16 bits of an IEEE float (sign, the same 8 exponent bits,
// 7 mantissa bits), the format tensor cores read. Same range as float, about 3 significant
// decimal digits: what mixed precision stores activations and gradient buckets in.
//
// float -> bf16 rounds to the nearest representable value, ties to even (what cuDNN, cuBLAS
// and __float2bfloat16 do), so a value that is already a bf16 converts exactly and the CPU
// and the GPU produce the same bits. Adding 0x7fff plus the lowest kept bit before truncating
// is that rounding: the carry into bit 16 happens exactly when the dropped half is above
// 0x8000, or equal to it with an odd kept part. NaN keeps a quiet NaN (the addition could
// carry it into infinity); an overflow rounds to infinity, as IEEE rounding does.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/view.h"

namespace bareyolo {

struct bf16 {
  uint16_t bits = 0;
};

BAREYOLO_HOST_DEVICE inline uint32_t float_bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

BAREYOLO_HOST_DEVICE inline float float_from_bits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// Without a branch, so that loops over arrays vectorise (the TCP ring's bf16 sums).
BAREYOLO_HOST_DEVICE inline bf16 to_bf16(float value) {
  const uint32_t bits = float_bits(value);
  const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (bits >> 16) | 0x0040u;
  return {uint16_t((bits & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded)};
}

BAREYOLO_HOST_DEVICE inline float to_float(bf16 value) {
  return float_from_bits(uint32_t(value.bits) << 16);
}

// The float nearest to `value` that bf16 can hold: what storing it in bf16 and reading it
// back gives.
BAREYOLO_HOST_DEVICE inline float round_to_bf16(float value) { return to_float(to_bf16(value)); }

// Mixed precision stores activations in bf16 and computes in float. An op on activations stored
// as T computes in ComputeType<T> and takes its per-channel values (parameters, statistics,
// sums, weight gradients) in it: T itself for float and double, float for bf16.
template <class T>
struct ComputeTypeOf {
  using type = T;
};
template <>
struct ComputeTypeOf<bf16> {
  using type = float;
};
template <class T>
using ComputeType = typename ComputeTypeOf<std::remove_const_t<T>>::type;

// A stored element in its compute type (exact), and a computed value stored as T (rounded to
// the nearest bf16, ties to even; float and double are kept as they are): kernels written with
// these serve float and bf16 storage alike.
BAREYOLO_HOST_DEVICE inline float widen(float value) { return value; }
BAREYOLO_HOST_DEVICE inline double widen(double value) { return value; }
BAREYOLO_HOST_DEVICE inline float widen(bf16 value) { return to_float(value); }
template <class T>
BAREYOLO_HOST_DEVICE inline T narrow(ComputeType<T> value) {
  if constexpr (std::is_same_v<T, bf16>)
    return to_bf16(value);
  else
    return value;
}

}  // namespace bareyolo
