// kernels/cpu/bf16.cpp — conversions between float and bf16 views, and rounding in place
// (the element formula is kernels/bf16.h's, shared with the CUDA kernels).
#include "kernels/bf16.h"

#include "kernels/cpu/loops.h"
#include "kernels/cuda/cuda_ops.h"
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

void convert_from_bf16(View<const bf16> x, View<float> y) {
  cpu::require_same_shape("convert_from_bf16", x, y);
  BAREYOLO_ROUTE_FLOAT_OP_TO_CUDA(convert_from_bf16,
                                  detail::common_device("convert_from_bf16", x, y), x, y);
  cpu::parallel_over_elements(x.shape, [&](int64_t n, int64_t begin, int64_t end) {
    const bf16* in = x.image(n);
    float* out = y.image(n);
    for (int64_t i = begin; i < end; ++i) out[i] = to_float(in[i]);
  });
}

void round_to_bf16_in_place(View<float> x) {
  BAREYOLO_ROUTE_FLOAT_OP_TO_CUDA(round_to_bf16_in_place, x.device, x);
  cpu::parallel_over_elements(x.shape, [&](int64_t n, int64_t begin, int64_t end) {
    float* values = x.image(n);
    for (int64_t i = begin; i < end; ++i) values[i] = round_to_bf16(values[i]);
  });
}

}  // namespace bareyolo::ops
