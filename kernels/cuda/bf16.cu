// kernels/cuda/bf16.cu — float <-> bf16 conversions, rounding in place and bf16 added into float
// on the GPU, with the element formula of kernels/bf16.h (the CPU's), so both produce the same
// bits; views of either layout, in any mix (pointwise.cuh's element).
#include "kernels/bf16.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/pointwise.cuh"
#include "kernels/krsc_weights.h"

namespace bareyolo::cuda {

namespace {
struct ToBf16 {
  __device__ bf16 operator()(float v) const { return to_bf16(v); }
};
struct ToFloat {
  float divisor;
  __device__ float operator()(bf16 v) const { return to_float(v) / divisor; }
};
struct RoundToBf16 {
  __device__ float operator()(float v) const { return round_to_bf16(v); }
};
struct AddBf16Into {
  View<const bf16> x;
  View<float> sum;
  ElementOrder order = ElementOrder::of(x);
  __device__ void operator()(int64_t n, int64_t i) const {
    element(sum, order, n, i) += to_float(element(x, order, n, i));
  }
};
// Copy element e rounds its KCRS source (flat views: e counts the whole arena).
struct RoundWeights {
  const float* values;
  bf16* copies;
  const int64_t* segments;
  int64_t count;
  __device__ void operator()(int64_t, int64_t e) const {
    copies[e] = to_bf16(values[ops::krsc_source(segments, count, e)]);
  }
};
}  // namespace

void convert_to_bf16(View<const float> x, View<bf16> y) { launch_map(x, y, ToBf16{}); }
void convert_from_bf16(View<const bf16> x, View<float> y, float divisor) {
  launch_map(x, y, ToFloat{divisor});
}
void round_to_bf16_in_place(View<float> x) { launch_map(View<const float>(x), x, RoundToBf16{}); }
void add_bf16_into(View<const bf16> x, View<float> sum) {
  launch_pointwise(x.shape, x.device, all_packed_alike(x, sum), AddBf16Into{x, sum});
}

void round_weights_to_bf16(View<const float> values, View<bf16> copies,
                           View<const int64_t> segments) {
  launch_pointwise(values.shape, values.device, /*all_dense=*/true,
                   RoundWeights{values.data, copies.data, segments.data,
                                segments.shape.numel() / ops::kSegmentFields});
}

}  // namespace bareyolo::cuda
