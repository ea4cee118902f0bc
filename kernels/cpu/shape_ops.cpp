// kernels/cpu/shape_ops.cpp — channel concatenation and nearest-neighbour x2 upsampling.
//
// These only move data. Concat here is the reference copy; the graph avoids it by having
// producers write straight into channel slices of the concatenated buffer (views with
// batch_stride > c*h*w), which is why every kernel honours batch_stride.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/cpu/loops.h"
#include "kernels/cpu/widened.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/ops.h"
#include "kernels/route.h"

namespace bareyolo::ops {

namespace {
// Checks that `parts`, stacked along channels, make up `whole`; returns the channel offset of
// each part.
template <class Part, class Whole>
std::vector<int64_t> channel_offsets(const char* op, const std::vector<View<Part>>& parts,
                                     const View<Whole>& whole) {
  std::vector<int64_t> offsets;
  int64_t channels = 0;
  for (const auto& part : parts) {
    detail::common_device(op, part, whole);
    const Shape4& s = part.shape;
    if (s.n != whole.shape.n || s.h != whole.shape.h || s.w != whole.shape.w)
      throw std::invalid_argument(std::string(op) + ": part " + s.str() +
                                  " does not match the concatenation " + whole.shape.str() +
                                  " in batch, height or width");
    offsets.push_back(channels);
    channels += s.c;
  }
  if (channels != whole.shape.c)
    throw std::invalid_argument(std::string(op) + ": parts have " + std::to_string(channels) +
                                " channels in all but the concatenation has " +
                                std::to_string(whole.shape.c));
  return offsets;
}

void require_upsampled(const char* op, const Shape4& small, const Shape4& large) {
  if (large.n != small.n || large.c != small.c || large.h != 2 * small.h || large.w != 2 * small.w)
    throw std::invalid_argument(std::string(op) + ": " + large.str() + " is not " + small.str() +
                                " upsampled x2");
}
}  // namespace

template <class T>
void concat_forward(const std::vector<View<const T>>& inputs, View<T> y) {
  BAREYOLO_REQUIRE_CPU(concat_forward, y.device, inputs, y);
  std::vector<int64_t> offsets = channel_offsets("concat_forward", inputs, y);
  const int64_t plane = y.shape.plane();
  for (size_t k = 0; k < inputs.size(); ++k) {
    const View<const T>& in = inputs[k];
    cpu::parallel_over_elements(in.shape, [&](int64_t n, int64_t begin, int64_t end) {
      std::copy(in.image(n) + begin, in.image(n) + end, y.image(n) + offsets[k] * plane + begin);
    });
  }
}

template <class T>
void concat_backward(View<const T> dy, const std::vector<View<T>>& dx) {
  BAREYOLO_REQUIRE_CPU(concat_backward, dy.device, dy, dx);
  std::vector<int64_t> offsets = channel_offsets("concat_backward", dx, dy);
  const int64_t plane = dy.shape.plane();
  for (size_t k = 0; k < dx.size(); ++k) {
    const View<T>& grad_in = dx[k];
    cpu::parallel_over_elements(grad_in.shape, [&](int64_t n, int64_t begin, int64_t end) {
      const T* grad_out = dy.image(n) + offsets[k] * plane;
      T* grad = grad_in.image(n);
      for (int64_t i = begin; i < end; ++i) grad[i] += grad_out[i];
    });
  }
}

template <class T>
void upsample_nearest2x_forward(View<const T> x, View<T> y) {
  require_upsampled("upsample_nearest2x_forward", x.shape, y.shape);
  BAREYOLO_ROUTE_TO_CUDA(upsample_nearest2x_forward,
                         detail::common_device("upsample_nearest2x_forward", x, y), x, y);
  const int64_t h = x.shape.h, w = x.shape.w;
  cpu::parallel_over_planes(x.shape, [&](int64_t n, int64_t c) {
    const T* in = x.channel(n, c);
    T* out = y.channel(n, c);
    for (int64_t i = 0; i < h; ++i) {
      T* row = out + 2 * i * 2 * w;
      for (int64_t j = 0; j < w; ++j) row[2 * j] = row[2 * j + 1] = in[i * w + j];
      std::copy(row, row + 2 * w, row + 2 * w);  // the second output row repeats the first
    }
  });
}

template <class T>
void upsample_nearest2x_backward(View<const T> dy, View<T> dx, GradientWrite write) {
  require_upsampled("upsample_nearest2x_backward", dx.shape, dy.shape);
  BAREYOLO_ROUTE_TO_CUDA(upsample_nearest2x_backward,
                         detail::common_device("upsample_nearest2x_backward", dy, dx), dy, dx,
                         write);
  const int64_t h = dx.shape.h, w = dx.shape.w;
  const bool add = write == GradientWrite::add;
  cpu::parallel_over_planes(dx.shape, [&](int64_t n, int64_t c) {
    const T* grad_out = dy.channel(n, c);
    T* grad_in = dx.channel(n, c);
    for (int64_t i = 0; i < h; ++i)
      for (int64_t j = 0; j < w; ++j) {
        const T* top = grad_out + 2 * i * 2 * w + 2 * j;
        const T* bottom = top + 2 * w;
        const T sum = top[0] + top[1] + bottom[0] + bottom[1];
        grad_in[i * w + j] = add ? grad_in[i * w + j] + sum : sum;
      }
  });
}

#define BAREYOLO_INSTANTIATE_SHAPE_OPS(T)                                       \
  template void concat_forward<T>(const std::vector<View<const T>>&, View<T>);  \
  template void concat_backward<T>(View<const T>, const std::vector<View<T>>&); \
  template void upsample_nearest2x_forward<T>(View<const T>, View<T>);          \
  template void upsample_nearest2x_backward<T>(View<const T>, View<T>, GradientWrite);
BAREYOLO_INSTANTIATE_SHAPE_OPS(float)
BAREYOLO_INSTANTIATE_SHAPE_OPS(double)

// ---- bf16 storage (mixed precision): the float ops on widened copies (kernels/cpu/widened.h)

template <>
void concat_forward<bf16>(const std::vector<View<const bf16>>& inputs, View<bf16> y) {
  BAREYOLO_REQUIRE_CPU(concat_forward, y.device, inputs, y);
  std::vector<cpu::Widened> widened;
  std::vector<View<const float>> views;
  for (const View<const bf16>& input : inputs) views.push_back(widened.emplace_back(input));
  cpu::Widened out(y.shape);
  concat_forward<float>(views, out);
  out.store(y);
}

template <>
void concat_backward<bf16>(View<const bf16> dy, const std::vector<View<bf16>>& dx) {
  BAREYOLO_REQUIRE_CPU(concat_backward, dy.device, dy, dx);
  std::vector<cpu::Widened> widened;
  std::vector<View<float>> views;
  for (const View<bf16>& grad : dx) views.push_back(widened.emplace_back(grad));
  concat_backward<float>(cpu::Widened(dy), views);
  for (size_t k = 0; k < dx.size(); ++k) widened[k].store(dx[k]);
}

template <>
void upsample_nearest2x_forward<bf16>(View<const bf16> x, View<bf16> y) {
  require_upsampled("upsample_nearest2x_forward", x.shape, y.shape);
  BAREYOLO_ROUTE_FLOAT_OP_TO_CUDA(upsample_nearest2x_forward,
                                  detail::common_device("upsample_nearest2x_forward", x, y), x, y);
  cpu::Widened out(y.shape);
  upsample_nearest2x_forward<float>(cpu::Widened(x), out);
  out.store(y);
}

template <>
void upsample_nearest2x_backward<bf16>(View<const bf16> dy, View<bf16> dx, GradientWrite write) {
  require_upsampled("upsample_nearest2x_backward", dx.shape, dy.shape);
  BAREYOLO_ROUTE_FLOAT_OP_TO_CUDA(upsample_nearest2x_backward,
                                  detail::common_device("upsample_nearest2x_backward", dy, dx), dy,
                                  dx, write);
  cpu::Widened dx_float = cpu::widened_gradient(dx, write);
  upsample_nearest2x_backward<float>(cpu::Widened(dy), dx_float, write);
  dx_float.store(dx);
}

}  // namespace bareyolo::ops
