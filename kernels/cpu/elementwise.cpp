// kernels/cpu/elementwise.cpp — SiLU, add, sigmoid and BCE-with-logits: the pointwise ops,
// forward and backward, for any NCHW view (strided batches included).
//
// Math, with s = sigmoid(x) = 1 / (1 + e^-x):
//   SiLU  y = x s            dy/dx = s (1 + x (1 - s))
//   BCE   l = -(w t log s + (1 - t) log(1 - s)),  w = pos_weight
//         = (1 - t) x + (w t + 1 - t) softplus(-x)        (using log s = -softplus(-x))
//   with softplus(-x) = max(-x, 0) + log1p(e^-|x|), which never overflows, and
//         dl/dx = (1 - t) s - w t (1 - s).
//
// The scalar formulas are kernels/activation.h's, shared with the CUDA kernels; SiLU and sigmoid
// run over each contiguous span through the *_span kernels of activation_spans.h.
#include "kernels/activation.h"
#include "kernels/cpu/activation_spans.h"
#include "kernels/cpu/loops.h"
#include "kernels/cpu/widened.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/ops.h"
#include "kernels/route.h"

namespace bareyolo::ops {

template <class T>
void silu_forward(View<const T> x, View<T> y) {
  cpu::require_same_shape("silu_forward", x, y);
  BAREYOLO_ROUTE_TO_CUDA(silu_forward, detail::common_device("silu_forward", x, y), x, y);
  cpu::parallel_over_elements(x.shape, [&](int64_t n, int64_t begin, int64_t end) {
    cpu::silu_forward_span(x.image(n) + begin, y.image(n) + begin, end - begin);
  });
}

template <class T>
void silu_backward(View<const T> x, View<const T> dy, View<T> dx) {
  cpu::require_same_shape("silu_backward", x, dy);
  cpu::require_same_shape("silu_backward", x, dx);
  BAREYOLO_ROUTE_TO_CUDA(silu_backward, detail::common_device("silu_backward", x, dy, dx), x, dy,
                         dx);
  cpu::parallel_over_elements(x.shape, [&](int64_t n, int64_t begin, int64_t end) {
    cpu::silu_backward_span(x.image(n) + begin, dy.image(n) + begin, dx.image(n) + begin,
                            end - begin);
  });
}

template <class T>
void add_forward(View<const T> a, View<const T> b, View<T> y) {
  cpu::require_same_shape("add_forward", a, b);
  cpu::require_same_shape("add_forward", a, y);
  BAREYOLO_ROUTE_TO_CUDA(add_forward, detail::common_device("add_forward", a, b, y), a, b, y);
  cpu::parallel_over_elements(a.shape, [&](int64_t n, int64_t begin, int64_t end) {
    const T* lhs = a.image(n);
    const T* rhs = b.image(n);
    T* out = y.image(n);
    for (int64_t i = begin; i < end; ++i) out[i] = lhs[i] + rhs[i];
  });
}

namespace {
// One gradient for both inputs (y = x + x): dy goes into it twice, each sum rounded, on every
// device. Decided before any routing: separate copies of da and db (a layout's, a widening's)
// would each take dy once, and the second written back would drop the first's.
template <class T>
bool added_twice_into_one(View<const T> dy, View<T> da, View<T> db) {
  if (da.data != db.data) return false;
  for (int twice = 0; twice < 2; ++twice) add_forward<T>(dy, View<const T>(da), da);
  return true;
}
}  // namespace

template <class T>
void add_backward(View<const T> dy, View<T> da, View<T> db) {
  cpu::require_same_shape("add_backward", dy, da);
  cpu::require_same_shape("add_backward", dy, db);
  if (added_twice_into_one(dy, da, db)) return;
  BAREYOLO_ROUTE_TO_CUDA(add_backward, detail::common_device("add_backward", dy, da, db), dy, da,
                         db);
  cpu::parallel_over_elements(dy.shape, [&](int64_t n, int64_t begin, int64_t end) {
    const T* grad_out = dy.image(n);
    T* grad_a = da.image(n);
    T* grad_b = db.image(n);
    for (int64_t i = begin; i < end; ++i) {
      grad_a[i] += grad_out[i];
      grad_b[i] += grad_out[i];
    }
  });
}

template <class T>
void sigmoid_forward(View<const T> x, View<T> y) {
  cpu::require_same_shape("sigmoid_forward", x, y);
  BAREYOLO_ROUTE_TO_CUDA(sigmoid_forward, detail::common_device("sigmoid_forward", x, y), x, y);
  cpu::parallel_over_elements(x.shape, [&](int64_t n, int64_t begin, int64_t end) {
    cpu::sigmoid_forward_span(x.image(n) + begin, y.image(n) + begin, end - begin);
  });
}

template <class T>
void sigmoid_backward(View<const T> y, View<const T> dy, View<T> dx) {
  cpu::require_same_shape("sigmoid_backward", y, dy);
  cpu::require_same_shape("sigmoid_backward", y, dx);
  BAREYOLO_ROUTE_TO_CUDA(sigmoid_backward, detail::common_device("sigmoid_backward", y, dy, dx), y,
                         dy, dx);
  cpu::parallel_over_elements(y.shape, [&](int64_t n, int64_t begin, int64_t end) {
    const T* out = y.image(n);
    const T* grad_out = dy.image(n);
    T* grad_in = dx.image(n);
    for (int64_t i = begin; i < end; ++i)
      grad_in[i] += sigmoid_gradient_from_output(out[i], grad_out[i]);
  });
}

template <class T>
void bce_with_logits_forward(View<const T> x, View<const T> target, T pos_weight, View<T> loss) {
  cpu::require_same_shape("bce_with_logits_forward", x, target);
  cpu::require_same_shape("bce_with_logits_forward", x, loss);
  BAREYOLO_ROUTE_TO_CUDA(bce_with_logits_forward,
                         detail::common_device("bce_with_logits_forward", x, target, loss), x,
                         target, pos_weight, loss);
  cpu::parallel_over_elements(x.shape, [&](int64_t n, int64_t begin, int64_t end) {
    const T* logit = x.image(n);
    const T* t = target.image(n);
    T* out = loss.image(n);
    for (int64_t i = begin; i < end; ++i) out[i] = bce(logit[i], t[i], pos_weight);
  });
}

template <class T>
void bce_with_logits_backward(View<const T> x, View<const T> target, T pos_weight,
                              View<const T> dloss, View<T> dx) {
  cpu::require_same_shape("bce_with_logits_backward", x, target);
  cpu::require_same_shape("bce_with_logits_backward", x, dloss);
  cpu::require_same_shape("bce_with_logits_backward", x, dx);
  BAREYOLO_ROUTE_TO_CUDA(bce_with_logits_backward,
                         detail::common_device("bce_with_logits_backward", x, target, dloss, dx), x,
                         target, pos_weight, dloss, dx);
  cpu::parallel_over_elements(x.shape, [&](int64_t n, int64_t begin, int64_t end) {
    const T* logit = x.image(n);
    const T* t = target.image(n);
    const T* grad_out = dloss.image(n);
    T* grad_in = dx.image(n);
    for (int64_t i = begin; i < end; ++i)
      grad_in[i] += grad_out[i] * bce_grad(logit[i], t[i], pos_weight);
  });
}

#define BAREYOLO_INSTANTIATE_ELEMENTWISE(T)                                                 \
  template void silu_forward<T>(View<const T>, View<T>);                                    \
  template void silu_backward<T>(View<const T>, View<const T>, View<T>);                    \
  template void add_forward<T>(View<const T>, View<const T>, View<T>);                      \
  template void add_backward<T>(View<const T>, View<T>, View<T>);                           \
  template void sigmoid_forward<T>(View<const T>, View<T>);                                 \
  template void sigmoid_backward<T>(View<const T>, View<const T>, View<T>);                 \
  template void bce_with_logits_forward<T>(View<const T>, View<const T>, T, View<T>);       \
  template void bce_with_logits_backward<T>(View<const T>, View<const T>, T, View<const T>, \
                                            View<T>);
BAREYOLO_INSTANTIATE_ELEMENTWISE(float)
BAREYOLO_INSTANTIATE_ELEMENTWISE(double)

// ---- bf16 storage (mixed precision): the float ops on widened copies (kernels/cpu/widened.h)

template <>
void silu_forward<bf16>(View<const bf16> x, View<bf16> y) {
  cpu::require_same_shape("silu_forward", x, y);
  BAREYOLO_ROUTE_FLOAT_OP_TO_CUDA(silu_forward, detail::common_device("silu_forward", x, y), x, y);
  cpu::Widened out(y.shape);
  silu_forward<float>(cpu::Widened(x), out);
  out.store(y);
}

template <>
void silu_backward<bf16>(View<const bf16> x, View<const bf16> dy, View<bf16> dx) {
  cpu::require_same_shape("silu_backward", x, dy);
  cpu::require_same_shape("silu_backward", x, dx);
  BAREYOLO_ROUTE_FLOAT_OP_TO_CUDA(silu_backward, detail::common_device("silu_backward", x, dy, dx),
                                  x, dy, dx);
  cpu::Widened dx_float(dx);
  silu_backward<float>(cpu::Widened(x), cpu::Widened(dy), dx_float);
  dx_float.store(dx);
}

template <>
void add_forward<bf16>(View<const bf16> a, View<const bf16> b, View<bf16> y) {
  cpu::require_same_shape("add_forward", a, b);
  cpu::require_same_shape("add_forward", a, y);
  BAREYOLO_ROUTE_FLOAT_OP_TO_CUDA(add_forward, detail::common_device("add_forward", a, b, y), a, b,
                                  y);
  cpu::Widened out(y.shape);
  add_forward<float>(cpu::Widened(a), cpu::Widened(b), out);
  out.store(y);
}

template <>
void add_backward<bf16>(View<const bf16> dy, View<bf16> da, View<bf16> db) {
  cpu::require_same_shape("add_backward", dy, da);
  cpu::require_same_shape("add_backward", dy, db);
  if (added_twice_into_one(dy, da, db)) return;
  BAREYOLO_ROUTE_FLOAT_OP_TO_CUDA(add_backward, detail::common_device("add_backward", dy, da, db),
                                  dy, da, db);
  cpu::Widened da_float(da), db_float(db);
  add_backward<float>(cpu::Widened(dy), da_float, db_float);
  da_float.store(da);
  db_float.store(db);
}

}  // namespace bareyolo::ops
