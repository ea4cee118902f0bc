// models/eval/metrics.cpp — detection matching, AP and the P/R/F1 operating point; see
// metrics.h. The numerical helpers mirror the numpy functions YOLOv5 calls (linspace,
// interp, a box-filter convolution) so the curves are evaluated at the same points with the
// same rules; sums are sequential, so means can differ from numpy's pairwise sums in the
// last bits.
#include "models/eval/metrics.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <stdexcept>
#include <string>

namespace bareyolo::models {

namespace {

constexpr double kEps = 1e-16;  // ap_per_class's guard against 0/0
constexpr int kApPoints = 101;  // the recall grid AP is integrated on
constexpr double kF1SmoothFraction = 0.1;

// numpy.linspace: start + i * step, with the last point exactly `stop`.
std::vector<double> linspace(double start, double stop, int count) {
  std::vector<double> points(static_cast<size_t>(count));
  const double step = (stop - start) / (count - 1);
  for (int i = 0; i < count; ++i) points[static_cast<size_t>(i)] = i * step + start;
  points.back() = stop;
  return points;
}

// numpy.interp for one x: xp ascending (repeats allowed: at x equal to a repeated value the
// last of them wins), `left` below xp's range, `right` above it.
double interp(double x, std::span<const double> xp, std::span<const double> fp, double left,
              double right) {
  if (x < xp.front()) return left;
  if (x > xp.back()) return right;
  const size_t j = static_cast<size_t>(std::upper_bound(xp.begin(), xp.end(), x) - xp.begin()) - 1;
  if (j + 1 == xp.size()) return fp[j];
  const double slope = (fp[j + 1] - fp[j]) / (xp[j + 1] - xp[j]);
  return slope * (x - xp[j]) + fp[j];
}

// YOLOv5's smooth(): a box filter of odd length round(2 * fraction * n) / 2 + 1 over y
// padded at both ends with copies of its end values, giving n outputs.
std::vector<double> box_filter(const std::vector<double>& y, double fraction) {
  const int length = static_cast<int>(std::nearbyint(y.size() * fraction * 2)) / 2 + 1;
  const int half = length / 2;
  std::vector<double> padded(static_cast<size_t>(half), y.front());
  padded.insert(padded.end(), y.begin(), y.end());
  padded.insert(padded.end(), static_cast<size_t>(half), y.back());
  const double weight = 1.0 / length;
  std::vector<double> smoothed(y.size(), 0.0);
  for (size_t i = 0; i < y.size(); ++i)
    for (int k = 0; k < length; ++k) smoothed[i] += padded[i + static_cast<size_t>(k)] * weight;
  return smoothed;
}

double mean(std::span<const double> values) {
  return values.empty() ? 0.0
                        : std::accumulate(values.begin(), values.end(), 0.0) /
                              static_cast<double>(values.size());
}

// A precision/recall curve with sentinels (recall 0, precision 1) and (recall 1, precision 0),
// each precision raised to the best precision at that recall or beyond: what AP integrates
// and the PR curve shows.
std::pair<std::vector<double>, std::vector<double>> precision_envelope(
    std::span<const double> recall, std::span<const double> precision) {
  std::vector<double> envelope_recall = {0.0};
  envelope_recall.insert(envelope_recall.end(), recall.begin(), recall.end());
  envelope_recall.push_back(1.0);
  std::vector<double> envelope_precision = {1.0};
  envelope_precision.insert(envelope_precision.end(), precision.begin(), precision.end());
  envelope_precision.push_back(0.0);
  for (size_t k = envelope_precision.size() - 1; k-- > 0;)
    envelope_precision[k] = std::max(envelope_precision[k], envelope_precision[k + 1]);
  return {envelope_recall, envelope_precision};
}

// One class's precision and recall after each of its detections (conf descending), at one
// IoU threshold.
struct PrecisionRecall {
  std::vector<double> precision, recall;
};
PrecisionRecall cumulative_precision_recall(const DetectionStats& stats,
                                            std::span<const size_t> detections, int threshold,
                                            int64_t label_count) {
  PrecisionRecall curve;
  double true_positives = 0;
  for (size_t k = 0; k < detections.size(); ++k) {
    true_positives += stats.correct[detections[k] * kIouThresholdCount + threshold];
    curve.recall.push_back(true_positives / (static_cast<double>(label_count) + kEps));
    curve.precision.push_back(true_positives / static_cast<double>(k + 1));
  }
  return curve;
}

// Per class: AP at every threshold, and the P and R curves (IoU 0.5) on the conf grid.
struct ClassCurves {
  ClassMetrics metrics;
  std::vector<double> precision_curve, recall_curve;  // kCurvePoints each
  std::vector<double> precision_at_recall;            // the PR curve on the recall grid
};
ClassCurves evaluate_class(const DetectionStats& stats, std::span<const size_t> detections,
                           int class_id, int64_t label_count, const std::vector<double>& grid) {
  ClassCurves result{{class_id, label_count},
                     std::vector<double>(grid.size(), 0.0),
                     std::vector<double>(grid.size(), 0.0),
                     std::vector<double>(grid.size(), 0.0)};
  if (detections.empty()) return result;

  // interp needs ascending x: the curves are functions of -conf.
  std::vector<double> negative_conf;
  for (size_t d : detections) negative_conf.push_back(-static_cast<double>(stats.conf[d]));
  double ap_sum = 0;
  for (int t = 0; t < kIouThresholdCount; ++t) {
    PrecisionRecall curve = cumulative_precision_recall(stats, detections, t, label_count);
    const double ap = compute_ap(curve.recall, curve.precision);
    ap_sum += ap;
    if (t != 0) continue;
    result.metrics.ap50 = ap;
    const auto [envelope_recall, envelope_precision] =
        precision_envelope(curve.recall, curve.precision);
    for (size_t g = 0; g < grid.size(); ++g) {
      result.precision_at_recall[g] = interp(grid[g], envelope_recall, envelope_precision,
                                             envelope_precision.front(), envelope_precision.back());
      result.recall_curve[g] =
          interp(-grid[g], negative_conf, curve.recall, 0.0, curve.recall.back());
      result.precision_curve[g] =
          interp(-grid[g], negative_conf, curve.precision, 1.0, curve.precision.back());
    }
  }
  result.metrics.ap50_95 = ap_sum / kIouThresholdCount;
  return result;
}

// The index of the conf grid where the mean F1 over classes, smoothed, is highest; sets
// each class's precision, recall and F1 there.
double f1_score(double precision, double recall) {
  return 2 * precision * recall / (precision + recall + kEps);
}

void choose_operating_point(std::vector<ClassCurves>& classes) {
  std::vector<double> mean_f1(kCurvePoints, 0.0);
  for (const ClassCurves& c : classes)
    for (size_t g = 0; g < mean_f1.size(); ++g)
      mean_f1[g] += f1_score(c.precision_curve[g], c.recall_curve[g]);
  for (double& value : mean_f1) value /= static_cast<double>(classes.size());
  std::vector<double> smoothed = box_filter(mean_f1, kF1SmoothFraction);
  const size_t best =
      static_cast<size_t>(std::max_element(smoothed.begin(), smoothed.end()) - smoothed.begin());
  for (ClassCurves& c : classes) {
    c.metrics.precision = c.precision_curve[best];
    c.metrics.recall = c.recall_curve[best];
    c.metrics.f1 = f1_score(c.metrics.precision, c.metrics.recall);
  }
}

void check_consistent(const DetectionStats& stats) {
  const size_t detections = stats.conf.size();
  if (stats.pred_class.size() != detections ||
      stats.correct.size() != detections * kIouThresholdCount)
    throw std::invalid_argument("DetectionStats: " + std::to_string(detections) + " confidences, " +
                                std::to_string(stats.pred_class.size()) +
                                " predicted classes and " + std::to_string(stats.correct.size()) +
                                " correct flags do not describe the same " + "detections (" +
                                std::to_string(kIouThresholdCount) + " flags each)");
}

}  // namespace

std::vector<double> curve_grid() { return linspace(0.0, 1.0, kCurvePoints); }

std::array<float, kIouThresholdCount> iou_thresholds() {
  std::array<float, kIouThresholdCount> thresholds{};
  for (int t = 0; t < kIouThresholdCount; ++t)
    thresholds[static_cast<size_t>(t)] = static_cast<float>(0.5 + 0.05 * t);
  return thresholds;
}

std::vector<uint8_t> match_detections(std::span<const Detection> detections,
                                      std::span<const GroundTruth> labels) {
  std::vector<uint8_t> correct(detections.size() * kIouThresholdCount, 0);
  std::vector<BoxXYXY> label_boxes, detection_boxes;
  for (const GroundTruth& l : labels) label_boxes.push_back(l.box);
  for (const Detection& d : detections) detection_boxes.push_back(d.box);
  const std::vector<float> iou = box_iou_matrix(label_boxes, detection_boxes);

  struct Pair {
    size_t label, detection;
    float iou;
  };
  const auto thresholds = iou_thresholds();
  for (int t = 0; t < kIouThresholdCount; ++t) {
    std::vector<Pair> pairs;  // label-major order
    for (size_t l = 0; l < labels.size(); ++l)
      for (size_t d = 0; d < detections.size(); ++d) {
        const float value = iou[l * detections.size() + d];
        if (value >= thresholds[static_cast<size_t>(t)] &&
            labels[l].class_id == detections[d].class_id)
          pairs.push_back({l, d, value});
      }
    // IoU descending; among equal IoU the later pair first (ascending stable sort, reversed).
    std::stable_sort(pairs.begin(), pairs.end(),
                     [](const Pair& a, const Pair& b) { return a.iou < b.iou; });
    std::reverse(pairs.begin(), pairs.end());

    // Each detection's best pair; the survivors then in detection order.
    std::vector<bool> detection_taken(detections.size(), false);
    std::vector<Pair> best_per_detection;
    for (const Pair& p : pairs)
      if (!detection_taken[p.detection]) {
        detection_taken[p.detection] = true;
        best_per_detection.push_back(p);
      }
    std::sort(best_per_detection.begin(), best_per_detection.end(),
              [](const Pair& a, const Pair& b) { return a.detection < b.detection; });

    // Each label goes to the first (lowest-index) detection that still holds it.
    std::vector<bool> label_taken(labels.size(), false);
    for (const Pair& p : best_per_detection)
      if (!label_taken[p.label]) {
        label_taken[p.label] = true;
        correct[p.detection * kIouThresholdCount + static_cast<size_t>(t)] = 1;
      }
  }
  return correct;
}

void DetectionStats::add_image(std::span<const Detection> detections,
                               std::span<const GroundTruth> labels) {
  ++images_seen;
  std::vector<uint8_t> image_correct = match_detections(detections, labels);
  correct.insert(correct.end(), image_correct.begin(), image_correct.end());
  for (const Detection& d : detections) {
    conf.push_back(d.conf);
    pred_class.push_back(d.class_id);
  }
  for (const GroundTruth& l : labels) target_class.push_back(l.class_id);
}

void DetectionStats::merge(const DetectionStats& other) {
  correct.insert(correct.end(), other.correct.begin(), other.correct.end());
  conf.insert(conf.end(), other.conf.begin(), other.conf.end());
  pred_class.insert(pred_class.end(), other.pred_class.begin(), other.pred_class.end());
  target_class.insert(target_class.end(), other.target_class.begin(), other.target_class.end());
  images_seen += other.images_seen;
}

std::vector<double> DetectionMetrics::ap50_95_per_class(int num_classes) const {
  std::vector<double> maps(static_cast<size_t>(num_classes), map50_95);
  for (const ClassMetrics& c : classes)
    if (c.class_id >= 0 && c.class_id < num_classes)
      maps[static_cast<size_t>(c.class_id)] = c.ap50_95;
  return maps;
}

double compute_ap(std::span<const double> recall, std::span<const double> precision) {
  const auto [envelope_recall, envelope_precision] = precision_envelope(recall, precision);
  // Trapezoid rule over the envelope, linearly interpolated at 101 recall points.
  const std::vector<double> x = linspace(0.0, 1.0, kApPoints);
  std::vector<double> y;
  for (double r : x)
    y.push_back(interp(r, envelope_recall, envelope_precision, envelope_precision.front(),
                       envelope_precision.back()));
  double area = 0;
  for (size_t i = 0; i + 1 < x.size(); ++i) area += (x[i + 1] - x[i]) * (y[i + 1] + y[i]) / 2.0;
  return area;
}

DetectionMetrics ap_per_class(const DetectionStats& stats) {
  check_consistent(stats);
  DetectionMetrics metrics;
  if (stats.target_class.empty() ||
      std::find(stats.correct.begin(), stats.correct.end(), 1) == stats.correct.end())
    return metrics;  // no true positive at any threshold: everything 0, as in YOLOv5

  std::vector<size_t> by_conf(stats.conf.size());
  std::iota(by_conf.begin(), by_conf.end(), 0);
  std::stable_sort(by_conf.begin(), by_conf.end(),
                   [&](size_t a, size_t b) { return stats.conf[a] > stats.conf[b]; });
  std::map<int, int64_t> label_counts;  // only classes with labels are scored
  for (int c : stats.target_class) ++label_counts[c];

  const std::vector<double> grid = curve_grid();
  std::vector<ClassCurves> classes;
  for (const auto& [class_id, label_count] : label_counts) {
    std::vector<size_t> class_detections;
    for (size_t d : by_conf)
      if (stats.pred_class[d] == class_id) class_detections.push_back(d);
    classes.push_back(evaluate_class(stats, class_detections, class_id, label_count, grid));
  }
  choose_operating_point(classes);

  std::vector<double> precision, recall, ap50, ap50_95;
  for (const ClassCurves& c : classes) {
    metrics.classes.push_back(c.metrics);
    precision.push_back(c.metrics.precision);
    recall.push_back(c.metrics.recall);
    ap50.push_back(c.metrics.ap50);
    ap50_95.push_back(c.metrics.ap50_95);
    std::vector<double> f1(grid.size());
    for (size_t g = 0; g < grid.size(); ++g)
      f1[g] = f1_score(c.precision_curve[g], c.recall_curve[g]);
    metrics.curves.precision.push_back(c.precision_curve);
    metrics.curves.recall.push_back(c.recall_curve);
    metrics.curves.f1.push_back(std::move(f1));
    metrics.curves.precision_at_recall.push_back(c.precision_at_recall);
  }
  metrics.mean_precision = mean(precision);
  metrics.mean_recall = mean(recall);
  metrics.map50 = mean(ap50);
  metrics.map50_95 = mean(ap50_95);
  return metrics;
}

}  // namespace bareyolo::models
