// data/warp.cpp — bilinear resize and warp (see warp.h for the conventions).
//
// Both run in fixed point with 11-bit weights, as OpenCV's 8-bit paths do: the resize
// interpolates rows horizontally into int32 (value * 2048), then blends two such rows.
#include "data/warp.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

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

Image warp(const Image& source, const Mat3& forward, int width, int height, uint8_t border) {
  Mat3 inv = forward.inverse();
  bool affine = forward.is_affine();
  Image out(width, height, border);
  const int max_x = source.width - 1, max_y = source.height - 1;
  for (int y = 0; y < height; ++y) {
    uint8_t* dst = out.row(y);
    for (int x = 0; x < width; ++x, dst += 3) {
      double sx = inv(0, 0) * x + inv(0, 1) * y + inv(0, 2);
      double sy = inv(1, 0) * x + inv(1, 1) * y + inv(1, 2);
      if (!affine) {
        double w = inv(2, 0) * x + inv(2, 1) * y + inv(2, 2);
        w = w != 0 ? 1.0 / w : 0.0;
        sx *= w, sy *= w;
      }
      if (!(sx > -1.0 && sy > -1.0 && sx < source.width && sy < source.height))
        continue;  // all four taps outside: stays `border`
      int x0 = static_cast<int>(std::floor(sx)), y0 = static_cast<int>(std::floor(sy));
      int fx = static_cast<int>((sx - x0) * kOne + 0.5);
      int fy = static_cast<int>((sy - y0) * kOne + 0.5);
      int w00 = (kOne - fx) * (kOne - fy), w01 = fx * (kOne - fy);
      int w10 = (kOne - fx) * fy, w11 = fx * fy;
      constexpr int kRound = 1 << (2 * kWeightBits - 1);
      if (x0 >= 0 && y0 >= 0 && x0 < max_x && y0 < max_y) {  // the common case: no border
        const uint8_t* a = source.at(x0, y0);
        const uint8_t* b = a + size_t(source.width) * 3;
        for (int c = 0; c < 3; ++c)
          dst[c] = static_cast<uint8_t>(
              (a[c] * w00 + a[c + 3] * w01 + b[c] * w10 + b[c + 3] * w11 + kRound) >>
              (2 * kWeightBits));
        continue;
      }
      for (int c = 0; c < 3; ++c) {
        auto tap = [&](int tx, int ty) -> int {
          bool outside = tx < 0 || ty < 0 || tx > max_x || ty > max_y;
          return outside ? border : source.at(tx, ty)[c];
        };
        int64_t sum = int64_t(tap(x0, y0)) * w00 + int64_t(tap(x0 + 1, y0)) * w01 +
                      int64_t(tap(x0, y0 + 1)) * w10 + int64_t(tap(x0 + 1, y0 + 1)) * w11;
        dst[c] = static_cast<uint8_t>((sum + kRound) >> (2 * kWeightBits));
      }
    }
  }
  return out;
}

}  // namespace bareyolo::data
