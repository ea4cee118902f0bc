// models/eval/metrics.h — detection metrics as YOLOv5's validation computes them (val.py,
// utils/metrics.py): matching detections to labels at ten IoU thresholds, then precision, recall
// and AP per class, then their means (mP, mR, mAP@0.5, mAP@0.5:0.95).
//
// The pipeline:
//   per image   match_detections(detections, labels) -> correct[detection][threshold]
//   collected   DetectionStats: four plain vectors, one entry per detection or label, so
//               ranks can concatenate theirs and the validator can feed images in any batches
//   at the end  ap_per_class(stats) -> DetectionMetrics
//
// Two YOLOv5 behaviours are kept on purpose, because published numbers depend on them:
//   * a label is credited to the lowest-index (highest-confidence) detection among those
//     whose best label it is, not to the one with the highest IoU;
//   * AP integrates a 101-point *linear* interpolation of the precision envelope with the
//     trapezoid rule, with sentinels (recall 0, precision 1) and (recall 1, precision 0). The
//     last sentinel adds a linear tail, so a perfect detector scores 0.995, not 1.0 (COCO's
//     step-wise 101-point mean would give 1.0).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "models/eval/boxes.h"
#include "models/eval/nms.h"

namespace bareyolo::models {

constexpr int kIouThresholdCount = 10;
// The points of the curves (MetricCurves): 0, 1/999, ..., 1 in confidence or recall.
constexpr int kCurvePoints = 1000;
std::vector<double> curve_grid();
// 0.50, 0.55, ..., 0.95 as float32 (torch.linspace(0.5, 0.95, 10)).
std::array<float, kIouThresholdCount> iou_thresholds();

// A labelled object, what the detections of its image are matched against.
struct GroundTruth {
  int class_id = 0;
  BoxXYXY box;  // same pixel space as the detections
};

// correct[d * kIouThresholdCount + t] = 1 when detection d is a true positive at threshold
// t: it overlaps a label of its class with IoU >= threshold, and the matching below gives
// that label to it. At each threshold, among the qualifying (label, detection) pairs:
//   1. each detection keeps its highest-IoU pair (ties: the later pair in label-major order,
//      which is what YOLOv5's reversed numpy argsort yields for small inputs);
//   2. each label then keeps the pair of the lowest-index detection left.
// `detections` are in NMS order (conf descending), so lowest index = most confident.
std::vector<uint8_t> match_detections(std::span<const Detection> detections,
                                      std::span<const GroundTruth> labels);

// The statistics validation collects, kept as plain vectors: one entry per detection in
// correct (kIouThresholdCount flags each), conf and pred_class; one per label in
// target_class.
struct DetectionStats {
  std::vector<uint8_t> correct;
  std::vector<float> conf;
  std::vector<int> pred_class;
  std::vector<int> target_class;
  int64_t images_seen = 0;

  // One image: matches its detections (NMS order) against its labels and appends.
  void add_image(std::span<const Detection> detections, std::span<const GroundTruth> labels);
  // Appends another collection (another rank's, another batch's).
  void merge(const DetectionStats& other);
  int64_t detection_count() const { return static_cast<int64_t>(conf.size()); }
};

struct ClassMetrics {
  int class_id = 0;
  int64_t labels = 0;                        // instances in the targets
  double precision = 0, recall = 0, f1 = 0;  // at the operating point (max mean F1)
  double ap50 = 0, ap50_95 = 0;
};

// The curves behind the numbers at IoU 0.5, YOLOv5's P/R/F1/PR_curve.png: one row per scored
// class (DetectionMetrics::classes' order), each value at the points of curve_grid().
struct MetricCurves {
  // against the confidence threshold: a detection counts when its conf is above it
  std::vector<std::vector<double>> precision, recall, f1;
  // against recall: the precision envelope AP integrates
  std::vector<std::vector<double>> precision_at_recall;
};

struct DetectionMetrics {
  double mean_precision = 0, mean_recall = 0;
  double map50 = 0, map50_95 = 0;
  std::vector<ClassMetrics> classes;  // classes that occur in the labels, ascending
  MetricCurves curves;

  // AP@0.5:0.95 of each of num_classes classes; a class absent from the labels gets the
  // overall map50_95 (YOLOv5's `maps`, used for image weights).
  std::vector<double> ap50_95_per_class(int num_classes) const;
};

// AP of one precision/recall curve (recall ascending, one point per detection).
double compute_ap(std::span<const double> recall, std::span<const double> precision);

// All metrics from collected statistics. All zero (and no classes) when there are no
// detections or none is a true positive at any threshold.
DetectionMetrics ap_per_class(const DetectionStats& stats);

}  // namespace bareyolo::models
