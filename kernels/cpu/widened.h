// kernels/cpu/widened.h — how the CPU runs an activation op on bf16 views (mixed precision's
// storage): as its definition says (kernels/ops.h), the float op on widened copies, each result
// rounded to bf16 where it is stored. Each op file ends with its ops' bf16 forms, which read:
//
//   cpu::Widened out(y.shape);                   // the float result, zeroed
//   silu_forward<float>(cpu::Widened(x), out);   // the float op on the widened operand
//   out.store(y);                                // rounded into the bf16 view
//
// A backward op that adds into its result starts from the widened result instead,
// `cpu::Widened dx_float(dx)`, so that store() writes round(dx + contribution); one that may
// write over it takes widened_gradient(dx, write).
//
// The copies are host memory held for one call: the CPU's bf16 path is how CI tests mixed
// precision's plumbing and numerics without a GPU, not a fast path.
#pragma once

#include <vector>

#include "kernels/ops.h"

namespace bareyolo::cpu {

class Widened {
 public:
  // The values of `values`, as floats (exact).
  explicit Widened(View<const bf16> values) : Widened(values.shape) {
    ops::convert_from_bf16(values, view_);
  }
  // Zeros of `shape`: a result the op writes.
  explicit Widened(const Shape4& shape)
      : values_(size_t(shape.numel()), 0.0f), view_(dense_view(values_.data(), shape)) {}
  Widened(Widened&&) = default;  // the values keep their address: the view stays valid
  Widened(const Widened&) = delete;
  Widened& operator=(const Widened&) = delete;

  operator View<float>() const { return view_; }
  operator View<const float>() const { return view_; }
  // The float values rounded to the nearest bf16 into `to` (same shape, any batch stride).
  void store(View<bf16> to) const { ops::convert_to_bf16(view_, to); }

 private:
  std::vector<float> values_;
  View<float> view_;
};

// A backward's float dx: dx's values, which the op adds into, or zeros where it writes dx over
// (dx is then not read: whatever it held, a NaN included, is gone).
inline Widened widened_gradient(View<const bf16> dx, ops::GradientWrite write) {
  return write == ops::GradientWrite::add ? Widened(dx) : Widened(dx.shape);
}

}  // namespace bareyolo::cpu
