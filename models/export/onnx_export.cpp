// models/export/onnx_export.cpp — see onnx_export.h. The writer walks the model yaml's rows with
// the rules the graph builder uses (models/yolo/model_config.h: inputs, arguments) and writes
// each of YOLOv5's blocks as ONNX nodes, taking every weight from the model's state by name;
// how many Bottlenecks a C3 holds is read from the state too, so depth scaling is not redone.
#include "models/export/onnx_export.h"

#include <onnx/checker.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <span>
#include <stdexcept>

#include "engine/atomic_file.h"
#include "models/export/onnx_graph.h"

namespace bareyolo::models {

namespace {

constexpr const char* kInputName = "images";
constexpr const char* kOutputName = "output0";  // YOLOv5's export names it so

class OnnxWriter {
 public:
  OnnxWriter(const ModelConfig& config, DetectionModel& model, int opset, onnx::GraphProto& graph)
      : config_(config), model_(model), opset_(opset), entries_(model.state()), graph_(graph) {
    for (const StateEntry& entry : entries_) by_name_[entry.name] = &entry;
  }

  // The whole graph for square inputs of `imgsz`; the batch is `batch` (-1: symbolic).
  void write(int imgsz, int64_t batch) {
    const std::vector<std::string> batch_symbol = {batch < 0 ? "batch" : ""};
    graph_.input(kInputName, {batch, config_.input_channels, imgsz, imgsz}, batch_symbol);
    two_ = graph_.constant("two", {}, {2.0f});
    std::vector<std::string> row_outputs;
    for (const ModelRow& row : config_.rows) {
      std::vector<std::string> inputs;
      for (int from : row.from) {
        const int input = input_row(config_, row, from);
        inputs.push_back(input == kNetworkInput ? kInputName : row_outputs[size_t(input)]);
      }
      row_outputs.push_back(write_row(row, inputs, imgsz));
    }
    graph_.output(kOutputName, {batch, decoded_rows(imgsz), model_.outputs_per_anchor()},
                  batch_symbol);
  }

  int64_t decoded_rows(int imgsz) const {
    int64_t rows = 0;
    for (double stride : model_.strides()) rows += model_.num_anchors() * cells(imgsz, stride);
    return rows;
  }

 private:
  static int64_t side(int imgsz, double stride) { return int64_t(imgsz / stride); }
  static int64_t cells(int imgsz, double stride) {
    return side(imgsz, stride) * side(imgsz, stride);
  }

  std::string write_row(const ModelRow& row, const std::vector<std::string>& inputs, int imgsz) {
    const std::string prefix = "model." + std::to_string(row.index) + ".";
    if (row.module == "Conv") {
      const bool auto_pad = row.args.size() < 4 || row.args[3].kind == ModelArg::Kind::none;
      return conv_bn_silu(prefix, inputs[0], int_arg(config_, row, 2, 1),
                          auto_pad ? -1 : int_arg(config_, row, 3, 0));
    }
    if (row.module == "C3") return c3(prefix, inputs[0], bool_arg(config_, row, 1, true));
    if (row.module == "SPPF") return sppf(prefix, inputs[0], int_arg(config_, row, 1, 5));
    if (row.module == "nn.Upsample") return upsample(prefix, inputs[0]);
    if (row.module == "Concat") {
      set_attribute(graph_.node("Concat", inputs, prefix + "cat"), "axis", int64_t(1));
      return prefix + "cat";
    }
    if (row.module == "Detect") return detect(prefix, inputs, imgsz);
    fail_at_row(config_, row, "has no ONNX form in this exporter");
  }

  const StateEntry& entry(const std::string& name) const {
    auto found = by_name_.find(name);
    if (found == by_name_.end())
      throw std::logic_error("the model has no state entry " + name + " for its ONNX graph");
    return *found->second;
  }

  // The state entry `name` as an initializer of the same name and shape.
  std::string weight(const std::string& name) {
    const StateEntry& e = entry(name);
    const std::vector<double> values = e.value->to_doubles();
    return graph_.constant(name, e.dims, std::vector<float>(values.begin(), values.end()));
  }

