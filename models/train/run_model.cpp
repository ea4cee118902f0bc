// models/train/run_model.cpp — see run_model.h.
#include "models/train/run_model.h"

#include <cmath>
#include <stdexcept>

#include "models/yolo/weights.h"

namespace bareyolo::models {

namespace {

ModelConfig named_model_config(const TrainOptions& options) {
  // A resumed run builds the model its checkpoint holds: the yaml in its metadata (its header
  // alone), which has the anchors the run trains with; a checkpoint without one, its --cfg.
  if (!options.resume.empty()) {
    const SafetensorsFile header = SafetensorsFile::load_metadata(options.resume);
    return weights_model_config(header, options.resume,
                                header.metadata().count("yaml") ? "" : options.cfg);
  }
  if (!options.cfg.empty()) return load_model_config(options.cfg);
  if (!options.weights.empty())
    return weights_model_config(load_weights_file(options.weights), options.weights, "");
  throw std::invalid_argument("no model to train: give --cfg (a model yaml) or --weights");
}

}  // namespace

ModelConfig run_model_config(const TrainOptions& options) {
  ModelConfig config = named_model_config(options);
  // The hyp file's anchors override the yaml's on a new run, rounded half to even as
  // YOLOv5's round() does.
  if (options.anchors != 0 && options.resume.empty())
    return with_placeholder_anchors(std::move(config), int(std::nearbyint(options.anchors)),
                                    "the hyp file's anchors");
  return config;
}

}  // namespace bareyolo::models
