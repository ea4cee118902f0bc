// models/head_loss.h — YOLOv5's loss of a DetectionModel's head outputs for a batch's labels,
// with the gradient to feed to DetectionModel::backward: the glue between the model (grid
// sizes and anchors), build_targets and yolo_loss, shared by training and `grads`.
#pragma once

#include <vector>

#include "models/loss.h"
#include "models/yolo_model.h"

namespace bareyolo::models {

struct HeadLoss {
  LossValues values;
  std::vector<Tensor> gradients;  // d total / d head output, one per level
};

// `head` holds the model's latest training-mode outputs for `images` images; the labels are
// normalised to the network input. With local counts: YOLOv5's single-process loss.
HeadLoss head_loss(const DetectionModel& model, const std::vector<Tensor>& head,
                   const std::vector<LabelRow>& labels, const LossOptions& options, int images);

}  // namespace bareyolo::models
