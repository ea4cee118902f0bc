// data/warp.h — geometric resampling of 8-bit RGB images: bilinear resize and the
// affine/perspective warp of random_perspective, both with bilinear sampling.
//
// Conventions follow OpenCV's, which YOLOv5's numbers assume: pixel centres at integer
// coordinates, resize maps dst x to src (x + 0.5) * src_w / dst_w - 0.5 and clamps at the
// edges (INTER_LINEAR); a warp takes the forward matrix src -> dst, inverts it and samples
// the source, taps outside the image reading a constant border value (BORDER_CONSTANT).
// YOLOv5 shrinks validation images with INTER_AREA; we use bilinear for that too (a little
// more aliasing on large downscales, never used for augmented training images).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "data/image.h"

namespace bareyolo::data {

// A 3x3 homogeneous transform, row-major, acting on column vectors (x, y, 1).
struct Mat3 {
  std::array<double, 9> m{1, 0, 0, 0, 1, 0, 0, 0, 1};
  double operator()(int r, int c) const { return m[size_t(r * 3 + c)]; }
  double& operator()(int r, int c) { return m[size_t(r * 3 + c)]; }
  static Mat3 identity() { return {}; }
  bool is_identity() const { return m == Mat3{}.m; }
  bool is_affine() const { return m[6] == 0 && m[7] == 0 && m[8] == 1; }
  Mat3 inverse() const;  // throws std::invalid_argument for a singular matrix
};
Mat3 operator*(const Mat3& a, const Mat3& b);

Image resize_bilinear(const Image& source, int width, int height);

// One image placed on a TiledCanvas: the canvas rectangle x1 <= x < x2, y1 <= y < y2 shows
// the image's pixels from (image_x, image_y) on. `pixels` points into the image (HWC RGB rows
// of `width` pixels), which must outlive the canvas.
struct CanvasTile {
  const uint8_t* pixels = nullptr;
  int width = 0, height = 0;
  int x1 = 0, y1 = 0, x2 = 0, y2 = 0;
  int image_x = 0, image_y = 0;
};

// A width x height canvas of disjoint tiles on a constant `fill` (the mosaic's 2s x 2s canvas),
// which the warp samples without it being drawn: each output pixel reads its four taps from
// the tiles, so the canvas's 4s^2 pixels are neither filled nor copied. Taps outside every
// tile, the canvas's edges included, read `fill`.
struct TiledCanvas {
  int width = 0, height = 0;
  uint8_t fill = 0;
  std::vector<CanvasTile> tiles;

  // The canvas of one tile: `image` itself, on `fill`.
  static TiledCanvas of(const Image& image, uint8_t fill);
  // The canvas drawn, for what must change its pixels before the warp (copy-paste).
  Image render() const;
};

// Mirror images of a warp's output, rendered by the warp itself: with left_right the output
// pixel (x, y) is the one the unflipped warp puts at (width - 1 - x, y), computed from that
// integer coordinate, so the bits are the same as flipping afterwards; up_down likewise.
struct Flips {
  bool up_down = false, left_right = false;
};

// dst(x, y) = canvas(M^-1 (x, y)), bilinear, then flipped.
Image warp(const TiledCanvas& source, const Mat3& forward, int width, int height, Flips flips = {});
// The same for one image; `border` fills what falls outside it.
Image warp(const Image& source, const Mat3& forward, int width, int height, uint8_t border);

}  // namespace bareyolo::data
