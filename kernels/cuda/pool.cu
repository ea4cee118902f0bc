// kernels/cuda/pool.cu — 2-D max pooling on the GPU: forward (any square window), SPPF's three
// chained stride-1 pools in one pass, and the backward; same meaning as kernels/cpu/pool.cpp.
// For float and bf16 storage (S): values are widened to float as they are loaded (shared memory
// holds floats), so a maximum is exact in either and the backward's sums run in float, each dx
// rounded once when stored, as the CPU's bf16 definition does.
//
// Tiles are 32x32, or the plane itself when it is smaller (SPPF's planes are 20x20 at 640):
// a tile larger than the plane would spend most of its shared memory on padding. Every element
// is reached through View::at, so channels-last views (in any mix) work as NCHW ones do; a
// block still walks one channel's plane, so in channels last its loads and stores are strided
// by the pixel stride (SPPF's one small tensor, which the L2 cache holds whole at 640).
//
// Forward, stride 1 with "same" padding (2 * pad = kernel - 1, SPPF's 5/1/2): one block per
// output tile of one (image, channel) plane loads the tile plus a halo of
// stages * pad into shared memory, with -infinity outside the image (so a window is the
// window clipped to the image, as on the CPU), and applies the pool `stages` times there,
// each a row pass then a column pass (2k compares per output instead of k*k). After each
// stage the positions outside the image are reset to -infinity, since the next pool must
// see the previous pool's output clipped to the image, not values computed in the halo.
// Stage s writes its tile to output s. With 3 stages SPPF's pools cost one read of x and
// three writes, where three separate pools cost three reads and three writes.
// Other strides and paddings take a direct kernel: one thread per output, window in global
// memory through the read-only cache.
//
// Backward, no atomics and no index buffer: one block per tile of the INPUT plane
// loads the part of x that the windows covering the tile read, finds each of those windows'
// first maximum (row-major, strictly greater: the CPU's choice) in shared memory, loads dy
// of those outputs, and then each input element sums, in output row-major order, the dy of
// the windows whose maximum it is — the same additions in the same order as the CPU's
// scatter, so dx matches it bit for bit. (NaN inputs are not handled as on the CPU: fmaxf
// skips a NaN that the CPU's first-element start would keep.)
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "kernels/bf16.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/runtime/check.h"
#include "kernels/cuda/runtime/runtime.h"
#include "kernels/cuda/runtime/stream.h"

