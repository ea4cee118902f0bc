// kernels/cpu/pool.cpp — 2-D max pooling on the CPU (SPPF's k=5 s=1 p=2 windows, and any
// other square window).
//
//   y[oh, ow] = max of x over rows [oh*s - p, oh*s - p + k) x cols [ow*s - p, ow*s - p + k)
// with padding as -infinity, i.e. the window clipped to the image. The backward sends each
// dy to the FIRST maximum of its window in row-major order (the element PyTorch picks), found
// again from x rather than kept from the forward: re-searching costs 2k compares per output
// (a row pass, then a column pass: window_argmaxes), an index tensor would cost one int64 per
// output held from forward to backward for every pooling layer. Forward and backward share
// the one window search, so they agree on ties.
//
// Threads: the (image, channel) planes are split over the pool (cpu::parallel_over_planes).
// Windows overlap only inside a plane, so the backward's dx += writes never race.
#include <algorithm>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <utility>

#include "kernels/cpu/loops.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cpu/thread_scratch.h"
#include "kernels/cpu/widened.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/ops.h"
#include "kernels/route.h"

namespace bareyolo::ops {

namespace {

struct PoolGeometry {
  int64_t height, width, out_h, out_w;
};

PoolGeometry pool_geometry(const char* op, Shape4 x, Pool2dParams p, Shape4 y) {
  auto fail = [&](const std::string& why) {
    throw std::invalid_argument(std::string(op) + ": " + why + " (input " + x.str() + ", output " +
                                y.str() + ", kernel " + std::to_string(p.kernel) + ", stride " +
                                std::to_string(p.stride) + ", padding " + std::to_string(p.pad) +
                                ")");
  };
  // pad <= kernel / 2 (PyTorch's rule) keeps at least one image element in every window.
  if (p.kernel < 1 || p.stride < 1 || p.pad < 0 || 2 * p.pad > p.kernel)
    fail("the kernel and stride must be at least 1 and the padding between 0 and kernel/2");
  PoolGeometry g{x.h, x.w, conv_out_size(x.h, p.kernel, p.stride, p.pad),
                 conv_out_size(x.w, p.kernel, p.stride, p.pad)};
  if (g.out_h < 1 || g.out_w < 1) fail("the window is larger than the padded input");
  Shape4 expected_y{x.n, x.c, g.out_h, g.out_w};
  if (!(y == expected_y)) fail("the output must have shape " + expected_y.str());
  return g;
}

// The thread_scratch tags of the row pass's values and columns, and of a plane's argmaxes.
struct RowMaxScratch;
struct RowArgmaxScratch;
struct PlaneArgmaxScratch;

// The first maximum of `values` over [begin, end), stepping by `step`: strictly greater
// replaces, so the first of equal values stays (and a NaN only where it comes first).
// The best value is kept in a register: re-loading values[best] made each compare wait on a
// load.
template <class T>
int64_t first_maximum(const T* values, int64_t begin, int64_t end, int64_t step) {
  int64_t best = begin;
  T best_value = values[begin * step];
  for (int64_t i = begin + 1; i < end; ++i) {
    const T value = values[i * step];
    if (value > best_value) best_value = value, best = i;
  }
  return best;
}

// argmax[o] = the index in `plane` of the first maximum (row-major) of output o's window,
// separably: first, along every input row, the first maximum of each output column's span
// of columns; then, down each output column, the first of those rows' maxima that is
// strictly greater than the ones before it. The row found is the first that holds the
// window's maximum and the column the first in it: the row-major first. 2k compares per
// output instead of k*k (SPPF's 5x5 windows spent 15 ns an output on a dependent chain).
template <class T>
void window_argmaxes(const T* plane, const PoolGeometry& g, Pool2dParams p, int64_t* argmax) {
  auto span = [&](int64_t o, int64_t size) {
    return std::pair<int64_t, int64_t>{std::max<int64_t>(0, o * p.stride - p.pad),
                                       std::min<int64_t>(size, o * p.stride - p.pad + p.kernel)};
  };
  T* row_max = cpu::thread_scratch<T, RowMaxScratch>(g.height * g.out_w);
  int64_t* row_argmax = cpu::thread_scratch<int64_t, RowArgmaxScratch>(g.height * g.out_w);
  for (int64_t r = 0; r < g.height; ++r) {
    const T* row = plane + r * g.width;
    for (int64_t ow = 0; ow < g.out_w; ++ow) {
      const auto [begin, end] = span(ow, g.width);
      const int64_t col = first_maximum(row, begin, end, 1);
      row_max[r * g.out_w + ow] = row[col];
      row_argmax[r * g.out_w + ow] = r * g.width + col;
    }
  }
  for (int64_t oh = 0; oh < g.out_h; ++oh)
    for (int64_t ow = 0; ow < g.out_w; ++ow) {
      const auto [begin, end] = span(oh, g.height);
      const int64_t r = first_maximum(row_max + ow, begin, end, g.out_w);
      argmax[oh * g.out_w + ow] = row_argmax[r * g.out_w + ow];
    }
}

// Runs per_window(image, channel, output index in the plane, index of its window's first
// maximum in x's plane) for every output, the planes split over the pool.
template <class T, class PerWindow>
void for_each_window(View<const T> x, const PoolGeometry& g, Pool2dParams p, PerWindow per_window) {
  const int64_t outputs = g.out_h * g.out_w;
  cpu::parallel_over_planes(x.shape, [&](int64_t image, int64_t channel) {
    int64_t* argmax = cpu::thread_scratch<int64_t, PlaneArgmaxScratch>(outputs);
    window_argmaxes(x.channel(image, channel), g, p, argmax);
    for (int64_t out = 0; out < outputs; ++out) per_window(image, channel, out, argmax[out]);
  });
}

void require_same_shape_as_input(const Shape4& x, const Shape4& dx) {
  if (!(dx == x))
    throw std::invalid_argument("maxpool2d_backward: dx has shape " + dx.str() +
                                " but x has shape " + x.str() + "; they must match");
}

// SPPF's chain: stride 1 and padding (kernel - 1) / 2, so each output has the input's shape.
void require_chainable(const Shape4& x, Pool2dParams p, std::initializer_list<Shape4> outputs) {
  if (p.stride != 1 || 2 * p.pad + 1 != p.kernel)
    throw std::invalid_argument(
        "maxpool2d_chain3_forward: chained pools need stride 1 and padding (kernel - 1) / 2 "
        "(SPPF's), got kernel " +
        std::to_string(p.kernel) + ", stride " + std::to_string(p.stride) + ", padding " +
        std::to_string(p.pad));
  for (const Shape4& y : outputs) pool_geometry("maxpool2d_chain3_forward", x, p, y);
}

}  // namespace

template <class T>
void maxpool2d_forward(View<const T> x, Pool2dParams p, View<T> y) {
  const PoolGeometry g = pool_geometry("maxpool2d_forward", x.shape, p, y.shape);
  BAREYOLO_ROUTE_TO_CUDA(maxpool2d_forward, detail::common_device("maxpool2d_forward", x, y), x, p,
                         y);
  for_each_window(x, g, p, [&](int64_t image, int64_t channel, int64_t out, int64_t argmax) {
    y.channel(image, channel)[out] = x.channel(image, channel)[argmax];
  });
}

template <class T>
void maxpool2d_backward(View<const T> x, View<const T> dy, Pool2dParams p, View<T> dx) {
  const PoolGeometry g = pool_geometry("maxpool2d_backward", x.shape, p, dy.shape);
  require_same_shape_as_input(x.shape, dx.shape);
  BAREYOLO_ROUTE_TO_CUDA(maxpool2d_backward, detail::common_device("maxpool2d_backward", x, dy, dx),
                         x, dy, p, dx);
  for_each_window(x, g, p, [&](int64_t image, int64_t channel, int64_t out, int64_t argmax) {
    dx.channel(image, channel)[argmax] += dy.channel(image, channel)[out];
  });
}

template <class T>
void maxpool2d_chain3_forward(View<const T> x, Pool2dParams p, View<T> y1, View<T> y2, View<T> y3) {
  require_chainable(x.shape, p, {y1.shape, y2.shape, y3.shape});
  BAREYOLO_ROUTE_TO_CUDA(maxpool2d_chain3_forward,
                         detail::common_device("maxpool2d_chain3_forward", x, y1, y2, y3), x, p, y1,
                         y2, y3);
  maxpool2d_forward<T>(x, p, y1);
  maxpool2d_forward<T>(y1, p, y2);
  maxpool2d_forward<T>(y2, p, y3);
}

#define BAREYOLO_INSTANTIATE_MAXPOOL2D(T)                                                   \
  template void maxpool2d_forward<T>(View<const T>, Pool2dParams, View<T>);                 \
  template void maxpool2d_backward<T>(View<const T>, View<const T>, Pool2dParams, View<T>); \
  template void maxpool2d_chain3_forward<T>(View<const T>, Pool2dParams, View<T>, View<T>, View<T>);
BAREYOLO_INSTANTIATE_MAXPOOL2D(float)
BAREYOLO_INSTANTIATE_MAXPOOL2D(double)

// ---- bf16 storage (mixed precision): the float ops on widened copies (kernels/cpu/widened.h)

template <>
void maxpool2d_forward<bf16>(View<const bf16> x, Pool2dParams p, View<bf16> y) {
  pool_geometry("maxpool2d_forward", x.shape, p, y.shape);
  BAREYOLO_ROUTE_FLOAT_OP_TO_CUDA(maxpool2d_forward,
                                  detail::common_device("maxpool2d_forward", x, y), x, p, y);
  cpu::Widened out(y.shape);
  maxpool2d_forward<float>(cpu::Widened(x), p, out);
  out.store(y);
}

template <>
void maxpool2d_backward<bf16>(View<const bf16> x, View<const bf16> dy, Pool2dParams p,
                              View<bf16> dx) {
  pool_geometry("maxpool2d_backward", x.shape, p, dy.shape);
  require_same_shape_as_input(x.shape, dx.shape);
  BAREYOLO_ROUTE_FLOAT_OP_TO_CUDA(
      maxpool2d_backward, detail::common_device("maxpool2d_backward", x, dy, dx), x, dy, p, dx);
  cpu::Widened dx_float(dx);
  maxpool2d_backward<float>(cpu::Widened(x), cpu::Widened(dy), p, dx_float);
  dx_float.store(dx);
}

template <>
void maxpool2d_chain3_forward<bf16>(View<const bf16> x, Pool2dParams p, View<bf16> y1,
                                    View<bf16> y2, View<bf16> y3) {
  require_chainable(x.shape, p, {y1.shape, y2.shape, y3.shape});
  BAREYOLO_ROUTE_FLOAT_OP_TO_CUDA(maxpool2d_chain3_forward,
                                  detail::common_device("maxpool2d_chain3_forward", x, y1, y2, y3),
                                  x, p, y1, y2, y3);
  cpu::Widened out1(y1.shape), out2(y2.shape), out3(y3.shape);
  maxpool2d_chain3_forward<float>(cpu::Widened(x), p, out1, out2, out3);
  out1.store(y1);
  out2.store(y2);
  out3.store(y3);
}

}  // namespace bareyolo::ops
