// kernels/cpu/im2col.cpp — im2col and its transpose col2im_add; see im2col.h for the layout.
#include "kernels/cpu/im2col.h"

#include <algorithm>
#include <type_traits>

#ifdef __AVX2__
#include <immintrin.h>
#endif

namespace bareyolo::cpu {

namespace {

// ceil(numerator / stride) for a non-negative result, 0 when numerator <= 0.
int64_t ceil_div_or_zero(int64_t numerator, int64_t stride) {
  return numerator <= 0 ? 0 : (numerator + stride - 1) / stride;
}

// The output positions o in [begin, end) whose input position o * stride - pad + offset
// lies inside [0, in_size); offset is the kernel tap (0 .. kernel - 1).
struct InsideRange {
  int64_t begin, end;
};
InsideRange inside_outputs(int64_t out_size, int64_t in_size, int64_t offset, int64_t stride,
                           int64_t pad) {
  int64_t begin = std::min(out_size, ceil_div_or_zero(pad - offset, stride));
  int64_t end = std::min(out_size, ceil_div_or_zero(in_size + pad - offset, stride));
  return {begin, std::max(begin, end)};
}

// One output row of one column-matrix row: col[col_offset + ow] for ow in [0, out_w) reads
// image[image_offset + (ow - ow_begin) * stride_w] for ow in [ow_begin, ow_end) and padding
// elsewhere (everywhere when the input row is outside the image: ow_begin == ow_end).
struct Segment {
  int64_t col_offset, image_offset, ow_begin, ow_end;
};

// Visits the segments of the output rows [oh_begin, oh_end), laid out as that band's matrix.
template <class Visit>
void for_each_segment(const ConvGeometry& g, int64_t oh_begin, int64_t oh_end, Visit visit) {
  const int64_t band_rows = oh_end - oh_begin;
  for (int64_t c = 0; c < g.channels; ++c)
    for (int64_t i = 0; i < g.kernel_h; ++i) {
      InsideRange rows = inside_outputs(g.out_h, g.height, i, g.stride_h, g.pad_h);
      for (int64_t j = 0; j < g.kernel_w; ++j) {
        InsideRange cols = inside_outputs(g.out_w, g.width, j, g.stride_w, g.pad_w);
        int64_t col_row = (c * g.kernel_h + i) * g.kernel_w + j;
        for (int64_t oh = oh_begin; oh < oh_end; ++oh) {
          Segment s{(col_row * band_rows + oh - oh_begin) * g.out_w, 0, 0, 0};
          if (oh >= rows.begin && oh < rows.end && cols.begin < cols.end) {
            int64_t ih = oh * g.stride_h - g.pad_h + i;
            int64_t iw = cols.begin * g.stride_w - g.pad_w + j;
            s = {s.col_offset, (c * g.height + ih) * g.width + iw, cols.begin, cols.end};
          }
          visit(s);
        }
      }
    }
}

// Calls body(std::integral_constant<int64_t, stride>) for the strides YOLOv5 uses (1 and 2)
// and body(stride) otherwise: with the stride a constant the compiler turns the segment loops
// into plain vector copies (stride 1) or shuffled loads (stride 2) instead of scalar gathers.
template <class Body>
void with_stride(int64_t stride, Body body) {
  if (stride == 1)
    body(std::integral_constant<int64_t, 1>{});
  else if (stride == 2)
    body(std::integral_constant<int64_t, 2>{});
  else
    body(stride);
}

// out[k * stride] += in[k] for k < count: col2im_add's inner loop.
template <class T, class Stride>
void add_strided(const T* __restrict in, int64_t count, Stride stride, T* __restrict out) {
  for (int64_t k = 0; k < count; ++k) out[k * stride] += in[k];
}

#ifdef __AVX2__
// Stride 2 in float (the downsampling convolutions' backward data), otherwise scalar (AVX2
// has no scatter): eight values of `in` spread over the even lanes of two vectors, -0.0 in the odd
// lanes (x + -0.0 is x bit for bit, -0.0 included), added onto 16 consecutive floats of out.
// A vector step stops short of the last even element, so it never touches a float past it
// (that could belong to the next image, another thread's).
void add_strided(const float* __restrict in, int64_t count, std::integral_constant<int64_t, 2>,
                 float* __restrict out) {
  const __m256 minus_zero = _mm256_set1_ps(-0.0f);
  int64_t k = 0;
  for (; k + 9 <= count; k += 8) {
    const __m256 values = _mm256_loadu_ps(in + k);
    const __m256 low = _mm256_unpacklo_ps(values, minus_zero);   // k, k+1 | k+4, k+5
    const __m256 high = _mm256_unpackhi_ps(values, minus_zero);  // k+2, k+3 | k+6, k+7
    float* target = out + 2 * k;
    _mm256_storeu_ps(
        target, _mm256_add_ps(_mm256_loadu_ps(target), _mm256_permute2f128_ps(low, high, 0x20)));
    _mm256_storeu_ps(target + 8, _mm256_add_ps(_mm256_loadu_ps(target + 8),
                                               _mm256_permute2f128_ps(low, high, 0x31)));
  }
  for (; k < count; ++k) out[2 * k] += in[k];
}
#endif

}  // namespace

template <class T>
void im2col(const T* image, const ConvGeometry& g, int64_t oh_begin, int64_t oh_end, T* col) {
  const int64_t out_w = g.out_w;
  with_stride(g.stride_w, [&](auto stride_w) {
    for_each_segment(g, oh_begin, oh_end, [&](const Segment& s) {
      T* out = col + s.col_offset;
      const T* in = image + s.image_offset;
      std::fill(out, out + s.ow_begin, T(0));
      T* inside = out + s.ow_begin;
      for (int64_t k = 0; k < s.ow_end - s.ow_begin; ++k) inside[k] = in[k * stride_w];
      std::fill(out + s.ow_end, out + out_w, T(0));
    });
  });
}

template <class T>
void col2im_add(const T* col, const ConvGeometry& g, int64_t oh_begin, int64_t oh_end, T* image) {
  with_stride(g.stride_w, [&](auto stride_w) {
    for_each_segment(g, oh_begin, oh_end, [&](const Segment& s) {
      add_strided(col + s.col_offset + s.ow_begin, s.ow_end - s.ow_begin, stride_w,
                  image + s.image_offset);
    });
  });
}

#define BAREYOLO_INSTANTIATE_IM2COL(T)                                          \
  template void im2col<T>(const T*, const ConvGeometry&, int64_t, int64_t, T*); \
  template void col2im_add<T>(const T*, const ConvGeometry&, int64_t, int64_t, T*);
BAREYOLO_INSTANTIATE_IM2COL(float)
BAREYOLO_INSTANTIATE_IM2COL(double)

}  // namespace bareyolo::cpu
