// models/yolo/model_config.cpp — yaml-cpp reading of a model yaml (see model_config.h).
//
// yaml-cpp's own errors say "bad conversion" without the key, so every read here names the
// key, the file and the row itself.
#include "models/yolo/model_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "engine/shipped_files.h"

namespace bareyolo::models {

namespace {

[[noreturn]] void fail(const std::string& where, const std::string& what) {
  throw std::invalid_argument(where + ": " + what);
}

double number_of(const YAML::Node& node, const std::string& where, const std::string& key) {
  try {
    return node.as<double>();
  } catch (const YAML::Exception&) {
    fail(where, key + " must be a number, got '" + YAML::Dump(node) + "'");
  }
}

int integer_of(const YAML::Node& node, const std::string& where, const std::string& key) {
  double value = number_of(node, where, key);
  // Compared as doubles first: casting a value outside int's range (or NaN) is undefined.
  if (!(value == std::floor(value) && std::fabs(value) <= std::numeric_limits<int>::max()))
    fail(where, key + " must be a whole number within +-2147483647, got " + YAML::Dump(node));
  return static_cast<int>(value);
}

ModelArg parse_arg(const YAML::Node& node, const std::string& where) {
  ModelArg arg;
  if (!node.IsScalar()) fail(where, "argument '" + YAML::Dump(node) + "' is not a scalar");
  const std::string& text = node.Scalar();
  if (node.Tag() == "!") {  // quoted: a plain string such as "nearest"
    arg.kind = ModelArg::Kind::text;
    arg.text = text;
  } else if (text == "None" || text == "null" || text == "~") {
    arg.kind = ModelArg::Kind::none;
  } else if (text == "True" || text == "true" || text == "False" || text == "false") {
    arg.kind = ModelArg::Kind::boolean;
    arg.flag = text[0] == 'T' || text[0] == 't';
  } else {
    std::istringstream in(text);
    double value;
    if (in >> value && in.eof()) {
      arg.kind = ModelArg::Kind::number;
      arg.number = value;
    } else {  // a name the builder resolves (nc, anchors) or rejects
      arg.kind = ModelArg::Kind::name;
      arg.text = text;
    }
  }
  return arg;
}

ModelRow parse_row(const YAML::Node& node, int index, const ModelConfig& config) {
  ModelRow row;
  row.index = index;
  row.line = node.Mark().line + 1;
  const std::string where =
      config.source + ", row " + std::to_string(index) + " (line " + std::to_string(row.line) + ")";
  if (!node.IsSequence() || node.size() != 4)
    fail(where, "a row must be [from, number, module, args], got " + YAML::Dump(node));
  const YAML::Node& from = node[0];
  if (from.IsSequence()) {
    for (const auto& f : from) row.from.push_back(integer_of(f, where, "from"));
  } else {
    row.from.push_back(integer_of(from, where, "from"));
  }
  if (row.from.empty()) fail(where, "from must name at least one layer");
  row.number = integer_of(node[1], where, "number");
  if (row.number < 1) fail(where, "number must be at least 1, got " + std::to_string(row.number));
  if (!node[2].IsScalar()) fail(where, "module must be a name, got " + YAML::Dump(node[2]));
  row.module = node[2].Scalar();
  if (!node[3].IsSequence()) fail(where, "args must be a list, got " + YAML::Dump(node[3]));
  for (const auto& a : node[3]) row.args.push_back(parse_arg(a, where));
  return row;
}

// The yaml's anchors, a list of levels, each [w0,h0, w1,h1, ...] in pixels.
std::vector<std::vector<double>> anchor_levels(const YAML::Node& anchors,
                                               const std::string& source) {
  if (!anchors.IsSequence() || anchors.size() == 0)
    fail(source,
         "anchors must be a list of levels, each [w0,h0, w1,h1, ...] in pixels, or a number of "
         "anchors per level for AutoAnchor to find");
  std::vector<std::vector<double>> levels;
  for (const auto& level : anchors) {
    std::vector<double> sizes;
    if (level.IsSequence())
      for (const auto& v : level) sizes.push_back(number_of(v, source, "anchors"));
    if (sizes.empty() || sizes.size() % 2 != 0 || sizes.size() != anchors[0].size())
      fail(source, "every anchors level must hold the same even number of values, got " +
                       YAML::Dump(level));
    for (size_t k = 0; k < sizes.size(); ++k)
      if (!(std::isfinite(sizes[k]) && sizes[k] > 0))  // the loss divides by them
        fail(source, "anchors level " + std::to_string(levels.size()) + ", value " +
                         std::to_string(k) + " (the " + (k % 2 ? "height" : "width") +
                         " of anchor " + std::to_string(k / 2) + ") is " + YAML::Dump(level[k]) +
                         "; anchors are widths and heights in pixels and must be positive");
    levels.push_back(sizes);
  }
  return levels;
}

}  // namespace

std::string ModelConfig::where(const ModelRow& row) const {
  return source + ", row " + std::to_string(row.index) + " (line " + std::to_string(row.line) + ")";
}

void fail_at_row(const ModelConfig& config, const ModelRow& row, const std::string& what) {
  throw std::invalid_argument(config.where(row) + ", " + row.module + ": " + what);
}

int int_arg(const ModelConfig& config, const ModelRow& row, size_t k, int fallback) {
  if (k >= row.args.size()) return fallback;
  const ModelArg& arg = row.args[k];
  // Compared as doubles first: casting a value outside int's range is undefined (found by
  // fuzz/model_yaml.cpp).
  if (arg.kind != ModelArg::Kind::number || arg.number != std::floor(arg.number) ||
      std::fabs(arg.number) > std::numeric_limits<int>::max())
    fail_at_row(config, row,
                "argument " + std::to_string(k) + " must be a whole number within +-2147483647");
  return static_cast<int>(arg.number);
}

bool bool_arg(const ModelConfig& config, const ModelRow& row, size_t k, bool fallback) {
  if (k >= row.args.size()) return fallback;
  if (row.args[k].kind != ModelArg::Kind::boolean)
    fail_at_row(config, row, "argument " + std::to_string(k) + " must be True or False");
  return row.args[k].flag;
}

int input_row(const ModelConfig& config, const ModelRow& row, int from) {
  if (row.index == 0 && from == -1) return kNetworkInput;
  const int index = from < 0 ? row.index + from : from;
  if (index < 0 || index >= row.index)
    fail_at_row(config, row,
                "from index " + std::to_string(from) +
                    " does not name an earlier row (this is row " + std::to_string(row.index) +
                    ")");
  return index;
}

ModelConfig parse_model_config(const std::string& yaml_text, const std::string& source) {
  ModelConfig config;
  config.source = source;
  config.yaml_text = yaml_text;
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::ParserException& e) {
    fail(source, std::string("not valid yaml: ") + e.what());
  }
  if (!root.IsMap()) fail(source, "a model yaml must be a map with nc, anchors, backbone, head");
  for (const char* key : {"nc", "depth_multiple", "width_multiple", "anchors", "backbone", "head"})
    if (!root[key]) fail(source, std::string("missing key '") + key + "'");

