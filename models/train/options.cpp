// models/train/options.cpp — see options.h.
#include "models/train/options.h"

#include <sched.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <utility>

namespace bareyolo::models {

namespace {

// Every numeric hyperparameter under its name in YOLOv5's hyp yamls.
std::vector<std::pair<const char*, double*>> hyp_fields(TrainOptions& o) {
  return {{"lr0", &o.schedule.lr0},
          {"lrf", &o.schedule.lrf},
          {"momentum", &o.schedule.momentum},
          {"weight_decay", &o.weight_decay},
          {"warmup_epochs", &o.schedule.warmup_epochs},
          {"warmup_momentum", &o.schedule.warmup_momentum},
          {"warmup_bias_lr", &o.schedule.warmup_bias_lr},
          {"box", &o.loss.box},
          {"cls", &o.loss.cls},
          {"cls_pw", &o.loss.cls_pw},
          {"obj", &o.loss.obj},
          {"obj_pw", &o.loss.obj_pw},
          {"anchor_t", &o.loss.anchor_t},
          {"label_smoothing", &o.loss.label_smoothing},
          {"hsv_h", &o.augment.hsv_h},
          {"hsv_s", &o.augment.hsv_s},
          {"hsv_v", &o.augment.hsv_v},
          {"degrees", &o.augment.degrees},
          {"translate", &o.augment.translate},
          {"scale", &o.augment.scale},
          {"shear", &o.augment.shear},
          {"perspective", &o.augment.perspective},
          {"flipud", &o.augment.flipud},
          {"fliplr", &o.augment.fliplr},
          {"mosaic", &o.augment.mosaic}};
}

// Hyp keys YOLOv5's yamls carry for features bareyolo does not have: accepted at 0 only.
constexpr const char* kMustBeZero[] = {"fl_gamma", "mixup", "copy_paste"};
// Hyp keys YOLOv5 defines but its training never reads.
constexpr const char* kUnused[] = {"iou_t"};

}  // namespace

void load_hyp_yaml(const std::string& path, TrainOptions& options) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    throw std::invalid_argument("--hyp " + path + ": cannot read it as yaml: " + e.what());
  }
  if (!root.IsMap()) throw std::invalid_argument("--hyp " + path + ": expected key: value lines");
  auto fields = hyp_fields(options);
  for (const auto& item : root) {
    const std::string key = item.first.as<std::string>();
    double value = 0;
    try {
      value = item.second.as<double>();
    } catch (const YAML::Exception&) {
      throw std::invalid_argument("--hyp " + path + ": '" + key + "' must be a number, got '" +
                                  YAML::Dump(item.second) + "'");
    }
    bool known = false;
    for (auto& [name, target] : fields)
      if (key == name) *target = value, known = true;
    for (const char* name : kMustBeZero)
      if (key == name) {
        if (value != 0)
          throw std::invalid_argument("--hyp " + path + ": " + key + "=" + YAML::Dump(item.second) +
                                      " is not supported by bareyolo; set it to 0");
        known = true;
      }
    for (const char* name : kUnused) known = known || key == name;
    if (!known)
      throw std::invalid_argument("--hyp " + path + ": unknown hyperparameter '" + key +
                                  "' (YOLOv5's hyp.scratch-low.yaml lists the keys)");
  }
}

const char* optimizer_name(OptimizerKind kind) {
  return kind == OptimizerKind::adamw ? "AdamW" : "SGD";
}

OptimizerKind parse_optimizer_name(const std::string& name) {
  if (name == "SGD") return OptimizerKind::sgd;
  if (name == "AdamW") return OptimizerKind::adamw;
  throw std::invalid_argument("optimizer '" + name + "' is not one of SGD, AdamW");
}

std::string options_to_json(const TrainOptions& o) {
  nlohmann::json j = {{"data", o.data},
                      {"cfg", o.cfg},
                      {"weights", o.weights},
                      {"run_dir", o.run_dir},
                      {"epochs", o.epochs},
                      {"batch", o.batch},
                      {"imgsz", o.imgsz},
                      {"workers", o.workers},
                      {"nbs", o.nbs},
                      {"patience", o.patience},
                      {"seed", o.seed},
                      {"validate", o.validate},
                      {"optimizer", optimizer_name(o.optimizer)},
                      {"freeze", o.freeze},
                      {"save_period", o.save_period},
                      {"save_steps", o.save_steps},
                      {"save_total_limit", o.save_total_limit},
                      {"cos_lr", o.schedule.cosine},
                      {"bucket_mb", o.bucket_mb}};
  j["sync_bn"] = o.sync_bn ? nlohmann::json(*o.sync_bn) : nlohmann::json(nullptr);
  TrainOptions copy = o;
  nlohmann::json hyp;
  for (auto& [name, value] : hyp_fields(copy)) hyp[name] = *value;
  j["hyp"] = hyp;
  return j.dump();
}

void options_from_json(const std::string& text, TrainOptions& o) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(std::string("the saved configuration is not JSON: ") + e.what());
  }
  auto read = [&](const nlohmann::json& object, const char* key, auto& target) {
    if (!object.contains(key))
      throw std::invalid_argument(std::string("the saved configuration has no '") + key + "'");
    try {
      object.at(key).get_to(target);
    } catch (const nlohmann::json::exception&) {
      throw std::invalid_argument(std::string("the saved configuration's '") + key +
                                  "' has the wrong type: " + object.at(key).dump());
    }
  };
  read(j, "data", o.data);
  read(j, "cfg", o.cfg);
  read(j, "weights", o.weights);
  read(j, "run_dir", o.run_dir);
  read(j, "epochs", o.epochs);
  read(j, "batch", o.batch);
  read(j, "imgsz", o.imgsz);
  read(j, "workers", o.workers);
  read(j, "nbs", o.nbs);
  read(j, "patience", o.patience);
  read(j, "seed", o.seed);
  read(j, "validate", o.validate);
  std::string optimizer;
  read(j, "optimizer", optimizer);
  o.optimizer = parse_optimizer_name(optimizer);
  read(j, "freeze", o.freeze);
  read(j, "save_period", o.save_period);
  read(j, "save_steps", o.save_steps);
  read(j, "save_total_limit", o.save_total_limit);
  read(j, "cos_lr", o.schedule.cosine);
  read(j, "bucket_mb", o.bucket_mb);
  if (!j.contains("sync_bn"))
    throw std::invalid_argument("the saved configuration has no 'sync_bn'");
  o.sync_bn =
      j.at("sync_bn").is_null() ? std::nullopt : std::optional<bool>(j.at("sync_bn").get<bool>());
  if (!j.contains("hyp")) throw std::invalid_argument("the saved configuration has no 'hyp'");
  for (auto& [name, value] : hyp_fields(o)) read(j.at("hyp"), name, *value);
}

int loader_workers(const TrainOptions& options) {
  if (options.workers != kAutoWorkers) return options.workers;
  if (!options.device_of_rank.is_cuda()) return 2;
  cpu_set_t allowed;
  const int cores = ::sched_getaffinity(0, sizeof allowed, &allowed) == 0 ? CPU_COUNT(&allowed) : 1;
  const int per_rank_batch = std::max(1, options.batch / std::max(1, options.world_size));
  return std::clamp(cores - 1, 1, per_rank_batch);
}

}  // namespace bareyolo::models
