// models/train/options.cpp — see options.h.
#include "models/train/options.h"

#include <sched.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string_view>
#include <type_traits>
#include <utility>

#include "engine/json_numbers.h"
#include "kernels/devices.h"
#include "models/train/flat_yaml.h"
#include "models/yolo/model_config.h"  // defines: kMaxAnchorsPerLevel

namespace bareyolo::models {

namespace {

constexpr double kNoLimit = std::numeric_limits<double>::infinity();

// The values at which a hyperparameter means something: from `low` to `high`, each end
// included unless open. No range holds NaN or an infinity.
struct HypRange {
  double low, high;
  bool low_open = false, high_open = false;

  bool contains(double v) const {
    return std::isfinite(v) && (low_open ? v > low : v >= low) &&
           (high_open ? v < high : v <= high);
  }
  std::string describe() const {
    if (high == kNoLimit) return (low_open ? "> " : ">= ") + number_text(low);
    return std::string("in ") + (low_open ? "(" : "[") + number_text(low) + ", " +
           number_text(high) + (high_open ? ")" : "]");
  }
  static std::string number_text(double v) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", v);
    return text;
  }
};
constexpr HypRange kPositive{0, kNoLimit, true};
constexpr HypRange kNonNegative{0, kNoLimit};
constexpr HypRange kFraction{0, 1};  // a probability, a gain of at most 100%
constexpr HypRange kBelowOne{0, 1, false,
                             true};  // a momentum or decay; a zoom that keeps images > 0

struct HypField {
  const char* name;
  double* value;
  HypRange range;
  const char* meaning;  // for messages
};

// Every numeric hyperparameter under its name in YOLOv5's hyp yamls, with the range in which
// it means something (YOLOv5's loss and augmentation code, its hyp.scratch-low.yaml comments).
std::vector<HypField> hyp_fields(TrainOptions& o) {
  return {
      {"lr0", &o.schedule.lr0, kPositive, "the initial learning rate"},
      {"lrf", &o.schedule.lrf, kFraction, "the final learning rate as a fraction of lr0"},
      {"momentum", &o.schedule.momentum, kBelowOne, "SGD's momentum, Adam's beta1"},
      {"weight_decay", &o.weight_decay, kBelowOne, "the optimizer's weight decay"},
      {"warmup_epochs", &o.schedule.warmup_epochs, kNonNegative, "epochs of warm-up"},
      {"warmup_momentum", &o.schedule.warmup_momentum, kBelowOne, "the warm-up's first momentum"},
      {"warmup_bias_lr", &o.schedule.warmup_bias_lr, kNonNegative,
       "the warm-up's first bias learning rate"},
      {"box", &o.loss.box, kNonNegative, "the box loss gain"},
      {"cls", &o.loss.cls, kNonNegative, "the class loss gain"},
      {"cls_pw", &o.loss.cls_pw, kPositive, "the class BCE's positive weight"},
      {"obj", &o.loss.obj, kNonNegative, "the objectness loss gain"},
      {"obj_pw", &o.loss.obj_pw, kPositive, "the objectness BCE's positive weight"},
      // A target matches an anchor when max(r, 1/r) < anchor_t for both its width and height
      // ratios r to the anchor (strict); max(r, 1/r) >= 1, so at anchor_t <= 1 nothing matches
      // and the box and class losses are zero.
      {"anchor_t",
       &o.loss.anchor_t,
       {1, kNoLimit, true},
       "a target matches anchors less than anchor_t times larger or smaller"},
      {"label_smoothing", &o.loss.label_smoothing, kFraction, "the class targets' smoothing"},
      {"fl_gamma", &o.loss.fl_gamma, kNonNegative,
       "the focal loss's gamma around the obj and cls BCE, 0 for none"},
      {"hsv_h", &o.augment.hsv_h, kFraction, "the hue gain"},
      {"hsv_s", &o.augment.hsv_s, kFraction, "the saturation gain"},
      {"hsv_v", &o.augment.hsv_v, kFraction, "the value gain"},
      {"degrees", &o.augment.degrees, {0, 180}, "the rotation, +/- degrees"},
      {"translate", &o.augment.translate, kFraction, "the translation, +/- a fraction"},
      {"scale", &o.augment.scale, kBelowOne, "the zoom, 1 +/- scale"},
      {"shear", &o.augment.shear, {0, 90, false, true}, "the shear, +/- degrees"},
      {"perspective", &o.augment.perspective, {0, 0.001}, "the perspective, +/- a fraction"},
      {"flipud", &o.augment.flipud, kFraction, "the probability of an up-down flip"},
      {"fliplr", &o.augment.fliplr, kFraction, "the probability of a left-right flip"},
      {"mosaic", &o.augment.mosaic, kFraction, "the probability of a mosaic"},
      {"mixup", &o.augment.mixup, kFraction, "the probability of a mixup"},
      {"copy_paste", &o.augment.copy_paste, kFraction, "the share of objects copy-pasted"}};
}

// "anchors = 0.3 must be 0 or ...", or "" when `anchors` is a hyp anchors value YOLOv5 takes:
// 0 (the model yaml's anchors), or one that rounds (half to even) to 1..kMaxAnchorsPerLevel.
std::string hyp_anchors_problem(double anchors) {
  const double per_level = std::nearbyint(anchors);
  if (anchors == 0 || (per_level >= 1 && per_level <= kMaxAnchorsPerLevel)) return "";
  return "anchors = " + HypRange::number_text(anchors) +
         " must be 0 (the model yaml's anchors) or a number of anchors per level that rounds "
         "to 1.." +
         std::to_string(kMaxAnchorsPerLevel);
}

// "lr0 = -0.01 must be > 0 (the initial learning rate)", or "" when `value` is in range.
std::string hyp_value_problem(const HypField& field, double value) {
  if (field.range.contains(value)) return "";
  return std::string(field.name) + " = " + HypRange::number_text(value) + " must be " +
         field.range.describe() + " (" + field.meaning + ")";
}

// Hyp keys YOLOv5 defines but its training never reads.
constexpr const char* kUnused[] = {"iou_t"};

// The entries of a --hyp yaml on `options`, each checked (load_hyp_yaml in options.h).
void apply_hyp_entries(const std::vector<FlatYamlEntry>& entries, const std::string& path,
                       TrainOptions& options) {
  const std::vector<HypField> fields = hyp_fields(options);
  for (const FlatYamlEntry& entry : entries) {
    const std::string where = "--hyp " + path + ":" + std::to_string(entry.line) + ": ";
    const std::string& key = entry.key;
    double value = 0;
    try {
      value = entry.value.as<double>();
    } catch (const YAML::Exception&) {
      throw std::invalid_argument(where + "'" + key + "' must be a number, got '" +
                                  entry.value.Scalar() + "'");
    }
    bool known = false;
    for (const HypField& field : fields)
      if (key == field.name) {
        if (const std::string problem = hyp_value_problem(field, value); !problem.empty())
          throw std::invalid_argument(where + problem);
        *field.value = value, known = true;
      }
    if (key == "anchors") {  // the model's, not the loss's (run_model.h)
      if (const std::string problem = hyp_anchors_problem(value); !problem.empty())
        throw std::invalid_argument(where + problem);
      options.anchors = value, known = true;
    }
    for (const char* name : kUnused) known = known || key == name;
    if (!known)
      throw std::invalid_argument(where + "unknown hyperparameter '" + key +
                                  "' (YOLOv5's hyp.scratch-low.yaml lists the keys)");
  }
}

}  // namespace