  config.nc = integer_of(root["nc"], source, "nc");
  config.depth_multiple = number_of(root["depth_multiple"], source, "depth_multiple");
  config.width_multiple = number_of(root["width_multiple"], source, "width_multiple");
  if (root["channel_multiple"])
    config.channel_multiple = integer_of(root["channel_multiple"], source, "channel_multiple");
  if (root["ch"]) config.input_channels = integer_of(root["ch"], source, "ch");
  if (config.nc < 1) fail(source, "nc must be at least 1, got " + std::to_string(config.nc));
  if (config.depth_multiple <= 0 || config.width_multiple <= 0)
    fail(source, "depth_multiple and width_multiple must be positive");

  const YAML::Node& anchors = root["anchors"];
  const bool anchors_counted = anchors.IsScalar();  // YOLOv5's `anchors: 3`
  if (!anchors_counted) config.anchors = anchor_levels(anchors, source);

  int index = 0;
  for (const char* section : {"backbone", "head"}) {
    if (!root[section].IsSequence()) fail(source, std::string(section) + " must be a list of rows");
    for (const auto& row : root[section]) config.rows.push_back(parse_row(row, index++, config));
  }
  if (config.rows.empty()) fail(source, "the model has no layers");
  if (anchors_counted)
    config = with_placeholder_anchors(std::move(config), integer_of(anchors, source, "anchors"),
                                      source + ": anchors");
  return config;
}

ModelConfig with_placeholder_anchors(ModelConfig config, int per_level, const std::string& source) {
  if (per_level < 1 || per_level > kMaxAnchorsPerLevel)
    throw std::invalid_argument(source + " is " + std::to_string(per_level) +
                                " anchors per level; give 1 to " +
                                std::to_string(kMaxAnchorsPerLevel));
  const auto detect = std::find_if(config.rows.begin(), config.rows.end(),
                                   [](const ModelRow& row) { return row.module == "Detect"; });
  if (detect == config.rows.end()) fail(config.source, "the model has no Detect row");
  // YOLOv5's placeholders (models/yolo.py): 0, 1, ..., 2k-1 on each level the Detect row reads.
  std::vector<double> placeholders(size_t(2 * per_level));
  for (size_t k = 0; k < placeholders.size(); ++k) placeholders[k] = double(k);
  config.anchors.assign(detect->from.size(), placeholders);
  config.placeholder_anchors = true;
  return config;
}

std::string yaml_text_with_anchors(const ModelConfig& config,
                                   const std::vector<std::vector<double>>& anchors) {
  YAML::Node root = YAML::Load(config.yaml_text);
  YAML::Node levels(YAML::NodeType::Sequence);
  for (const std::vector<double>& sizes : anchors) {
    YAML::Node level(YAML::NodeType::Sequence);
    level.SetStyle(YAML::EmitterStyle::Flow);
    for (double v : sizes) {
      char text[32];  // the shortest text that reads back as `v`
      level.push_back(std::string(text, std::to_chars(text, text + sizeof text, v).ptr));
    }
    levels.push_back(level);
  }
  root["anchors"] = levels;
  YAML::Emitter out;
  out << root;
  return std::string(out.c_str()) + "\n";
}

namespace fs = std::filesystem;

ModelConfig load_model_config(const std::string& path) {
  std::ifstream in(path);
  // A relative path that names no file here may name one of the shipped yamls
  // ("models/yolov5s.yaml" from any folder), as YOLOv5 looks in its own models/.
  const std::optional<std::string> shipped =
      in || fs::path(path).is_absolute() ? std::nullopt : find_shipped_file(path);
  if (shipped) in.open(*shipped);
  if (!in)
    throw std::invalid_argument("cannot open model config '" + path +
                                "' (neither as given nor among the shipped models/*.yaml)");
  std::stringstream text;
  text << in.rdbuf();
  return parse_model_config(text.str(), path);
}

}  // namespace bareyolo::models
