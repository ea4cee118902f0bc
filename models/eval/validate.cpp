// models/eval/validate.cpp — see validate.h.
#include "models/eval/validate.h"

#include <stdexcept>

#include "data/loader.h"
#include "data/val_batches.h"
#include "models/eval/decode.h"
#ifdef BAREYOLO_WITH_CUDA
#include "models/eval/detect_cuda.h"
#endif

namespace bareyolo::models {

namespace {

#ifdef BAREYOLO_WITH_CUDA
// detect() for a head on a GPU: the rows decoded into device memory in decode_predictions'
// layout, then NMS per image there.
std::vector<std::vector<Detection>> detect_on_device(const std::vector<Tensor>& head,
                                                     const DetectionModel& model,
                                                     const NmsOptions& nms) {
  const int64_t no = model.outputs_per_anchor(), images = head[0].shape().n;
  const int64_t rows_per_image = decoded_rows_per_image(head, model);
  const Device device = head[0].device();
  Tensor rows = Tensor::empty({1, 1, 1, images * rows_per_image * no}, device);
  decode_predictions_on_device(head, model, rows.view<float>().data);
  std::vector<std::vector<Detection>> detections(static_cast<size_t>(images));
  for (int64_t image = 0; image < images; ++image)
    for (const cuda::NmsDetection& d :
         cuda::non_max_suppression(rows.view<float>().data + image * rows_per_image * no,
                                   rows_per_image, model.num_classes(), nms, device.index))
      detections[size_t(image)].push_back({{d.x1, d.y1, d.x2, d.y2}, d.conf, d.class_id});
  return detections;
}
#endif

Letterbox letterbox_of(const data::ImageMeta& meta) {
  // YOLOv5's scale_boxes divides by the first gain only (x and y gains are equal here).
  return {float(meta.gain_x), float(meta.pad_x), float(meta.pad_y), float(meta.original_width),
          float(meta.original_height)};
}

// Image i's labels: normalised xywh on the batch image -> pixels -> the original image.
std::vector<GroundTruth> labels_of(const data::Batch& batch, int image) {
  std::vector<GroundTruth> labels;
  const Letterbox placement = letterbox_of(batch.meta[size_t(image)]);
  for (int64_t r = 0; r < batch.num_targets(); ++r) {
    const data::LabelRow label = batch.label(r);
    if (label.image != image) continue;
    const BoxXYXY on_canvas = xywh_to_xyxy({label.cx * batch.width, label.cy * batch.height,
                                            label.w * batch.width, label.h * batch.height});
    labels.push_back({label.class_id, scale_box_to_original(on_canvas, placement)});
  }
  return labels;
}

}  // namespace

ValidationResult validate(const data::Dataset& dataset, const ValidationOptions& options,
                          const BatchPredictor& predict, int stride) {
  const std::vector<data::Step> plan = data::validation_plan(dataset, {.batch = options.batch,
                                                                       .imgsz = options.imgsz,
                                                                       .rect = options.rect,
                                                                       .stride = stride,
                                                                       .pad = 0.5});
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
      const std::vector<GroundTruth> labels = labels_of(*batch, i);
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

std::vector<std::vector<Detection>> detect(const std::vector<Tensor>& head,
                                           const DetectionModel& model, const NmsOptions& nms) {
  decoded_rows_per_image(head, model);  // refuses a head that does not fit the model
  if (head[0].device().is_cuda()) {
#ifdef BAREYOLO_WITH_CUDA
    return detect_on_device(head, model, nms);
#else
    throw std::invalid_argument("detect: the head is on " + head[0].device().str() +
                                " but this binary was built without CUDA");
#endif
  }
  return non_max_suppression_batch(decode_predictions(head, model), head[0].shape().n,
                                   model.num_classes(), nms);
}

ValidationResult validate(DetectionModel& model, const data::Dataset& dataset,
                          const ValidationOptions& options) {
  auto predict = [&](const data::Batch& batch) {
    return detect(model.forward(batch.images_tensor(model.device()), Mode::eval), model,
                  options.nms);
  };
  return validate(dataset, options, predict, int(model.strides().back()));
}

}  // namespace bareyolo::models
