// models/eval/validate.h — YOLOv5's validation (val.py as train.py calls it): the split in
// letterboxed (optionally rectangular) batches, the model in eval mode, Detect decode, NMS
// (multi-label, conf 0.001, IoU 0.6, 300 per image), predictions and labels mapped back to
// each original image, then matching at IoU 0.5:0.95 and AP per class (models/eval/metrics.h).
//
// Validation reads datasets, so this file is where models/ uses data/.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "data/batch.h"
#include "data/dataset.h"
#include "models/eval/confusion_matrix.h"
#include "models/eval/metrics.h"
#include "models/eval/nms.h"
#include "models/eval/speed.h"
#include "models/yolo/yolo_model.h"

namespace bareyolo::models {

// YOLOv5's validation NMS: conf 0.001, IoU 0.6, at most 300 per image, every class above the
// threshold (multi-label).
inline NmsOptions validation_nms() {
  NmsOptions nms;
  nms.conf_threshold = 0.001f;
  nms.iou_threshold = 0.6f;
  nms.max_det = 300;
  nms.multi_label = true;
  return nms;
}

struct ValidationOptions {
  int batch = 32;
  int imgsz = 640;
  bool rect = true;  // YOLOv5's val: rectangular batches, pad 0.5
  int workers = 0;   // loader threads
  NmsOptions nms = validation_nms();
  bool keep_detections = false;  // fill ValidationResult::detections (for --save-json)
  // YOLOv5's val --single-cls, on a dataset made one class (data::as_single_class): the NMS
  // suppresses across classes (agnostic) and every detection counts as class 0.
  bool single_cls = false;
  // Called with the split's first batch and its detections (the batch's pixels), by the one
  // shard that scores it: val_batch0_labels.jpg and val_batch0_pred.jpg (models/eval/plots.h).
  std::function<void(const data::Batch&, const std::vector<std::vector<Detection>>&)>
      on_first_batch = {};
  // Sharded validation (every rank of a job scores its own share, gather_shards() joins them):
  // this process scores share `shard` of `shards` contiguous shares of the batches, and the
  // result holds that share's statistics only (no metrics until gathered). The batches are
  // the whole split's (rectangular shapes included), so the shares together score every
  // image exactly as one process would, none twice.
  int shard = 0, shards = 1;
};

// The NMS a model's validation runs: `options.nms`, across classes under --single-cls (val.py
// passes agnostic=single_cls).
inline NmsOptions nms_of(const ValidationOptions& options) {
  NmsOptions nms = options.nms;
  nms.agnostic = nms.agnostic || options.single_cls;
  return nms;
}

// The batches [begin, end) of `steps` that share `shard` of `shards` scores: contiguous, in
// order, sizes differing by at most one (a share may be empty when there are fewer batches).
struct ShardRange {
  int64_t begin = 0, end = 0;
};
ShardRange shard_range(int64_t steps, int shard, int shards);

struct ImageDetections {
  std::string path;
  std::vector<Detection> detections;  // boxes in the original image's pixels
};

struct ValidationResult {
  DetectionMetrics metrics;   // of the whole split: with one shard, or after gather_shards
  DetectionStats stats;       // the raw statistics (ranks can merge theirs)
  ConfusionMatrix confusion;  // of the dataset's classes; summed over shards by gather_shards
  int64_t images = 0, labels = 0;
  std::vector<ImageDetections> detections;  // when keep_detections
  StageTimes times;  // validate(model, ...)'s stages, summed over `images` (val's Speed: line)
};

// Detections of each image of a batch, in the batch canvas's pixels.
using BatchPredictor = std::function<std::vector<std::vector<Detection>>(const data::Batch&)>;

// Detections of each image of the batch whose head outputs (eval mode) are `head`: Detect
// decode, then NMS, on the head's device (decode_predictions, then batch_detections) — for a
// head on a GPU both run there and only the kept detections come back.
std::vector<std::vector<Detection>> detect(const std::vector<Tensor>& head,
                                           const DetectionModel& model, const NmsOptions& nms);

// Validation of any predictor (tests use an oracle), and of a model (detect() of its head).
ValidationResult validate(const data::Dataset& dataset, const ValidationOptions& options,
                          const BatchPredictor& predict, int stride);
ValidationResult validate(DetectionModel& model, const data::Dataset& dataset,
                          const ValidationOptions& options);

}  // namespace bareyolo::models
