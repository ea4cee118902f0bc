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

namespace {

// Every saved field of TrainOptions under its name in the configuration JSON (checkpoints,
// report.html), in one table that writing and reading both walk; the hyperparameters go
// under "hyp", by hyp_fields. The launch (device, ranks, backend) is not saved: a resumed
// run is launched anew.
template <class Visit>
void saved_fields(TrainOptions& o, Visit&& visit) {
  visit("data", o.data);
  visit("cfg", o.cfg);
  visit("weights", o.weights);
  visit("run_dir", o.run_dir);
  visit("epochs", o.epochs);
  visit("batch", o.batch);
  visit("imgsz", o.imgsz);
  visit("workers", o.workers);
  visit("nbs", o.nbs);
  visit("patience", o.patience);
  visit("seed", o.seed);
  visit("validate", o.validate);
  visit("optimizer", o.optimizer);
  visit("freeze", o.freeze);
  visit("save_period", o.save_period);
  visit("save_steps", o.save_steps);
  visit("save_total_limit", o.save_total_limit);
  visit("cos_lr", o.schedule.cosine);
  visit("bucket_mb", o.bucket_mb);
  visit("sync_bn", o.sync_bn);
}

// The JSON form of a field: the optimizer by its name, an unset sync_bn as null.
template <class T>
nlohmann::json saved_value(const T& value) {
  return value;
}
nlohmann::json saved_value(OptimizerKind kind) { return optimizer_name(kind); }
nlohmann::json saved_value(const std::optional<bool>& flag) {
  return flag ? nlohmann::json(*flag) : nlohmann::json(nullptr);
}

template <class T>
void read_saved_value(const nlohmann::json& value, T& target) {
  value.get_to(target);
}
void read_saved_value(const nlohmann::json& value, OptimizerKind& kind) {
  kind = parse_optimizer_name(value.get<std::string>());
}
void read_saved_value(const nlohmann::json& value, std::optional<bool>& flag) {
  flag = value.is_null() ? std::nullopt : std::optional<bool>(value.get<bool>());
}

}  // namespace

std::string options_to_json(const TrainOptions& options) {
  TrainOptions o = options;  // the tables take mutable references
  nlohmann::json j, hyp;
  saved_fields(o, [&](const char* key, const auto& value) { j[key] = saved_value(value); });
  for (auto& [name, value] : hyp_fields(o)) hyp[name] = *value;
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
      read_saved_value(object.at(key), target);
    } catch (const nlohmann::json::exception&) {
      throw std::invalid_argument(std::string("the saved configuration's '") + key +
                                  "' has the wrong type: " + object.at(key).dump());
    }
  };
  saved_fields(o, [&](const char* key, auto& target) { read(j, key, target); });
  if (!j.contains("hyp")) throw std::invalid_argument("the saved configuration has no 'hyp'");
  for (auto& [name, value] : hyp_fields(o)) read(j.at("hyp"), name, *value);
}

int loader_workers(int workers, const Device& device, int per_rank_batch) {
  if (workers != kAutoWorkers) return workers;
  if (!device.is_cuda()) return 2;
  cpu_set_t allowed;
  const int cores = ::sched_getaffinity(0, sizeof allowed, &allowed) == 0 ? CPU_COUNT(&allowed) : 1;
  return std::clamp(cores - 1, 1, std::max(1, per_rank_batch));
}

}  // namespace bareyolo::models
