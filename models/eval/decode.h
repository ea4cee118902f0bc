// models/eval/decode.h — the Detect head's inference decode: raw head outputs to boxes in pixels.
//
// For every level, anchor a and cell (gy, gx), with s = sigmoid of each field:
//   cx = (2 s_x - 0.5 + gx) * stride      cy = (2 s_y - 0.5 + gy) * stride
//   w  = (2 s_w)^2 * anchor_w * stride    h  = (2 s_h)^2 * anchor_h * stride
//   objectness and class scores = s
// Rows are ordered level by level (P3, P4, P5), then anchor, y, x — YOLOv5's eval output.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/tensor.h"
#include "kernels/activation.h"
#include "models/yolo/yolo_model.h"

namespace bareyolo::models {

// One level of the Detect head as the decode reads it: the anchors' (w, h) in grid units, the
// level's stride, and where its rows go among an image's rows.
constexpr int kMaxDecodeAnchors = kMaxAnchorsPerLevel;  // model_config.h
struct DecodeLevel {
  int anchors = 3, outputs = 85;
  float stride = 8;
  float anchors_grid[2 * kMaxDecodeAnchors] = {};
  int64_t first_row = 0, rows_per_image = 0;
};

// Field `field` of the row of anchor `anchor` at cell (gx, gy) of `level`, from the head's raw
// value: the formulas above, written once for the host (decode_level) and the GPU (decode.cu).
BAREYOLO_HOST_DEVICE inline float decoded_field(const DecodeLevel& level, int anchor, int field,
                                                float raw, int64_t gx, int64_t gy) {
  const float s = sigmoid(raw);
  switch (field) {
    case 0:
      return (2 * s - 0.5f + float(gx)) * level.stride;
    case 1:
      return (2 * s - 0.5f + float(gy)) * level.stride;
    case 2:
    case 3:
      return (2 * s) * (2 * s) * level.anchors_grid[2 * anchor + field - 2] * level.stride;
    default:
      return s;
  }
}

// The op: one level's decode into `rows` ([images][rows_per_image][outputs] floats, a flat view
// on the head's device), starting at row `first_row` of each image. `head` is (images, anchors
// * outputs, ny, nx). The host runs the formulas above; a GPU the kernel of decode.cu.
void decode_level(View<const float> head, const DecodeLevel& level, View<float> rows);

// Rows per image: anchors x cells, summed over the levels.
int64_t decoded_rows_per_image(const std::vector<Tensor>& head, const DetectionModel& model);

// [images][rows][5 + nc] floats: (cx, cy, w, h, objectness, class scores) per row, written into
// `rows` (dense, images * decoded_rows_per_image * (5 + nc) values on the head's device) by
// decode_level of every level ...
void decode_predictions(const std::vector<Tensor>& head, const DetectionModel& model,
                        View<float> rows);
// ... or returned as one flat (1, 1, 1, n) tensor on the head's device.
Tensor decode_predictions(const std::vector<Tensor>& head, const DetectionModel& model);

}  // namespace bareyolo::models