void load_hyp_yaml(const std::string& path, TrainOptions& options) {
  apply_hyp_entries(read_flat_yaml(path, "--hyp"), path, options);
}

void parse_hyp_yaml(const std::string& yaml_text, const std::string& path, TrainOptions& options) {
  apply_hyp_entries(parse_flat_yaml(yaml_text, path, "--hyp"), path, options);
}

void check_hyp(const TrainOptions& options) {
  TrainOptions o = options;  // the table takes mutable references
  for (const HypField& field : hyp_fields(o))
    if (const std::string problem = hyp_value_problem(field, *field.value); !problem.empty())
      throw std::invalid_argument("hyperparameter " + problem);
  if (const std::string problem = hyp_anchors_problem(options.anchors); !problem.empty())
    throw std::invalid_argument("hyperparameter " + problem);
}

std::vector<HypValue> hyp_values(const TrainOptions& options) {
  TrainOptions o = options;  // the table takes mutable references
  std::vector<HypValue> values;
  for (const HypField& field : hyp_fields(o)) values.push_back({field.name, *field.value});
  if (options.anchors != 0) values.push_back({"anchors", options.anchors});  // YOLOv5's last
  return values;
}

bool records_cuda_graphs(const TrainOptions& options, const Device& device, bool graphs_supported,
                         StepCollectives collectives, const GatedDefaults& gates) {
  if (options.cuda_graph == CudaGraphMode::off) return false;
  std::string obstacle;
  if (!graphs_supported)
    obstacle = "it trains on " + device.str() + ", which has no CUDA graphs";
  else if (collectives == StepCollectives::unrecordable)
    obstacle =
        "its step talks to other ranks over TCP or shared memory, or over NCCL under "
        "BAREYOLO_DESYNC_CHECK=1 (which waits before each collective), and a CUDA graph "
        "cannot hold such collectives (NCCL's it can)";
  else if (collectives == StepCollectives::recordable && options.cuda_graph != CudaGraphMode::on &&
           !gates.cuda_graph_with_nccl)
    return false;  // auto: NCCL steps are recorded on request only, until the gate opens
  else if (options.rect)
    obstacle = "--rect gives batches of many shapes";
  else if (options.multi_scale)
    obstacle = "--multi-scale gives batches of many shapes";
  if (obstacle.empty()) return true;
  if (options.cuda_graph == CudaGraphMode::on)
    throw std::invalid_argument("--cuda-graph on: this run cannot record its steps: " + obstacle +
                                "; use --cuda-graph auto or off");
  return false;
}

