// models/eval/confusion_matrix.cpp — see confusion_matrix.h.
#include "models/eval/confusion_matrix.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace bareyolo::models {

namespace {

struct Pair {
  size_t label = 0, detection = 0;
  float iou = 0;
};

// The candidate pairs reduced as YOLOv5 does: by descending IoU, the first pair of each
// detection, then of those the first pair of each label.
std::vector<Pair> one_to_one(std::vector<Pair> pairs) {
  std::stable_sort(pairs.begin(), pairs.end(),
                   [](const Pair& a, const Pair& b) { return a.iou > b.iou; });
  auto first_of_each = [](const std::vector<Pair>& sorted, size_t Pair::*key) {
    std::vector<Pair> kept;
    for (const Pair& p : sorted)
      if (std::none_of(kept.begin(), kept.end(), [&](const Pair& k) { return k.*key == p.*key; }))
        kept.push_back(p);
    return kept;
  };
  return first_of_each(first_of_each(pairs, &Pair::detection), &Pair::label);
}

}  // namespace

void ConfusionMatrix::add_image(std::span<const Detection> detections,
                                std::span<const GroundTruth> labels) {
  if (labels.empty()) return;
  std::vector<Detection> kept;
  for (const Detection& d : detections)
    if (d.conf > kConfThreshold) kept.push_back(d);
  std::vector<Pair> pairs;
  for (size_t l = 0; l < labels.size(); ++l)
    for (size_t d = 0; d < kept.size(); ++d) {
      const float iou = box_iou(labels[l].box, kept[d].box);
      if (iou > kIouThreshold) pairs.push_back({l, d, iou});
    }
  const std::vector<Pair> matches = one_to_one(std::move(pairs));
  auto check_class = [&](int cls) {
    if (cls < 0 || cls >= classes_)
      throw std::invalid_argument("confusion matrix: class " + std::to_string(cls) +
                                  " is outside the dataset's " + std::to_string(classes_) +
                                  " classes");
    return cls;
  };
  for (size_t l = 0; l < labels.size(); ++l) {
    const int truth = check_class(labels[l].class_id);
    auto match =
        std::find_if(matches.begin(), matches.end(), [&](const Pair& p) { return p.label == l; });
    ++cell(match == matches.end() ? classes_ : check_class(kept[match->detection].class_id), truth);
  }
  for (size_t d = 0; d < kept.size(); ++d)
    if (std::none_of(matches.begin(), matches.end(),
                     [&](const Pair& p) { return p.detection == d; }))
      ++cell(check_class(kept[d].class_id), classes_);
}

void ConfusionMatrix::merge(const ConfusionMatrix& other) {
  if (other.classes_ != classes_)
    throw std::invalid_argument("confusion matrix: cannot add a matrix of " +
                                std::to_string(other.classes_) + " classes to one of " +
                                std::to_string(classes_));
  for (size_t i = 0; i < counts_.size(); ++i) counts_[i] += other.counts_[i];
}

ConfusionMatrix ConfusionMatrix::from_counts(int classes, std::span<const int64_t> counts) {
  ConfusionMatrix matrix(classes);
  if (counts.size() != matrix.counts_.size())
    throw std::invalid_argument("confusion matrix: " + std::to_string(counts.size()) +
                                " counts for " + std::to_string(classes) + " classes (expected " +
                                std::to_string(matrix.counts_.size()) + ")");
  std::copy(counts.begin(), counts.end(), matrix.counts_.begin());
  return matrix;
}

}  // namespace bareyolo::models
