// kernels/cpu/im2col.cpp — im2col and its transpose col2im_add; see im2col.h for the layout.
#include "kernels/cpu/im2col.h"

#include <algorithm>

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

template <class Visit>
void for_each_segment(const ConvGeometry& g, Visit visit) {
  for (int64_t c = 0; c < g.channels; ++c)
    for (int64_t i = 0; i < g.kernel_h; ++i) {
      InsideRange rows = inside_outputs(g.out_h, g.height, i, g.stride_h, g.pad_h);
      for (int64_t j = 0; j < g.kernel_w; ++j) {
        InsideRange cols = inside_outputs(g.out_w, g.width, j, g.stride_w, g.pad_w);
        int64_t col_row = (c * g.kernel_h + i) * g.kernel_w + j;
        for (int64_t oh = 0; oh < g.out_h; ++oh) {
          Segment s{(col_row * g.out_h + oh) * g.out_w, 0, 0, 0};
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

}  // namespace

template <class T>
void im2col(const T* image, const ConvGeometry& g, T* col) {
  const int64_t stride_w = g.stride_w, out_w = g.out_w;
  for_each_segment(g, [&](const Segment& s) {
    T* out = col + s.col_offset;
    const T* in = image + s.image_offset;
    std::fill(out, out + s.ow_begin, T(0));
    for (int64_t ow = s.ow_begin; ow < s.ow_end; ++ow) out[ow] = in[(ow - s.ow_begin) * stride_w];
    std::fill(out + s.ow_end, out + out_w, T(0));
  });
}

template <class T>
void col2im_add(const T* col, const ConvGeometry& g, T* image) {
  const int64_t stride_w = g.stride_w;
  for_each_segment(g, [&](const Segment& s) {
    const T* in = col + s.col_offset;
    T* out = image + s.image_offset;
    for (int64_t ow = s.ow_begin; ow < s.ow_end; ++ow) out[(ow - s.ow_begin) * stride_w] += in[ow];
  });
}

template void im2col<float>(const float*, const ConvGeometry&, float*);
template void im2col<double>(const double*, const ConvGeometry&, double*);
template void col2im_add<float>(const float*, const ConvGeometry&, float*);
template void col2im_add<double>(const double*, const ConvGeometry&, double*);

}  // namespace bareyolo::cpu
