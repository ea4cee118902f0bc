// kernels/cpu/conv2d_bf16.cpp — the bf16 convolutions' definitions (kernels/ops.h): the float
// convolutions, their results rounded to bf16 where a bf16 convolution stores them.
#include <vector>

#include "kernels/cuda/cuda_ops.h"
#include "kernels/ops.h"
#include "kernels/route.h"

namespace bareyolo::ops {

void conv2d_forward_bf16(View<const float> x, View<const float> weight, const float* bias,
                         Conv2dParams p, View<float> y) {
  BAREYOLO_ROUTE_FLOAT_OP_TO_CUDA(conv2d_forward_bf16,
                                  detail::common_device("conv2d_forward_bf16", x, weight, y), x,
                                  weight, bias, p, y);
  conv2d_forward<float>(x, weight, bias, p, y);
  round_to_bf16_in_place(y);
}

void conv2d_backward_data_bf16(View<const float> dy, View<const float> weight, Conv2dParams p,
                               View<float> dx) {
  BAREYOLO_ROUTE_FLOAT_OP_TO_CUDA(
      conv2d_backward_data_bf16, detail::common_device("conv2d_backward_data_bf16", dy, weight, dx),
      dy, weight, p, dx);
  conv2d_backward_data<float>(dy, weight, p, dx);  // adds in float, then the bf16 store
  round_to_bf16_in_place(dx);
}

void conv2d_backward_weight_bf16(View<const float> x, View<const float> dy, Conv2dParams p,
                                 View<float> dweight, float* dbias) {
  BAREYOLO_ROUTE_FLOAT_OP_TO_CUDA(
      conv2d_backward_weight_bf16,
      detail::common_device("conv2d_backward_weight_bf16", x, dy, dweight), x, dy, p, dweight,
      dbias);
  // The bf16 product on its own (a weight's worth of floats), rounded, then accumulated.
  std::vector<float> product(size_t(dweight.shape.numel()), 0.0f);
  const View<float> bf16_product = dense_view(product.data(), dweight.shape);
  conv2d_backward_weight<float>(x, dy, p, bf16_product, dbias);
  round_to_bf16_in_place(bf16_product);
  add_forward<float>(dweight, bf16_product, dweight);
}

}  // namespace bareyolo::ops
