// models/eval/validate.cpp — see validate.h.
#include "models/eval/validate.h"

#include <stdexcept>

#include "data/loader.h"
#include "data/val_batches.h"
#include "engine/distributed/comm/progress_board.h"
#include "models/eval/decode.h"
#include "models/eval/nms.h"

namespace bareyolo::models {

namespace {

Letterbox letterbox_of(const data::ImageMeta& meta) {
  // YOLOv5's scale_boxes divides by the first gain only (x and y gains are equal here).
  return {float(meta.gain_x), float(meta.pad_x), float(meta.pad_y), float(meta.original_width),
          float(meta.original_height)};
}

// Image i's labels: normalised xywh -> pixels of the model's input (the detections') -> the
// original image.
std::vector<GroundTruth> labels_of(const data::Batch& batch, int image) {
  std::vector<GroundTruth> labels;
  const Letterbox placement = letterbox_of(batch.meta[size_t(image)]);
  const float width = float(batch.input_width), height = float(batch.input_height);
  for (int64_t r = 0; r < batch.num_targets(); ++r) {
    const data::LabelRow label = batch.label(r);
    if (label.image != image) continue;
    const BoxXYXY on_canvas =
        xywh_to_xyxy({label.cx * width, label.cy * height, label.w * width, label.h * height});
    labels.push_back({label.class_id, scale_box_to_original(on_canvas, placement)});
  }
  return labels;
}

}  // namespace

ShardRange shard_range(int64_t steps, int shard, int shards) {
  if (shards < 1 || shard < 0 || shard >= shards)
    throw std::invalid_argument("validation shard " + std::to_string(shard) + " of " +
                                std::to_string(shards) + " does not exist");
  return {steps * shard / shards, steps * (shard + 1) / shards};
}

ValidationResult validate(const data::Dataset& dataset, const ValidationOptions& options,
                          const BatchPredictor& predict, int stride) {
  std::vector<data::Step> plan = data::validation_plan(dataset, {.batch = options.batch,
                                                                 .imgsz = options.imgsz,
                                                                 .rect = options.rect,
                                                                 .stride = stride,
                                                                 .pad = 0.5});
  if (options.keep_detections && options.shards > 1)
    throw std::invalid_argument(
        "keep_detections: sharded validation gathers statistics, not detections");
  const ShardRange share = shard_range(int64_t(plan.size()), options.shard, options.shards);
  plan.erase(plan.begin() + share.end, plan.end());
  plan.erase(plan.begin(), plan.begin() + share.begin);
  data::LoaderOptions loader_options;
  loader_options.imgsz = options.imgsz;
  loader_options.augment = false;  // YOLOv5's val: letterbox only
  loader_options.workers = options.workers;
  data::Loader loader(dataset, plan, 0, loader_options);
  ValidationResult result;
  result.confusion = ConfusionMatrix(int(dataset.names().size()));
  while (std::optional<data::Batch> batch = loader.next()) {
    std::vector<std::vector<Detection>> detections = predict(*batch);
    if (options.single_cls)
      for (std::vector<Detection>& image : detections)
        for (Detection& d : image) d.class_id = 0;
    if (options.on_first_batch && batch->step == 0) options.on_first_batch(*batch, detections);
    dist::note_progress();  // a batch validated, for the stall watch (progress_board.h)
    for (int i = 0; i < batch->size; ++i) {
      const Letterbox placement = letterbox_of(batch->meta[size_t(i)]);
      std::vector<Detection> mapped = detections.at(size_t(i));
      for (Detection& d : mapped) d.box = scale_box_to_original(d.box, placement);
      const std::vector<GroundTruth> labels = labels_of(*batch, i);
      result.stats.add_image(mapped, labels);
      result.confusion.add_image(mapped, labels);
      result.labels += int64_t(labels.size());
      if (options.keep_detections)
        result.detections.push_back({batch->meta[size_t(i)].path, std::move(mapped)});
    }
    result.images += batch->size;
  }
  if (options.shards == 1) result.metrics = ap_per_class(result.stats);
  return result;
}

std::vector<std::vector<Detection>> detect(const std::vector<Tensor>& head,
                                           const DetectionModel& model, const NmsOptions& nms) {
  const Tensor rows = decode_predictions(head, model);  // on the head's device
  return batch_detections(rows.view<float>(), head[0].shape().n, model.num_classes(), nms);
}

ValidationResult validate(DetectionModel& model, const data::Dataset& dataset,
                          const ValidationOptions& options) {
  const Device device = model.device();
  const NmsOptions nms = nms_of(options);
  StageTimes times;
  auto predict = [&](const data::Batch& batch) {
    const Tensor images =
        timed_stage(times.pre_process_s, device, [&] { return batch.images_tensor(device); });
    const std::vector<Tensor> head =
        timed_stage(times.inference_s, device, [&] { return model.forward(images, Mode::eval); });
    return timed_stage(times.nms_s, device, [&] { return detect(head, model, nms); });
  };
  ValidationResult result = validate(dataset, options, predict, int(model.strides().back()));
  result.times = times;
  return result;
}

}  // namespace bareyolo::models
