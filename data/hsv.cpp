// data/hsv.cpp — OpenCV-compatible 8-bit RGB <-> HSV and the HSV jitter (see hsv.h).
#include "data/hsv.h"

#include <algorithm>
#include <cmath>

namespace bareyolo::data {

namespace {

constexpr int kShift = 12;  // OpenCV's hsv_shift: divisions as multiplications in 20.12

// OpenCV's tables: 255/v and 180/(6 * diff) in fixed point, rounded.
struct DivisionTables {
  std::array<int, 256> saturation{};
  std::array<int, 256> hue{};
  DivisionTables() {
    for (int i = 1; i < 256; ++i) {
      saturation[size_t(i)] = static_cast<int>(std::lround((255 << kShift) / double(i)));
      hue[size_t(i)] = static_cast<int>(std::lround((180 << kShift) / (6.0 * i)));
    }
  }
};
const DivisionTables kTables;

}  // namespace

Hsv rgb_to_hsv(Rgb rgb) {
  int r = rgb[0], g = rgb[1], b = rgb[2];
  int v = std::max({r, g, b});
  int diff = v - std::min({r, g, b});
  int s = (diff * kTables.saturation[size_t(v)] + (1 << (kShift - 1))) >> kShift;
  int h;
  if (v == r)
    h = g - b;
  else if (v == g)
    h = b - r + 2 * diff;
  else
    h = r - g + 4 * diff;
  h = (h * kTables.hue[size_t(diff)] + (1 << (kShift - 1))) >> kShift;
  if (h < 0) h += 180;
  return {uint8_t(h), uint8_t(s), uint8_t(v)};
}

Rgb hsv_to_rgb(Hsv hsv) {
  float v = hsv[2] / 255.0f, s = hsv[1] / 255.0f;
  float r = v, g = v, b = v;
  if (s != 0) {
    float h = hsv[0] * (6.0f / 180.0f);  // sectors of 60 degrees
    while (h < 0) h += 6;
    while (h >= 6) h -= 6;
    int sector = static_cast<int>(std::floor(h));
    h -= sector;
    if (sector < 0 || sector >= 6) sector = 0, h = 0;
    const float tab[4] = {v, v * (1 - s), v * (1 - s * h), v * (1 - s * (1 - h))};
    // Which of tab[] each of b, g, r takes per sector (OpenCV's sector_data).
    static const int kSector[6][3] = {{1, 3, 0}, {1, 0, 2}, {3, 0, 1},
                                      {0, 2, 1}, {0, 1, 3}, {2, 1, 0}};
    b = tab[kSector[sector][0]], g = tab[kSector[sector][1]], r = tab[kSector[sector][2]];
  }
  auto to_byte = [](float x) { return uint8_t(std::clamp<long>(std::lrint(x * 255.0f), 0, 255)); };
  return {to_byte(r), to_byte(g), to_byte(b)};
}

void augment_hsv(Image& image, const AugmentHyp& hyp, SampleRng& rng) {
  if (hyp.hsv_h == 0 && hyp.hsv_s == 0 && hyp.hsv_v == 0) return;
  double gain_h = rng.uniform(-1, 1) * hyp.hsv_h + 1;
  double gain_s = rng.uniform(-1, 1) * hyp.hsv_s + 1;
  double gain_v = rng.uniform(-1, 1) * hyp.hsv_v + 1;
  std::array<uint8_t, 256> lut_h, lut_s, lut_v;
  for (int x = 0; x < 256; ++x) {
    lut_h[size_t(x)] = uint8_t(std::fmod(x * gain_h, 180.0));
    lut_s[size_t(x)] = uint8_t(std::clamp(x * gain_s, 0.0, 255.0));
    lut_v[size_t(x)] = uint8_t(std::clamp(x * gain_v, 0.0, 255.0));
  }
  uint8_t* p = image.pixels.data();
  for (size_t i = 0, n = image.pixels.size() / 3; i < n; ++i, p += 3) {
    Hsv hsv = rgb_to_hsv({p[0], p[1], p[2]});
    Rgb rgb = hsv_to_rgb({lut_h[hsv[0]], lut_s[hsv[1]], lut_v[hsv[2]]});
    p[0] = rgb[0], p[1] = rgb[1], p[2] = rgb[2];
  }
}

}  // namespace bareyolo::data
