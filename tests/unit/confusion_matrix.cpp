// tests/unit/confusion_matrix.cpp — YOLOv5's confusion matrix on images worked out by hand:
// a hit, a confused class, a miss, a false positive, the conf and IoU thresholds, two
// detections on one object, competing pairs, images without labels, and the sum of shares.
#include <doctest/doctest.h>

#include <numeric>
#include <stdexcept>

#include "models/eval/confusion_matrix.h"

namespace bareyolo::models {
namespace {

constexpr int kBackground = 2;  // two classes: 0, 1, then background
const BoxXYXY kA{0, 0, 10, 10}, kB{100, 100, 110, 110}, kFar{200, 200, 210, 210};

Detection detection(BoxXYXY box, float conf, int cls) { return {box, conf, cls}; }

// Every cell's count together: what the image's labels and detections added.
int64_t total(const ConfusionMatrix& matrix) {
  const std::vector<int64_t>& counts = matrix.counts();
  return std::accumulate(counts.begin(), counts.end(), int64_t{0});
}

}  // namespace

TEST_CASE("confusion matrix counts hits, confusions, misses and false positives") {
  ConfusionMatrix matrix(2);
  matrix.add_image(std::vector<Detection>{detection(kA, 0.9f, 0), detection(kB, 0.8f, 0),
                                          detection(kFar, 0.7f, 1)},
                   std::vector<GroundTruth>{{0, kA}, {1, kB}, {1, {300, 300, 310, 310}}});
  CHECK(matrix.at(0, 0) == 1);            // kA found as its class
  CHECK(matrix.at(0, 1) == 1);            // kB (class 1) detected as class 0
  CHECK(matrix.at(kBackground, 1) == 1);  // the last label missed
  CHECK(matrix.at(1, kBackground) == 1);  // the detection far from every label
  CHECK(total(matrix) == 4);
}

TEST_CASE("confusion matrix drops detections at conf 0.25 or IoU 0.45 and below") {
  ConfusionMatrix matrix(2);
  const BoxXYXY overlapping{0, 0, 10, 4.4f};  // IoU 0.44 with kA
  matrix.add_image(std::vector<Detection>{detection(kA, 0.25f, 0), detection(overlapping, 0.9f, 0)},
                   std::vector<GroundTruth>{{0, kA}});
  CHECK(matrix.at(kBackground, 0) == 1);  // missed: the first is too unsure, the second too far
  CHECK(matrix.at(0, kBackground) == 1);  // the confident one is a false positive
  CHECK(matrix.at(0, 0) == 0);
}

TEST_CASE("confusion matrix gives an object to its best-overlapping detection only") {
  ConfusionMatrix matrix(2);
  matrix.add_image(std::vector<Detection>{detection({0, 0, 10, 8}, 0.9f, 1),      // IoU 0.8
                                          detection({0, 0, 10, 9.5f}, 0.5f, 0)},  // IoU 0.95
                   std::vector<GroundTruth>{{0, kA}});
  CHECK(matrix.at(0, 0) == 1);            // the higher IoU wins, not the higher conf
  CHECK(matrix.at(1, kBackground) == 1);  // the other is left over
}

TEST_CASE("confusion matrix pairs by IoU: each detection's best pair first, then each label's") {
  // Pairs by IoU: (l0 d0 0.9), (l1 d0 0.89), (l1 d1 0.875), (l0 d1 0.7). Each detection keeps
  // its best (d0: l0, d1: l1), then each label its best of those: l0-d0 and l1-d1. Labels
  // first would leave l0-d0 alone, l1 missed and d1 a false positive; labels only would give
  // d0 to both labels.
  ConfusionMatrix matrix(2);
  matrix.add_image(
      std::vector<Detection>{detection({0, 0, 10, 9}, 0.9f, 0), detection({0, 0, 10, 7}, 0.9f, 1)},
      std::vector<GroundTruth>{{0, kA}, {1, {0, 0, 10, 8}}});
  CHECK(matrix.at(0, 0) == 1);
  CHECK(matrix.at(1, 1) == 1);
  CHECK(total(matrix) == 2);
}

TEST_CASE("confusion matrix skips images without labels and adds shares") {
  ConfusionMatrix first(2), second(2);
  first.add_image(std::vector<Detection>{detection(kA, 0.9f, 0)}, std::vector<GroundTruth>{});
  CHECK(first.counts() == std::vector<int64_t>(9, 0));
  first.add_image(std::vector<Detection>{}, std::vector<GroundTruth>{{1, kA}});
  second.add_image(std::vector<Detection>{detection(kA, 0.9f, 1)},
                   std::vector<GroundTruth>{{1, kA}});
  first.merge(ConfusionMatrix::from_counts(2, second.counts()));
  CHECK(first.at(kBackground, 1) == 1);
  CHECK(first.at(1, 1) == 1);
  CHECK_THROWS_WITH_AS(first.merge(ConfusionMatrix(3)), doctest::Contains("3 classes"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(first.add_image(std::vector<Detection>{}, std::vector<GroundTruth>{{2, kA}}),
                       doctest::Contains("class 2 is outside"), std::invalid_argument);
}

}  // namespace bareyolo::models
