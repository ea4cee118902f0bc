// kernels/cpu/conv2d_direct.cpp — the direct forward of few-input-channel convolutions; see
// conv2d_direct.h.
#include "kernels/cpu/conv2d_direct.h"

#include <immintrin.h>

#include <algorithm>

#include "kernels/cpu/gemm/gemm.h"
#include "kernels/cpu/thread_scratch.h"
#include "kernels/round_up.h"

namespace bareyolo::cpu {

namespace {

// A register tile: kChannels output channels x kVectors vectors of 8 output columns, 12
// accumulators, more than the 8 that cover the FMA's latency on both pipes; per tap it loads
// kVectors input vectors and broadcasts kChannels weights. (4 x 2 ran the stem about 10%
// slower: 8 chains leave no slack.)
constexpr int64_t kChannels = 4, kVectors = 3, kTileCols = 8 * kVectors;
constexpr int64_t kMaxInputChannels = 4;
// One depth block of the GEMM: up to here it sums all the taps in one chain, as here.
constexpr int64_t kMaxTaps = kGemmMaxDepth;

struct PhaseScratch;

// The input split by column phase: for each channel c, input row r and phase s < stride_w,
// a row of phase_len values whose element t is image[c][r][t * stride_w + s - pad_w], zero
// where that column is padding. A tap (i, j) of output column ow then reads phase j % stride_w
// at t = ow + j / stride_w: consecutive output columns read consecutive values.
template <int64_t kStride>
void split_phases(const float* image, const ConvGeometry& g, int64_t phase_len, float* phases) {
  for (int64_t cr = 0; cr < g.channels * g.height; ++cr) {
    const float* in = image + cr * g.width;
    for (int64_t s = 0; s < kStride; ++s) {
      float* out = phases + (cr * kStride + s) * phase_len;
      // t with 0 <= t * kStride + s - pad_w < width
      const int64_t begin = std::min(phase_len, (g.pad_w - s + kStride - 1) / kStride);
      const int64_t end =
          std::clamp<int64_t>((g.width + g.pad_w - s + kStride - 1) / kStride, begin, phase_len);
      std::fill(out, out + begin, 0.0f);
      for (int64_t t = begin; t < end; ++t) out[t] = in[t * kStride + s - g.pad_w];
      std::fill(out + end, out + phase_len, 0.0f);
    }
  }
}

// out[o0 .. o0 + kChannels)[oh][ow0 .. ow0 + cols) of the convolution, from the phase rows;
// tap column j reads its input row's phases at tap_offsets[j] + ow. A tap whose input row is
// padding reads `zeros` (the GEMM multiplies those taps by zero too). With a bias, it is
// added once at the end, as the GEMM path's C = 1 * bias + sum rounds.
void multiply_tile(const ConvGeometry& g, const float* phases, int64_t phase_len,
                   const float* zeros, const int64_t* tap_offsets, const float* weight,
                   const float* bias, int64_t taps, int64_t o0, int64_t oh, int64_t ow0,
                   int64_t cols, float* out) {
  // The loops over the tile are unrolled so that acc stays in registers.
  __m256 acc[kChannels][kVectors];
#pragma GCC unroll 4
  for (int64_t oc = 0; oc < kChannels; ++oc)
#pragma GCC unroll 3
    for (int64_t v = 0; v < kVectors; ++v) acc[oc][v] = _mm256_setzero_ps();
  for (int64_t c = 0; c < g.channels; ++c)
    for (int64_t i = 0; i < g.kernel_h; ++i) {
      const int64_t row = oh * g.stride_h - g.pad_h + i;
      const float* row_phases = row >= 0 && row < g.height
                                    ? phases + (c * g.height + row) * g.stride_w * phase_len
                                    : zeros;
      for (int64_t j = 0; j < g.kernel_w; ++j) {
        const float* in = row_phases + tap_offsets[j] + ow0;
        __m256 x[kVectors];
#pragma GCC unroll 3
        for (int64_t v = 0; v < kVectors; ++v) x[v] = _mm256_loadu_ps(in + 8 * v);
        const float* w = weight + o0 * taps + (c * g.kernel_h + i) * g.kernel_w + j;
#pragma GCC unroll 4
        for (int64_t oc = 0; oc < kChannels; ++oc) {
          const __m256 w_oc = _mm256_broadcast_ss(w + oc * taps);
#pragma GCC unroll 3
          for (int64_t v = 0; v < kVectors; ++v)
            acc[oc][v] = _mm256_fmadd_ps(w_oc, x[v], acc[oc][v]);
        }
      }
    }
  const int64_t hw = g.out_h * g.out_w;
#pragma GCC unroll 4
  for (int64_t oc = 0; oc < kChannels; ++oc) {
    if (bias)
#pragma GCC unroll 3
      for (int64_t v = 0; v < kVectors; ++v)
        acc[oc][v] = _mm256_add_ps(_mm256_set1_ps(bias[o0 + oc]), acc[oc][v]);
    float* dst = out + (o0 + oc) * hw + oh * g.out_w + ow0;
    if (cols == kTileCols) {
#pragma GCC unroll 3
      for (int64_t v = 0; v < kVectors; ++v) _mm256_storeu_ps(dst + 8 * v, acc[oc][v]);
      continue;
    }
    alignas(32) float tile[kTileCols];
#pragma GCC unroll 3
    for (int64_t v = 0; v < kVectors; ++v) _mm256_store_ps(tile + 8 * v, acc[oc][v]);
    std::copy(tile, tile + cols, dst);
  }
}

}  // namespace

bool direct_conv_applies(const ConvGeometry& g, int64_t c_out) {
  return g.channels <= kMaxInputChannels && g.col_rows() <= kMaxTaps &&
         (g.stride_w == 1 || g.stride_w == 2) && c_out % kChannels == 0;
}

void direct_conv_forward(const float* image, const ConvGeometry& g, const float* weight,
                         const float* bias, int64_t c_out, float* out) {
  // Long enough for the last tile's widest tap: t up to round_up(out_w) - 1 + (kw - 1) / s.
  const int64_t phase_len = round_up(g.out_w, kTileCols) + (g.kernel_w - 1) / g.stride_w;
  const int64_t row_values = g.stride_w * phase_len;  // one input row's phases
  const int64_t phase_values = g.channels * g.height * row_values;
  float* phases = thread_scratch<float, PhaseScratch>(phase_values + row_values);
  float* zeros = phases + phase_values;
  std::fill(zeros, zeros + row_values, 0.0f);
  int64_t tap_offsets[kMaxTaps];
  for (int64_t j = 0; j < g.kernel_w; ++j)
    tap_offsets[j] = j % g.stride_w * phase_len + j / g.stride_w;
  if (g.stride_w == 1)
    split_phases<1>(image, g, phase_len, phases);
  else
    split_phases<2>(image, g, phase_len, phases);
  const int64_t taps = g.col_rows();
  // The channel groups of one column tile one after another: they read the same input spans.
  for (int64_t oh = 0; oh < g.out_h; ++oh)
    for (int64_t ow0 = 0; ow0 < g.out_w; ow0 += kTileCols)
      for (int64_t o0 = 0; o0 < c_out; o0 += kChannels)
        multiply_tile(g, phases, phase_len, zeros, tap_offsets, weight, bias, taps, o0, oh, ow0,
                      std::min(kTileCols, g.out_w - ow0), out);
}

}  // namespace bareyolo::cpu
