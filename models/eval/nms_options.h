// models/eval/nms_options.h — the options of YOLOv5's non-maximum suppression, shared by the
// host implementation (models/eval/nms.h, which documents the steps) and the CUDA one
// (models/eval/nms.cu), so that both read one struct and cannot drift apart.
#pragma once

#include <string>
#include <vector>

#include "kernels/op_sequence.h"

namespace bareyolo {

struct NmsOptions {
  float conf_threshold = 0.25f;
  float iou_threshold = 0.45f;
  int max_det = 300;
  bool multi_label = false;      // validation: true
  bool agnostic = false;         // one suppression across classes (single_cls)
  std::vector<int> classes;      // keep only these classes; empty = all
  int max_nms = 30000;           // rows that enter the suppression at most
  float class_offset = 7680.0f;  // max_wh: larger than any image side
};

// What the op sequence (kernels/op_sequence.h) records of the options: every setting.
inline std::string describe_argument(const NmsOptions& o) {
  using op_sequence::describe;
  return "nms " + describe(o.conf_threshold) + " " + describe(o.iou_threshold) + " " +
         describe(o.max_det) + " " + describe(o.multi_label) + " " + describe(o.agnostic) + " " +
         describe(o.classes) + " " + describe(o.max_nms) + " " + describe(o.class_offset);
}

}  // namespace bareyolo
