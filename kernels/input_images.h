// kernels/input_images.h — the element formulas of the input-image ops (kernels/ops.h,
// hwc_bytes_to_unit_float and resize_bilinear), shared by the CPU implementation and the CUDA
// kernels so that both compute the same thing the same way.
//
// Bilinear resizing as PyTorch's F.interpolate(mode='bilinear', align_corners=False) computes it
// for float tensors: align_corners=False lines up the pixel centres of the two grids rather than
// their corner pixels, so output column x samples the input at
//   source = (x + 0.5) * in_width / out_width - 0.5,
// clamped at 0 (the first input pixel repeats before its centre), between input columns
// floor(source) and the next one (the last one repeats past the end), weighted 1 - fraction and
// fraction; rows the same, and the two passes' weights multiply. The scale and the source
// coordinate are floats, as PyTorch computes them.
#pragma once

#include "kernels/view.h"  // defines: BAREYOLO_HOST_DEVICE

namespace bareyolo {

// A byte's value as a model input in [0, 1]: a product by the float 1/255 (YOLOv5 divides by
// 255; this is what the batch has always held, so CPU runs keep their bits).
inline constexpr float kUnitPerByte = 1.0f / 255.0f;

// Where output coordinate `out_index` reads along one axis of `in_size` pixels resized to
// `out_size`: two input coordinates and their weights.
struct BilinearTap {
  int first = 0, second = 0;
  float first_weight = 1, second_weight = 0;
};

BAREYOLO_HOST_DEVICE inline BilinearTap bilinear_tap(int out_index, int in_size, int out_size) {
  const float scale = float(in_size) / float(out_size);
  const float unclamped = scale * (float(out_index) + 0.5f) - 0.5f;
  const float source = unclamped < 0.0f ? 0.0f : unclamped;
  BilinearTap tap;
  tap.first = int(source);  // floor: source >= 0
  tap.second = tap.first + (tap.first < in_size - 1 ? 1 : 0);
  tap.second_weight = source - float(tap.first);  // exact, in [0, 1)
  tap.first_weight = 1.0f - tap.second_weight;
  return tap;
}

// The output pixel at (row, column) of a plane: `top` and `bottom` are its input rows row.first
// and row.second.
BAREYOLO_HOST_DEVICE inline float bilinear_sample(const float* top, const float* bottom,
                                                  const BilinearTap& row,
                                                  const BilinearTap& column) {
  return row.first_weight *
             (column.first_weight * top[column.first] + column.second_weight * top[column.second]) +
         row.second_weight * (column.first_weight * bottom[column.first] +
                              column.second_weight * bottom[column.second]);
}

}  // namespace bareyolo
