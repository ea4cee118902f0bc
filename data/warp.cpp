// data/warp.cpp — bilinear resize and warp (see warp.h for the conventions).
//
// Both run in fixed point with 11-bit weights, as OpenCV's 8-bit paths do: the resize
// interpolates rows horizontally into int32 (value * 2048), then blends two such rows.
#include "data/warp.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "data/rgb_simd.h"

namespace bareyolo::data {

namespace {

constexpr int kWeightBits = 11;
constexpr int kOne = 1 << kWeightBits;

// For each destination coordinate: the left source tap and the right tap's weight (0..kOne).
struct Taps {
  std::vector<int> first;
  std::vector<int> weight;
};

Taps linear_taps(int src_size, int dst_size) {
  Taps taps;
  taps.first.resize(size_t(dst_size));
  taps.weight.resize(size_t(dst_size));
  double scale = double(src_size) / dst_size;
  for (int d = 0; d < dst_size; ++d) {
    double s = (d + 0.5) * scale - 0.5;
    int s0 = static_cast<int>(std::floor(s));
    double frac = s - s0;
    if (s0 < 0) s0 = 0, frac = 0;
    if (s0 >= src_size - 1) s0 = src_size - 1, frac = 0;
    taps.first[size_t(d)] = s0;
    taps.weight[size_t(d)] = static_cast<int>(std::lround(frac * kOne));
  }
  return taps;
}

void horizontal_pass(const uint8_t* src_row, int src_width, const Taps& xs, int32_t* out) {
  int dst_width = static_cast<int>(xs.first.size());
  for (int x = 0; x < dst_width; ++x) {
    int s0 = xs.first[size_t(x)], w1 = xs.weight[size_t(x)], w0 = kOne - w1;
    int s1 = std::min(s0 + 1, src_width - 1);
    const uint8_t* a = src_row + s0 * 3;
    const uint8_t* b = src_row + s1 * 3;
    for (int c = 0; c < 3; ++c) out[x * 3 + c] = a[c] * w0 + b[c] * w1;
  }
}

}  // namespace

Mat3 operator*(const Mat3& a, const Mat3& b) {
  Mat3 product;
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 3; ++c)
      product(r, c) = a(r, 0) * b(0, c) + a(r, 1) * b(1, c) + a(r, 2) * b(2, c);
  return product;
}

Mat3 Mat3::inverse() const {
  const Mat3& a = *this;
  double det = a(0, 0) * (a(1, 1) * a(2, 2) - a(1, 2) * a(2, 1)) -
               a(0, 1) * (a(1, 0) * a(2, 2) - a(1, 2) * a(2, 0)) +
               a(0, 2) * (a(1, 0) * a(2, 1) - a(1, 1) * a(2, 0));
  if (std::abs(det) < 1e-12) throw std::invalid_argument("warp matrix is singular");
  Mat3 inv;
  inv(0, 0) = (a(1, 1) * a(2, 2) - a(1, 2) * a(2, 1)) / det;
  inv(0, 1) = (a(0, 2) * a(2, 1) - a(0, 1) * a(2, 2)) / det;
  inv(0, 2) = (a(0, 1) * a(1, 2) - a(0, 2) * a(1, 1)) / det;
  inv(1, 0) = (a(1, 2) * a(2, 0) - a(1, 0) * a(2, 2)) / det;
  inv(1, 1) = (a(0, 0) * a(2, 2) - a(0, 2) * a(2, 0)) / det;
  inv(1, 2) = (a(0, 2) * a(1, 0) - a(0, 0) * a(1, 2)) / det;
  inv(2, 0) = (a(1, 0) * a(2, 1) - a(1, 1) * a(2, 0)) / det;
  inv(2, 1) = (a(0, 1) * a(2, 0) - a(0, 0) * a(2, 1)) / det;
  inv(2, 2) = (a(0, 0) * a(1, 1) - a(0, 1) * a(1, 0)) / det;
  return inv;
}

