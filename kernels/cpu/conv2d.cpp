// kernels/cpu/conv2d.cpp — 2-D convolution (cross-correlation) forward and backward on the CPU.
//
// Every pass is a GEMM per image over the im2col column matrix col_i (K x HW, K = c_in*kh*kw,
// HW = out_h*out_w; kernels/cpu/im2col.h):
//   forward          Y_i   = W * col_i (+ bias per row)        (c_out x K) * (K x HW)
//   backward data    dcol  = W^T * dY_i, then col2im adds dcol onto dx_i
//   backward weight  dW   += dY_i * col_i^T,  dbias += row sums of dY_i
// A 1x1 stride-1 unpadded convolution (most of YOLOv5's) skips im2col: the image is already
// the column matrix (one channel plane per row), so the GEMMs read and write it in place.
//
// Threads: forward and backward-data split the batch over the pool, one image per task; the
// GEMM inside then runs on that thread (nested loops run serially), and with a batch of one
// the GEMM gets the pool itself. backward-weight accumulates the images one after another
// into the single dW so the summation order, hence the result, is the same on any machine.
// Column matrices live in a per-thread grow-only buffer: no allocation after the first step.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/im2col.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/ops.h"
#include "kernels/route.h"

namespace bareyolo::ops {

namespace {

using cpu::ConvGeometry;

// The convolution's sizes, after checking that x, weight and y fit together.
ConvGeometry conv_geometry(const char* op, Shape4 x, Shape4 weight, bool weight_dense,
                           Conv2dParams p, Shape4 y) {
  auto fail = [&](const std::string& why) {
    throw std::invalid_argument(std::string(op) + ": " + why + " (input " + x.str() +
                                ", weight " + weight.str() + ", output " + y.str() +
                                ", stride " + std::to_string(p.stride_h) + "x" +
                                std::to_string(p.stride_w) + ", padding " +
                                std::to_string(p.pad_h) + "x" + std::to_string(p.pad_w) + ")");
  };
  if (p.stride_h < 1 || p.stride_w < 1 || p.pad_h < 0 || p.pad_w < 0)
    fail("strides must be at least 1 and paddings at least 0");
  if (weight.n < 1 || weight.h < 1 || weight.w < 1)
    fail("the weight must hold at least one kernel of at least 1x1");
  if (!weight_dense)
    fail("the weight must be one dense (c_out, c_in, kernel_h, kernel_w) block");
  if (x.c != weight.c)
    fail("the input has " + std::to_string(x.c) + " channels but the weight expects " +
         std::to_string(weight.c));
  ConvGeometry g{x.c, x.h, x.w, weight.h, weight.w, p.stride_h, p.stride_w, p.pad_h, p.pad_w,
                 conv_out_size(x.h, weight.h, p.stride_h, p.pad_h),
                 conv_out_size(x.w, weight.w, p.stride_w, p.pad_w)};
  if (g.out_h < 1 || g.out_w < 1) fail("the kernel is larger than the padded input");
  Shape4 expected_y{x.n, weight.n, g.out_h, g.out_w};
  if (!(y == expected_y)) fail("the output must have shape " + expected_y.str());
  return g;
}

// A buffer of at least `count` elements owned by the calling thread, reused across calls.
template <class T>
T* col_scratch(int64_t count) {
  thread_local std::vector<T> buffer;
  if (buffer.size() < static_cast<size_t>(count)) buffer.resize(static_cast<size_t>(count));
  return buffer.data();
}

// The column matrix of one image: the image itself for a 1x1 stride-1 convolution, else
// im2col into this thread's scratch.
template <class T>
const T* columns_of(const T* image, const ConvGeometry& g) {
  if (g.image_is_col()) return image;
  T* col = col_scratch<T>(g.col_rows() * g.col_cols());
  cpu::im2col(image, g, col);
  return col;
}

// Runs per_image(i) for every image of the batch, one image per task on the thread pool.
template <class PerImage>
void for_each_image(int64_t batch, PerImage per_image) {
  parallel_for(batch, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) per_image(i);
  });
}

}  // namespace

