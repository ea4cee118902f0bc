// models/export/onnx_export.h — a detection model as an ONNX inference graph.
//
// The graph is the model in eval mode followed by the Detect head's decode, so that its one
// output is YOLOv5's inference output and YOLOv5's non_max_suppression reads it unchanged:
//
//   input  `images`  float [batch, 3, imgsz, imgsz], RGB in 0..1 (the letterboxed image / 255)
//   output `output0` float [batch, anchors x cells, 5 + nc]: per row centre x, centre y, width,
//          height in input pixels, then objectness and the nc class probabilities, each after
//          its sigmoid (objectness is not multiplied into the classes: NMS does that); rows
//          level by level (P3, P4, P5), then anchor, y, x — models/eval/decode.h's rows.
//
// Each BatchNorm is folded into its convolution (conv.weight scaled, conv.bias added), as
// YOLOv5 fuses its model before export; initializers carry YOLOv5's state_dict names
// (model.0.conv.weight, ...). The model's metadata_props hold what YOLOv5's detect.py reads
// back from an ONNX file, written as YOLOv5 writes them: `stride`, the largest stride as an
// integer ("32"), and `names`, a Python dict literal ("{0: 'person', 1: 'bicycle'}").
// The nodes stay within what OpenCV's DNN module (4.6, Debian 12) imports at opset 12.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/yolo/model_config.h"
#include "models/yolo/yolo_model.h"

namespace bareyolo::models {

// The opsets the graph's nodes are written for: 12, the default, is YOLOv5's and the newest
// OpenCV 4.6 reads (Split takes its sizes as an input from 13 on, which it does not); Debian's
// ONNX 1.12 (the library that writes and checks the file) knows 17 at most.
constexpr int kMinOnnxOpset = 12, kDefaultOnnxOpset = 12, kMaxOnnxOpset = 17;

struct OnnxExportOptions {
  int imgsz = 640;  // a multiple of the model's largest stride
  int opset = kDefaultOnnxOpset;
  bool dynamic_batch = false;  // false: batch 1
  // The class names for the `names` metadata; empty: YOLOv5's defaults, class0, class1, ...
  std::vector<std::string> names;
};

// `names` as Python writes a dict of them, {0: 'a', 1: "b's"} (YOLOv5's `names` metadata).
std::string python_names_dict(const std::vector<std::string>& names);

struct OnnxExportSummary {
  std::vector<int64_t> input_dims, output_dims;  // -1 = the dynamic batch
  int64_t nodes = 0, bytes = 0;
};

// Builds the graph of `model` (built from `config`, holding its weights), checks it with
// ONNX's checker and writes it to `out` atomically. Throws std::invalid_argument for options it
// cannot honour, naming the value and what to give instead.
OnnxExportSummary export_onnx(const ModelConfig& config, DetectionModel& model,
                              const OnnxExportOptions& options, const std::string& out);

}  // namespace bareyolo::models