namespace bareyolo::cuda {

namespace {

constexpr int kMaxTile = 32;  // output (forward) or input (backward) tile side
constexpr int kThreadsX = 32, kThreadsY = 8;
constexpr size_t kMaxSharedBytes = 48 * 1024;  // without opting in to more per block

struct PlaneGeometry {
  int height, width, out_h, out_w;
  int tile_h, tile_w;    // tile size (the plane's, up to kMaxTile)
  int tiles_x, tiles_y;  // tiles per plane
  int64_t channels;      // planes = images * channels
};

// Integer division rounding towards -infinity (window bounds can be negative).
__device__ int floor_div(int a, int b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// The (image, channel, tile row, tile column) of this block: blockIdx.x enumerates tiles
// plane by plane (gridDim.y/z are too small for images x channels).
struct TileIndex {
  int64_t image, channel;
  int tile_y, tile_x;
};
__device__ TileIndex tile_of_block(const PlaneGeometry& g) {
  const int64_t tiles = int64_t(g.tiles_x) * g.tiles_y;
  const int64_t plane = blockIdx.x / tiles;
  const int tile = int(blockIdx.x % tiles);
  return {plane / g.channels, plane % g.channels, tile / g.tiles_x, tile % g.tiles_x};
}

// Output `stage` views for the chained forward; unused ones are empty.
template <class S>
struct ChainOutputs {
  View<S> y[3];
};

// A value of a read-only plane as float: through the read-only cache for float.
template <class S>
__device__ float load_read_only(const S* value) {
  if constexpr (std::is_same_v<S, float>)
    return __ldg(value);
  else
    return widen(*value);
}

// `stages` stride-1 pools of radius `pad` over an output tile, in shared memory. The region is
// side_h x side_w floats with side = tile + 2 * stages * pad; stage s is valid on
// [s * pad, side - s * pad) in both directions.
template <class S>
__global__ void pool_chain_kernel(View<const S> x, ChainOutputs<S> outputs, int stages, int pad,
                                  PlaneGeometry g) {
  extern __shared__ float shared[];
  const int halo = stages * pad;
  const int side_h = g.tile_h + 2 * halo, side_w = g.tile_w + 2 * halo;
  float* values = shared;                     // the current stage, side_h x side_w
  float* row_max = shared + side_h * side_w;  // the row pass of the next stage
  const TileIndex t = tile_of_block(g);
  const int origin_y = t.tile_y * g.tile_h - halo, origin_x = t.tile_x * g.tile_w - halo;
  const int thread = threadIdx.y * blockDim.x + threadIdx.x;
  const int threads = blockDim.x * blockDim.y;
  auto inside = [&](int r, int c) {
    const int gy = origin_y + r, gx = origin_x + c;
    return gy >= 0 && gy < g.height && gx >= 0 && gx < g.width;
  };

  for (int i = thread; i < side_h * side_w; i += threads) {
    const int r = i / side_w, c = i % side_w;
    values[i] = inside(r, c)
                    ? widen(x.at(t.image, t.channel, (origin_y + r) * g.width + origin_x + c))
                    : -INFINITY;
  }
  __syncthreads();

  for (int stage = 1; stage <= stages; ++stage) {
    // This stage's valid rectangle: rows [lo, lo + rows), columns [lo, lo + cols).
    const int lo = stage * pad, rows = side_h - 2 * lo, cols = side_w - 2 * lo;
    // Row pass: rows of the previous stage's rectangle, columns of this stage's.
    for (int i = thread; i < (rows + 2 * pad) * cols; i += threads) {
      const int r = lo - pad + i / cols, c = lo + i % cols;
      float m = values[r * side_w + c - pad];
      for (int d = 1 - pad; d <= pad; ++d) m = fmaxf(m, values[r * side_w + c + d]);
      row_max[r * side_w + c] = m;
    }
    __syncthreads();
    // Column pass, back into `values`; outside the image stays -infinity.
    for (int i = thread; i < rows * cols; i += threads) {
      const int r = lo + i / cols, c = lo + i % cols;
      float m = row_max[(r - pad) * side_w + c];
      for (int d = 1 - pad; d <= pad; ++d) m = fmaxf(m, row_max[(r + d) * side_w + c]);
      values[r * side_w + c] = inside(r, c) ? m : -INFINITY;
    }
    __syncthreads();
    // The tile itself goes to this stage's output.
    const View<S>& y = outputs.y[stage - 1];
    for (int i = thread; i < g.tile_h * g.tile_w; i += threads) {
      const int r = halo + i / g.tile_w, c = halo + i % g.tile_w;
      if (inside(r, c))
        y.at(t.image, t.channel, (origin_y + r) * g.width + origin_x + c) =
            narrow<S>(values[r * side_w + c]);
    }
    // No barrier needed here: the next row pass writes only row_max, and `values` is
    // rewritten only after the barrier that follows it.
  }
}

// Any window: one thread per output, the clipped window read through the read-only cache.
template <class S>
__global__ void pool_direct_kernel(View<const S> x, View<S> y, ops::Pool2dParams p,
                                   PlaneGeometry g) {
  const int64_t per_plane = int64_t(g.out_h) * g.out_w;
  const int64_t total = x.shape.n * g.channels * per_plane;
  for (int64_t index = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; index < total;
       index += int64_t(gridDim.x) * blockDim.x) {
    const int64_t plane_index = index / per_plane;
    const int out = int(index % per_plane);
    const int oh = out / g.out_w, ow = out % g.out_w;
    const int64_t image = plane_index / g.channels, channel = plane_index % g.channels;
    const int r0 = max(0, oh * p.stride - p.pad),
              r1 = min(g.height, oh * p.stride - p.pad + p.kernel);
    const int c0 = max(0, ow * p.stride - p.pad),
              c1 = min(g.width, ow * p.stride - p.pad + p.kernel);
    float best = load_read_only(&x.at(image, channel, r0 * g.width + c0));
    for (int r = r0; r < r1; ++r)
      for (int c = c0; c < c1; ++c) {
        const float v = load_read_only(&x.at(image, channel, r * g.width + c));
        if (v > best) best = v;
      }
    y.at(image, channel, out) = narrow<S>(best);
  }
}

// Shared memory of the backward for an input tile: the x region the covering windows read,
// and per covering output its window's argmax and its dy.
struct BackwardLayout {
  int outputs_h, outputs_w;  // covering outputs per tile, at most
  int rows, cols;            // x rows and columns those windows read, at most
  size_t bytes() const {
    return size_t(rows) * cols * sizeof(float) +
           size_t(outputs_h) * outputs_w * (sizeof(int) + sizeof(float));
  }
};
__host__ __device__ BackwardLayout backward_layout(ops::Pool2dParams p, const PlaneGeometry& g) {
  const int outputs_h = (g.tile_h - 1 + p.kernel) / p.stride + 1;
  const int outputs_w = (g.tile_w - 1 + p.kernel) / p.stride + 1;
  return {outputs_h, outputs_w, (outputs_h - 1) * p.stride + p.kernel,
          (outputs_w - 1) * p.stride + p.kernel};
}

template <class S>
__global__ void pool_backward_kernel(View<const S> x, View<const S> dy, View<S> dx,
                                     ops::Pool2dParams p, PlaneGeometry g) {
  extern __shared__ float shared[];
  const BackwardLayout layout = backward_layout(p, g);
  float* x_region = shared;
  int* argmax = reinterpret_cast<int*>(x_region + layout.rows * layout.cols);
  float* grad = reinterpret_cast<float*>(argmax + layout.outputs_h * layout.outputs_w);
  const TileIndex t = tile_of_block(g);
  const int thread = threadIdx.y * blockDim.x + threadIdx.x;
  const int threads = blockDim.x * blockDim.y;

  // Input tile [h0, h0 + tile_h) x [w0, w0 + tile_w), clipped to the plane.
  const int h0 = t.tile_y * g.tile_h, w0 = t.tile_x * g.tile_w;
  const int h1 = min(g.height, h0 + g.tile_h), w1 = min(g.width, w0 + g.tile_w);
  // Outputs whose window meets the tile: oh * s - p <= h < oh * s - p + k.
  const int oh0 = max(0, floor_div(h0 + p.pad - p.kernel, p.stride) + 1);
  const int oh1 = min(g.out_h - 1, floor_div(h1 - 1 + p.pad, p.stride));
  const int ow0 = max(0, floor_div(w0 + p.pad - p.kernel, p.stride) + 1);
  const int ow1 = min(g.out_w - 1, floor_div(w1 - 1 + p.pad, p.stride));
  if (oh0 > oh1 || ow0 > ow1) return;  // no window reads this tile: dx keeps its values
  const int rows_out = oh1 - oh0 + 1, cols_out = ow1 - ow0 + 1;
  // The x those windows read, clipped to the plane.
  const int r0 = max(0, oh0 * p.stride - p.pad),
            r1 = min(g.height, oh1 * p.stride - p.pad + p.kernel);
  const int c0 = max(0, ow0 * p.stride - p.pad),
            c1 = min(g.width, ow1 * p.stride - p.pad + p.kernel);
  const int region_w = c1 - c0;

  for (int i = thread; i < (r1 - r0) * region_w; i += threads)
    x_region[i] =
        widen(x.at(t.image, t.channel, (r0 + i / region_w) * g.width + c0 + i % region_w));
  for (int i = thread; i < rows_out * cols_out; i += threads)
    grad[i] = widen(dy.at(t.image, t.channel, (oh0 + i / cols_out) * g.out_w + ow0 + i % cols_out));
  __syncthreads();

  // Each covering window's first maximum in row-major order, as a row-major index in x's plane.
  for (int i = thread; i < rows_out * cols_out; i += threads) {
    const int oh = oh0 + i / cols_out, ow = ow0 + i % cols_out;
    const int wr0 = max(0, oh * p.stride - p.pad),
              wr1 = min(g.height, oh * p.stride - p.pad + p.kernel);
    const int wc0 = max(0, ow * p.stride - p.pad),
              wc1 = min(g.width, ow * p.stride - p.pad + p.kernel);
    int best_r = wr0, best_c = wc0;
    float best = x_region[(wr0 - r0) * region_w + wc0 - c0];
    for (int r = wr0; r < wr1; ++r)
      for (int c = wc0; c < wc1; ++c) {
        const float v = x_region[(r - r0) * region_w + c - c0];
        if (v > best) {
          best = v;
          best_r = r;
          best_c = c;
        }
      }
    argmax[i] = best_r * g.width + best_c;
  }
  __syncthreads();

  // Gather: each input element of the tile adds the dy of the windows it is the maximum of.
  for (int i = thread; i < g.tile_h * g.tile_w; i += threads) {
    const int h = h0 + i / g.tile_w, w = w0 + i % g.tile_w;
    if (h >= h1 || w >= w1) continue;
    const int me = h * g.width + w;
    const int first_oh = max(oh0, floor_div(h + p.pad - p.kernel, p.stride) + 1);
    const int last_oh = min(oh1, floor_div(h + p.pad, p.stride));
    const int first_ow = max(ow0, floor_div(w + p.pad - p.kernel, p.stride) + 1);
    const int last_ow = min(ow1, floor_div(w + p.pad, p.stride));
    S& grad_in = dx.at(t.image, t.channel, me);
    float sum = widen(grad_in);
    for (int oh = first_oh; oh <= last_oh; ++oh)
      for (int ow = first_ow; ow <= last_ow; ++ow) {
        const int k = (oh - oh0) * cols_out + (ow - ow0);
        if (argmax[k] == me) sum += grad[k];
      }
    grad_in = narrow<S>(sum);
  }
}

// Geometry of x -> y, with tiles over a plane of tiled_h x tiled_w (the output's in the
// forward, the input's in the backward).
PlaneGeometry plane_geometry(const Shape4& x, const Shape4& y, int64_t tiled_h, int64_t tiled_w) {
  const int tile_h = int(std::min<int64_t>(kMaxTile, tiled_h));
  const int tile_w = int(std::min<int64_t>(kMaxTile, tiled_w));
  return {int(x.h),
          int(x.w),
          int(y.h),
          int(y.w),
          tile_h,
          tile_w,
          int((tiled_w + tile_w - 1) / tile_w),
          int((tiled_h + tile_h - 1) / tile_h),
          x.c};
}

// Planes are addressed with int offsets inside the kernels.
void require_int_planes(const char* op, const Shape4& x) {
  if (x.plane() > (int64_t(1) << 30))
    throw std::invalid_argument(std::string(op) + ": a plane of " + x.str() +
                                " is too large for the CUDA kernel (at most 2^30 elements)");
}

dim3 tile_grid(const PlaneGeometry& g, int64_t images) {
  return dim3(unsigned(images * g.channels * g.tiles_x * g.tiles_y));
}

template <class S>
void launch_chain(View<const S> x, int pad, const ChainOutputs<S>& outputs, int stages) {
  const PlaneGeometry g = plane_geometry(x.shape, x.shape, x.shape.h, x.shape.w);
  const int halo = stages * pad;
  const size_t bytes = size_t(2) * (g.tile_h + 2 * halo) * (g.tile_w + 2 * halo) * sizeof(float);
  if (bytes > kMaxSharedBytes)
    throw std::invalid_argument("maxpool on CUDA: a window of " + std::to_string(2 * pad + 1) +
                                " chained " + std::to_string(stages) +
                                " times needs more shared memory than a block has");
  pool_chain_kernel<<<tile_grid(g, x.shape.n), dim3(kThreadsX, kThreadsY), bytes,
                      stream_of(x.device)>>>(x, outputs, stages, pad, g);
  BAREYOLO_CUDA_CHECK_LAUNCH();
}

}  // namespace

template <class S>
void maxpool2d_forward(View<const S> x, ops::Pool2dParams p, View<S> y) {
  if (x.shape.numel() == 0) return;
  require_int_planes("maxpool2d_forward", x.shape);
  if (p.stride == 1 && 2 * p.pad + 1 == p.kernel) {
    launch_chain(x, p.pad, ChainOutputs<S>{{y, {}, {}}}, 1);
    return;
  }
  const PlaneGeometry g = plane_geometry(x.shape, y.shape, y.shape.h, y.shape.w);
  const int64_t total = y.shape.numel();
  const int64_t blocks = std::min<int64_t>((total + 255) / 256, 8192);
  pool_direct_kernel<<<unsigned(blocks), 256, 0, stream_of(x.device)>>>(x, y, p, g);
  BAREYOLO_CUDA_CHECK_LAUNCH();
}

// Window, shapes and devices are checked by the op (kernels/cpu/pool.cpp).
template <class S>
void maxpool2d_chain3_forward(View<const S> x, ops::Pool2dParams p, View<S> y1, View<S> y2,
                              View<S> y3) {
  if (x.shape.numel() == 0) return;
  require_int_planes("maxpool2d_chain3_forward", x.shape);
  launch_chain(x, p.pad, ChainOutputs<S>{{y1, y2, y3}}, 3);
}

template <class S>
void maxpool2d_backward(View<const S> x, View<const S> dy, ops::Pool2dParams p, View<S> dx) {
  if (x.shape.numel() == 0 || dy.shape.numel() == 0) return;
  require_int_planes("maxpool2d_backward", x.shape);
  const PlaneGeometry g = plane_geometry(x.shape, dy.shape, x.shape.h, x.shape.w);
  const BackwardLayout layout = backward_layout(p, g);
  if (layout.bytes() > kMaxSharedBytes)
    throw std::invalid_argument("maxpool2d_backward on CUDA: kernel " + std::to_string(p.kernel) +
                                " stride " + std::to_string(p.stride) +
                                " needs more shared memory than a block has");
  pool_backward_kernel<<<tile_grid(g, x.shape.n), dim3(kThreadsX, kThreadsY), layout.bytes(),
                         stream_of(x.device)>>>(x, dy, dx, p, g);
  BAREYOLO_CUDA_CHECK_LAUNCH();
}

#define BAREYOLO_INSTANTIATE_POOL(S)                                                            \
  template void maxpool2d_forward<S>(View<const S>, ops::Pool2dParams, View<S>);                \
  template void maxpool2d_chain3_forward<S>(View<const S>, ops::Pool2dParams, View<S>, View<S>, \
                                            View<S>);                                           \
  template void maxpool2d_backward<S>(View<const S>, View<const S>, ops::Pool2dParams, View<S>);
BAREYOLO_INSTANTIATE_POOL(float)
BAREYOLO_INSTANTIATE_POOL(bf16)

}  // namespace bareyolo::cuda