  // YOLOv5's Conv with its BatchNorm folded in, then SiLU as x * sigmoid(x). In eval mode
  // BN(conv(x)) = s * conv(x) + (beta - s * mean) per output channel, s = gamma / sqrt(var + eps),
  // so one convolution with its weights scaled by s and that bias computes both (in double,
  // rounded once to float): one node instead of two, as YOLOv5 fuses before it exports.
  std::string conv_bn_silu(const std::string& prefix, const std::string& input, int stride,
                           int pad) {
    const StateEntry& conv_weight = entry(prefix + "conv.weight");
    const int64_t kernel = conv_weight.dims[2];
    const int64_t padding = pad < 0 ? kernel / 2 : pad;
    const std::vector<double> w = conv_weight.value->to_doubles();
    const std::vector<double> gamma = entry(prefix + "bn.weight").value->to_doubles();
    const std::vector<double> beta = entry(prefix + "bn.bias").value->to_doubles();
    const std::vector<double> mean = entry(prefix + "bn.running_mean").value->to_doubles();
    const std::vector<double> var = entry(prefix + "bn.running_var").value->to_doubles();
    const size_t per_channel = w.size() / gamma.size();
    std::vector<float> folded_weight(w.size()), folded_bias(gamma.size());
    for (size_t c = 0; c < gamma.size(); ++c) {
      const double scale = gamma[c] / std::sqrt(var[c] + kBatchNormEps);
      for (size_t i = c * per_channel; i < (c + 1) * per_channel; ++i)
        folded_weight[i] = float(w[i] * scale);
      folded_bias[c] = float(beta[c] - scale * mean[c]);
    }
    onnx::NodeProto& conv = graph_.node(
        "Conv",
        {input, graph_.constant(prefix + "conv.weight", conv_weight.dims, folded_weight),
         graph_.constant(prefix + "conv.bias", {int64_t(gamma.size())}, folded_bias)},
        prefix + "conv");
    set_attribute(conv, "kernel_shape", std::vector<int64_t>{kernel, kernel});
    set_attribute(conv, "strides", std::vector<int64_t>{stride, stride});
    set_attribute(conv, "pads", std::vector<int64_t>{padding, padding, padding, padding});
    graph_.node("Sigmoid", {prefix + "conv"}, prefix + "sigmoid");
    graph_.node("Mul", {prefix + "conv", prefix + "sigmoid"}, prefix + "silu");
    return prefix + "silu";
  }

  std::string bottleneck(const std::string& prefix, const std::string& input, bool shortcut) {
    const std::string hidden = conv_bn_silu(prefix + "cv1.", input, 1, -1);
    const std::string out = conv_bn_silu(prefix + "cv2.", hidden, 1, -1);
    const bool same_channels =
        entry(prefix + "cv1.conv.weight").dims[1] == entry(prefix + "cv2.conv.weight").dims[0];
    if (!shortcut || !same_channels) return out;
    graph_.node("Add", {input, out}, prefix + "add");
    return prefix + "add";
  }

  std::string c3(const std::string& prefix, const std::string& input, bool shortcut) {
    std::string branch = conv_bn_silu(prefix + "cv1.", input, 1, -1);
    for (int i = 0; by_name_.count(prefix + "m." + std::to_string(i) + ".cv1.conv.weight"); ++i)
      branch = bottleneck(prefix + "m." + std::to_string(i) + ".", branch, shortcut);
    const std::string second = conv_bn_silu(prefix + "cv2.", input, 1, -1);
    set_attribute(graph_.node("Concat", {branch, second}, prefix + "cat"), "axis", int64_t(1));
    return conv_bn_silu(prefix + "cv3.", prefix + "cat", 1, -1);
  }

  std::string sppf(const std::string& prefix, const std::string& input, int kernel) {
    std::vector<std::string> pooled = {conv_bn_silu(prefix + "cv1.", input, 1, -1)};
    for (int k = 1; k <= 3; ++k) {
      const std::string name = prefix + "pool" + std::to_string(k);
      onnx::NodeProto& pool = graph_.node("MaxPool", {pooled.back()}, name);
      set_attribute(pool, "kernel_shape", std::vector<int64_t>{kernel, kernel});
      set_attribute(pool, "strides", std::vector<int64_t>{1, 1});
      const int64_t pad = kernel / 2;
      set_attribute(pool, "pads", std::vector<int64_t>{pad, pad, pad, pad});
      pooled.push_back(name);
    }
    set_attribute(graph_.node("Concat", pooled, prefix + "cat"), "axis", int64_t(1));
    return conv_bn_silu(prefix + "cv2.", prefix + "cat", 1, -1);
  }

  // Nearest x2 as PyTorch's nn.Upsample computes it: source index = floor(target / 2). The
  // region of interest is an empty constant, not left out: opsets 11 and 12 require the input.
  std::string upsample(const std::string& prefix, const std::string& input) {
    const std::string roi = graph_.constant(prefix + "roi", {0}, {});
    const std::string scales = graph_.constant(prefix + "scales", {4}, {1, 1, 2, 2});
    onnx::NodeProto& resize = graph_.node("Resize", {input, roi, scales}, prefix + "resize");
    set_attribute(resize, "mode", std::string("nearest"));
    set_attribute(resize, "coordinate_transformation_mode", std::string("asymmetric"));
    set_attribute(resize, "nearest_mode", std::string("floor"));
    return prefix + "resize";
  }

