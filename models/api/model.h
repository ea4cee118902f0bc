// models/api/model.h — the C++ API: a detector you can build, train and save in a few lines.
//
//   bareyolo::Model model("models/yolov5n.yaml");            // or
//   "runs/train/exp/weights/best.safetensors" model.train({.data = "data.yaml", .epochs = 100,
//   .batch = 32, .device = "0,1",
//                .sync_bn = true, .callbacks = {my_callbacks}});
//   model.save("yolov5n-trained.safetensors");
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

#include "models/train/launch.h"
#include "models/yolo/yolo_model.h"

namespace bareyolo {

class Model {
 public:
  // A model yaml (fresh weights; `nc` overrides its class count), or a .safetensors written by
  // bareyolo (the network from its metadata "cfg", its classes and weights).
  explicit Model(const std::string& cfg_or_weights, int nc = 0);

  // Trains from the current weights (a model fresh from its yaml: from scratch, as the CLI);
  // options.cfg and options.weights are set from this model. Returns rank 0's summary; then,
  // in rank 0's process, the model holds the run's best weights.
  models::TrainSummary train(models::TrainOptions options);

  // Writes the weights (YOLOv5's state_dict names) with nc, names and cfg as metadata.
  void save(const std::string& path);

  models::DetectionModel& network() { return *network_; }
  const std::string& cfg() const { return cfg_; }
  const std::vector<std::string>& names() const { return names_; }

 private:
  void load_weights(const std::string& path);

  std::string cfg_;
  std::vector<std::string> names_;
  bool weights_loaded_ = false;  // false: fresh from the yaml
  std::unique_ptr<models::DetectionModel> network_;
};

}  // namespace bareyolo
