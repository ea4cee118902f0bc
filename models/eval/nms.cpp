// models/eval/nms.cpp — candidate selection, class-offset greedy NMS; the steps are listed in
// nms.h.
#include "models/eval/nms.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/route.h"
#include "models/eval/detect_cuda.h"

namespace bareyolo::models {

namespace {

// Steps 1-4: the (box, score, class) rows that pass the confidence threshold.
std::vector<Detection> select_candidates(std::span<const float> rows, int num_classes,
                                         const NmsOptions& options) {
  const size_t stride = 5 + static_cast<size_t>(num_classes);
  auto wanted = [&](int class_id) {
    return options.classes.empty() || std::find(options.classes.begin(), options.classes.end(),
                                                class_id) != options.classes.end();
  };
  std::vector<Detection> candidates;
  for (size_t start = 0; start < rows.size(); start += stride) {
    const float* row = rows.data() + start;
    const float objectness = row[4];
    if (!(objectness > options.conf_threshold)) continue;
    const BoxXYXY box = xywh_to_xyxy({row[0], row[1], row[2], row[3]});
    auto score = [&](int c) { return row[5 + c] * objectness; };

    if (options.multi_label) {
      for (int c = 0; c < num_classes; ++c)
        if (score(c) > options.conf_threshold && wanted(c))
          candidates.push_back({box, score(c), c});
    } else {
      int best = 0;  // the first class with the highest score
      for (int c = 1; c < num_classes; ++c)
        if (score(c) > score(best)) best = c;
      if (score(best) > options.conf_threshold && wanted(best))
        candidates.push_back({box, score(best), best});
    }
  }
  return candidates;
}

}  // namespace

std::vector<int64_t> greedy_nms(std::span<const BoxXYXY> sorted_boxes, float iou_threshold,
                                int64_t max_keep) {
  const size_t count = sorted_boxes.size();
  std::vector<float> areas(count);
  for (size_t i = 0; i < count; ++i) areas[i] = box_area(sorted_boxes[i]);
  std::vector<bool> suppressed(count, false);
  std::vector<int64_t> kept;
  for (size_t i = 0; i < count && static_cast<int64_t>(kept.size()) < max_keep; ++i) {
    if (suppressed[i]) continue;
    kept.push_back(static_cast<int64_t>(i));
    for (size_t j = i + 1; j < count; ++j) {
      if (suppressed[j]) continue;
      float inter = intersection_area(sorted_boxes[i], sorted_boxes[j]);
      if (inter / (areas[i] + areas[j] - inter) > iou_threshold) suppressed[j] = true;
    }
  }
  return kept;
}

std::vector<Detection> non_max_suppression(std::span<const float> rows, int num_classes,
                                           const NmsOptions& options) {
  const size_t stride = 5 + static_cast<size_t>(num_classes);
  if (num_classes < 1 || rows.size() % stride != 0)
    throw std::invalid_argument(
        "non_max_suppression: " + std::to_string(rows.size()) +
        " values do not form rows of 5 + num_classes=" + std::to_string(num_classes));
  std::vector<Detection> candidates = select_candidates(rows, num_classes, options);
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Detection& a, const Detection& b) { return a.conf > b.conf; });
  // (max_nms <= 0 keeps none, as on a GPU.)
  const size_t max_nms = static_cast<size_t>(std::max(options.max_nms, 0));
  if (candidates.size() > max_nms) candidates.resize(max_nms);

  // Shifting each class by class_id * class_offset makes boxes of different classes
  // disjoint, so one greedy pass does per-class NMS.
  std::vector<BoxXYXY> shifted(candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i) {
    const float shift =
        options.agnostic ? 0.0f : static_cast<float>(candidates[i].class_id) * options.class_offset;
    const BoxXYXY& b = candidates[i].box;
    shifted[i] = {b.x1 + shift, b.y1 + shift, b.x2 + shift, b.y2 + shift};
  }
  std::vector<Detection> detections;
  for (int64_t index : greedy_nms(shifted, options.iou_threshold, options.max_det))
    detections.push_back(candidates[static_cast<size_t>(index)]);
  return detections;
}

std::vector<std::vector<Detection>> batch_detections(View<const float> rows, int64_t images,
                                                     int num_classes, const NmsOptions& options) {
  const int64_t values = rows.shape.numel(), row_length = 5 + int64_t(num_classes);
  if (images <= 0 || num_classes < 1 || !rows.dense() || values % (images * row_length) != 0)
    throw std::invalid_argument("batch_detections: " + std::to_string(values) +
                                " values do not split into " + std::to_string(images) +
                                " images of rows of " + std::to_string(row_length) +
                                " (5 + classes) dense values");
  BAREYOLO_ROUTE_FLOAT_OP_TO_CUDA(batch_detections, rows.device, rows, images, num_classes,
                                  options);
  const size_t per_image = size_t(values / images);
  const std::span<const float> all(rows.data, size_t(values));
  std::vector<std::vector<Detection>> detections;
  for (int64_t i = 0; i < images; ++i)
    detections.push_back(
        non_max_suppression(all.subspan(size_t(i) * per_image, per_image), num_classes, options));
  return detections;
}

}  // namespace bareyolo::models