DeviceAbilities abilities_of(const Device& device) {
  if (!device.is_cuda()) return {};
  return {.gpu = true, .bf16_tensor_cores = gpu_properties(device.index).compute_major >= 8};
}

TrainOptions resolved_for(const TrainOptions& options, const DeviceAbilities& device,
                          const GatedDefaults& gates) {
  TrainOptions resolved = options;
  if (!resolved.amp) resolved.amp = gates.amp_on_bf16_gpus && device.bf16_tensor_cores;
  if (resolved.channels_last == ChannelsLastMode::automatic)
    resolved.channels_last =
        gates.channels_last_on_gpus && device.gpu ? ChannelsLastMode::on : ChannelsLastMode::off;
  return resolved;
}

bool mixed_precision(const TrainOptions& resolved) {
  if (!resolved.amp)
    throw std::logic_error("mixed_precision: --amp is unresolved (resolved_for, options.h)");
  return *resolved.amp;
}

bool channels_last(const TrainOptions& resolved) {
  if (resolved.channels_last == ChannelsLastMode::automatic)
    throw std::logic_error(
        "channels_last: --channels-last is unresolved (resolved_for, options.h)");
  return resolved.channels_last == ChannelsLastMode::on;
}

const char* optimizer_name(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::adam:
      return "Adam";
    case OptimizerKind::adamw:
      return "AdamW";
    default:
      return "SGD";
  }
}

OptimizerKind parse_optimizer_name(const std::string& name) {
  if (name == "SGD") return OptimizerKind::sgd;
  if (name == "Adam") return OptimizerKind::adam;
  if (name == "AdamW") return OptimizerKind::adamw;
  throw std::invalid_argument("optimizer '" + name + "' is not one of SGD, Adam, AdamW");
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
  visit("rect", o.rect);
  visit("multi_scale", o.multi_scale);
  visit("optimizer", o.optimizer);
  visit("freeze", o.freeze);
  visit("save_period", o.save_period);
  visit("save_steps", o.save_steps);
  visit("save_total_limit", o.save_total_limit);
  visit("cos_lr", o.schedule.cosine);
  visit("bucket_mb", o.bucket_mb);
  visit("sync_bn", o.sync_bn);
  visit("single_cls", o.single_cls);
}

