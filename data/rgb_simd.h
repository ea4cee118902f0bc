// data/rgb_simd.h — eight packed RGB pixels from 32-bit lanes, for the AVX2 paths of the warp
// and the HSV jitter, which compute a pixel per lane.
#pragma once

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

#include <cstdint>

namespace bareyolo::data {

// Stores the eight lanes R | G << 8 | B << 16 as 24 packed bytes at dst (and no more): 12 per
// 128-bit lane, then the two halves joined.
inline void store_8_pixels(__m256i rgb, uint8_t* dst) {
  const __m128i pack = _mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
  const __m256i packed =
      _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(rgb, _mm256_broadcastsi128_si256(pack)),
                                  _mm256_setr_epi32(0, 1, 2, 4, 5, 6, 7, 7));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm256_castsi256_si128(packed));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(dst + 16), _mm256_extracti128_si256(packed, 1));
}

}  // namespace bareyolo::data
#endif
