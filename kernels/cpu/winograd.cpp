// kernels/cpu/winograd.cpp — Winograd F(2x2, 3x3); see winograd.h for the math.
//
// Layouts: a band's transformed tiles are v[(ξ * channels + c) * tiles + t] and the GEMM
// products m[(ξ * c_out + o) * tiles + t], so that for each ξ the GEMM's operands are dense
// row-major matrices. Like im2col (conv2d.cpp), a large map is done in bands of whole tile rows
// whose transforms stay in cache; every pass's bands run on over the batch's images, so that
// small maps still give the GEMMs enough tiles. Borders: each transform first copies the rows it
// reads into a zero-padded line buffer, so its inner loop over tiles has no bounds tests.
#include "kernels/cpu/winograd.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "kernels/cpu/cache_sizes.h"
#include "kernels/cpu/gemm/gemm.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cpu/thread_scratch.h"

namespace bareyolo::cpu {

namespace {

std::atomic<WinogradUse> current_use{WinogradUse::kMeasuredRule};

// The thread_scratch tags of a band's input transforms, its GEMM products and the line buffer.
struct InputTransformScratch;
struct ProductScratch;
struct LineScratch;

struct Tiles {
  int64_t rows, cols;  // 2x2 output tiles per column and per row of the map
};
Tiles tiles_of(const ConvGeometry& g) { return {(g.out_h + 1) / 2, (g.out_w + 1) / 2}; }

// Tile rows per band, out of `rows`: as many as keep the band's 16 * channels transforms within
// l2_band_bytes() (as conv2d.cpp's column bands).
template <class T>
int64_t band_tile_rows(const Tiles& tiles, int64_t channels, int64_t rows) {
  const int64_t row_bytes = 16 * channels * tiles.cols * static_cast<int64_t>(sizeof(T));
  return std::clamp<int64_t>(l2_band_bytes() / row_bytes, 1, rows);
}

// Bands run over the tile rows of a batch (image i's tile row tr is row i * tiles.rows + tr):
// on 20x20 and smaller maps an image has too few tiles (100, 25) for 16 GEMMs that each pack
// all of U_ξ (forward) or that are only tiles deep (weight gradient) to pay. A band holds at
// least kMinBandTiles tiles when the batch has them, over the cache budget if need be: each
// GEMM still reads only its own ξ's share.
constexpr int64_t kMinBandTiles = 128;

template <class T>
int64_t batch_band_rows(const Tiles& tiles, int64_t channels, int64_t total_rows) {
  const int64_t min_rows = std::min(total_rows, (kMinBandTiles + tiles.cols - 1) / tiles.cols);
  return std::max(min_rows, band_tile_rows<T>(tiles, channels, total_rows));
}

// per_slice(image, tr_begin, tr_end, offset) for the piece of each image in the batch's tile
// rows [first, last): its tile rows, and the tile at which they start within the band.
template <class PerSlice>
void for_each_image_slice(const Tiles& tiles, int64_t first, int64_t last, PerSlice per_slice) {
  for (int64_t row = first; row < last;) {
    const int64_t image = row / tiles.rows, tr = row % tiles.rows;
    const int64_t tr_end = std::min(tiles.rows, tr + (last - row));
    per_slice(image, tr, tr_end, (row - first) * tiles.cols);
    row += tr_end - tr;
  }
}

// line[pad + x] = plane[y][x], zero elsewhere (a row y outside the plane, the left padding and
// the columns past the plane's width).
template <class T>
void load_padded_row(const T* plane, int64_t height, int64_t width, int64_t y, int64_t pad,
                     int64_t line_width, T* line) {
  std::fill(line, line + line_width, T(0));
  if (y < 0 || y >= height) return;
  const T* src = plane + y * width;
  std::copy(src, src + std::min(width, line_width - pad), line + pad);
}

// The transforms' inner loops run over the tiles of a tile row (5 to 80 of them) through
// `Lanes`: one tile at a time (Scalar) or a vector register of them (Vector, GCC's vector
// extension: 8 floats or 4 doubles in AVX2), written once as a generic lambda
// per_lanes(lanes, t) that handles the tiles [t, t + lanes.width). The auto-vectoriser left
// these loops scalar (it could not rule out aliasing between the buffers), and a scalar tail
// after a vector body cost as much as the body for 20-tile rows.
template <class T>
struct ScalarLanes {
  static constexpr int64_t width = 1;
  static T load(const T* p) { return *p; }
  static void store(T* p, T value) { *p = value; }
};
template <class T>
struct VectorOf;  // (GCC drops vector_size on a dependent type, so one per type)
template <>
struct VectorOf<float> {
  typedef float type __attribute__((vector_size(32)));
};
template <>
struct VectorOf<double> {
  typedef double type __attribute__((vector_size(32)));
};
template <class T>
struct VectorLanes {
  using V = typename VectorOf<T>::type;
  static constexpr int64_t width = 32 / sizeof(T);
  static V load(const T* p) {
    V v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  static void store(T* p, V v) { std::memcpy(p, &v, sizeof v); }
};

// per_lanes over [0, count) in vectors, the last one ending at count and overlapping the one
// before it (so per_lanes must only write what it computes from inputs it does not write);
// rows shorter than a vector go tile by tile.
template <class T, class PerLanes>
void for_tile_vectors(int64_t count, PerLanes per_lanes) {
  constexpr int64_t width = VectorLanes<T>::width;
  if (count < width) {
    for (int64_t t = 0; t < count; ++t) per_lanes(ScalarLanes<T>{}, t);
    return;
  }
  for (int64_t t = 0;; t += width) {
    t = std::min(t, count - width);
    per_lanes(VectorLanes<T>{}, t);
    if (t + width == count) return;
  }
}

// The rows [first_row, first_row + rows) of a plane, zero-padded (pad columns on the left, zeros
// past the plane's edges) to 2 * half_width columns and split by column parity: even[r * half_width
// + k] = padded row r at column 2k, odd[...] at 2k + 1. A tile t reads the padded columns 2t ..
// 2t + 3, that is even[t], odd[t], even[t + 1], odd[t + 1]: unit-stride loads, a vector of
// consecutive tiles at a time (for_tile_vectors), where the interleaved row needed stride 2.
template <class T>
void load_split_rows(const T* plane, int64_t height, int64_t width, int64_t first_row, int64_t rows,
                     int64_t pad, int64_t half_width, T* row_buffer, T* __restrict even,
                     T* __restrict odd) {
  for (int64_t r = 0; r < rows; ++r) {
    load_padded_row(plane, height, width, first_row + r, pad, 2 * half_width, row_buffer);
    const T* __restrict row = row_buffer;
    for (int64_t k = 0; k < half_width; ++k) {
      even[r * half_width + k] = row[2 * k];
      odd[r * half_width + k] = row[2 * k + 1];
    }
  }
}

// v = B^T d B for the tiles of the tile rows [tr_begin, tr_end) of the channels [c_begin, c_end)
// of image, at tile `offset` of a band of band_tiles.
template <class T>
void transform_input_band(const T* image, const ConvGeometry& g, const Tiles& tiles,
                          int64_t tr_begin, int64_t tr_end, int64_t band_tiles, int64_t offset,
                          int64_t c_begin, int64_t c_end, T* __restrict v) {
  const int64_t xi_stride = g.channels * band_tiles, half_width = tiles.cols + 1;
  // The band's tile rows read the input rows 2 tr - pad .. 2 tr - pad + 3: each is split once.
  const int64_t rows = 2 * (tr_end - tr_begin) + 2;
  T* buffers = thread_scratch<T, LineScratch>((2 * rows + 2 + 16) * half_width);
  T *even = buffers, *odd = even + rows * half_width, *row_buffer = odd + rows * half_width;
  T* h = row_buffer + 2 * half_width;  // h[(4 r + j) * cols + t]: d B of row r, for one tile row
  const int64_t cols = tiles.cols;
  for (int64_t c = c_begin; c < c_end; ++c) {
    load_split_rows(image + c * g.height * g.width, g.height, g.width, 2 * tr_begin - g.pad_h, rows,
                    g.pad_w, half_width, row_buffer, even, odd);
    for (int64_t tr = tr_begin; tr < tr_end; ++tr) {
      // Two passes over the tiles, each vectorised: along the four rows of the tiles (d B),
      // then down their columns (B^T (d B)).
      for (int64_t r = 0; r < 4; ++r) {
        const T* e = even + (2 * (tr - tr_begin) + r) * half_width;
        const T* o = odd + (2 * (tr - tr_begin) + r) * half_width;
        T* h0 = h + 4 * r * cols;
        T *h1 = h0 + cols, *h2 = h1 + cols, *h3 = h2 + cols;
        for_tile_vectors<T>(cols, [&](auto lanes, int64_t t) {
          using L = decltype(lanes);
          const auto e0 = L::load(e + t), e1 = L::load(e + t + 1);
          const auto o0 = L::load(o + t), o1 = L::load(o + t + 1);
          L::store(h0 + t, e0 - e1);
          L::store(h1 + t, o0 + e1);
          L::store(h2 + t, e1 - o0);
          L::store(h3 + t, o0 - o1);
        });
      }
      T* dst = v + c * band_tiles + offset + (tr - tr_begin) * cols;
      for (int64_t j = 0; j < 4; ++j) {
        const T *r0 = h + j * cols, *r1 = r0 + 4 * cols, *r2 = r1 + 4 * cols, *r3 = r2 + 4 * cols;
        T *out0 = dst + j * xi_stride, *out1 = dst + (4 + j) * xi_stride;
        T *out2 = dst + (8 + j) * xi_stride, *out3 = dst + (12 + j) * xi_stride;
        for_tile_vectors<T>(cols, [&](auto lanes, int64_t t) {
          using L = decltype(lanes);
          const auto a = L::load(r0 + t), b = L::load(r1 + t);
          const auto c2 = L::load(r2 + t), d = L::load(r3 + t);
          L::store(out0 + t, a - c2);
          L::store(out1 + t, b + c2);
          L::store(out2 + t, c2 - b);
          L::store(out3 + t, b - d);
        });
      }
    }
  }
}

// out = A^T m A (+ bias) for the tiles of [tr_begin, tr_end), at tile `offset` of a band of
// band_tiles in m, written or (accumulate) added, clipped to the map where out_h or out_w is odd.
template <class T>
void transform_output_band(const T* __restrict m, const ConvGeometry& g, int64_t c_out,
                           const Tiles& tiles, int64_t tr_begin, int64_t tr_end, int64_t band_tiles,
                           int64_t offset, const T* bias, bool accumulate, T* out) {
  const int64_t xi_stride = c_out * band_tiles, line_width = 2 * tiles.cols;
  T* line = thread_scratch<T, LineScratch>(2 * line_width);
  for (int64_t o = 0; o < c_out; ++o) {
    const T b = bias ? bias[o] : T(0);
    T* plane = out + o * g.out_h * g.out_w;
    for (int64_t tr = tr_begin; tr < tr_end; ++tr) {
      const T* src = m + o * band_tiles + offset + (tr - tr_begin) * tiles.cols;
      for (int64_t t = 0; t < tiles.cols; ++t) {
        T cols[4][2];  // cols[j] = A^T applied to column j of the tile's M
        for (int j = 0; j < 4; ++j) {
          const T m0 = src[j * xi_stride + t], m1 = src[(4 + j) * xi_stride + t];
          const T m2 = src[(8 + j) * xi_stride + t], m3 = src[(12 + j) * xi_stride + t];
          cols[j][0] = m0 + m1 + m2;
          cols[j][1] = m1 - m2 - m3;
        }
        for (int i = 0; i < 2; ++i) {
          line[i * line_width + 2 * t] = cols[0][i] + cols[1][i] + cols[2][i];
          line[i * line_width + 2 * t + 1] = cols[1][i] - cols[2][i] - cols[3][i];
        }
      }
      for (int64_t i = 0; i < 2 && 2 * tr + i < g.out_h; ++i) {
        T* row = plane + (2 * tr + i) * g.out_w;
        const T* values = line + i * line_width;
        if (accumulate)
          for (int64_t x = 0; x < g.out_w; ++x) row[x] += values[x] + b;
        else
          for (int64_t x = 0; x < g.out_w; ++x) row[x] = values[x] + b;
      }
    }
  }
}

// dm = A dY A^T for the 2x2 tiles of the channels [o_begin, o_end) of dY (c_out x out_h x out_w)
// in the tile rows [tr_begin, tr_end), at tile `offset` of a band of band_tiles; dY taken as
// zero past an odd map's last row or column.
template <class T>
void transform_output_gradient_band(const T* dy, const ConvGeometry& g, int64_t c_out,
                                    const Tiles& tiles, int64_t tr_begin, int64_t tr_end,
                                    int64_t band_tiles, int64_t offset, int64_t o_begin,
                                    int64_t o_end, T* __restrict dm) {
  const int64_t xi_stride = c_out * band_tiles, cols = tiles.cols;
  // The band reads dY's rows 2 tr_begin .. 2 tr_end - 1, split by column parity as the input
  // transform's are: a tile's two columns are then even[t] and odd[t] of its two rows.
  const int64_t rows = 2 * (tr_end - tr_begin);
  T* buffers = thread_scratch<T, LineScratch>((2 * rows + 2) * cols);
  T *even = buffers, *odd = even + rows * cols, *row_buffer = odd + rows * cols;
  for (int64_t o = o_begin; o < o_end; ++o) {
    load_split_rows(dy + o * g.out_h * g.out_w, g.out_h, g.out_w, 2 * tr_begin, rows, int64_t{0},
                    cols, row_buffer, even, odd);
    for (int64_t tr = tr_begin; tr < tr_end; ++tr) {
      const int64_t r = 2 * (tr - tr_begin);
      const T *e0 = even + r * cols, *e1 = e0 + cols, *o0 = odd + r * cols, *o1 = o0 + cols;
      T* dst = dm + o * band_tiles + offset + (tr - tr_begin) * cols;
      for_tile_vectors<T>(cols, [&](auto lanes, int64_t t) {
        using L = decltype(lanes);
        const auto y00 = L::load(e0 + t), y01 = L::load(o0 + t);  // row 0, columns 0 and 1
        const auto y10 = L::load(e1 + t), y11 = L::load(o1 + t);  // row 1
        // Row i of A dY is (p, q): (y0, y0 + y1, y0 - y1, -y1) down each column; then
        // (A dY) A^T's row i is (p, p + q, p - q, -q).
        auto store_row = [&](int64_t i, auto p, auto q) {
          L::store(dst + (4 * i + 0) * xi_stride + t, p);
          L::store(dst + (4 * i + 1) * xi_stride + t, p + q);
          L::store(dst + (4 * i + 2) * xi_stride + t, p - q);
          L::store(dst + (4 * i + 3) * xi_stride + t, -q);
        };
        store_row(0, y00, y01);
        store_row(1, y00 + y10, y01 + y11);
        store_row(2, y00 - y10, y01 - y11);
        store_row(3, -y10, -y11);
      });
    }
  }
}

// (G g) of a 3-vector, and (G^T u) of a 4-vector.
template <class T>
void filter_transform_1d(T g0, T g1, T g2, T* r) {
  r[0] = g0;
  r[1] = T(0.5) * (g0 + g1 + g2);
  r[2] = T(0.5) * (g0 - g1 + g2);
  r[3] = g2;
}
template <class T>
void filter_gradient_1d(T u0, T u1, T u2, T u3, T* r) {
  r[0] = u0 + T(0.5) * (u1 + u2);
  r[1] = T(0.5) * (u1 - u2);
  r[2] = T(0.5) * (u1 + u2) + u3;
}

}  // namespace

bool winograd_applies(const ConvGeometry& g) {
  return g.kernel_h == 3 && g.kernel_w == 3 && g.stride_h == 1 && g.stride_w == 1 && g.pad_h <= 2 &&
         g.pad_w <= 2;
}

// The measured rule, from build/bench_conv3x3 (batch 8, 2 threads, AVX-512 host, ms per image
// im2col + GEMM -> Winograd, forward / data gradient / weight gradient, two runs' ranges):
//   16 ch @80:   0.45-0.47 -> 0.37-0.39 / 0.34-0.35 -> 0.36-0.38 / 0.49-0.51 -> 0.83-0.88
//   32 ch @40:   0.28-0.42 -> 0.22-0.31 / 0.22-0.33 -> 0.22-0.30 / 0.34-0.46 -> 0.25-0.38
//   64 ch @20:   0.23-0.34 -> 0.22-0.28 / 0.20-0.28 -> 0.20-0.27 / 0.27-0.40 -> 0.22-0.33
//   128 ch @20:  1.25-1.37 -> 0.70-0.94 / 1.05-1.14 -> 0.70-0.95 / 1.26-1.53 -> 1.29-1.57
//   256 ch @20:  6.06-6.09 -> 3.04-3.15 / 5.80-5.90 -> 2.74-3.19 / 6.86-7.07 -> 3.38-3.78
//   128 ch @10:  0.22-0.35 -> 0.32-0.43 / 0.21-0.29 -> 0.32-0.43 / 0.32-0.46 -> 0.37-0.49
//   256 ch @10:  1.22-1.50 -> 1.39-1.48 / 1.31-1.38 -> 1.37-1.54 / 1.28-1.47 -> 1.11-1.22
// So: maps of at least 20x20 (a 10x10 map's tile row holds 5 tiles, fewer than a vector, so
// its transforms run scalar), 8 channels or more each side, and for the weight gradient, whose
// 16 GEMMs are only c_out x c_in large, 32 channels or more.
bool winograd_chosen(const ConvGeometry& g, int64_t c_out, ConvPass pass) {
  const WinogradUse use = winograd_use();
  if (use == WinogradUse::kNever || !winograd_applies(g)) return false;
  if (use == WinogradUse::kAlways) return true;
  const int64_t min_channels = pass == ConvPass::kWeightGradient ? 32 : 8;
  return std::min(g.channels, c_out) >= min_channels && std::min(g.out_h, g.out_w) >= 20;
}

void set_winograd_use(WinogradUse use) { current_use.store(use); }
WinogradUse winograd_use() { return current_use.load(); }

template <class T>
void winograd_transform_filters(const T* weight, int64_t c_out, int64_t c_in,
                                bool for_data_gradient, T* u) {
  // U_ξ is rows x cols: c_out x c_in for the forward, c_in x c_out (transposed) for the data
  // gradient. The loops run over U's rows and columns so that its writes are sequential: a
  // transposed scatter cost 7 ms at 256 x 256 channels, as much as the GEMMs of an image.
  const int64_t rows = for_data_gradient ? c_in : c_out, cols = for_data_gradient ? c_out : c_in;
  const int64_t xi_stride = rows * cols;
  for (int64_t row = 0; row < rows; ++row)
    for (int64_t col = 0; col < cols; ++col) {
      const int64_t o = for_data_gradient ? col : row, c = for_data_gradient ? row : col;
      const T* w = weight + (o * c_in + c) * 9;
      // The data gradient's filter is this one turned by 180 degrees.
      auto tap = [&](int i, int j) {
        return for_data_gradient ? w[(2 - i) * 3 + 2 - j] : w[i * 3 + j];
      };
      T columns[3][4];  // columns[j] = G applied to column j of the filter
      for (int j = 0; j < 3; ++j) filter_transform_1d(tap(0, j), tap(1, j), tap(2, j), columns[j]);
      T* dst = u + row * cols + col;
      for (int i = 0; i < 4; ++i) {
        T transformed[4];
        filter_transform_1d(columns[0][i], columns[1][i], columns[2][i], transformed);
        for (int j = 0; j < 4; ++j) dst[(4 * i + j) * xi_stride] = transformed[j];
      }
    }
}

template <class T>
void winograd_correlate(const T* input, int64_t input_stride, int64_t batch, const ConvGeometry& g,
                        int64_t c_out, const T* u, const T* bias, bool accumulate, T* output,
                        int64_t output_stride) {
  const Tiles tiles = tiles_of(g);
  const int64_t c_in = g.channels, total_rows = batch * tiles.rows;
  int64_t band_rows = batch_band_rows<T>(tiles, c_in, total_rows);
  // Bands of equal size, as many as a multiple of the pool's threads where there are several:
  // each output is computed by one band and its GEMMs alone, so the bits do not depend on
  // the cut (or on the thread count).
  const int64_t threads = ThreadPool::global().num_threads();
  int64_t bands = (total_rows + band_rows - 1) / band_rows;
  if (bands > 1) bands = std::min(total_rows, (bands + threads - 1) / threads * threads);
  band_rows = (total_rows + bands - 1) / bands;
  bands = (total_rows + band_rows - 1) / band_rows;
  parallel_for(bands, 1, [&](int64_t begin, int64_t end) {
    T* v = thread_scratch<T, InputTransformScratch>(16 * c_in * band_rows * tiles.cols);
    T* m = thread_scratch<T, ProductScratch>(16 * c_out * band_rows * tiles.cols);
    for (int64_t band = begin; band < end; ++band) {
      const int64_t first = band * band_rows, last = std::min(total_rows, first + band_rows);
      const int64_t n = (last - first) * tiles.cols;
      for_each_image_slice(tiles, first, last,
                           [&](int64_t image, int64_t tr, int64_t tr_end, int64_t offset) {
                             transform_input_band(input + image * input_stride, g, tiles, tr,
                                                  tr_end, n, offset, int64_t{0}, c_in, v);
                           });
      for (int64_t xi = 0; xi < 16; ++xi)
        gemm<T>(false, false, c_out, n, c_in, T(1), u + xi * c_out * c_in, c_in, v + xi * c_in * n,
                n, T(0), m + xi * c_out * n, n);
      for_each_image_slice(tiles, first, last,
                           [&](int64_t image, int64_t tr, int64_t tr_end, int64_t offset) {
                             transform_output_band(m, g, c_out, tiles, tr, tr_end, n, offset, bias,
                                                   accumulate, output + image * output_stride);
                           });
    }
  });
}

ConvGeometry winograd_data_gradient_geometry(const ConvGeometry& g, int64_t c_out) {
  ConvGeometry d = g;
  d.channels = c_out;
  d.height = g.out_h;
  d.width = g.out_w;
  d.pad_h = 2 - g.pad_h;
  d.pad_w = 2 - g.pad_w;
  d.out_h = g.height;
  d.out_w = g.width;
  return d;
}

template <class T>
void winograd_add_filter_gradient(const T* input, int64_t input_stride, const T* dy,
                                  int64_t dy_stride, int64_t batch, const ConvGeometry& g,
                                  int64_t c_out, T* du) {
  const Tiles tiles = tiles_of(g);
  const int64_t c_in = g.channels, total_rows = batch * tiles.rows;
  const int64_t band_rows = batch_band_rows<T>(tiles, c_in + c_out, total_rows);
  T* v = thread_scratch<T, InputTransformScratch>(16 * c_in * band_rows * tiles.cols);
  T* dm = thread_scratch<T, ProductScratch>(16 * c_out * band_rows * tiles.cols);
  for (int64_t first = 0; first < total_rows; first += band_rows) {
    const int64_t last = std::min(total_rows, first + band_rows), n = (last - first) * tiles.cols;
    // The band's transforms on the pool, a range of the c_in + c_out channels per task (each
    // writes only its own channels' rows of v and dm); the GEMMs then use the pool themselves.
    parallel_for(c_in + c_out, 1, [&](int64_t begin, int64_t end) {
      for_each_image_slice(
          tiles, first, last, [&](int64_t image, int64_t tr, int64_t tr_end, int64_t offset) {
            if (begin < c_in)
              transform_input_band(input + image * input_stride, g, tiles, tr, tr_end, n, offset,
                                   begin, std::min(end, c_in), v);
            if (end > c_in)
              transform_output_gradient_band(dy + image * dy_stride, g, c_out, tiles, tr, tr_end, n,
                                             offset, std::max(begin, c_in) - c_in, end - c_in, dm);
          });
    });
    for (int64_t xi = 0; xi < 16; ++xi)
      gemm<T>(false, true, c_out, c_in, n, T(1), dm + xi * c_out * n, n, v + xi * c_in * n, n, T(1),
              du + xi * c_out * c_in, c_in);
  }
}

template <class T>
void winograd_add_weight_gradient(const T* du, int64_t c_out, int64_t c_in, T* dweight) {
  const int64_t xi_stride = c_out * c_in;
  for (int64_t o = 0; o < c_out; ++o)
    for (int64_t c = 0; c < c_in; ++c) {
      const T* src = du + o * c_in + c;
      T rows[4][3];  // rows[i] = G^T applied to row i of dU
      for (int i = 0; i < 4; ++i)
        filter_gradient_1d(src[(4 * i) * xi_stride], src[(4 * i + 1) * xi_stride],
                           src[(4 * i + 2) * xi_stride], src[(4 * i + 3) * xi_stride], rows[i]);
      T* dw = dweight + (o * c_in + c) * 9;
      for (int j = 0; j < 3; ++j) {
        T column[3];
        filter_gradient_1d(rows[0][j], rows[1][j], rows[2][j], rows[3][j], column);
        for (int i = 0; i < 3; ++i) dw[i * 3 + j] += column[i];
      }
    }
}

#define BAREYOLO_INSTANTIATE_WINOGRAD(T)                                                        \
  template void winograd_transform_filters<T>(const T*, int64_t, int64_t, bool, T*);            \
  template void winograd_correlate<T>(const T*, int64_t, int64_t, const ConvGeometry&, int64_t, \
                                      const T*, const T*, bool, T*, int64_t);                   \
  template void winograd_add_filter_gradient<T>(const T*, int64_t, const T*, int64_t, int64_t,  \
                                                const ConvGeometry&, int64_t, T*);              \
  template void winograd_add_weight_gradient<T>(const T*, int64_t, int64_t, T*);
BAREYOLO_INSTANTIATE_WINOGRAD(float)
BAREYOLO_INSTANTIATE_WINOGRAD(double)

}  // namespace bareyolo::cpu
