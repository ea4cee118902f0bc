// data/hsv.h — YOLOv5's HSV jitter, with OpenCV's 8-bit colour conversion.
//
// Three gains r = U(-1, 1) * (hsv_h, hsv_s, hsv_v) + 1 (drawn in that order; nothing drawn
// and nothing changed when all three hyperparameters are 0). Tables for x = 0..255:
// H' = uint8((x * r0) mod 180), S' = uint8(clip(x * r1, 0, 255)), V' = uint8(clip(x * r2, 0,
// 255)) (the casts truncate). Each pixel goes RGB -> HSV (OpenCV 8-bit: H in [0, 180), S and V
// in [0, 255], fixed-point divisions), through the tables, and back (OpenCV's float
// sector formula, rounded to nearest).
#pragma once

#include <array>
#include <cstdint>

#include "data/augment_hyp.h"
#include "data/image.h"
#include "data/rng.h"

namespace bareyolo::data {

using Hsv = std::array<uint8_t, 3>;
using Rgb = std::array<uint8_t, 3>;

Hsv rgb_to_hsv(Rgb rgb);
Rgb hsv_to_rgb(Hsv hsv);

// The three gains, drawn; off (nothing drawn) when all three hyperparameters are 0. Drawn
// apart from their application so that the flips, drawn after them, can be folded into the
// warp that makes the image (sample.cpp).
struct HsvJitter {
  bool on = false;
  double gain_h = 1, gain_s = 1, gain_v = 1;
};
HsvJitter draw_hsv_jitter(const AugmentHyp& hyp, SampleRng& rng);
void apply_hsv_jitter(Image& image, const HsvJitter& jitter);

}  // namespace bareyolo::data
