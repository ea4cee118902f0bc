// tests/unit/metrics.cpp — matching and mAP on cases small enough to work out by hand:
// per-threshold matching, YOLOv5's "lowest detection index wins" rule, duplicates, class
// confusion, misses, the 0.995 of a perfect detector, and the statistics accumulator.
#include <doctest/doctest.h>

#include <cmath>
#include <stdexcept>

#include "models/eval/metrics.h"

namespace bareyolo::models {
namespace {

Detection detection(BoxXYXY box, float conf, int class_id = 0) { return {box, conf, class_id}; }
GroundTruth label(BoxXYXY box, int class_id = 0) { return {class_id, box}; }

// Detection d's row of the correct matrix.
std::vector<int> correct_row(const std::vector<uint8_t>& correct, size_t d) {
  return {correct.begin() + static_cast<ptrdiff_t>(d * kIouThresholdCount),
          correct.begin() + static_cast<ptrdiff_t>((d + 1) * kIouThresholdCount)};
}

const BoxXYXY kSquare{0, 0, 10, 10};
// Boxes inside kSquare of its width and the given height: IoU = height / 10.
BoxXYXY part_of_square(float height) { return {0, 0, 10, height}; }

}  // namespace

TEST_CASE("map iou thresholds run from 0.50 to 0.95") {
  const auto thresholds = iou_thresholds();
  CHECK(thresholds.front() == 0.5f);
  CHECK(thresholds[5] == 0.75f);
  CHECK(thresholds.back() == 0.95f);
}

TEST_CASE("map matching marks a detection correct only up to its IoU") {
  const std::vector<Detection> detections = {detection(part_of_square(6.8f), 0.9f)};  // IoU 0.68
  const auto correct = match_detections(detections, std::vector<GroundTruth>{label(kSquare)});
  CHECK(correct_row(correct, 0) == std::vector<int>{1, 1, 1, 1, 0, 0, 0, 0, 0, 0});
  // An IoU exactly on a threshold counts there (YOLOv5: iou >= threshold): 0.5 and 0.75.
  const std::vector<GroundTruth> square = {label(kSquare)};
  const std::vector<Detection> half = {detection(part_of_square(5.0f), 0.9f)},
                               three_quarters = {detection(part_of_square(7.5f), 0.9f)};
  CHECK(correct_row(match_detections(half, square), 0) ==
        std::vector<int>{1, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  CHECK(correct_row(match_detections(three_quarters, square), 0) ==
        std::vector<int>{1, 1, 1, 1, 1, 1, 0, 0, 0, 0});
}

TEST_CASE("map matching gives a label to the lowest detection index not the highest IoU") {
  // Both detections' best label is the one label. Detection 0 (IoU 0.62) comes first in NMS
  // order, so it takes the label at every threshold it reaches; detection 1 (IoU 0.93) gets
  // the label only where detection 0 does not qualify.
  const std::vector<Detection> detections = {detection(part_of_square(6.2f), 0.9f),
                                             detection(part_of_square(9.3f), 0.8f)};
  const auto correct = match_detections(detections, std::vector<GroundTruth>{label(kSquare)});
  CHECK(correct_row(correct, 0) == std::vector<int>{1, 1, 1, 0, 0, 0, 0, 0, 0, 0});
  CHECK(correct_row(correct, 1) == std::vector<int>{0, 0, 0, 1, 1, 1, 1, 1, 1, 0});
}

TEST_CASE("map matching lets each detection take its best label first") {
  // Detection 0 overlaps both labels but is closer to label 1; detection 1 overlaps only
  // label 0. Both are correct: detection 0 claims label 1, leaving label 0 to detection 1.
  const std::vector<GroundTruth> labels = {label({0, 0, 10, 10}), label({0, 2, 10, 12})};
  const std::vector<Detection> detections = {detection({0, 1.5f, 10, 11.5f}, 0.9f),
                                             detection({0, -0.5f, 10, 9.5f}, 0.8f)};
  const auto correct = match_detections(detections, labels);
  CHECK(correct_row(correct, 0)[0] == 1);
  CHECK(correct_row(correct, 1)[0] == 1);
}

TEST_CASE("map matching credits a duplicate once and never another class") {
  const std::vector<Detection> detections = {detection(kSquare, 0.9f), detection(kSquare, 0.8f),
                                             detection(kSquare, 0.7f, 1)};
  const auto correct = match_detections(detections, std::vector<GroundTruth>{label(kSquare)});
  CHECK(correct_row(correct, 0) == std::vector<int>(10, 1));
  CHECK(correct_row(correct, 1) == std::vector<int>(10, 0));  // duplicate
  CHECK(correct_row(correct, 2) == std::vector<int>(10, 0));  // wrong class
  CHECK(match_detections(detections, {}) == std::vector<uint8_t>(30, 0));
}

TEST_CASE("map of a perfect detector is 0.995 as in YOLOv5") {
  CHECK(compute_ap(std::vector<double>{1.0}, std::vector<double>{1.0}) == doctest::Approx(0.995));
  DetectionStats stats;
  stats.add_image(
      std::vector<Detection>{detection(kSquare, 0.9f, 0), detection({20, 20, 40, 40}, 0.8f, 1)},
      std::vector<GroundTruth>{label(kSquare, 0), label({20, 20, 40, 40}, 1)});
  stats.add_image(std::vector<Detection>{detection({5, 5, 25, 25}, 0.7f, 0)},
                  std::vector<GroundTruth>{label({5, 5, 25, 25}, 0)});
  const DetectionMetrics metrics = ap_per_class(stats);
  CHECK(metrics.map50 == doctest::Approx(0.995));
  CHECK(metrics.map50_95 == doctest::Approx(0.995));
  CHECK(metrics.mean_precision == doctest::Approx(1.0));
  CHECK(metrics.mean_recall == doctest::Approx(1.0));
  REQUIRE(metrics.classes.size() == 2);
  CHECK(metrics.classes[0].labels == 2);
  CHECK(metrics.classes[1].class_id == 1);
}

TEST_CASE("map50 is the 0.5 threshold's AP and map50-95 the mean over the ten") {
  // One label found at IoU 0.68: a true positive at 0.5 to 0.65, nothing above.
  DetectionStats stats;
  stats.add_image(std::vector<Detection>{detection(part_of_square(6.8f), 0.9f)},
                  std::vector<GroundTruth>{label(kSquare)});
  const DetectionMetrics metrics = ap_per_class(stats);
  CHECK(metrics.map50 == doctest::Approx(0.995));
  CHECK(metrics.map50_95 == doctest::Approx(0.995 * 4 / 10));
  CHECK(metrics.mean_recall == doctest::Approx(1.0));  // at 0.5, where P and R are read
}

TEST_CASE("map with a miss and a false positive matches the hand-computed area") {
  // Two labels, one found (conf 0.9), one false positive (conf 0.8). Recall/precision after
  // each detection: (0.5, 1), (0.5, 0.5). With the sentinels the envelope is 1 up to recall
  // 0.5, where it drops to 0.5 (numpy.interp takes the last of repeated x), then falls
  // linearly to 0 at recall 1. Trapezoids on the 101-point grid:
  //   49 * 0.01 (flat) + 0.01 * (1 + 0.5) / 2 (the drop) + 0.5 * 0.5 / 2 (the tail) = 0.6225.
  DetectionStats stats;
  stats.add_image(
      std::vector<Detection>{detection(kSquare, 0.9f), detection({200, 200, 210, 210}, 0.8f)},
      std::vector<GroundTruth>{label(kSquare), label({100, 100, 110, 110})});
  const DetectionMetrics metrics = ap_per_class(stats);
  CHECK(metrics.map50 == doctest::Approx(0.6225));
  CHECK(metrics.map50_95 == doctest::Approx(0.6225));
  // Recall is 0.5 wherever it is not 0; the smoothed F1 peaks with the filter's right edge at
  // conf 0.9, i.e. at conf ~0.85, where precision (linear from 0.5 at 0.8 to 1 at 0.9) is ~0.75.
  CHECK(metrics.mean_recall == doctest::Approx(0.5));
  CHECK(metrics.mean_precision == doctest::Approx(0.75).scale(0).epsilon(0.01));
}

TEST_CASE("map curves follow the detections in confidence and recall") {
  // Two labels; detections at conf 0.9 (true), 0.6 (false), 0.3 (true): recall 0.5, 0.5, 1
  // and precision 1, 0.5, 2/3 after each. Against confidence the curves are linear between
  // the detections' confidences (numpy.interp), recall 0 and precision 1 above the first,
  // the last values below the last. Against recall, the envelope: 1 up to recall 0.5, then
  // 2/3 up to recall 1, where the sentinel drops it to 0.
  DetectionStats stats;
  stats.add_image(
      std::vector<Detection>{detection(kSquare, 0.9f), detection({200, 200, 210, 210}, 0.6f),
                             detection({100, 100, 110, 110}, 0.3f)},
      std::vector<GroundTruth>{label(kSquare), label({100, 100, 110, 110})});
  const DetectionMetrics metrics = ap_per_class(stats);
  const MetricCurves& curves = metrics.curves;
  REQUIRE(curves.recall.size() == 1);
  const std::vector<double> grid = curve_grid();
  REQUIRE(grid.size() == size_t(kCurvePoints));
  auto at = [&](const std::vector<double>& curve, double x) {
    const size_t g = size_t(std::lround(x * (kCurvePoints - 1)));
    REQUIRE(std::fabs(grid[g] - x) <= 0.5 / (kCurvePoints - 1));  // the grid point nearest x
    return curve[g];
  };
  CHECK(at(curves.recall[0], 0.95) == 0);
  CHECK(at(curves.precision[0], 0.95) == 1);
  CHECK(at(curves.recall[0], 0.75) == doctest::Approx(0.5));
  CHECK(at(curves.precision[0], 0.75) == doctest::Approx(0.75).scale(0).epsilon(0.01));
  CHECK(at(curves.recall[0], 0.1) == doctest::Approx(1));
  CHECK(at(curves.precision[0], 0.1) == doctest::Approx(2.0 / 3));
  CHECK(at(curves.f1[0], 0.1) == doctest::Approx(0.8));  // 2 * (2/3) / (5/3)
  CHECK(at(curves.precision_at_recall[0], 0.25) == doctest::Approx(1));
  CHECK(at(curves.precision_at_recall[0], 0.75) == doctest::Approx(2.0 / 3));
  CHECK(curves.precision_at_recall[0].back() == 0);
}

TEST_CASE("map envelope lifts the precision of a false positive ranked first") {
  // One label; a false positive at conf 0.9, then the true detection at 0.8: recall 0 then 1,
  // precision 0 then 0.5. The envelope raises the first point to 0.5, so the curve is 0.5
  // on [0, 1) and 0 at recall 1: AP = 99 * 0.01 * 0.5 + 0.01 * 0.5 / 2 = 0.4975.
  DetectionStats stats;
  stats.add_image(
      std::vector<Detection>{detection({50, 50, 60, 60}, 0.9f), detection(kSquare, 0.8f)},
      std::vector<GroundTruth>{label(kSquare)});
  CHECK(ap_per_class(stats).map50 == doctest::Approx(0.4975));
}

TEST_CASE("map scores a confused class 0 and ignores classes without labels") {
  // Class 0: one label, found at conf 0.9, plus a false positive at 0.8 that is really the
  // class-1 object: recall 1 is reached at precision 1, AP = 0.995. Class 1: one label, no
  // detection, AP = 0. Class 2 has a detection but no label: not scored.
  DetectionStats stats;
  stats.add_image(
      std::vector<Detection>{detection(kSquare, 0.9f, 0), detection({50, 50, 60, 60}, 0.8f, 0),
                             detection({80, 80, 90, 90}, 0.95f, 2)},
      std::vector<GroundTruth>{label(kSquare, 0), label({50, 50, 60, 60}, 1)});
  const DetectionMetrics metrics = ap_per_class(stats);
  REQUIRE(metrics.classes.size() == 2);
  CHECK(metrics.classes[0].ap50 == doctest::Approx(0.995));
  CHECK(metrics.classes[1].ap50 == 0);
  CHECK(metrics.classes[1].recall == 0);
  CHECK(metrics.map50 == doctest::Approx(0.4975));
  CHECK(metrics.map50_95 == doctest::Approx(0.4975));
  CHECK(metrics.ap50_95_per_class(3) ==
        std::vector<double>{metrics.classes[0].ap50_95, 0.0, metrics.map50_95});
}

TEST_CASE("map is zero without a true positive") {
  DetectionStats stats;
  stats.add_image(std::vector<Detection>{detection({50, 50, 60, 60}, 0.9f)},
                  std::vector<GroundTruth>{label(kSquare)});
  const DetectionMetrics metrics = ap_per_class(stats);
  CHECK(metrics.map50 == 0);
  CHECK(metrics.mean_precision == 0);
  CHECK(metrics.classes.empty());
  CHECK(ap_per_class(DetectionStats{}).map50_95 == 0);
}

TEST_CASE("map statistics accumulate per image and merge across collections") {
  const std::vector<Detection> image0 = {detection(kSquare, 0.9f),
                                         detection({50, 0, 60, 10}, 0.3f)};
  const std::vector<GroundTruth> labels0 = {label(kSquare), label({20, 0, 30, 10}, 1)};
  const std::vector<GroundTruth> labels1 = {label({20, 0, 30, 10})};  // missed

  DetectionStats one;
  one.add_image(image0, labels0);
  one.add_image({}, labels1);  // no detections: only the labels count
  one.add_image({}, {});       // nothing at all: only seen
  CHECK(one.images_seen == 3);
  CHECK(one.detection_count() == 2);
  CHECK(one.correct.size() == 20);
  CHECK(one.target_class == std::vector<int>{0, 1, 0});

  DetectionStats first, second;
  first.add_image(image0, labels0);
  second.add_image({}, labels1);
  second.add_image({}, {});
  first.merge(second);
  CHECK(first.correct == one.correct);
  CHECK(first.conf == one.conf);
  CHECK(first.pred_class == one.pred_class);
  CHECK(first.target_class == one.target_class);
  CHECK(first.images_seen == 3);
  CHECK(ap_per_class(first).map50 == ap_per_class(one).map50);

  DetectionStats broken = one;
  broken.conf.pop_back();
  CHECK_THROWS_AS(ap_per_class(broken), std::invalid_argument);
}

}  // namespace bareyolo::models
