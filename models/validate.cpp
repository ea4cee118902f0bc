// models/validate.cpp — see validate.h.
#include "models/validate.h"


#include "data/loader.h"
#include "data/val_batches.h"
#include "models/decode.h"

namespace bareyolo::models {

namespace {

Letterbox letterbox_of(const data::ImageMeta& meta) {
  // YOLOv5's scale_boxes divides by the first gain only (x and y gains are equal here).
  return {float(meta.gain_x), float(meta.pad_x), float(meta.pad_y), float(meta.original_width),
          float(meta.original_height)};
}

// Image i's labels: normalised xywh on the batch image -> pixels -> the original image.
std::vector<LabelBox> labels_of(const data::Batch& batch, int image) {
  std::vector<LabelBox> labels;
  const Letterbox placement = letterbox_of(batch.meta[size_t(image)]);
  for (int64_t r = 0; r < batch.num_targets(); ++r) {
    const float* row = batch.targets.data() + r * 6;
    if (int(row[0]) != image) continue;
    const BoxXYXY on_canvas = xywh_to_xyxy({row[2] * batch.width, row[3] * batch.height,
                                            row[4] * batch.width, row[5] * batch.height});
    labels.push_back({int(row[1]), scale_box_to_original(on_canvas, placement)});
  }
  return labels;
}

}  // namespace

ValidationResult validate(const data::Dataset& dataset, const ValidationOptions& options,
                          const BatchPredictor& predict, int stride) {
  const std::vector<data::Step> plan = data::validation_plan(
      dataset, {.batch = options.batch, .imgsz = options.imgsz, .rect = options.rect,
                .stride = stride, .pad = 0.5});
  data::LoaderOptions loader_options;
  loader_options.imgsz = options.imgsz;
  loader_options.augment = false;  // YOLOv5's val: letterbox only
  loader_options.workers = options.workers;
  data::Loader loader(dataset, plan, 0, loader_options);
  ValidationResult result;
  while (std::optional<data::Batch> batch = loader.next()) {
    const std::vector<std::vector<Detection>> detections = predict(*batch);
    for (int i = 0; i < batch->size; ++i) {
      const Letterbox placement = letterbox_of(batch->meta[size_t(i)]);
      std::vector<Detection> mapped = detections.at(size_t(i));
      for (Detection& d : mapped) d.box = scale_box_to_original(d.box, placement);
      const std::vector<LabelBox> labels = labels_of(*batch, i);
      result.stats.add_image(mapped, labels);
      result.labels += int64_t(labels.size());
      if (options.keep_detections)
        result.detections.push_back({batch->meta[size_t(i)].path, std::move(mapped)});
    }
    result.images += batch->size;
  }
  result.metrics = ap_per_class(result.stats);
  return result;
}

ValidationResult validate(DetectionModel& model, const data::Dataset& dataset,
                          const ValidationOptions& options) {
  auto predict = [&](const data::Batch& batch) {
    const std::vector<float> rows =
        decode_predictions(model.forward(batch.images_tensor(), Mode::eval), model);
    return non_max_suppression_batch(rows, batch.size, model.num_classes(), options.nms);
  };
  return validate(dataset, options, predict, int(model.strides().back()));
}

}  // namespace bareyolo::models
