// models/loss/gradient_report.h — one training step's numbers, in the layout the golden check
// against PyTorch YOLOv5 reads (`bareyolo grads`, tools/check_against_yolov5.py):
//   loss [3]          box, obj, cls as YOLOv5 reports them (after the gains)
//   loss_total [1]    (box + obj + cls) * batch, the value YOLOv5's loss returns
//   p3, p4, p5        raw head outputs in YOLOv5's layout [batch, anchors, ny, nx, 5 + nc]
//   grad.<name>       d loss_total / d parameter, for every trainable parameter
// all float32. The model runs in training mode (BN batch statistics; running statistics are
// updated), with hyp's loss gains scaled as train.py scales them for the model's nc and the
// batch's image width.
#pragma once

#include <vector>

#include "engine/safetensors.h"
#include "models/loss/loss.h"
#include "models/yolo/yolo_model.h"

namespace bareyolo::models {

SafetensorsFile gradient_report(DetectionModel& model, const Tensor& images,
                                const std::vector<LabelRow>& labels, const LossHyp& hyp);

// YOLOv5's collate rows [n, 6] (image, class, cx, cy, w, h) read from a safetensors record,
// each checked against a batch of `images` images and `nc` classes (check_label_rows); an
// error names `source`, the record and the row.
std::vector<LabelRow> label_rows(const SafetensorsFile& file, const std::string& name,
                                 const std::string& source, int images, int nc);

}  // namespace bareyolo::models
