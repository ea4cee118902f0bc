// models/train/rank_agreement.cpp — see rank_agreement.h.
#include "models/train/rank_agreement.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "data/cache_files.h"
#include "data/dataset_yaml.h"
#include "data/regular_file.h"
#include "models/train/run_model.h"
#include "models/yolo/model_config.h"
#include "models/yolo/yolo_model.h"

namespace bareyolo::models {

namespace {

// Saved fields that may differ between ranks: paths (another machine mounts the same files
// elsewhere; the model and the data are compared by content instead) and a rank's own loader
// threads.
constexpr const char* kNotCompared[] = {"data", "cfg", "weights", "run_dir", "workers"};

const char* kConfigKeyPrefix = "bareyolo/configuration/";
const char* kVerdictKey = "bareyolo/configuration/verdict";

// A JSON value as a message shows it: text unquoted, a flag on or off.
std::string value_text(const nlohmann::json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_boolean()) return value.get<bool>() ? "on" : "off";
  return value.dump();
}

// "--cos-lr" for "cos_lr".
std::string flag_name(std::string key) {
  for (char& c : key) c = c == '_' ? '-' : c;
  return "--" + key;
}

std::string file_name(const std::string& path) {
  return std::filesystem::path(path).filename().string();
}

// The model's parameters and buffers, names and shapes, as one hash; built on the CPU.
ConfigurationField model_field(const TrainOptions& options, int classes) {
  DetectionModel model(run_model_config(options), {.nc = classes});
  uint64_t hash = data::fnv1a("");
  for (const StateEntry& entry : model.state()) {
    std::string line = entry.name;
    for (int64_t dim : entry.dims) line += " " + std::to_string(dim);
    hash = data::fnv1a(line + "\n", hash);
  }
  return {"model", data::hex(hash),
          file_name(options.cfg.empty() ? options.weights : options.cfg) + " (" +
              std::to_string(model.parameter_count()) + " parameters for " +
              std::to_string(classes) + " classes, names and shapes hashed to " + data::hex(hash) +
              ")"};
}

ConfigurationField data_field(const std::string& yaml) {
  const data::FileContents contents = data::read_regular_file(yaml);
  if (contents.kind != data::FileContents::regular)
    throw std::runtime_error("cannot read the data yaml " + yaml);
  const std::string hash = data::hex(data::fnv1a(contents.bytes));
  return {"--data", hash, file_name(yaml) + " (contents hashed to " + hash + ")"};
}

RankConfiguration numerics_fields(const TrainOptions& options) {
  RankConfiguration fields;
  for (const auto& [flag, value] : numerics_flags(options)) fields.push_back({flag, value, ""});
  return fields;
}

RankConfiguration build_configuration(const TrainOptions& options) {
  RankConfiguration fields;
  const nlohmann::json saved = nlohmann::json::parse(options_to_json(options));
  for (const auto& [key, value] : saved.items()) {
    if (std::ranges::find(kNotCompared, key) != std::end(kNotCompared)) continue;
    if (key == "hyp") {
      for (const auto& [name, number] : value.items())
        fields.push_back({"hyp " + name, value_text(number), ""});
    } else if (key == "sync_bn") {  // unset is on
      fields.push_back({"--sync-bn", value.is_null() ? "on" : value_text(value), ""});
    } else if (key == "validate") {
      fields.push_back({"--no-val", value.get<bool>() ? "off" : "on", ""});
    } else {
      fields.push_back({flag_name(key), value_text(value), ""});
    }
  }
  for (ConfigurationField& field : numerics_fields(options)) fields.push_back(std::move(field));
  fields.push_back({"--max-steps", std::to_string(options.max_steps), ""});
  // Another pixel limit skips other images: the ranks' datasets would differ.
  fields.push_back({"--max-pixels", std::to_string(options.max_pixels), ""});
  fields.push_back(data_field(options.data));
  fields.push_back(model_field(options, data::read_dataset_yaml(options.data).num_classes()));
  return fields;
}

const std::string& shown(const ConfigurationField& field) {
  return field.shown.empty() ? field.value : field.shown;
}

std::string to_json(const RankConfiguration& fields) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& field : fields) rows.push_back({field.name, field.value, field.shown});
  return rows.dump();
}

RankConfiguration from_json(const std::string& text) {
  RankConfiguration fields;
  for (const auto& row : nlohmann::json::parse(text))
    fields.push_back(
        {row[0].get<std::string>(), row[1].get<std::string>(), row[2].get<std::string>()});
  return fields;
}

// `build` of the options resolved for `device`, or one "error" field saying why not: told to
// rank 0, so that no rank waits for it.
RankConfiguration built_or_error(const TrainOptions& options, const Device& device,
                                 RankConfiguration (*build)(const TrainOptions&)) {
  try {
    return build(resolved_for(options, abilities_of(device)));
  } catch (const std::exception& error) {
    return {{"error", error.what(), ""}};
  }
}

}  // namespace

RankConfiguration rank_configuration(const TrainOptions& options, const Device& device) {
  return built_or_error(options, device, build_configuration);
}

RankConfiguration device_configuration(const TrainOptions& options, const Device& device) {
  return built_or_error(options, device, numerics_fields);
}

std::string configuration_differences(const std::vector<RankConfiguration>& by_rank) {
  std::string differences;
  auto add = [&](const std::string& sentence) {
    differences += (differences.empty() ? "" : "; ") + sentence;
  };
  for (size_t rank = 0; rank < by_rank.size(); ++rank) {
    const std::string who = "rank " + std::to_string(rank);
    if (!by_rank[rank].empty() && by_rank[rank][0].name == "error")
      add(who + " could not build its configuration: " + by_rank[rank][0].value);
    if (rank == 0 || by_rank[rank].empty() || by_rank[rank][0].name == "error" ||
        by_rank[0].empty() || by_rank[0][0].name == "error")
      continue;
    for (const ConfigurationField& field : by_rank[rank]) {
      const auto reference = std::ranges::find(by_rank[0], field.name, &ConfigurationField::name);
      if (reference == by_rank[0].end())
        add(who + " has " + field.name + " " + shown(field) + ", rank 0 has none");
      else if (reference->value != field.value)
        add(who + " has " + field.name + " " + shown(field) + ", rank 0 has " + shown(*reference));
    }
  }
  if (differences.empty()) return "";
  return "the ranks' configurations differ: " + differences +
         ". Start every rank with the same flags, model and data (nothing was written)";
}

void agree_on_configuration(dist::Store& store, int rank, int world_size,
                            const RankConfiguration& mine) {
  store.set(kConfigKeyPrefix + std::to_string(rank), to_json(mine));
  if (rank == 0) {
    std::vector<RankConfiguration> by_rank;
    for (int other = 0; other < world_size; ++other)
      by_rank.push_back(from_json(store.get(kConfigKeyPrefix + std::to_string(other))));
    store.set(kVerdictKey, configuration_differences(by_rank));
  }
  const std::string verdict = store.get(kVerdictKey);
  if (!verdict.empty()) throw std::invalid_argument(verdict);
}

}  // namespace bareyolo::models
