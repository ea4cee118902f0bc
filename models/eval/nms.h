// models/eval/nms.h — non-maximum suppression: from the Detect head's decoded rows to the final
// detections of each image (YOLOv5's non_max_suppression in utils/general.py).
//
// Per image:
//   1. candidates: objectness > conf_threshold;
//   2. class scores *= objectness; boxes from centre+size to corners;
//   3. multi_label: one row per (box, class) with score > conf_threshold, box-major order;
//      otherwise the best class of each box, kept if its score > conf_threshold;
//   4. optional class filter;
//   5. sort by score descending, keep the first max_nms;
//   6. greedy NMS per class: each class's boxes are shifted by class * 7680 pixels (0 when
//      agnostic) so that boxes of different classes never overlap, then one greedy pass
//      over all rows suppresses every row whose IoU with a kept row exceeds iou_threshold;
//   7. keep the first max_det.
// Differences from YOLOv5, on purpose: ties in score keep their input order (a stable sort;
// torch's sort leaves them unspecified), and there is no wall-clock limit (YOLOv5 gives up
// after 0.5 + 0.05 * batch seconds and returns nothing for the remaining images, which
// would make validation depend on machine speed).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/view.h"
#include "models/eval/boxes.h"
#include "models/eval/nms_options.h"

namespace bareyolo::models {

struct Detection {
  BoxXYXY box;     // pixels of the network input
  float conf = 0;  // objectness * class score
  int class_id = 0;
};

using bareyolo::NmsOptions;  // models/eval/nms_options.h

// Detections of one image. `rows` holds `rows.size() / (5 + num_classes)` predictions, each
// [cx, cy, w, h, objectness, class_0 .. class_{num_classes-1}], decoded to pixels.
// The result is sorted by conf descending.
std::vector<Detection> non_max_suppression(std::span<const float> rows, int num_classes,
                                           const NmsOptions& options);

// The op: detections of each image of a batch of decoded rows, laid out as
// [images][rows_per_image][5 + num_classes] floats in one dense view (decode_predictions'
// output). Rows on the host go through non_max_suppression above; rows on a GPU through its
// CUDA twin (detect_cuda.h), which returns only the kept detections.
std::vector<std::vector<Detection>> batch_detections(View<const float> rows, int64_t images,
                                                     int num_classes, const NmsOptions& options);

// Greedy suppression over boxes already sorted by score descending: the indices of the kept
// boxes, in order. A box is dropped when its IoU (torchvision's: no eps) with an earlier kept
// box is greater than iou_threshold. Stops once max_keep boxes are kept, which gives the
// first max_keep of the full result at a fraction of the cost.
std::vector<int64_t> greedy_nms(std::span<const BoxXYXY> sorted_boxes, float iou_threshold,
                                int64_t max_keep);

}  // namespace bareyolo::models
