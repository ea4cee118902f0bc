// data/hsv.cpp — OpenCV-compatible 8-bit RGB <-> HSV and the HSV jitter (see hsv.h).
#include "data/hsv.h"

#include <algorithm>
#include <cmath>

#include "data/rgb_simd.h"

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

namespace {

// OpenCV's split of an 8-bit hue (0..180 for 0..360 degrees) into a 60-degree sector and
// the fraction within it, in float as OpenCV computes it.
struct HueSector {
  int sector = 0;
  float fraction = 0;
};
HueSector hue_sector(uint8_t hue) {
  float h = hue * (6.0f / 180.0f);
  while (h < 0) h += 6;
  while (h >= 6) h -= 6;
  int sector = static_cast<int>(std::floor(h));
  h -= sector;
  if (sector < 0 || sector >= 6) sector = 0, h = 0;
  return {sector, h};
}

// Which of the sector formula's four values each of b, g, r takes per sector (OpenCV's
// sector_data).
constexpr int kSectorValue[6][3] = {{1, 3, 0}, {1, 0, 2}, {3, 0, 1},
                                    {0, 2, 1}, {0, 1, 3}, {2, 1, 0}};

// OpenCV's sector formula. With s = 0 every value is v, which is its grey. The one fused
// multiply-add is written out, and this file is compiled without contraction
// (-ffp-contract=off, CMakeLists.txt), so that this and the vector path below compute the same
// bits in every build, the bits the fixtures and the main job were made with.
Rgb sector_to_rgb(int sector, float h, float s, float v) {
  const float values[4] = {v, v * (1 - s), v * std::fma(-s, h, 1.0f), v * (1 - s * (1 - h))};
  // nearbyint rounds as lrint does (to nearest, ties to even) but compiles to one instruction.
  auto to_byte = [](float x) {
    return uint8_t(std::clamp(static_cast<int>(std::nearbyint(x * 255.0f)), 0, 255));
  };
  return {to_byte(values[kSectorValue[sector][2]]), to_byte(values[kSectorValue[sector][1]]),
          to_byte(values[kSectorValue[sector][0]])};
}

}  // namespace

Rgb hsv_to_rgb(Hsv hsv) {
  const HueSector hue = hue_sector(hsv[0]);
  return sector_to_rgb(hue.sector, hue.fraction, hsv[1] / 255.0f, hsv[2] / 255.0f);
}