// Saved keys (and hyp keys) that checkpoints of earlier versions lack: their runs trained with
// the field's default (off, or 0: the only value bareyolo took then), which reading such a
// checkpoint gives it.
constexpr const char* kKeysAddedLater[] = {
    "rect", "multi_scale", "single_cls", "mixup", "copy_paste", "fl_gamma",
};
bool added_later(const char* key) {
  return std::any_of(std::begin(kKeysAddedLater), std::end(kKeysAddedLater),
                     [&](const char* added) { return std::string_view(added) == key; });
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

// `what` names the value in the message when it is no whole number of the field's type.
template <class T>
void read_saved_value(const nlohmann::json& value, T& target, const std::string& what) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
    read_whole_number(value, target, what);
  else
    value.get_to(target);
}
void read_saved_value(const nlohmann::json& value, OptimizerKind& kind, const std::string&) {
  kind = parse_optimizer_name(value.get<std::string>());
}
void read_saved_value(const nlohmann::json& value, std::optional<bool>& flag, const std::string&) {
  flag = value.is_null() ? std::nullopt : std::optional<bool>(value.get<bool>());
}

}  // namespace

std::string options_to_json(const TrainOptions& options) {
  TrainOptions o = options;  // the tables take mutable references
  nlohmann::json j, hyp;
  saved_fields(o, [&](const char* key, const auto& value) { j[key] = saved_value(value); });
  for (const HypField& field : hyp_fields(o)) hyp[field.name] = *field.value;
  j["hyp"] = hyp;
  return j.dump();
}

std::vector<FlagValue> numerics_flags(const TrainOptions& options) {
  auto on_off = [](bool on) { return std::string(on ? "on" : "off"); };
  return {{"--amp", options.amp ? on_off(*options.amp) : "auto"},
          {"--grad-dtype", options.bf16_grad_buckets ? "bf16" : "fp32"},
          {"--tf32", on_off(options.tf32)},
          {"--cudnn", options.cudnn_deterministic ? "deterministic" : "fast"},
          {"--winograd", on_off(options.winograd)}};
}

void options_from_json(const std::string& text, TrainOptions& o) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(std::string("the saved configuration is not JSON: ") + e.what());
  }
  auto read = [&](const nlohmann::json& object, const char* key, auto& target) {
    if (!object.contains(key) && added_later(key)) {
      target = std::remove_reference_t<decltype(target)>{};
      return;
    }
    if (!object.contains(key))
      throw std::invalid_argument(std::string("the saved configuration has no '") + key + "'");
    try {
      read_saved_value(object.at(key), target,
                       std::string("the saved configuration's '") + key + "'");
    } catch (const nlohmann::json::exception&) {
      throw std::invalid_argument(std::string("the saved configuration's '") + key +
                                  "' has the wrong type: " + object.at(key).dump());
    }
  };
  saved_fields(o, [&](const char* key, auto& target) { read(j, key, target); });
  if (!j.contains("hyp")) throw std::invalid_argument("the saved configuration has no 'hyp'");
  for (const HypField& field : hyp_fields(o)) read(j.at("hyp"), field.name, *field.value);
}

void check_nosave(const TrainOptions& options) {
  if (!options.nosave) return;
  auto refuse = [](const std::string& flag) {
    throw std::invalid_argument("--nosave writes no checkpoint before the run ends, which " + flag +
                                " needs; drop one of them");
  };
  if (options.save_period > 0) refuse("--save-period " + std::to_string(options.save_period));
  if (options.save_steps > 0) refuse("--save-steps " + std::to_string(options.save_steps));
  if (options.max_restarts > 0)
    refuse("--max-restarts " + std::to_string(options.max_restarts) +
           " (a restart continues from the newest checkpoint)");
}

int loader_workers(int workers, const Device& device, int per_rank_batch) {
  if (workers != kAutoWorkers) return workers;
  if (!device.is_cuda()) return 2;
  cpu_set_t allowed;
  const int cores = ::sched_getaffinity(0, sizeof allowed, &allowed) == 0 ? CPU_COUNT(&allowed) : 1;
  return std::clamp(cores - 1, 1, std::max(1, per_rank_batch));
}

}  // namespace bareyolo::models
