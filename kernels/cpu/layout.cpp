// kernels/cpu/layout.cpp — copy_elements: a copy between views of any layout (kernels/ops.h).
//
// It takes channels-last views as they are on every device (kernels/route.h lists it): its CPU
// loop is the one the channels-last adapter itself copies with (kernels/nchw_adapter.h).
#include <stdexcept>

#include "kernels/cuda/cuda_ops.h"
#include "kernels/ops.h"
#include "kernels/route.h"

namespace bareyolo::ops {

namespace {
void require_same_shape(const Shape4& x, const Shape4& y) {
  if (!(x == y))
    throw std::invalid_argument("copy_elements: " + x.str() + " into " + y.str() +
                                "; the shapes must be the same");
}
}  // namespace

template <class T>
void copy_elements(View<const T> x, View<T> y) {
  require_same_shape(x.shape, y.shape);
  BAREYOLO_ROUTE_TO_CUDA(copy_elements, detail::common_device("copy_elements", x, y), x, y);
  detail::copy_elements_on_host(x, y);
}

template <>
void copy_elements<bf16>(View<const bf16> x, View<bf16> y) {
  require_same_shape(x.shape, y.shape);
  BAREYOLO_ROUTE_FLOAT_OP_TO_CUDA(copy_elements, detail::common_device("copy_elements", x, y), x,
                                  y);
  detail::copy_elements_on_host(x, y);
}

template void copy_elements<float>(View<const float>, View<float>);
template void copy_elements<double>(View<const double>, View<double>);

}  // namespace bareyolo::ops