Image resize_bilinear(const Image& source, int width, int height) {
  if (width <= 0 || height <= 0 || source.width <= 0 || source.height <= 0)
    throw std::invalid_argument("resize_bilinear: empty image or size");
  if (width == source.width && height == source.height) return source;
  Taps xs = linear_taps(source.width, width);
  Taps ys = linear_taps(source.height, height);
  Image out(width, height, 0);
  std::vector<int32_t> upper(size_t(width) * 3), lower(size_t(width) * 3);
  int upper_row = -1, lower_row = -1;  // which source rows the buffers hold
  for (int y = 0; y < height; ++y) {
    int s0 = ys.first[size_t(y)], s1 = std::min(s0 + 1, source.height - 1);
    if (upper_row != s0) {
      if (lower_row == s0)
        std::swap(upper, lower), std::swap(upper_row, lower_row);
      else
        horizontal_pass(source.row(s0), source.width, xs, upper.data()), upper_row = s0;
    }
    if (lower_row != s1)
      horizontal_pass(source.row(s1), source.width, xs, lower.data()), lower_row = s1;
    int w1 = ys.weight[size_t(y)], w0 = kOne - w1;
    uint8_t* dst = out.row(y);
    constexpr int kRound = 1 << (2 * kWeightBits - 1);
    for (int i = 0; i < width * 3; ++i)
      dst[i] = static_cast<uint8_t>(
          (int64_t(upper[size_t(i)]) * w0 + int64_t(lower[size_t(i)]) * w1 + kRound) >>
          (2 * kWeightBits));
  }
  return out;
}

TiledCanvas TiledCanvas::of(const Image& image, uint8_t fill) {
  return {
      image.width,
      image.height,
      fill,
      {{image.pixels.data(), image.width, image.height, 0, 0, image.width, image.height, 0, 0}}};
}

Image TiledCanvas::render() const {
  Image canvas(width, height, fill);
  for (const CanvasTile& tile : tiles)
    for (int y = tile.y1; y < tile.y2; ++y)
      std::memcpy(
          canvas.at(tile.x1, y),
          tile.pixels + (size_t(tile.image_y + y - tile.y1) * tile.width + tile.image_x) * 3,
          size_t(tile.x2 - tile.x1) * 3);
  return canvas;
}

namespace {

// Where an output pixel samples the canvas: its top-left tap and the fixed-point weights of the
// taps to the right (fx) and below (fy), 0..kOne. The multiply-adds are written out so that the
// scalar and the vector path (and every build) compute the same bits.
struct SourcePoint {
  int x0, y0, fx, fy;
};
SourcePoint source_point(double sx, double sy) {
  const int x0 = static_cast<int>(std::floor(sx)), y0 = static_cast<int>(std::floor(sy));
  return {x0, y0, static_cast<int>(std::fma(sx - x0, kOne, 0.5)),
          static_cast<int>(std::fma(sy - y0, kOne, 0.5))};
}

constexpr int kBlendShift = 2 * kWeightBits;
constexpr int kBlendRound = 1 << (kBlendShift - 1);

// The pixel under canvas point (x, y), or null where only the fill is.
const uint8_t* canvas_pixel(const TiledCanvas& canvas, int x, int y) {
  for (const CanvasTile& t : canvas.tiles)
    if (x >= t.x1 && x < t.x2 && y >= t.y1 && y < t.y2)
      return t.pixels + (size_t(y - t.y1 + t.image_y) * t.width + (x - t.x1 + t.image_x)) * 3;
  return nullptr;
}

// One output pixel: the bilinear blend of the four taps around (sx, sy).
void sample_pixel(const TiledCanvas& canvas, double sx, double sy, uint8_t* dst) {
  if (!(sx > -1.0 && sy > -1.0 && sx < canvas.width && sy < canvas.height))
    return;  // all four taps outside the canvas: dst keeps the fill
  const SourcePoint p = source_point(sx, sy);
  const int w00 = (kOne - p.fx) * (kOne - p.fy), w01 = p.fx * (kOne - p.fy);
  const int w10 = (kOne - p.fx) * p.fy, w11 = p.fx * p.fy;
  const uint8_t* taps[4] = {canvas_pixel(canvas, p.x0, p.y0), canvas_pixel(canvas, p.x0 + 1, p.y0),
                            canvas_pixel(canvas, p.x0, p.y0 + 1),
                            canvas_pixel(canvas, p.x0 + 1, p.y0 + 1)};
  for (int c = 0; c < 3; ++c) {
    auto tap = [&](int k) -> int { return taps[k] ? taps[k][c] : canvas.fill; };
    dst[c] = static_cast<uint8_t>(
        (tap(0) * w00 + tap(1) * w01 + tap(2) * w10 + tap(3) * w11 + kBlendRound) >> kBlendShift);
  }
}

#if defined(__AVX2__) && defined(__FMA__)
// The lanes whose four taps (x0..x0 + 1, y0..y0 + 1) all lie in tile t.
__m256i taps_in(const CanvasTile& t, __m256i x0, __m256i y0) {
  const __m256i x1 = _mm256_add_epi32(x0, _mm256_set1_epi32(1));
  const __m256i y1 = _mm256_add_epi32(y0, _mm256_set1_epi32(1));
  return _mm256_andnot_si256(_mm256_or_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(t.x1), x0),
                                             _mm256_cmpgt_epi32(_mm256_set1_epi32(t.y1), y0)),
                             _mm256_and_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(t.x2), x1),
                                              _mm256_cmpgt_epi32(_mm256_set1_epi32(t.y2), y1)));
}

