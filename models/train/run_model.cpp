// models/train/run_model.cpp — see run_model.h.
#include "models/train/run_model.h"

#include <stdexcept>

#include "models/yolo/weights.h"

namespace bareyolo::models {

ModelConfig run_model_config(const TrainOptions& options) {
  if (!options.cfg.empty()) return load_model_config(options.cfg);
  // A checkpoint's metadata alone (its header) says which model it is.
  if (!options.resume.empty())
    return weights_model_config(SafetensorsFile::load_metadata(options.resume), options.resume, "");
  if (!options.weights.empty())
    return weights_model_config(load_weights_file(options.weights), options.weights, "");
  throw std::invalid_argument("no model to train: give --cfg (a model yaml) or --weights");
}

}  // namespace bareyolo::models
