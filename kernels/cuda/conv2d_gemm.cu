// kernels/cuda/conv2d_gemm.cu — the hand-written convolution path (BAREYOLO_CONV=gemm): the
// CPU reference's formulation (kernels/cpu/conv2d.cpp) on the GPU, kept to compare cuDNN
// against. Per image i, with the column matrix col_i (K x HW, K = c_in*kh*kw, HW =
// out_h*out_w; the layout of kernels/cpu/im2col.h):
//   forward          Y_i  = W * col_i (+ bias per row)
//   backward data    dcol = W^T * dY_i, then col2im adds dcol onto dx_i
//   backward weight  dW  += dY_i * col_i^T, image after image;  dbias += row sums of dY
// A 1x1 stride-1 unpadded convolution skips im2col: the image is its own column matrix.
//
// Images go in chunks whose column matrices fit kColumnBudgetBytes; the forward and the
// backward-data GEMMs of a chunk are one strided-batched SGEMM. The weight GEMMs run one
// image after another into the same dW, so the sum's order is fixed (deterministic).
// Row-major matrices are handed to column-major cuBLAS as their transposes: a row-major
// (rows x cols) matrix is a column-major (cols x rows) one with leading dimension cols.
// col2im gathers (one thread per input pixel sums the column entries that came from it):
// no atomics, the same bits every run.
#include <algorithm>

#include "kernels/cuda/conv2d_paths.h"
#include "kernels/cuda/runtime/check.h"
#include "kernels/cuda/runtime/cublas.h"
#include "kernels/cuda/runtime/runtime.h"
#include "kernels/cuda/runtime/stream.h"
#include "kernels/scratch_stack.h"

