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
// Bands: the column matrix of a large map is big (the 6x6 stem at 320x320: 108 x 25600
// floats, 11 MB per image), and writing it out only for the GEMM to read it back from memory
// cost as much as the GEMM. So an image whose column matrix exceeds cpu::l2_band_bytes() is done in
// bands of whole output rows (im2col.h), each band's columns written and consumed while they
// sit in L2: Y, dY and dcol are cut the same way, as column ranges of width band rows * out_w.
// (Measured on the stem with build/bench_model: its three passes run about 40% faster in bands
// than with the band size raised above its column matrix.)
//
// Threads: forward and backward-data split the batch over the pool, one image per task; the
// GEMM inside then runs on that thread (nested loops run serially), and with a batch of one
// the GEMM gets the pool itself.
//
// backward-weight sums over the images. Where dW is large (the deep layers) the GEMMs split
// well over the pool: the column matrices of a chunk of images (at most max_chunk_bytes()) are
// written together on the pool, then summed by one gemm_sum, one split of dW over the pool
// for all the chunk's images. (Image by image, the 10x10 layers' GEMMs are only 100 deep:
// each image paid a serial im2col and a wait for the pool; at 2 threads that path scaled
// 1.2-1.6x on yolov5n's deep layers.) Where dW is small (at most kMaxPartialWeights: the
// early layers, whose dW has few columns, e.g. 16 x 108 for the stem) a GEMM is one task, so
// the batch is cut into at most kMaxWeightGroups groups of consecutive images, each summed
// by one thread into its own partial dW, and the partials are added into dW in group order.
// Both ways the grouping and the summation order follow from the shape and the band size (from
// this CPU's L2) alone: the bits are the same for any thread count.
//
// Asked for them, forward also gives its output's BatchNorm moments (ops.h): on the GEMM path
// each image's task takes its channels' planes right after writing them, merged in image order
// after the batch (kernels/cpu/batchnorm_channel.h): batchnorm_moments' bits.
//
// The forward of a convolution of at most 4 input channels (YOLOv5's stem) in float skips
// im2col and the GEMM: kernels/cpu/conv2d_direct.h computes it directly, the same bits.
//
// 3x3 stride-1 convolutions run Winograd F(2x2, 3x3) instead where its measured rule picks it
// per pass (kernels/cpu/winograd.h), in float and double alike: in bands of tiles that run on
// over the batch's images, within the same backward-weight grouping, its filter transforms
// computed once per call.
//
// Column matrices and partials live in per-thread grow-only buffers
// (kernels/cpu/thread_scratch.h): no allocation after the first step.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/cpu/batchnorm_channel.h"
#include "kernels/cpu/cache_sizes.h"
#include "kernels/cpu/conv2d_direct.h"
#include "kernels/cpu/gemm/gemm.h"
#include "kernels/cpu/im2col.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cpu/thread_scratch.h"
#include "kernels/cpu/widened.h"
#include "kernels/cpu/winograd.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/ops.h"
#include "kernels/route.h"

