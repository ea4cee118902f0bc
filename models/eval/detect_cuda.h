// models/eval/detect_cuda.h — the GPU halves of the Detect head's decode and of NMS, for
// float rows in device memory: decode.cu beside decode.cpp, nms.cu and greedy_nms.cu beside
// nms.cpp, with the same formulas, float operations and row order as their CPU references.
// The ops route here (decode_level, batch_detections); greedy_nms and non_max_suppression are
// their steps, declared for the tests that check each against its host twin.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/view.h"
#include "models/eval/decode.h"
#include "models/eval/nms.h"

namespace bareyolo::cuda {

// decode.cu — models::decode_level on the GPU: one block per run of cells of one (image,
// anchor) transposes the field-major head into cell-major rows through shared memory.
void decode_level(View<const float> head, const models::DecodeLevel& level, View<float> rows);
// greedy_nms.cu — greedy NMS over `count` boxes (x1, y1, x2, y2 per box, device memory of
// `device`) already sorted by score descending: the indices of the kept boxes, in order, as
// models::greedy_nms (IoU as torchvision's, no eps; a box is dropped when its IoU with an
// earlier kept box exceeds iou_threshold; at most max_keep kept). The IoU test of every pair
// runs on the GPU as a bit matrix, and so does the greedy walk over it (one block). On the
// device: kept[0 .. *kept_count) (room for min(count, max_keep) indices), the host not waiting;
// greedy_nms brings them back.
void greedy_nms_on_device(const float* boxes, int64_t count, float iou_threshold, int64_t max_keep,
                          int64_t* kept, int64_t* kept_count, int device);
std::vector<int64_t> greedy_nms(const float* boxes, int64_t count, float iou_threshold,
                                int64_t max_keep, int device);
// nms.cu — models::batch_detections on the GPU: YOLOv5's non_max_suppression (nms.h, steps 1-7,
// same semantics and the same float operations, so the same detections from the same rows) of
// each image's decoded rows (as decode_level writes them): candidates, their stable sort by
// score, the cut to max_nms, the class offsets and greedy_nms all run on the GPU, and so does
// the gather of the kept detections into the batch's results; the host waits once per image
// for its number of candidates (which sizes the sort and the IoU matrix) and once at the end,
// when every image's detections come back in one copy, sorted by conf descending.
std::vector<std::vector<models::Detection>> batch_detections(View<const float> rows, int64_t images,
                                                             int classes,
                                                             const NmsOptions& options);

}  // namespace bareyolo::cuda