// The lanes none of whose four taps lies in tile t.
__m256i taps_off(const CanvasTile& t, __m256i x0, __m256i y0) {
  const __m256i x1 = _mm256_add_epi32(x0, _mm256_set1_epi32(1));
  const __m256i y1 = _mm256_add_epi32(y0, _mm256_set1_epi32(1));
  return _mm256_or_si256(_mm256_or_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(t.x1), x1),
                                         _mm256_cmpgt_epi32(_mm256_set1_epi32(t.y1), y1)),
                         _mm256_or_si256(_mm256_cmpgt_epi32(x0, _mm256_set1_epi32(t.x2 - 1)),
                                         _mm256_cmpgt_epi32(y0, _mm256_set1_epi32(t.y2 - 1))));
}

// Eight output pixels of an affine warp at once, the same operations as source_point and
// sample_pixel lane by lane, when every lane reads its four taps from one tile or only the
// fill (most of a mosaic; the lanes across a tile's edge go through sample_pixel). `sx`, `sy`:
// the eight source points; `tile_hint`: the tile to try first, updated; `reversed`: the eight
// are stored at dst in the opposite order (a left-right flip). Returns false, writing nothing,
// when the lanes do not qualify.
bool sample_8_pixels(const TiledCanvas& canvas, __m256d sx_lo, __m256d sx_hi, __m256d sy_lo,
                     __m256d sy_hi, uint8_t* dst, int& tile_hint, bool reversed) {
  // In the canvas (the scalar path's early out), then clamped so that every lane converts to
  // an int; the lanes outside keep no tile's taps and read the fill.
  auto inside = [](__m256d s, double size) {
    return _mm256_and_pd(_mm256_cmp_pd(s, _mm256_set1_pd(-1.0), _CMP_GT_OQ),
                         _mm256_cmp_pd(s, _mm256_set1_pd(size), _CMP_LT_OQ));
  };
  auto to_ints = [](__m256d lo, __m256d hi) {
    return _mm256_set_m128i(_mm256_cvttpd_epi32(hi), _mm256_cvttpd_epi32(lo));
  };
  const __m256d in_lo = _mm256_and_pd(inside(sx_lo, canvas.width), inside(sy_lo, canvas.height));
  const __m256d in_hi = _mm256_and_pd(inside(sx_hi, canvas.width), inside(sy_hi, canvas.height));
  // The two 4 x 64-bit masks as one 8 x 32-bit mask (each lane's low half).
  const __m256i low_halves = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);
  const __m256i in_canvas = _mm256_set_m128i(
      _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(_mm256_castpd_si256(in_hi), low_halves)),
      _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(_mm256_castpd_si256(in_lo), low_halves)));
  auto clamp = [](__m256d s, double size) {
    return _mm256_min_pd(_mm256_max_pd(s, _mm256_set1_pd(-1.0)), _mm256_set1_pd(size));
  };
  sx_lo = clamp(sx_lo, canvas.width), sx_hi = clamp(sx_hi, canvas.width);
  sy_lo = clamp(sy_lo, canvas.height), sy_hi = clamp(sy_hi, canvas.height);
  const __m256d fx_lo = _mm256_floor_pd(sx_lo), fx_hi = _mm256_floor_pd(sx_hi);
  const __m256d fy_lo = _mm256_floor_pd(sy_lo), fy_hi = _mm256_floor_pd(sy_hi);
  const __m256i x0 = to_ints(fx_lo, fx_hi), y0 = to_ints(fy_lo, fy_hi);
  const __m256d one = _mm256_set1_pd(kOne), half = _mm256_set1_pd(0.5);
  const __m256i fx = to_ints(_mm256_fmadd_pd(_mm256_sub_pd(sx_lo, fx_lo), one, half),
                             _mm256_fmadd_pd(_mm256_sub_pd(sx_hi, fx_hi), one, half));
  const __m256i fy = to_ints(_mm256_fmadd_pd(_mm256_sub_pd(sy_lo, fy_lo), one, half),
                             _mm256_fmadd_pd(_mm256_sub_pd(sy_hi, fy_hi), one, half));

  // Which lanes have all four taps in one tile (tried first: the tile of the previous eight),
  // and which have none in any tile.
  const __m256i all = _mm256_set1_epi32(-1);
  const CanvasTile* chosen = nullptr;
  __m256i in_chosen = _mm256_setzero_si256(), fill = _mm256_setzero_si256();
  if (_mm256_testc_si256(in_canvas, all) &&
      _mm256_testc_si256(taps_in(canvas.tiles[size_t(tile_hint)], x0, y0), all)) {
    chosen = &canvas.tiles[size_t(tile_hint)], in_chosen = all;
  } else {
    fill = _mm256_andnot_si256(in_canvas, all);
    __m256i in_no_tile = all;
    for (const CanvasTile& t : canvas.tiles) {
      const __m256i in_tile = taps_in(t, x0, y0);
      in_no_tile = _mm256_and_si256(in_no_tile, taps_off(t, x0, y0));
      if (!chosen && !_mm256_testz_si256(in_tile, in_canvas)) chosen = &t, in_chosen = in_tile;
    }
    fill = _mm256_or_si256(fill, in_no_tile);
    in_chosen = _mm256_andnot_si256(fill, in_chosen);
    if (!_mm256_testc_si256(_mm256_or_si256(fill, in_chosen), all)) return false;
    if (chosen) tile_hint = int(chosen - canvas.tiles.data());
  }

  __m256i rgb = _mm256_set1_epi32(canvas.fill * 0x010101);
  if (chosen) {
    const CanvasTile& t = *chosen;
    const int stride = t.width * 3;
    const __m256i ix = _mm256_add_epi32(x0, _mm256_set1_epi32(t.image_x - t.x1));
    const __m256i iy = _mm256_add_epi32(y0, _mm256_set1_epi32(t.image_y - t.y1));
    const __m256i offset = _mm256_add_epi32(_mm256_mullo_epi32(iy, _mm256_set1_epi32(stride)),
                                            _mm256_mullo_epi32(ix, _mm256_set1_epi32(3)));
    // Four bytes at each tap: the left tap's RGB in bytes 0-2, the right tap's in bytes 1-3
    // (read from one byte before it, which stays inside the image). Lanes of the fill read
    // nothing.
    const int* base = reinterpret_cast<const int*>(t.pixels);
    auto gather = [&](int skip) {
      return _mm256_mask_i32gather_epi32(_mm256_setzero_si256(), base,
                                         _mm256_add_epi32(offset, _mm256_set1_epi32(skip)),
                                         in_chosen, 1);
    };
    const __m256i top_left = gather(0), top_right = gather(2);
    const __m256i bottom_left = gather(stride), bottom_right = gather(stride + 2);
    const __m256i k = _mm256_set1_epi32(kOne);
    const __m256i gx = _mm256_sub_epi32(k, fx), gy = _mm256_sub_epi32(k, fy);
    const __m256i w00 = _mm256_mullo_epi32(gx, gy), w01 = _mm256_mullo_epi32(fx, gy);
    const __m256i w10 = _mm256_mullo_epi32(gx, fy), w11 = _mm256_mullo_epi32(fx, fy);
    const __m256i byte = _mm256_set1_epi32(0xff);
    auto at = [&](__m256i taps, int shift) {
      return _mm256_and_si256(_mm256_srli_epi32(taps, shift), byte);
    };
    __m256i blended = _mm256_setzero_si256();
    for (int c = 0; c < 3; ++c) {
      __m256i sum = _mm256_add_epi32(_mm256_mullo_epi32(at(top_left, 8 * c), w00),
                                     _mm256_mullo_epi32(at(top_right, 8 * c + 8), w01));
      sum = _mm256_add_epi32(sum, _mm256_mullo_epi32(at(bottom_left, 8 * c), w10));
      sum = _mm256_add_epi32(sum, _mm256_mullo_epi32(at(bottom_right, 8 * c + 8), w11));
      sum = _mm256_srli_epi32(_mm256_add_epi32(sum, _mm256_set1_epi32(kBlendRound)), kBlendShift);
      blended = _mm256_or_si256(blended, _mm256_slli_epi32(sum, 8 * c));
    }
    rgb = _mm256_blendv_epi8(rgb, blended, in_chosen);
  }
  if (reversed) rgb = _mm256_permutevar8x32_epi32(rgb, _mm256_setr_epi32(7, 6, 5, 4, 3, 2, 1, 0));
  store_8_pixels(rgb, dst);
  return true;
}
#endif

}  // namespace