namespace bareyolo::ops {

namespace {

using cpu::ConvGeometry;

// The convolution's sizes, after checking that x, weight and y fit together.
// The weight is one packed block: KCRS, or KRSC (channels last, the bf16 weight copies of a
// channels-last graph: kernels/krsc_weights.h).
ConvGeometry conv_geometry(const char* op, Shape4 x, Shape4 weight, bool weight_packed,
                           Conv2dParams p, Shape4 y) {
  auto fail = [&](const std::string& why) {
    throw std::invalid_argument(std::string(op) + ": " + why + " (input " + x.str() + ", weight " +
                                weight.str() + ", output " + y.str() + ", stride " +
                                std::to_string(p.stride_h) + "x" + std::to_string(p.stride_w) +
                                ", padding " + std::to_string(p.pad_h) + "x" +
                                std::to_string(p.pad_w) + ")");
  };
  if (p.stride_h < 1 || p.stride_w < 1 || p.pad_h < 0 || p.pad_w < 0)
    fail("strides must be at least 1 and paddings at least 0");
  if (weight.n < 1 || weight.h < 1 || weight.w < 1)
    fail("the weight must hold at least one kernel of at least 1x1");
  if (!weight_packed)
    fail("the weight must be one packed (c_out, c_in, kernel_h, kernel_w) block, KCRS or KRSC");
  if (x.c != weight.c)
    fail("the input has " + std::to_string(x.c) + " channels but the weight expects " +
         std::to_string(weight.c));
  ConvGeometry g{x.c,
                 x.h,
                 x.w,
                 weight.h,
                 weight.w,
                 p.stride_h,
                 p.stride_w,
                 p.pad_h,
                 p.pad_w,
                 conv_out_size(x.h, weight.h, p.stride_h, p.pad_h),
                 conv_out_size(x.w, weight.w, p.stride_w, p.pad_w)};
  if (g.out_h < 1 || g.out_w < 1) fail("the kernel is larger than the padded input");
  Shape4 expected_y{x.n, weight.n, g.out_h, g.out_w};
  if (!(y == expected_y)) fail("the output must have shape " + expected_y.str());
  return g;
}

void require_both_or_neither(const void* moments_mean, const void* moments_m2) {
  if (!moments_mean != !moments_m2)
    throw std::invalid_argument("conv2d_forward: give both moments outputs or neither");
}

// The thread_scratch tags of a band's column matrix, of a chunk of images' column matrices, of
// backward-weight's partial sums, of Winograd's transformed filters and their gradient, and
// of forward's per-image moments.
struct ColumnScratch;
struct ChunkColumnScratch;
struct PartialScratch;
struct WinogradFilterScratch;
struct PlaneMomentsScratch;

// Output rows per band: all of them when the whole column matrix fits cpu::l2_band_bytes(), else as
// many as fit (at least one). A function of the shape and of this CPU's L2 only.
template <class T>
int64_t band_rows(const ConvGeometry& g) {
  const int64_t row_bytes = g.col_rows() * g.out_w * static_cast<int64_t>(sizeof(T));
  return std::clamp<int64_t>(cpu::l2_band_bytes() / row_bytes, 1, g.out_h);
}

// Calls per_band(oh_begin, oh_end, scratch) for the bands of output rows in order; scratch
// is this thread's buffer for one band's column matrix (col_rows x band columns).
template <class T, class PerBand>
void for_each_band(const ConvGeometry& g, PerBand per_band) {
  const int64_t rows = band_rows<T>(g);
  T* scratch = cpu::thread_scratch<T, ColumnScratch>(g.col_rows() * rows * g.out_w);
  for (int64_t oh = 0; oh < g.out_h; oh += rows)
    per_band(oh, std::min(g.out_h, oh + rows), scratch);
}

// Calls per_band(column offset, band columns, col) with the column matrix col (dense, band
// columns wide) of each band of `image`: for a 1x1 stride-1 convolution the image itself, in
// one band; else im2col into this thread's scratch.
template <class T, class PerBand>
void for_each_column_band(const T* image, const ConvGeometry& g, PerBand per_band) {
  if (g.image_is_col()) return per_band(int64_t{0}, g.col_cols(), image);
  for_each_band<T>(g, [&](int64_t oh_begin, int64_t oh_end, T* col) {
    cpu::im2col(image, g, oh_begin, oh_end, col);
    per_band(oh_begin * g.out_w, (oh_end - oh_begin) * g.out_w, static_cast<const T*>(col));
  });
}

// sum (c_out x col_rows) += dY_i col_i^T for the images [first, last), one after another,
// each band by band (for_each_column_band), a GEMM per band.
template <class T>
void add_weight_gradient_by_bands(View<const T> x, View<const T> dy, const ConvGeometry& g,
                                  int64_t c_out, int64_t first, int64_t last, T* sum) {
  const int64_t k = g.col_rows(), hw = g.col_cols();
  for (int64_t i = first; i < last; ++i)
    for_each_column_band(x.image(i), g, [&](int64_t offset, int64_t cols, const T* col) {
      cpu::gemm<T>(false, true, c_out, k, cols, T(1), dy.image(i) + offset, hw, col, cols, T(1),
                   sum, k);
    });
}

// Backward-weight's partial sums, see the header: dW of at most this many values is summed in
// at most this many groups.
constexpr int64_t kMaxPartialWeights = 1 << 16;
constexpr int64_t kMaxWeightGroups = 8;
constexpr int64_t kPartialSumGrain = 8192;  // elements per task of the partials' sum

// total (size values) += the sum over the batch of add_images(first, last, sum), which adds
// the images [first, last) onto sum. Large sums are one task whose GEMMs use the pool; small
// ones are cut into groups of images, each summed into its own partial, then added in group
// order (see the header).
template <class T, class AddImages>
void sum_over_batch(int64_t batch, int64_t size, AddImages add_images, T* total) {
  const int64_t groups = size <= kMaxPartialWeights ? std::min(batch, kMaxWeightGroups) : 1;
  if (groups == 1) return add_images(int64_t{0}, batch, total);
  T* partials = cpu::thread_scratch<T, PartialScratch>(groups * size);
  parallel_for(groups, 1, [&](int64_t begin, int64_t end) {
    for (int64_t group = begin; group < end; ++group) {
      T* partial = partials + group * size;
      std::fill(partial, partial + size, T(0));
      add_images(group * batch / groups, (group + 1) * batch / groups, partial);
    }
  });
  // The partials' sum, element by element in group order, on the pool too: serial, it was up
  // to 8 x 65536 adds per call left to one thread.
  parallel_for(size, kPartialSumGrain, [&](int64_t begin, int64_t end) {
    for (int64_t e = begin; e < end; ++e) {
      T sum = partials[e];
      for (int64_t group = 1; group < groups; ++group) sum += partials[group * size + e];
      total[e] += sum;
    }
  });
}

// Column matrices written at once by backward weight's large-dW path: two cores' L2 (with
// 1 MB ones, 2-4 of yolov5n's deep-layer images; 8 MB, all 16, was slower on one thread, the
// columns then read back from L3).
int64_t max_chunk_bytes() { return 2 * cpu::cache_sizes().l2; }

// dweight += the batch's dY_i col_i^T with the GEMMs on the pool (the large-dW path, see the
// header). A 1x1 stride-1 convolution's images are their own column matrices: one gemm_sum
// over the batch. An image whose column matrix alone is over max_chunk_bytes() goes band by
// band, a GEMM each.
template <class T>
void add_weight_gradient_on_pool(View<const T> x, View<const T> dy, const ConvGeometry& g,
                                 int64_t c_out, T* dweight) {
  const int64_t k = g.col_rows(), hw = g.col_cols(), batch = x.shape.n;
  if (g.image_is_col())
    return cpu::gemm_sum<T>(batch, false, true, c_out, k, hw, T(1), dy.data, hw, dy.batch_stride,
                            x.data, hw, x.batch_stride, T(1), dweight, k);
  const int64_t image_values = k * hw;
  const int64_t per_chunk =
      std::min(batch, max_chunk_bytes() / (image_values * static_cast<int64_t>(sizeof(T))));
  if (per_chunk == 0) return add_weight_gradient_by_bands(x, dy, g, c_out, 0, batch, dweight);
  // The chunk's im2col, a quarter of an image's channels per task (a task per channel cost
  // more in claiming than it gave on two threads).
  ConvGeometry one_channel = g;
  one_channel.channels = 1;
  const int64_t channel_values = g.kernel_h * g.kernel_w * hw, plane = g.height * g.width;
  T* cols = cpu::thread_scratch<T, ChunkColumnScratch>(per_chunk * image_values);
  for (int64_t first = 0; first < batch; first += per_chunk) {
    const int64_t count = std::min(per_chunk, batch - first);
    parallel_for(count * g.channels, (g.channels + 3) / 4, [&](int64_t begin, int64_t end) {
      for (int64_t e = begin; e < end; ++e) {
        const int64_t i = e / g.channels, c = e % g.channels;
        cpu::im2col(x.image(first + i) + c * plane, one_channel, 0, g.out_h,
                    cols + i * image_values + c * channel_values);
      }
    });
    cpu::gemm_sum<T>(count, false, true, c_out, k, hw, T(1), dy.image(first), hw, dy.batch_stride,
                     cols, hw, image_values, T(1), dweight, k);
  }
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
void conv2d_forward(View<const T> x, View<const T> weight, const ComputeType<T>* bias,
                    Conv2dParams p, View<T> y, ComputeType<T>* moments_mean,
                    ComputeType<T>* moments_m2) {
  const Device device = detail::common_device("conv2d_forward", x, weight, y);
  const ConvGeometry g =
      conv_geometry("conv2d_forward", x.shape, weight.shape, weight.packed(), p, y.shape);
  require_both_or_neither(moments_mean, moments_m2);
  BAREYOLO_ROUTE_TO_CUDA(conv2d_forward, device, x, weight, bias, p, y, moments_mean, moments_m2);
  const int64_t c_out = weight.shape.n, k = g.col_rows(), hw = g.col_cols();
  if (cpu::winograd_chosen(g, c_out, cpu::ConvPass::kForward)) {
    // Winograd's bands run across images: the moments are taken after the whole output.
    T* u =
        cpu::thread_scratch<T, WinogradFilterScratch>(cpu::winograd_filter_size(c_out, x.shape.c));
    cpu::winograd_transform_filters(weight.data, c_out, x.shape.c, false, u);
    cpu::winograd_correlate(x.data, x.batch_stride, x.shape.n, g, c_out, u, bias, false, y.data,
                            y.batch_stride);
    if (moments_mean) batchnorm_moments(View<const T>(y), moments_mean, moments_m2);
    return;
  }
  // Each image's per-channel moments (batchnorm_moments' planes), merged in image order below.
  cpu::batchnorm::Moments* planes =
      moments_mean
          ? cpu::thread_scratch<cpu::batchnorm::Moments, PlaneMomentsScratch>(x.shape.n * c_out)
          : nullptr;
  // Few input channels (the stem) in float: computed directly, the same bits (conv2d_direct.h).
  bool direct = false;
  if constexpr (std::is_same_v<T, float>) direct = cpu::direct_conv_applies(g, c_out);
  for_each_image(x.shape.n, [&](int64_t i) {
    T* out = y.image(i);
    if constexpr (std::is_same_v<T, float>) {
      if (direct) cpu::direct_conv_forward(x.image(i), g, weight.data, bias, c_out, out);
    }
    if (!direct) {
      // With a bias, Y starts as the bias broadcast along each row and the GEMM adds onto it.
      if (bias)
        for (int64_t o = 0; o < c_out; ++o) std::fill(out + o * hw, out + (o + 1) * hw, bias[o]);
      for_each_column_band(x.image(i), g, [&](int64_t first, int64_t cols, const T* col) {
        cpu::gemm<T>(false, false, c_out, cols, k, T(1), weight.data, k, col, cols,
                     bias ? T(1) : T(0), out + first, hw);
      });
    }
    if (moments_mean)
      for (int64_t o = 0; o < c_out; ++o)
        planes[i * c_out + o] = cpu::batchnorm::plane_moments(y.channel(i, o), hw);
  });
  if (!moments_mean) return;
  for (int64_t o = 0; o < c_out; ++o) {
    const cpu::batchnorm::Moments total = cpu::batchnorm::channel_moments(
        x.shape.n, [&](int64_t i) { return planes[i * c_out + o]; });
    moments_mean[o] = static_cast<T>(total.mean);
    moments_m2[o] = static_cast<T>(total.m2);
  }
}

template <class T>
void conv2d_backward_data(View<const T> dy, View<const T> weight, Conv2dParams p, View<T> dx,
                          GradientWrite write) {
  const Device device = detail::common_device("conv2d_backward_data", dy, weight, dx);
  const ConvGeometry g =
      conv_geometry("conv2d_backward_data", dx.shape, weight.shape, weight.packed(), p, dy.shape);
  BAREYOLO_ROUTE_TO_CUDA(conv2d_backward_data, device, dy, weight, p, dx, write);
  const int64_t c_out = weight.shape.n, k = g.col_rows(), hw = g.col_cols();
  const bool add = write == GradientWrite::add;
  if (cpu::winograd_chosen(g, c_out, cpu::ConvPass::kDataGradient)) {
    const int64_t c_in = dx.shape.c;
    const ConvGeometry dg = cpu::winograd_data_gradient_geometry(g, c_out);
    T* u = cpu::thread_scratch<T, WinogradFilterScratch>(cpu::winograd_filter_size(c_out, c_in));
    cpu::winograd_transform_filters(weight.data, c_out, c_in, true, u);
    return cpu::winograd_correlate(dy.data, dy.batch_stride, dx.shape.n, dg, c_in, u,
                                   static_cast<const T*>(nullptr), add, dx.data, dx.batch_stride);
  }
  for_each_image(dx.shape.n, [&](int64_t i) {
    // For a 1x1 stride-1 convolution dx_i is its own column matrix: the GEMM adds into it (or
    // writes it).
    if (g.image_is_col())
      return cpu::gemm<T>(true, false, k, hw, c_out, T(1), weight.data, k, dy.image(i), hw,
                          T(add ? 1 : 0), dx.image(i), hw);
    // Bands overlap in dx's rows: col2im adds every band, into an image zeroed first when
    // written over (while it is this task's, in cache).
    if (!add) std::fill(dx.image(i), dx.image(i) + dx.shape.image_numel(), T(0));
    for_each_band<T>(g, [&](int64_t oh_begin, int64_t oh_end, T* dcol) {
      const int64_t cols = (oh_end - oh_begin) * g.out_w;
      cpu::gemm<T>(true, false, k, cols, c_out, T(1), weight.data, k,
                   dy.image(i) + oh_begin * g.out_w, hw, T(0), dcol, cols);
      cpu::col2im_add(dcol, g, oh_begin, oh_end, dx.image(i));
    });
  });
}

template <class T>
void conv2d_backward_weight(View<const T> x, View<const T> dy, Conv2dParams p,
                            View<ComputeType<T>> dweight, ComputeType<T>* dbias) {
  const Device device = detail::common_device("conv2d_backward_weight", x, dy, dweight);
  const ConvGeometry g = conv_geometry("conv2d_backward_weight", x.shape, dweight.shape,
                                       dweight.packed(), p, dy.shape);
  BAREYOLO_ROUTE_TO_CUDA(conv2d_backward_weight, device, x, dy, p, dweight, dbias);
  const int64_t c_out = dweight.shape.n, k = g.col_rows(), hw = g.col_cols();
  const int64_t batch = x.shape.n, c_in = x.shape.c;
  if (cpu::winograd_chosen(g, c_out, cpu::ConvPass::kWeightGradient)) {
    // The images' dU are summed in the transformed domain, then turned into dW once.
    const int64_t size = cpu::winograd_filter_size(c_out, c_in);
    T* du = cpu::thread_scratch<T, WinogradFilterScratch>(size);
    std::fill(du, du + size, T(0));
    sum_over_batch(
        batch, size,
        [&](int64_t first, int64_t last, T* sum) {
          cpu::winograd_add_filter_gradient(x.image(first), x.batch_stride, dy.image(first),
                                            dy.batch_stride, last - first, g, c_out, sum);
        },
        du);
    cpu::winograd_add_weight_gradient(du, c_out, c_in, dweight.data);
  } else if (c_out * k > kMaxPartialWeights) {
    add_weight_gradient_on_pool(x, dy, g, c_out, dweight.data);
  } else {
    sum_over_batch(
        batch, c_out * k,
        [&](int64_t first, int64_t last, T* sum) {
          add_weight_gradient_by_bands(x, dy, g, c_out, first, last, sum);
        },
        dweight.data);
  }
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

#define BAREYOLO_INSTANTIATE_CONV2D(T)                                                       \
  template void conv2d_forward<T>(View<const T>, View<const T>, const ComputeType<T>*,       \
                                  Conv2dParams, View<T>, ComputeType<T>*, ComputeType<T>*);  \
  template void conv2d_backward_data<T>(View<const T>, View<const T>, Conv2dParams, View<T>, \
                                        GradientWrite);                                      \
  template void conv2d_backward_weight<T>(View<const T>, View<const T>, Conv2dParams,        \
                                          View<ComputeType<T>>, ComputeType<T>*);
BAREYOLO_INSTANTIATE_CONV2D(float)
BAREYOLO_INSTANTIATE_CONV2D(double)

// ---- bf16 storage (mixed precision): the float ops on widened copies (kernels/cpu/widened.h),
// each result rounded where a bf16 convolution stores it (ops.h); bias, moments and the weight
// gradient are float.

template <>
void conv2d_forward<bf16>(View<const bf16> x, View<const bf16> weight, const float* bias,
                          Conv2dParams p, View<bf16> y, float* moments_mean, float* moments_m2) {
  const Device device = detail::common_device("conv2d_forward", x, weight, y);
  conv_geometry("conv2d_forward", x.shape, weight.shape, weight.packed(), p, y.shape);
  require_both_or_neither(moments_mean, moments_m2);
  BAREYOLO_ROUTE_FLOAT_OP_TO_CUDA(conv2d_forward, device, x, weight, bias, p, y, moments_mean,
                                  moments_m2);
  cpu::Widened out(y.shape);
  conv2d_forward<float>(cpu::Widened(x), cpu::Widened(weight), bias, p, out);
  out.store(y);
  if (moments_mean) batchnorm_moments<bf16>(y, moments_mean, moments_m2);  // of the stored y
}

template <>
void conv2d_backward_data<bf16>(View<const bf16> dy, View<const bf16> weight, Conv2dParams p,
                                View<bf16> dx, GradientWrite write) {
  const Device device = detail::common_device("conv2d_backward_data", dy, weight, dx);
  conv_geometry("conv2d_backward_data", dx.shape, weight.shape, weight.packed(), p, dy.shape);
  BAREYOLO_ROUTE_FLOAT_OP_TO_CUDA(conv2d_backward_data, device, dy, weight, p, dx, write);
  cpu::Widened dx_float = cpu::widened_gradient(dx, write);
  conv2d_backward_data<float>(cpu::Widened(dy), cpu::Widened(weight), p, dx_float, write);
  dx_float.store(dx);
}

template <>
void conv2d_backward_weight<bf16>(View<const bf16> x, View<const bf16> dy, Conv2dParams p,
                                  View<float> dweight, float* dbias) {
  const Device device = detail::common_device("conv2d_backward_weight", x, dy, dweight);
  conv_geometry("conv2d_backward_weight", x.shape, dweight.shape, dweight.packed(), p, dy.shape);
  BAREYOLO_ROUTE_FLOAT_OP_TO_CUDA(conv2d_backward_weight, device, x, dy, p, dweight, dbias);
  // The product on its own, rounded to bf16 as a tensor-core convolution stores it, then added.
  cpu::Widened product(dweight.shape);
  conv2d_backward_weight<float>(cpu::Widened(x), cpu::Widened(dy), p, product, dbias);
  round_to_bf16_in_place(product);
  add_forward<float>(dweight, product, dweight);
}

}  // namespace bareyolo::ops
