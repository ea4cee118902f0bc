// models/api/model.cpp — see model.h.
#include "models/api/model.h"

#include <unistd.h>

#include <filesystem>
#include <stdexcept>

#include "engine/safetensors.h"
#include "models/eval/image_prediction.h"
#include "models/train/checkpoint.h"
#include "models/yolo/torch_checkpoint.h"
#include "models/yolo/weights.h"

namespace bareyolo {

namespace fs = std::filesystem;

Model::Model(const std::string& cfg_or_weights, int nc) {
  if (fs::path(cfg_or_weights).extension() == ".safetensors" ||
      models::is_torch_checkpoint(cfg_or_weights)) {
    load_weights(cfg_or_weights);
    return;
  }
  cfg_ = fs::absolute(cfg_or_weights).string();
  const models::ModelConfig config = models::load_model_config(cfg_);
  yaml_ = config.yaml_text;
  network_ = std::make_unique<models::DetectionModel>(config, models::ModelOptions{.nc = nc});
}

void Model::load_weights(const std::string& path) {
  const SafetensorsFile file = models::load_weights_file(path);
  const auto& meta = file.metadata();
  if (!meta.count("yaml") && !meta.count("cfg"))
    throw std::invalid_argument(path +
                                " does not say which model it holds (no 'yaml' or 'cfg' "
                                "metadata): build the Model from the model yaml instead");
  const models::ModelConfig config = models::weights_model_config(file, path, "");
  cfg_ = meta.count("cfg") ? meta.at("cfg") : "";
  yaml_ = config.yaml_text;
  names_ = models::metadata_names(file);
  network_ = std::make_unique<models::DetectionModel>(
      config, models::ModelOptions{.nc = models::metadata_nc(file, path)});
  models::load_state(file, network_->state(), path);
  weights_loaded_ = true;
}

models::TrainSummary Model::train(models::TrainOptions options) {
  options.cfg = cfg_;
  // Every rank starts from this model's weights, through a file (a spawned worker rebuilds the
  // network from it). A model fresh from its yaml trains from scratch, as `bareyolo train`.
  std::string start_weights;
  if (weights_loaded_ && options.resume.empty()) {
    start_weights = (fs::temp_directory_path() /
                     ("bareyolo-start-" + std::to_string(::getpid()) + ".safetensors"))
                        .string();
    save(start_weights);
    options.weights = start_weights;
  }
  models::TrainSummary summary;
  try {
    summary = models::run_training(options, [](const std::string& line) {
      std::printf("%s\n", line.c_str());
      std::fflush(stdout);
    });
  } catch (...) {
    if (!start_weights.empty()) fs::remove(start_weights);
    throw;
  }
  if (!start_weights.empty()) fs::remove(start_weights);
  if (summary.rank0) {
    const fs::path weights = fs::path(summary.run_dir) / "weights";
    // final: best's weights in f32 (best itself is stripped to fp16 when training ends).
    load_weights((fs::exists(weights / "final.safetensors") ? weights / "final.safetensors"
                                                            : weights / "last.safetensors")
                     .string());
  }
  return summary;
}

std::vector<models::Detection> Model::predict(const std::string& path,
                                              const PredictOptions& options) {
  const int canvas =
      models::stride_multiple_size(options.imgsz, int(network_->strides().back()), 0, nullptr);
  const models::LetterboxedInput input =
      models::letterboxed_input(path, canvas, options.max_pixels, network_->device());
  const std::vector<Tensor>& head = network_->forward(input.batch, Mode::eval);
  NmsOptions nms;
  nms.conf_threshold = options.conf;
  nms.iou_threshold = options.iou;
  return models::detections_in_image(head, *network_, input.letterbox, nms);
}

void Model::save(const std::string& path) {
  models::make_weights_file(network_->state(), network_->num_classes(), names_, cfg_, yaml_)
      .save(path);
}

}  // namespace bareyolo
