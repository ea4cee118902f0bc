// models/decode.h — the Detect head's inference decode: raw head outputs to boxes in pixels.
//
// For every level, anchor a and cell (gy, gx), with s = sigmoid of each field:
//   cx = (2 s_x - 0.5 + gx) * stride      cy = (2 s_y - 0.5 + gy) * stride
//   w  = (2 s_w)^2 * anchor_w * stride    h  = (2 s_h)^2 * anchor_h * stride
//   objectness and class scores = s
// Rows are ordered level by level (P3, P4, P5), then anchor, y, x — YOLOv5's eval output.
#pragma once

#include <vector>

#include "engine/tensor.h"
#include "models/yolo_model.h"

namespace bareyolo::models {

// [images][rows][5 + nc] floats: (cx, cy, w, h, objectness, class scores) per row.
std::vector<float> decode_predictions(const std::vector<Tensor>& head, const DetectionModel& model);

}  // namespace bareyolo::models