  std::string detect(const std::string& prefix, const std::vector<std::string>& inputs, int imgsz) {
    std::vector<std::string> levels;
    for (size_t level = 0; level < inputs.size(); ++level)
      levels.push_back(detect_level(prefix + "m." + std::to_string(level) + ".", int(level),
                                    inputs[level], imgsz));
    set_attribute(graph_.node("Concat", levels, kOutputName), "axis", int64_t(1));
    return kOutputName;
  }

  // One level: the 1x1 convolution, (b, na * no, ny, nx) -> (b, na, ny, nx, no), the sigmoid,
  // then decode.h's formulas: xy = (2 s + grid) * stride with grid = (x - 0.5, y - 0.5), and
  // wh = (2 s)^2 * anchor in pixels; the scores stay s. Rows out: (b, na * ny * nx, no).
  std::string detect_level(const std::string& prefix, int level, const std::string& input,
                           int imgsz) {
    const int64_t na = model_.num_anchors(), no = model_.outputs_per_anchor();
    const double stride = model_.strides()[size_t(level)];
    const int64_t n = side(imgsz, stride);
    set_attribute(graph_.node("Conv", {input, weight(prefix + "weight"), weight(prefix + "bias")},
                              prefix + "conv"),
                  "kernel_shape", std::vector<int64_t>{1, 1});
    graph_.node(
        "Reshape",
        {prefix + "conv", graph_.int64_constant(prefix + "fields_shape", {0, na, no, n, n})},
        prefix + "fields");
    set_attribute(graph_.node("Transpose", {prefix + "fields"}, prefix + "cells"), "perm",
                  std::vector<int64_t>{0, 1, 3, 4, 2});
    graph_.node("Sigmoid", {prefix + "cells"}, prefix + "sigmoid");
    split(prefix + "sigmoid", 4, {2, 2, no - 4}, {prefix + "xy", prefix + "wh", prefix + "scores"});

    // Both constants span the whole level, [1, na, ny, nx, 2], as YOLOv5's grid and anchor_grid
    // do: OpenCV 4.6 cannot broadcast a [1, na, 1, 1, 2] operand over five dimensions.
    std::vector<float> grid, anchor_pixels;
    for (int64_t a = 0; a < na; ++a) {
      const std::array<double, 2> anchor = model_.anchor(level, int(a));
      for (int64_t y = 0; y < n; ++y)
        for (int64_t x = 0; x < n; ++x) {
          grid.insert(grid.end(), {x - 0.5f, y - 0.5f});
          anchor_pixels.insert(anchor_pixels.end(),
                               {float(anchor[0] * stride), float(anchor[1] * stride)});
        }
    }
    graph_.node("Mul", {prefix + "xy", two_}, prefix + "xy2");
    graph_.node("Add", {prefix + "xy2", graph_.constant(prefix + "grid", {1, na, n, n, 2}, grid)},
                prefix + "xy_grid");
    graph_.node("Mul",
                {prefix + "xy_grid", graph_.constant(prefix + "stride", {}, {float(stride)})},
                prefix + "xy_pixels");
    graph_.node("Mul", {prefix + "wh", two_}, prefix + "wh2");
    graph_.node("Mul", {prefix + "wh2", prefix + "wh2"}, prefix + "wh2_squared");
    graph_.node("Mul",
                {prefix + "wh2_squared",
                 graph_.constant(prefix + "anchor_pixels", {1, na, n, n, 2}, anchor_pixels)},
                prefix + "wh_pixels");
    set_attribute(
        graph_.node("Concat", {prefix + "xy_pixels", prefix + "wh_pixels", prefix + "scores"},
                    prefix + "decoded"),
        "axis", int64_t(4));
    graph_.node(
        "Reshape",
        {prefix + "decoded", graph_.int64_constant(prefix + "rows_shape", {0, na * n * n, no})},
        prefix + "rows");
    return prefix + "rows";
  }

  // Split's sizes are an attribute up to opset 12 and an input from 13 on.
  void split(const std::string& input, int64_t axis, const std::vector<int64_t>& sizes,
             const std::vector<std::string>& outputs) {
    const bool sizes_as_input = opset_ >= 13;
    onnx::NodeProto& node = graph_.node(
        "Split",
        sizes_as_input
            ? std::vector<std::string>{input, graph_.int64_constant(outputs[0] + "_sizes", sizes)}
            : std::vector<std::string>{input},
        outputs);
    set_attribute(node, "axis", axis);
    if (!sizes_as_input) set_attribute(node, "split", sizes);
  }