Image warp(const TiledCanvas& source, const Mat3& forward, int width, int height, Flips flips) {
  const Mat3 inv = forward.inverse();
  const bool affine = forward.is_affine();
  Image out(width, height, source.fill);
  // Where the unflipped pixel x of a row goes.
  auto at = [&](uint8_t* row, int x) { return row + (flips.left_right ? width - 1 - x : x) * 3; };
  [[maybe_unused]] int tile_hint = 0;
  for (int y = 0; y < height; ++y) {
    uint8_t* row = out.row(flips.up_down ? height - 1 - y : y);
    // The y terms once per row; per pixel the x term is fused onto them.
    const double row_x = inv(0, 1) * y, row_y = inv(1, 1) * y, row_w = inv(2, 1) * y;
    auto sample_column = [&](int x) {
      double sx = std::fma(inv(0, 0), x, row_x) + inv(0, 2);
      double sy = std::fma(inv(1, 0), x, row_y) + inv(1, 2);
      if (!affine) {
        double w = std::fma(inv(2, 0), x, row_w) + inv(2, 2);
        w = w != 0 ? 1.0 / w : 0.0;
        sx *= w, sy *= w;
      }
      sample_pixel(source, sx, sy, at(row, x));
    };
    int x = 0;
#if defined(__AVX2__) && defined(__FMA__)
    if (affine && !source.tiles.empty()) {
      const __m256d a00 = _mm256_set1_pd(inv(0, 0)), a10 = _mm256_set1_pd(inv(1, 0));
      const __m256d a02 = _mm256_set1_pd(inv(0, 2)), a12 = _mm256_set1_pd(inv(1, 2));
      const __m256d bx = _mm256_set1_pd(row_x), by = _mm256_set1_pd(row_y);
      for (; x + 8 <= width; x += 8) {
        const __m256d xs_lo = _mm256_setr_pd(x, x + 1, x + 2, x + 3);
        const __m256d xs_hi = _mm256_add_pd(xs_lo, _mm256_set1_pd(4));
        const __m256d sx_lo = _mm256_add_pd(_mm256_fmadd_pd(a00, xs_lo, bx), a02);
        const __m256d sx_hi = _mm256_add_pd(_mm256_fmadd_pd(a00, xs_hi, bx), a02);
        const __m256d sy_lo = _mm256_add_pd(_mm256_fmadd_pd(a10, xs_lo, by), a12);
        const __m256d sy_hi = _mm256_add_pd(_mm256_fmadd_pd(a10, xs_hi, by), a12);
        // The eight go to x..x + 7, or, flipped, to the eight that end at width - 1 - x.
        uint8_t* first = flips.left_right ? at(row, x + 7) : at(row, x);
        if (sample_8_pixels(source, sx_lo, sx_hi, sy_lo, sy_hi, first, tile_hint, flips.left_right))
          continue;
        for (int k = 0; k < 8; ++k) sample_column(x + k);
      }
    }
#endif
    for (; x < width; ++x) sample_column(x);
  }
  return out;
}

Image warp(const Image& source, const Mat3& forward, int width, int height, uint8_t border) {
  return warp(TiledCanvas::of(source, border), forward, width, height);
}

}  // namespace bareyolo::data
