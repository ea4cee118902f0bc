// kernels/cpu/im2col.h — the column matrix that turns a convolution into one GEMM per image.
//
// For one image of shape (C, H, W) and a kernel (kh, kw), im2col writes the matrix
//   col[(c * kh + i) * kw + j][oh * out_w + ow] = image[c][oh * sh - ph + i][ow * sw - pw + j]
// (zero where that position falls in the padding), so that the convolution of the image is
//   Y[c_out x out_h*out_w] = W[c_out x C*kh*kw] * col.
// col2im_add is its transpose: it adds every column entry back onto the image pixel it was
// copied from, which is how the data gradient dcol = W^T * dY returns to dx.
//
// Both work on a band of output rows [oh_begin, oh_end): the column matrix of the band is the
// matrix above restricted to those output positions (col_rows x (oh_end - oh_begin) * out_w),
// which lets a convolution process a large image in bands whose columns stay in cache.
//
// Both walk the same (row, output row) segments: the output columns whose input column lies
// inside the image form one contiguous range [ow_begin, ow_end) per kernel column j, computed
// once instead of testing bounds per element. That keeps the inner loops branch-free.
#pragma once

#include <cstdint>

namespace bareyolo::cpu {

// Sizes of one convolution, per image.
struct ConvGeometry {
  int64_t channels = 0, height = 0, width = 0;  // input image
  int64_t kernel_h = 0, kernel_w = 0;
  int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
  int64_t out_h = 0, out_w = 0;

  int64_t col_rows() const { return channels * kernel_h * kernel_w; }
  int64_t col_cols() const { return out_h * out_w; }
  // A 1x1, stride-1, unpadded convolution: the image itself is the column matrix.
  bool image_is_col() const {
    return kernel_h == 1 && kernel_w == 1 && stride_h == 1 && stride_w == 1 && pad_h == 0 &&
           pad_w == 0;
  }
};

// col (col_rows x band columns, dense) = the columns of `image` (channels x height x width,
// dense) for the output rows [oh_begin, oh_end).
template <class T>
void im2col(const T* image, const ConvGeometry& g, int64_t oh_begin, int64_t oh_end, T* col);

// image += the columns of the band [oh_begin, oh_end) in col, each added onto the pixel it
// was read from.
template <class T>
void col2im_add(const T* col, const ConvGeometry& g, int64_t oh_begin, int64_t oh_end, T* image);

}  // namespace bareyolo::cpu