template <class T>
void conv2d_forward(View<const T> x, View<const T> weight, const T* bias, Conv2dParams p,
                    View<T> y) {
  BAREYOLO_REQUIRE_CPU(conv2d_forward, detail::common_device("conv2d_forward", x, weight, y));
  const ConvGeometry g =
      conv_geometry("conv2d_forward", x.shape, weight.shape, weight.dense(), p, y.shape);
  const int64_t c_out = weight.shape.n, k = g.col_rows(), hw = g.col_cols();
  for_each_image(x.shape.n, [&](int64_t i) {
    T* out = y.image(i);
    // With a bias, Y starts as the bias broadcast along each row and the GEMM adds onto it.
    if (bias)
      for (int64_t o = 0; o < c_out; ++o) std::fill(out + o * hw, out + (o + 1) * hw, bias[o]);
    cpu::gemm<T>(false, false, c_out, hw, k, T(1), weight.data, k, columns_of(x.image(i), g), hw,
                 bias ? T(1) : T(0), out, hw);
  });
}

template <class T>
void conv2d_backward_data(View<const T> dy, View<const T> weight, Conv2dParams p, View<T> dx) {
  BAREYOLO_REQUIRE_CPU(conv2d_backward_data,
                       detail::common_device("conv2d_backward_data", dy, weight, dx));
  const ConvGeometry g = conv_geometry("conv2d_backward_data", dx.shape, weight.shape,
                                       weight.dense(), p, dy.shape);
  const int64_t c_out = weight.shape.n, k = g.col_rows(), hw = g.col_cols();
  // For a 1x1 stride-1 convolution dx_i is its own column matrix: the GEMM adds into it.
  const bool dx_is_dcol = g.image_is_col();
  for_each_image(dx.shape.n, [&](int64_t i) {
    T* dcol = dx_is_dcol ? dx.image(i) : col_scratch<T>(k * hw);
    cpu::gemm<T>(true, false, k, hw, c_out, T(1), weight.data, k, dy.image(i), hw,
                 dx_is_dcol ? T(1) : T(0), dcol, hw);
    if (!dx_is_dcol) cpu::col2im_add(dcol, g, dx.image(i));
  });
}

template <class T>
void conv2d_backward_weight(View<const T> x, View<const T> dy, Conv2dParams p, View<T> dweight,
                            T* dbias) {
  BAREYOLO_REQUIRE_CPU(conv2d_backward_weight,
                       detail::common_device("conv2d_backward_weight", x, dy, dweight));
  const ConvGeometry g = conv_geometry("conv2d_backward_weight", x.shape, dweight.shape,
                                       dweight.dense(), p, dy.shape);
  const int64_t c_out = dweight.shape.n, k = g.col_rows(), hw = g.col_cols();
  for (int64_t i = 0; i < x.shape.n; ++i)  // serial: a fixed summation order over images
    cpu::gemm<T>(false, true, c_out, k, hw, T(1), dy.image(i), hw, columns_of(x.image(i), g), hw,
                 T(1), dweight.data, k);
  if (!dbias) return;
  parallel_for(c_out, 1, [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) {
      double row_sum = 0;  // double: a channel sums batch * HW values
      for (int64_t i = 0; i < dy.shape.n; ++i) {
        const T* row = dy.channel(i, o);
        for (int64_t j = 0; j < hw; ++j) row_sum += row[j];
      }
      dbias[o] += static_cast<T>(row_sum);
    }
  });
}

#define BAREYOLO_INSTANTIATE_CONV2D(T)                                                        \
  template void conv2d_forward<T>(View<const T>, View<const T>, const T*, Conv2dParams,       \
                                  View<T>);                                                   \
  template void conv2d_backward_data<T>(View<const T>, View<const T>, Conv2dParams, View<T>); \
  template void conv2d_backward_weight<T>(View<const T>, View<const T>, Conv2dParams, View<T>, \
                                          T*);
BAREYOLO_INSTANTIATE_CONV2D(float)
BAREYOLO_INSTANTIATE_CONV2D(double)

}  // namespace bareyolo::ops