namespace bareyolo::cuda {

namespace {

constexpr size_t kColumnBudgetBytes = size_t{256} << 20;
constexpr int kThreads = 256;

// Blocks for a grid-stride loop over `total` elements: enough to fill the GPU a few times over.
unsigned grid_for(int64_t total) {
  return static_cast<unsigned>(std::clamp<int64_t>((total + kThreads - 1) / kThreads, 1, 16384));
}

// Images per chunk: as many column matrices as fit the budget, at least one.
int64_t chunk_images(const ConvShape& g) {
  const int64_t per_image = g.col_rows() * g.col_cols() * int64_t{sizeof(float)};
  return std::clamp<int64_t>(int64_t{kColumnBudgetBytes} / per_image, 1, g.images);
}

// col[m][r][p] for images first + m, m < images: r = (c * kh + i) * kw + j, p = oh * out_w + ow.
__global__ void __launch_bounds__(kThreads)
    im2col_kernel(View<const float> x, ConvShape g, int64_t first, int64_t images, float* col) {
  const int64_t hw = g.col_cols(), k = g.col_rows(), total = images * k * hw;
  for (int64_t index = blockIdx.x * int64_t(kThreads) + threadIdx.x; index < total;
       index += int64_t(gridDim.x) * kThreads) {
    const int64_t p = index % hw, row = (index / hw) % k, m = index / (hw * k);
    const int64_t oh = p / g.out_w, ow = p % g.out_w;
    const int64_t j = row % g.kernel_w, i = (row / g.kernel_w) % g.kernel_h,
                  c = row / (g.kernel_w * g.kernel_h);
    const int64_t ih = oh * g.stride_h - g.pad_h + i, iw = ow * g.stride_w - g.pad_w + j;
    const bool inside = ih >= 0 && ih < g.height && iw >= 0 && iw < g.width;
    col[index] = inside ? x.channel(first + m, c)[ih * g.width + iw] : 0.0f;
  }
}

// dx[first + m][c][ih][iw] += every entry of dcol (layout of im2col_kernel) copied from it.
__global__ void __launch_bounds__(kThreads)
    col2im_add_kernel(const float* dcol, ConvShape g, int64_t first, int64_t images,
                      View<float> dx) {
  const int64_t hw = g.col_cols(), k = g.col_rows();
  const int64_t total = images * g.c_in * g.height * g.width;
  for (int64_t index = blockIdx.x * int64_t(kThreads) + threadIdx.x; index < total;
       index += int64_t(gridDim.x) * kThreads) {
    const int64_t iw = index % g.width, ih = (index / g.width) % g.height;
    const int64_t c = (index / (g.width * g.height)) % g.c_in;
    const int64_t m = index / (g.width * g.height * g.c_in);
    const float* image_col = dcol + m * k * hw;
    float sum = 0.0f;
    for (int64_t i = 0; i < g.kernel_h; ++i) {
      const int64_t th = ih + g.pad_h - i;  // = oh * stride_h for the output row that read it
      if (th < 0 || th % g.stride_h != 0 || th / g.stride_h >= g.out_h) continue;
      const int64_t oh = th / g.stride_h;
      for (int64_t j = 0; j < g.kernel_w; ++j) {
        const int64_t tw = iw + g.pad_w - j;
        if (tw < 0 || tw % g.stride_w != 0 || tw / g.stride_w >= g.out_w) continue;
        const int64_t row = (c * g.kernel_h + i) * g.kernel_w + j;
        sum += image_col[row * hw + oh * g.out_w + tw / g.stride_w];
      }
    }
    dx.channel(first + m, c)[ih * g.width + iw] += sum;
  }
}

// y[n][o][p] = bias[o] for every image.
__global__ void __launch_bounds__(kThreads) fill_bias_kernel(const float* bias, View<float> y) {
  const int64_t plane = y.shape.plane(), per_image = y.shape.image_numel();
  const int64_t total = y.shape.n * per_image;
  for (int64_t index = blockIdx.x * int64_t(kThreads) + threadIdx.x; index < total;
       index += int64_t(gridDim.x) * kThreads) {
    const int64_t n = index / per_image, within = index % per_image;
    y.image(n)[within] = bias[within / plane];
  }
}

// `count` floats of column matrices on GPU `device`: the thread's grow-only scratch
// (kernels/scratch_stack.h), so a warm step allocates none.
float* columns_scratch(detail::ScratchFrame& scratch, int64_t count, int device) {
  return static_cast<float*>(scratch.take(count * int64_t(sizeof(float)), Device::cuda(device)));
}

}  // namespace

void gemm_conv2d_forward(View<const float> x, View<const float> weight, const float* bias,
                         ops::Conv2dParams p, View<float> y) {
  const ConvShape g = conv_shape(x.shape, weight.shape, p);
  if (g.images == 0) return;
  const int device = x.device.index;
  const cudaStream_t stream = stream_of(x.device);
  const cublasHandle_t handle = cublas_handle(device);
  const int hw = as_int(g.col_cols(), "output plane"), k = as_int(g.col_rows(), "column rows"),
            c_out = as_int(g.c_out, "output channels");
  if (bias) {  // Y starts as the bias and the GEMM adds onto it
    fill_bias_kernel<<<grid_for(y.shape.numel()), kThreads, 0, stream>>>(bias, y);
    BAREYOLO_CUDA_CHECK_LAUNCH();
  }
  const float one = 1.0f, beta = bias ? 1.0f : 0.0f;
  const int64_t chunk = g.image_is_col() ? g.images : chunk_images(g);
  detail::ScratchFrame scratch;
  float* col = g.image_is_col() ? nullptr : columns_scratch(scratch, chunk * k * hw, device);
  for (int64_t first = 0; first < g.images; first += chunk) {
    const int64_t images = std::min(chunk, g.images - first);
    const float* columns = x.image(first);
    long long column_stride = x.batch_stride;
    if (!g.image_is_col()) {
      im2col_kernel<<<grid_for(images * k * hw), kThreads, 0, stream>>>(x, g, first, images, col);
      BAREYOLO_CUDA_CHECK_LAUNCH();
      columns = col;
      column_stride = static_cast<long long>(k) * hw;
    }
    // Y_i (HW x c_out, column-major) = col_i (HW x K) * W (K x c_out)
    BAREYOLO_CUBLAS_CHECK_LAUNCH(cublasSgemmStridedBatched(
        handle, CUBLAS_OP_N, CUBLAS_OP_N, hw, c_out, k, &one, columns, hw, column_stride,
        weight.data, k, 0, &beta, y.image(first), hw, y.batch_stride, as_int(images, "images")));
  }
}

void gemm_conv2d_backward_data(View<const float> dy, View<const float> weight, ops::Conv2dParams p,
                               View<float> dx, ops::GradientWrite write) {
  const ConvShape g = conv_shape(dx.shape, weight.shape, p);
  if (g.images == 0) return;
  const int device = dx.device.index;
  const cudaStream_t stream = stream_of(dx.device);
  const cublasHandle_t handle = cublas_handle(device);
  const int hw = as_int(g.col_cols(), "output plane"), k = as_int(g.col_rows(), "column rows"),
            c_out = as_int(g.c_out, "output channels");
  const float one = 1.0f, zero = 0.0f;
  const bool add = write == ops::GradientWrite::add;
  if (g.image_is_col()) {
    // dx_i (HW x K, column-major) (+)= dY_i (HW x c_out) * W^T (c_out x K), straight into dx.
    BAREYOLO_CUBLAS_CHECK_LAUNCH(
        cublasSgemmStridedBatched(handle, CUBLAS_OP_N, CUBLAS_OP_T, hw, k, c_out, &one, dy.data, hw,
                                  dy.batch_stride, weight.data, k, 0, add ? &one : &zero, dx.data,
                                  hw, dx.batch_stride, as_int(g.images, "images")));
    return;
  }
  // col2im adds every column back: written over, dx's images start from zeros (each image's
  // c * h * w values, one row of a 2D fill whose pitch is the batch stride).
  if (!add)
    BAREYOLO_CUDA_CHECK(cudaMemset2DAsync(dx.data, sizeof(float) * size_t(dx.batch_stride), 0,
                                          sizeof(float) * size_t(dx.shape.image_numel()),
                                          size_t(g.images), stream));
  const int64_t chunk = chunk_images(g);
  detail::ScratchFrame scratch;
  float* dcol = columns_scratch(scratch, chunk * k * hw, device);
  for (int64_t first = 0; first < g.images; first += chunk) {
    const int64_t images = std::min(chunk, g.images - first);
    BAREYOLO_CUBLAS_CHECK_LAUNCH(cublasSgemmStridedBatched(
        handle, CUBLAS_OP_N, CUBLAS_OP_T, hw, k, c_out, &one, dy.image(first), hw, dy.batch_stride,
        weight.data, k, 0, &zero, dcol, hw, static_cast<long long>(k) * hw,
        as_int(images, "images")));
    col2im_add_kernel<<<grid_for(images * g.c_in * g.height * g.width), kThreads, 0, stream>>>(
        dcol, g, first, images, dx);
    BAREYOLO_CUDA_CHECK_LAUNCH();
  }
}

void gemm_conv2d_backward_weight(View<const float> x, View<const float> dy, ops::Conv2dParams p,
                                 View<float> dweight, float* dbias) {
  const ConvShape g = conv_shape(x.shape, dweight.shape, p);
  if (g.images == 0) return;
  const int device = x.device.index;
  const cudaStream_t stream = stream_of(x.device);
  const cublasHandle_t handle = cublas_handle(device);
  const int hw = as_int(g.col_cols(), "output plane"), k = as_int(g.col_rows(), "column rows"),
            c_out = as_int(g.c_out, "output channels");
  const float one = 1.0f;
  const int64_t chunk = g.image_is_col() ? g.images : chunk_images(g);
  detail::ScratchFrame scratch;
  float* col = g.image_is_col() ? nullptr : columns_scratch(scratch, chunk * k * hw, device);
  for (int64_t first = 0; first < g.images; first += chunk) {
    const int64_t images = std::min(chunk, g.images - first);
    if (!g.image_is_col()) {
      im2col_kernel<<<grid_for(images * k * hw), kThreads, 0, stream>>>(x, g, first, images, col);
      BAREYOLO_CUDA_CHECK_LAUNCH();
    }
    for (int64_t m = 0; m < images; ++m) {
      const float* columns = g.image_is_col() ? x.image(first + m) : col + m * int64_t{k} * hw;
      // dW (K x c_out, column-major) += col_i^T (K x HW) * dY_i (HW x c_out)
      BAREYOLO_CUBLAS_CHECK_LAUNCH(cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, k, c_out, hw, &one,
                                               columns, hw, dy.image(first + m), hw, &one,
                                               dweight.data, k));
    }
  }
  if (dbias) add_bias_gradient(dy, dbias);
}

}  // namespace bareyolo::cuda
