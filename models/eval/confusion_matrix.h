// models/eval/confusion_matrix.h — YOLOv5's confusion matrix (val.py with plots on): which
// class each labelled object was detected as, or missed, and which detections matched no
// object. It is counted per image, so shares of a split add up (gather_shards).
//
// Rows are the predicted class, columns the true class; index nc is "background": column nc
// counts detections that matched no label (false positives), row nc labels no detection
// matched (missed). Per image, detections with conf <= 0.25 are dropped, then every (label,
// detection) pair with IoU > 0.45, whatever the classes, is a candidate; by descending IoU
// each detection keeps its best label, then each label its best detection. A matched label
// counts at (detection's class, label's class), even when the classes differ. An image
// without labels is not counted at all (YOLOv5 calls it only where there are labels).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "models/eval/metrics.h"

namespace bareyolo::models {

class ConfusionMatrix {
 public:
  static constexpr float kConfThreshold = 0.25f, kIouThreshold = 0.45f;

  ConfusionMatrix() : ConfusionMatrix(0) {}
  explicit ConfusionMatrix(int classes)
      : classes_(classes), counts_(size_t(classes + 1) * size_t(classes + 1), 0) {}

  // One image: its detections (any order) against its labels, in the same pixels.
  void add_image(std::span<const Detection> detections, std::span<const GroundTruth> labels);
  // Adds another matrix of the same classes (another rank's share).
  void merge(const ConfusionMatrix& other);

  int classes() const { return classes_; }  // without background
  int64_t at(int predicted, int truth) const {
    return counts_[size_t(predicted) * size_t(classes_ + 1) + size_t(truth)];
  }
  // Row-major (classes + 1)^2 counts, for sending between ranks and back (from_counts).
  const std::vector<int64_t>& counts() const { return counts_; }
  static ConfusionMatrix from_counts(int classes, std::span<const int64_t> counts);

 private:
  int64_t& cell(int predicted, int truth) {
    return counts_[size_t(predicted) * size_t(classes_ + 1) + size_t(truth)];
  }
  int classes_ = 0;
  std::vector<int64_t> counts_;
};

}  // namespace bareyolo::models