  const ModelConfig& config_;
  DetectionModel& model_;
  int opset_;
  std::vector<StateEntry> entries_;
  std::map<std::string, const StateEntry*> by_name_;
  OnnxGraph graph_;
  std::string two_;
};

// A string as a Python literal, as repr() quotes it: single quotes unless the text holds one and
// no double quote, backslashes and that quote escaped; control characters as \xNN (repr writes
// \n for \x0a, which Python reads back as the same string).
std::string python_string(const std::string& text) {
  const bool double_quoted =
      text.find('\'') != std::string::npos && text.find('"') == std::string::npos;
  const char quote = double_quoted ? '"' : '\'';
  std::string written(1, quote);
  for (const char c : text) {
    if (c == '\\' || c == quote) {
      written += '\\';
      written += c;
    } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", static_cast<unsigned char>(c));
      written += escaped;
    } else {
      written += c;  // UTF-8 bytes stay as they are, as Python 3 prints printable text
    }
  }
  return written + quote;
}

void add_metadata(onnx::ModelProto& proto, const std::string& key, const std::string& value) {
  onnx::StringStringEntryProto* entry = proto.add_metadata_props();
  entry->set_key(key);
  entry->set_value(value);
}

}  // namespace

std::string python_names_dict(const std::vector<std::string>& names) {
  std::string dict = "{";
  for (size_t i = 0; i < names.size(); ++i)
    dict += (i ? ", " : "") + std::to_string(i) + ": " + python_string(names[i]);
  return dict + "}";
}

OnnxExportSummary export_onnx(const ModelConfig& config, DetectionModel& model,
                              const OnnxExportOptions& options, const std::string& out) {
  if (options.opset < kMinOnnxOpset || options.opset > kMaxOnnxOpset)
    throw std::invalid_argument(
        "--opset " + std::to_string(options.opset) +
        " is not one this exporter writes: give one of " + std::to_string(kMinOnnxOpset) + ".." +
        std::to_string(kMaxOnnxOpset) + " (" + std::to_string(kDefaultOnnxOpset) +
        ", the default, is the one OpenCV's DNN module reads)");
  const int stride = int(model.strides().back());
  if (options.imgsz < stride || options.imgsz % stride != 0)
    throw std::invalid_argument(
        "--imgsz " + std::to_string(options.imgsz) + " is not a multiple of the model's stride " +
        std::to_string(stride) + ": give " +
        std::to_string(stride_multiple_size(options.imgsz, stride, stride, nullptr)));
  const int nc = model.num_classes();
  if (!options.names.empty() && int(options.names.size()) != nc)
    throw std::invalid_argument(std::to_string(options.names.size()) +
                                " class names for a model of " + std::to_string(nc) +
                                " classes: give the weights' own names (or none)");
  onnx::ModelProto proto;
  proto.set_ir_version(onnx::IR_VERSION);
  proto.set_producer_name("bareyolo");
  proto.set_producer_version("0.1.0");
  std::vector<std::string> names = options.names;
  for (int c = int(names.size()); c < nc; ++c) names.push_back("class" + std::to_string(c));
  add_metadata(proto, "stride", std::to_string(stride));
  add_metadata(proto, "names", python_names_dict(names));
  onnx::OperatorSetIdProto* opset = proto.add_opset_import();
  opset->set_domain("");
  opset->set_version(options.opset);
  onnx::GraphProto* graph = proto.mutable_graph();
  graph->set_name("bareyolo " + config.source);

  const int64_t batch = options.dynamic_batch ? -1 : 1;
  OnnxWriter writer(config, model, options.opset, *graph);
  writer.write(options.imgsz, batch);
  try {
    onnx::checker::check_model(proto);
  } catch (const std::exception& error) {
    throw std::logic_error(std::string("the exported graph fails ONNX's checker: ") + error.what());
  }

  std::string bytes;
  if (!proto.SerializeToString(&bytes))
    throw std::runtime_error("cannot encode the ONNX graph for " + out +
                             " (protobuf refuses messages over 2 GiB)");
  write_file_atomically(out,
                        {std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size())});
  return {.input_dims = {batch, config.input_channels, options.imgsz, options.imgsz},
          .output_dims = {batch, writer.decoded_rows(options.imgsz), model.outputs_per_anchor()},
          .nodes = graph->node_size(),
          .bytes = int64_t(bytes.size())};
}

}  // namespace bareyolo::models