namespace {

// One sample's jitter folded into tables indexed by the pixel's own 8-bit H, S and V:
// hsv_to_rgb(lut_h[H], lut_s[S], lut_v[V]) needs from H only the sector and the fraction of
// lut_h[H] (stored as their sum, the float hue in sectors, from which both come back exactly:
// a float minus its integer part is exact), and from S and V only lut_s[S] / 255 and
// lut_v[V] / 255. So each pixel costs rgb_to_hsv, three lookups and the sector formula.
struct JitterTables {
  std::array<float, 256> hue{}, saturation{}, value{};
};

JitterTables jitter_tables(double gain_h, double gain_s, double gain_v) {
  JitterTables t;
  for (int x = 0; x < 256; ++x) {
    const HueSector hue = hue_sector(uint8_t(std::fmod(x * gain_h, 180.0)));
    t.hue[size_t(x)] = float(hue.sector) + hue.fraction;
    t.saturation[size_t(x)] = uint8_t(std::clamp(x * gain_s, 0.0, 255.0)) / 255.0f;
    t.value[size_t(x)] = uint8_t(std::clamp(x * gain_v, 0.0, 255.0)) / 255.0f;
  }
  return t;
}

void jitter_pixel(const JitterTables& t, uint8_t* p) {
  const Hsv hsv = rgb_to_hsv({p[0], p[1], p[2]});
  const float hue = t.hue[hsv[0]];
  const float sector = std::floor(hue);
  const Rgb rgb = sector_to_rgb(int(sector), hue - sector, t.saturation[hsv[1]], t.value[hsv[2]]);
  p[0] = rgb[0], p[1] = rgb[1], p[2] = rgb[2];
}

#if defined(__AVX2__) && defined(__FMA__)
// jitter_pixel for 8 pixels at once (24 bytes at p; 32 bytes must be readable), lane by lane
// the same integer and float operations, so the same bytes.
void jitter_8_pixels(const JitterTables& t, uint8_t* p) {
  // Bytes 0-11 (pixels 0-3) to the low 128-bit lane, 12-23 (pixels 4-7) to the high one, then
  // each channel's bytes widened to 32-bit lanes.
  const __m256i bytes =
      _mm256_permutevar8x32_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)),
                                  _mm256_setr_epi32(0, 1, 2, 3, 3, 4, 5, 6));
  auto channel = [&](int c) {
    const __m128i pick = _mm_setr_epi8(char(c), -1, -1, -1, char(c + 3), -1, -1, -1, char(c + 6),
                                       -1, -1, -1, char(c + 9), -1, -1, -1);
    return _mm256_shuffle_epi8(bytes, _mm256_broadcastsi128_si256(pick));
  };
  const __m256i r = channel(0), g = channel(1), b = channel(2);

  // rgb_to_hsv
  const __m256i v = _mm256_max_epi32(r, _mm256_max_epi32(g, b));
  const __m256i diff = _mm256_sub_epi32(v, _mm256_min_epi32(r, _mm256_min_epi32(g, b)));
  const __m256i half = _mm256_set1_epi32(1 << (kShift - 1));
  const __m256i s = _mm256_srai_epi32(
      _mm256_add_epi32(
          _mm256_mullo_epi32(diff, _mm256_i32gather_epi32(kTables.saturation.data(), v, 4)), half),
      kShift);
  const __m256i v_is_r = _mm256_cmpeq_epi32(v, r), v_is_g = _mm256_cmpeq_epi32(v, g);
  const __m256i hue_if_b = _mm256_add_epi32(_mm256_sub_epi32(r, g), _mm256_slli_epi32(diff, 2));
  const __m256i hue_if_g = _mm256_add_epi32(_mm256_sub_epi32(b, r), _mm256_slli_epi32(diff, 1));
  __m256i h = _mm256_blendv_epi8(_mm256_blendv_epi8(hue_if_b, hue_if_g, v_is_g),
                                 _mm256_sub_epi32(g, b), v_is_r);
  h = _mm256_srai_epi32(
      _mm256_add_epi32(_mm256_mullo_epi32(h, _mm256_i32gather_epi32(kTables.hue.data(), diff, 4)),
                       half),
      kShift);
  h = _mm256_add_epi32(
      h, _mm256_and_si256(_mm256_cmpgt_epi32(_mm256_setzero_si256(), h), _mm256_set1_epi32(180)));

  // The tables, then the sector formula
  const __m256 hue = _mm256_i32gather_ps(t.hue.data(), h, 4);
  const __m256 sat = _mm256_i32gather_ps(t.saturation.data(), s, 4);
  const __m256 val = _mm256_i32gather_ps(t.value.data(), v, 4);
  const __m256 sector = _mm256_floor_ps(hue), fraction = _mm256_sub_ps(hue, sector);
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 values[4] = {
      val, _mm256_mul_ps(val, _mm256_sub_ps(one, sat)),
      _mm256_mul_ps(val, _mm256_fnmadd_ps(sat, fraction, one)),
      _mm256_mul_ps(val, _mm256_sub_ps(one, _mm256_mul_ps(sat, _mm256_sub_ps(one, fraction))))};
  const __m256i sector_index = _mm256_cvttps_epi32(sector);
  auto output = [&](int c) {  // c: 0 = b, 1 = g, 2 = r, as kSectorValue's columns
    const __m256i which = _mm256_permutevar8x32_epi32(
        _mm256_setr_epi32(kSectorValue[0][c], kSectorValue[1][c], kSectorValue[2][c],
                          kSectorValue[3][c], kSectorValue[4][c], kSectorValue[5][c], 0, 0),
        sector_index);
    __m256 x = values[0];
    for (int k = 1; k < 4; ++k)
      x = _mm256_blendv_ps(x, values[k],
                           _mm256_castsi256_ps(_mm256_cmpeq_epi32(which, _mm256_set1_epi32(k))));
    const __m256i rounded = _mm256_cvtps_epi32(_mm256_round_ps(
        _mm256_mul_ps(x, _mm256_set1_ps(255.0f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    return _mm256_max_epi32(_mm256_min_epi32(rounded, _mm256_set1_epi32(255)),
                            _mm256_setzero_si256());
  };
  const __m256i rgb = _mm256_or_si256(output(2), _mm256_or_si256(_mm256_slli_epi32(output(1), 8),
                                                                 _mm256_slli_epi32(output(0), 16)));
  store_8_pixels(rgb, p);
}
#endif

}  // namespace

HsvJitter draw_hsv_jitter(const AugmentHyp& hyp, SampleRng& rng) {
  if (hyp.hsv_h == 0 && hyp.hsv_s == 0 && hyp.hsv_v == 0) return {};
  HsvJitter jitter;
  jitter.on = true;
  jitter.gain_h = rng.uniform(-1, 1) * hyp.hsv_h + 1;
  jitter.gain_s = rng.uniform(-1, 1) * hyp.hsv_s + 1;
  jitter.gain_v = rng.uniform(-1, 1) * hyp.hsv_v + 1;
  return jitter;
}

void apply_hsv_jitter(Image& image, const HsvJitter& jitter) {
  if (!jitter.on) return;
  const JitterTables tables = jitter_tables(jitter.gain_h, jitter.gain_s, jitter.gain_v);
  uint8_t* p = image.pixels.data();
  const size_t bytes = image.pixels.size();
  size_t done = 0;
#if defined(__AVX2__) && defined(__FMA__)
  for (; done + 32 <= bytes; done += 24) jitter_8_pixels(tables, p + done);
#endif
  for (; done < bytes; done += 3) jitter_pixel(tables, p + done);
}

}  // namespace bareyolo::data
