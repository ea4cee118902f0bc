// models/api/model.h — the C++ API: a detector you can build, train and save in a few lines.
//
//   bareyolo::Model model("models/yolov5n.yaml");  // or ".../best.safetensors", "yolov5n.pt"
//   model.train({.data = "data.yaml", .epochs = 100, .batch = 32, .device = "0,1",
//                .sync_bn = true, .callbacks = {my_callbacks}});
//   model.save("yolov5n-trained.safetensors");
//   for (const bareyolo::models::Detection& d : model.predict("bus.jpg")) ...  // box, conf, class
//
// train() has the semantics of `bareyolo train` (models/train/launch.h): the batch is global,
// more than one rank forks workers unless a launcher started this process, and so on. The
// model's current weights are where training starts: they are written to a temporary
// safetensors file that every rank (every spawned worker included) loads. When train()
// returns — on the spawn path too — the model holds rank 0's best weights. Callbacks run in
// rank 0's process: in a spawned run that is a worker, so they must not expect to change this
// process's memory (write files, print, or send to a socket instead).
#pragma once

#include <memory>
#include <string>

#include "data/image.h"
#include "models/eval/nms.h"
#include "models/train/launch.h"
#include "models/yolo/yolo_model.h"

namespace bareyolo {

// What predict() takes: `bareyolo predict`'s --imgsz, --conf, --iou and --max-pixels.
struct PredictOptions {
  int imgsz = 640;  // rounded up to the model's largest stride, as the CLI does
  float conf = 0.25f, iou = 0.45f;
  int64_t max_pixels = data::kDefaultMaxPixels;  // a larger image is refused
};

class Model {
 public:
  // A model yaml (fresh weights; `nc` overrides its class count), or a weights file that names
  // its model, as the CLI reads one without --cfg: a .safetensors written by bareyolo (the
  // network from its metadata "yaml" or "cfg") or a PyTorch YOLOv5 checkpoint (.pt, told by
  // its zip signature, read without running its code: models/yolo/torch_checkpoint.h), with
  // its classes, names and weights.
  explicit Model(const std::string& cfg_or_weights, int nc = 0);

  // Trains from the current weights (a model fresh from its yaml: from scratch, as the CLI);
  // options.cfg and options.weights are set from this model. Returns rank 0's summary; then,
  // in rank 0's process, the model holds the run's best weights.
  models::TrainSummary train(models::TrainOptions options);

  // The detections in the image at `path`, as `bareyolo predict` finds them (the same boxes,
  // scores and classes): boxes in the image's pixels, class_id an index into names(). Throws
  // data::ImageError naming the file when it cannot be read.
  std::vector<models::Detection> predict(const std::string& path,
                                         const PredictOptions& options = {});

  // Writes the weights (YOLOv5's state_dict names) with nc, names, cfg and the model yaml's
  // text as metadata, so that the file alone rebuilds this model.
  void save(const std::string& path);

  models::DetectionModel& network() { return *network_; }
  const std::string& cfg() const { return cfg_; }  // the yaml's path; "" for a .pt's model
  const std::vector<std::string>& names() const { return names_; }

 private:
  void load_weights(const std::string& path);

  std::string cfg_;
  std::string yaml_;  // the model yaml's text
  std::vector<std::string> names_;
  bool weights_loaded_ = false;  // false: fresh from the yaml
  std::unique_ptr<models::DetectionModel> network_;
};

}  // namespace bareyolo
