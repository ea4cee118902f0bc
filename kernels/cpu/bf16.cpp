// kernels/cpu/bf16.cpp — conversions between float and bf16 views, and rounding in place
// (the element formula is kernels/bf16.h's, shared with the CUDA kernels).
#include "kernels/bf16.h"

#include <stdexcept>
#include <string>

#include "kernels/cpu/loops.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/krsc_weights.h"
#include "kernels/ops.h"
#include "kernels/route.h"

namespace bareyolo::ops {

void convert_to_bf16(View<const float> x, View<bf16> y) {
  cpu::require_same_shape("convert_to_bf16", x, y);
  BAREYOLO_ROUTE_FLOAT_OP_TO_CUDA(convert_to_bf16, detail::common_device("convert_to_bf16", x, y),
                                  x, y);
  cpu::parallel_over_elements(x.shape, [&](int64_t n, int64_t begin, int64_t end) {
    const float* in = x.image(n);
    bf16* out = y.image(n);
    for (int64_t i = begin; i < end; ++i) out[i] = to_bf16(in[i]);
  });
}

void convert_from_bf16(View<const bf16> x, View<float> y, float divisor) {
  cpu::require_same_shape("convert_from_bf16", x, y);
  BAREYOLO_ROUTE_FLOAT_OP_TO_CUDA(convert_from_bf16,
                                  detail::common_device("convert_from_bf16", x, y), x, y, divisor);
  cpu::parallel_over_elements(x.shape, [&](int64_t n, int64_t begin, int64_t end) {
    const bf16* in = x.image(n);
    float* out = y.image(n);
    for (int64_t i = begin; i < end; ++i) out[i] = to_float(in[i]) / divisor;
  });
}

void round_to_bf16_in_place(View<float> x) {
  BAREYOLO_ROUTE_FLOAT_OP_TO_CUDA(round_to_bf16_in_place, x.device, x);
  cpu::parallel_over_elements(x.shape, [&](int64_t n, int64_t begin, int64_t end) {
    float* values = x.image(n);
    for (int64_t i = begin; i < end; ++i) values[i] = round_to_bf16(values[i]);
  });
}

void round_weights_to_bf16(View<const float> values, View<bf16> copies,
                           View<const int64_t> segments) {
  if (!values.dense() || !copies.dense() || !segments.dense() ||
      values.shape.numel() != copies.shape.numel() || segments.shape.numel() % kSegmentFields != 0)
    throw std::invalid_argument(
        "round_weights_to_bf16: values " + values.shape.str() + " and copies " +
        copies.shape.str() + " must be dense views of one size, the segments " +
        segments.shape.str() + " a dense multiple of " + std::to_string(kSegmentFields));
  BAREYOLO_ROUTE_FLOAT_OP_TO_CUDA(
      round_weights_to_bf16,
      detail::common_device("round_weights_to_bf16", values, copies, segments), values, copies,
      segments);
  const int64_t count = segments.shape.numel() / kSegmentFields;
  cpu::parallel_over_elements(values.shape, [&](int64_t n, int64_t begin, int64_t end) {
    const int64_t first = n * values.shape.image_numel();  // dense: image n starts there
    for (int64_t i = begin; i < end; ++i)
      copies.data[first + i] = to_bf16(values.data[krsc_source(segments.data, count, first + i)]);
  });
}

}  // namespace bareyolo::ops
