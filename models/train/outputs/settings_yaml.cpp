// models/train/outputs/settings_yaml.cpp — see settings_yaml.h.
#include "models/train/outputs/settings_yaml.h"

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <cstdint>
#include <filesystem>
#include <span>

#include "engine/atomic_file.h"

namespace bareyolo::models {

namespace {

// The shortest text that reads back as exactly `value`.
std::string number_text(double value) {
  char text[32];
  const auto end = std::to_chars(text, text + sizeof text, value).ptr;
  return std::string(text, end);
}

void write_text(const std::string& path, const std::string& text) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(text.data());
  write_file_atomically(path, {std::span<const uint8_t>(bytes, text.size())});
}

}  // namespace

std::string hyp_yaml_text(const TrainOptions& options) {
  std::string text = "# the hyperparameters of this run (YOLOv5's hyp yaml; --hyp reads it)\n";
  for (const HypValue& hyp : hyp_values(options))
    text += std::string(hyp.name) + ": " + number_text(hyp.value) + "\n";
  return text;
}

std::string opt_yaml_text(const TrainOptions& options, const std::string& hyp_yaml_path) {
  const std::filesystem::path run_dir(options.run_dir);
  YAML::Emitter out;
  out << YAML::Comment("this run's configuration as `bareyolo train --config` keys");
  out << YAML::BeginMap;
  out << YAML::Key << "data" << YAML::Value << options.data;
  out << YAML::Key << "cfg" << YAML::Value << options.cfg;
  out << YAML::Key << "weights" << YAML::Value << options.weights;  // "": from scratch
  out << YAML::Key << "hyp" << YAML::Value << hyp_yaml_path;
  out << YAML::Key << "epochs" << YAML::Value << options.epochs;
  out << YAML::Key << "batch_size" << YAML::Value << options.batch;
  out << YAML::Key << "imgsz" << YAML::Value << options.imgsz;
  out << YAML::Key << "rect" << YAML::Value << options.rect;
  out << YAML::Key << "multi_scale" << YAML::Value << options.multi_scale;
  out << YAML::Key << "noval" << YAML::Value << !options.validate;
  out << YAML::Key << "noautoanchor" << YAML::Value << !options.autoanchor;
  out << YAML::Key << "single_cls" << YAML::Value << options.single_cls;
  out << YAML::Key << "optimizer" << YAML::Value << optimizer_name(options.optimizer);
  if (options.sync_bn)  // unset: on with more than one rank, as no flag says
    out << YAML::Key << (*options.sync_bn ? "sync_bn" : "no_sync_bn") << YAML::Value << true;
  out << YAML::Key << "workers" << YAML::Value << options.workers;
  out << YAML::Key << "project" << YAML::Value << run_dir.parent_path().string();
  out << YAML::Key << "name" << YAML::Value << run_dir.filename().string();
  out << YAML::Key << "cos_lr" << YAML::Value << options.schedule.cosine;
  out << YAML::Key << "patience" << YAML::Value << options.patience;
  out << YAML::Key << "freeze" << YAML::Value << options.freeze;
  out << YAML::Key << "save_period" << YAML::Value << options.save_period;
  out << YAML::Key << "seed" << YAML::Value << options.seed;
  out << YAML::Key << "nbs" << YAML::Value << options.nbs;
  out << YAML::Key << "save_steps" << YAML::Value << options.save_steps;
  out << YAML::Key << "save_total_limit" << YAML::Value << options.save_total_limit;
  out << YAML::Key << "bucket_mb" << YAML::Value << options.bucket_mb;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

void write_settings_yamls(const TrainOptions& options, const std::string& run_dir) {
  const std::filesystem::path dir = std::filesystem::absolute(run_dir);
  const std::string hyp_path = (dir / "hyp.yaml").string();
  write_text(hyp_path, hyp_yaml_text(options));
  write_text((dir / "opt.yaml").string(), opt_yaml_text(options, hyp_path));
}

}  // namespace bareyolo::models
