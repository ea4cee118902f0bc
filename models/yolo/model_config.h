// models/yolo/model_config.h — a YOLOv5 model yaml, read and checked (nothing built yet).
//
// Keys: nc, depth_multiple, width_multiple, anchors (per level [w0,h0, w1,h1, ...] in input
// pixels; or, as YOLOv5 allows, a whole number k of anchors per level: placeholders that
// AutoAnchor replaces), backbone and head (rows [from, number, module, args]), and the optional
// channel_multiple (8) and ch (3). Errors name the file, the row and the problem.
#pragma once

#include <string>
#include <vector>

namespace bareyolo::models {

// One yaml argument: a number, a boolean, None, a bare name (nc, anchors) or a quoted string.
struct ModelArg {
  enum class Kind { number, boolean, none, name, text } kind = Kind::none;
  double number = 0;
  bool flag = false;
  std::string text;  // for name and text

  bool is_name(const char* name) const { return kind == Kind::name && text == name; }
};

struct ModelRow {
  int index = 0;          // position in backbone + head
  int line = 0;           // 1-based line in the yaml, for messages
  std::vector<int> from;  // as written (-1 = the previous row)
  int number = 1;         // repeats before depth scaling
  std::string module;     // "Conv", "C3", "SPPF", "nn.Upsample", "Concat", "Detect"
  std::vector<ModelArg> args;
};

// The most anchors a level may have: what the Detect decode takes (models/eval/decode.h).
inline constexpr int kMaxAnchorsPerLevel = 16;

struct ModelConfig {
  std::string source;     // file path (or "<string>") for messages
  std::string yaml_text;  // the yaml read: saved beside the weights, which then need no --cfg
  int nc = 80;
  double depth_multiple = 1.0, width_multiple = 1.0;
  int channel_multiple = 8;
  int input_channels = 3;
  std::vector<std::vector<double>> anchors;  // per level, pixels
  // `anchors: k`: anchors holds YOLOv5's placeholders, [0, 1, ..., 2k-1] on every level (the
  // Detect row's inputs), which only AutoAnchor makes anchors (models/train/autoanchor.h).
  bool placeholder_anchors = false;
  std::vector<ModelRow> rows;

  // "file.yaml, row 12 (line 40)"
  std::string where(const ModelRow& row) const;
};

// Reads a model yaml: `path` as given, else (a relative path) among the shipped model yamls
// (engine/shipped_files.h), so "models/yolov5s.yaml" works from any folder.
ModelConfig load_model_config(const std::string& path);
ModelConfig parse_model_config(const std::string& yaml_text, const std::string& source);

// `config` with YOLOv5's placeholder anchors, `per_level` on each of its levels (a hyp file's
// `anchors: 3`, as YOLOv5's Model(anchors=...) overrides the yaml's). Throws
// std::invalid_argument naming `source` unless 1 <= per_level <= kMaxAnchorsPerLevel.
ModelConfig with_placeholder_anchors(ModelConfig config, int per_level, const std::string& source);

// The yaml text of `config` with `anchors` (per level, pixels) in place of its own: what a
// run's weights carry once AutoAnchor or the initial weights changed the anchors, so that the
// model built from it is the one trained. yaml-cpp writes it again: the comments are lost, the
// rest reads back the same.
std::string yaml_text_with_anchors(const ModelConfig& config,
                                   const std::vector<std::vector<double>>& anchors);

// What building a row reads of it (the graph builder and the ONNX exporter alike). Each throws
// std::invalid_argument as fail_at_row does.
[[noreturn]] void fail_at_row(const ModelConfig& config, const ModelRow& row,
                              const std::string& what);  // "file.yaml, row 12 (line 40), C3: what"
// args[k] as a whole number or a boolean, or `fallback` when the row has fewer arguments.
int int_arg(const ModelConfig& config, const ModelRow& row, size_t k, int fallback);
bool bool_arg(const ModelConfig& config, const ModelRow& row, size_t k, bool fallback);
// The earlier row that `from` names, as an absolute index; kNetworkInput for row 0's -1.
constexpr int kNetworkInput = -1;
int input_row(const ModelConfig& config, const ModelRow& row, int from);

}  // namespace bareyolo::models
