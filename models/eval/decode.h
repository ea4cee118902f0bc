// models/eval/decode.h — the Detect head's inference decode: raw head outputs to boxes in pixels.
//
// For every level, anchor a and cell (gy, gx), with s = sigmoid of each field:
//   cx = (2 s_x - 0.5 + gx) * stride      cy = (2 s_y - 0.5 + gy) * stride
//   w  = (2 s_w)^2 * anchor_w * stride    h  = (2 s_h)^2 * anchor_h * stride
//   objectness and class scores = s
// Rows are ordered level by level (P3, P4, P5), then anchor, y, x — YOLOv5's eval output.
#pragma once

#include <vector>

#include "engine/tensor.h"
#include "models/yolo/yolo_model.h"

namespace bareyolo::models {

// Rows per image: anchors x cells, summed over the levels.
int64_t decoded_rows_per_image(const std::vector<Tensor>& head, const DetectionModel& model);

// [images][rows][5 + nc] floats: (cx, cy, w, h, objectness, class scores) per row.
std::vector<float> decode_predictions(const std::vector<Tensor>& head, const DetectionModel& model);

#ifdef BAREYOLO_WITH_CUDA
// The same rows, decoded on the GPU that holds `head` into `rows` (device memory there, room
// for images x decoded_rows_per_image x (5 + nc) floats): one detect_decode_level per level.
void decode_predictions_on_device(const std::vector<Tensor>& head, const DetectionModel& model,
                                  float* rows);
#endif

}  // namespace bareyolo::models
