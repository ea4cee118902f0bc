// kernels/cuda/decode.cu — the Detect head's inference decode on the GPU, one level per call;
// the formulas and the row order of models/decode.h:
//   cx = (2 s_x - 0.5 + gx) * stride      cy = (2 s_y - 0.5 + gy) * stride
//   w  = (2 s_w)^2 * anchor_w * stride    h  = (2 s_h)^2 * anchor_h * stride
//   objectness and class scores = s       (s = sigmoid of the field)
// One thread per head element (coalesced reads); it writes field k of its row. The products
// are rounded in the CPU's order ((2 s)^2 * anchor, then * stride).
#include <stdexcept>
#include <string>

#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/pointwise.cuh"

namespace bareyolo::cuda {

namespace {

struct Decode {
  View<const float> head;
  DecodeLevel level;
  float* rows;
  __device__ void operator()(int64_t image, int64_t i) const {
    const int64_t nx = head.shape.w, ny = head.shape.h, plane = nx * ny;
    const int channel = int(i / plane);
    const int anchor = channel / level.outputs, field = channel % level.outputs;
    const int64_t cell = i % plane, gy = cell / nx, gx = cell % nx;
    const float s = 1.0f / (1.0f + expf(-head.image(image)[i]));
    float value;
    switch (field) {
      case 0: value = (2 * s - 0.5f + float(gx)) * level.stride; break;
      case 1: value = (2 * s - 0.5f + float(gy)) * level.stride; break;
      case 2:
      case 3: value = (2 * s) * (2 * s) * level.anchors_grid[2 * anchor + field - 2] * level.stride; break;
      default: value = s;
    }
    const int64_t row = level.first_row + anchor * plane + cell;
    rows[(image * level.rows_per_image + row) * level.outputs + field] = value;
  }
};

}  // namespace

void detect_decode_level(View<const float> head, const DecodeLevel& level, float* rows) {
  if (level.anchors < 1 || level.anchors > kMaxDecodeAnchors || level.outputs < 5 ||
      head.shape.c != int64_t(level.anchors) * level.outputs ||
      level.first_row + level.anchors * head.shape.plane() > level.rows_per_image)
    throw std::invalid_argument(
        "detect_decode_level: head " + head.shape.str() + " does not hold " +
        std::to_string(level.anchors) + " anchors x " + std::to_string(level.outputs) +
        " outputs fitting rows [" + std::to_string(level.first_row) + ", " +
        std::to_string(level.rows_per_image) + ") (at most " +
        std::to_string(kMaxDecodeAnchors) + " anchors)");
  launch_pointwise(head.shape, head.device, false, Decode{head, level, rows});
}

}  // namespace bareyolo::cuda
