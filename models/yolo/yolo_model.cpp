// models/yolo/yolo_model.cpp — YOLOv5's parse_model and DetectionModel construction.
//
// Per row i (backbone then head), as YOLOv5 does it:
//   repeats  n = max(round_half_even(number * depth_multiple), 1) when number > 1
//   channels c2 = ceil(args[0] * width_multiple / channel_multiple) * channel_multiple for
//            Conv, C3 and SPPF (the Detect outputs na * (nc + 5) are never rounded)
//   inputs   from -1 = the previous row, other negatives count back from row i
// Strides come from the shapes of the Detect inputs for a 256x256 input (no computation).
#include "models/yolo/yolo_model.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "engine/layers/conv2d.h"
#include "engine/layers/upsample.h"
#include "engine/tensor_factories.h"
#include "kernels/cpu/host_memory.h"
#include "models/yolo/blocks.h"

namespace bareyolo::models {

namespace {

// The value YOLOv5's half().float() leaves: the nearest fp16 (ties to even), as float.
float round_to_half(float x) { return _cvtsh_ss(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT)); }

}  // namespace

DetectionModel::DetectionModel(const ModelConfig& config, const ModelOptions& options)
    : device_(options.device) {
  // Running out of host memory here is the yaml's doing (its width_multiple or
  // depth_multiple), whichever command builds the model: say so, not "lower --batch".
  try {
    build(config, options);
    initialise_like_yolov5();
  } catch (const std::bad_alloc&) {
    char multiples[96];
    std::snprintf(multiples, sizeof multiples, "width_multiple %g, depth_multiple %g",
                  config.width_multiple, config.depth_multiple);
    throw HostOutOfMemory("out of host memory building the model of " + config.source + " (" +
                          multiples +
                          "): the model is too large for this machine; lower width_multiple or "
                          "depth_multiple in the yaml (yolov5s has 0.5 and 0.33)");
  }
}

void DetectionModel::build(const ModelConfig& config, const ModelOptions& options) {
  if (options.nc < 0)
    throw std::invalid_argument(config.source + ": nc " + std::to_string(options.nc) +
                                " is not a number of classes; give one >= 1, or 0 for the "
                                "yaml's nc (" +
                                std::to_string(config.nc) + ")");
  nc_ = options.nc > 0 ? options.nc : config.nc;
  if (nc_ > kMaxClasses)
    throw std::invalid_argument(
        (options.nc > 0 ? "" : config.source + ": ") + "nc " + std::to_string(nc_) +
        " is out of range: a model takes 1 to " + std::to_string(kMaxClasses) +
        " classes (its Detect head has anchors x (nc + 5) outputs per grid cell)");
  na_ = static_cast<int>(config.anchors[0].size() / 2);
  const int outputs = na_ * (nc_ + 5);
  std::mt19937_64 rng(options.seed);
  const BlockContext context{
      rng, {.eps = kBatchNormEps, .momentum = 0.03}, options.device, options.dtype};

  std::vector<int> channels;  // output channels of each row
  std::vector<int> node_of_row;
  // A layer or the graph refusing a row (a zero kernel, Concat inputs of different sizes) is
  // reported at the row and line of the yaml that asked for it; the graph's shapes are
  // probed after each row so that a mismatch names its row too.
  const Shape4 probe{1, config.input_channels, 256, 256};
  for (const ModelRow& row : config.rows) {
    try {
      const double scaled_repeats = std::nearbyint(row.number * config.depth_multiple);
      if (row.number > 1 && scaled_repeats > std::numeric_limits<int>::max()) {
        char what[160];
        std::snprintf(what, sizeof what,
                      "depth_multiple %g makes %d repeats %g, more than a model can have; lower "
                      "depth_multiple",
                      config.depth_multiple, row.number, scaled_repeats);
        fail_at_row(config, row, what);
      }
      const int repeats =
          row.number > 1 ? std::max(static_cast<int>(scaled_repeats), 1) : row.number;
      std::vector<int> inputs;
      for (int f : row.from) {
        const int input = input_row(config, row, f);
        inputs.push_back(input == kNetworkInput ? Graph::kGraphInput : input);
      }
      auto input_channels = [&](int input) {
        return input == Graph::kGraphInput ? config.input_channels
                                           : channels[static_cast<size_t>(input)];
      };
      const int c1 = input_channels(inputs[0]);
      auto scaled_width = [&] {
        const int c2 = int_arg(config, row, 0, 0);
        if (c2 < 1) fail_at_row(config, row, "the first argument must be the output channels");
        if (c2 == outputs) return c2;
        const double divisor = config.channel_multiple;
        const double scaled = std::ceil(c2 * config.width_multiple / divisor) * divisor;
        if (scaled > std::numeric_limits<int>::max()) {
          char what[160];
          std::snprintf(what, sizeof what,
                        "width_multiple %g makes %d output channels %g, more than a layer can "
                        "have; lower width_multiple",
                        config.width_multiple, c2, scaled);
          fail_at_row(config, row, what);
        }
        return static_cast<int>(scaled);
      };
      // A kernel size or stride read from the row: a whole number >= 1, or the row is refused
      // with the argument, its value and the rule.
      auto positive_arg = [&](size_t k, int fallback, const char* what) {
        const int value = int_arg(config, row, k, fallback);
        if (value < 1)
          fail_at_row(config, row,
                      std::string(what) + " (argument " + std::to_string(k) + ") is " +
                          std::to_string(value) + "; it must be a whole number >= 1");
        return value;
      };
      if (row.module != "C3" && repeats > 1)
        fail_at_row(config, row, "a repeat count above 1 is only supported for C3");
      if (row.module != "Concat" && row.module != "Detect" && inputs.size() != 1)
        fail_at_row(config, row, "takes exactly one input");
      const std::string name = "model." + std::to_string(row.index) + ".";
      std::vector<int> nodes;
      for (int input : inputs)
        nodes.push_back(input == Graph::kGraphInput ? input : node_of_row[size_t(input)]);

      int c2 = c1;
      if (row.module == "Conv") {
        c2 = scaled_width();
        const int kernel = positive_arg(1, 1, "the kernel size"),
                  stride = positive_arg(2, 1, "the stride");
        const bool auto_pad = row.args.size() < 4 || row.args[3].kind == ModelArg::Kind::none;
        if (int_arg(config, row, 4, 1) != 1 || int_arg(config, row, 5, 1) != 1)
          fail_at_row(config, row, "groups and dilation other than 1 are not supported");
        node_of_row.push_back(graph_.add(
            name, nodes,
            std::make_unique<ConvBnSilu>(c1, c2, kernel, stride,
                                         auto_pad ? -1 : int_arg(config, row, 3, 0), context.bn,
                                         rng, options.device, options.dtype)));
      } else if (row.module == "C3") {
        c2 = scaled_width();
        node_of_row.push_back(graph_.add(
            name, nodes,
            std::make_unique<C3>(c1, c2, repeats, bool_arg(config, row, 1, true), context)));
      } else if (row.module == "SPPF") {
        c2 = scaled_width();
        node_of_row.push_back(graph_.add(
            name, nodes,
            std::make_unique<SPPF>(c1, c2, positive_arg(1, 5, "the pooling size"), context)));
      } else if (row.module == "nn.Upsample") {
        const bool nearest2 = row.args.size() >= 3 && row.args[1].kind == ModelArg::Kind::number &&
                              row.args[1].number == 2 && row.args[2].text == "nearest";
        if (!nearest2) fail_at_row(config, row, "only [None, 2, \"nearest\"] is supported");
        node_of_row.push_back(graph_.add(name, nodes, std::make_unique<Upsample>()));
      } else if (row.module == "Concat") {
        if (int_arg(config, row, 0, 1) != 1)
          fail_at_row(config, row, "only dimension 1 is supported");
        c2 = 0;
        for (int input : inputs) c2 += input_channels(input);
        node_of_row.push_back(graph_.add_concat(name, nodes));
      } else if (row.module == "Detect") {
        if (&row != &config.rows.back()) fail_at_row(config, row, "Detect must be the last row");
        if (inputs.size() != config.anchors.size())
          fail_at_row(config, row,
                      std::to_string(inputs.size()) + " inputs but " +
                          std::to_string(config.anchors.size()) + " anchor levels");
        detect_name_ = name;
        for (size_t level = 0; level < inputs.size(); ++level)
          detect_nodes_.push_back(graph_.add(
              name + "m." + std::to_string(level) + ".", {nodes[level]},
              std::make_unique<Conv2d>(Conv2dOptions{.c_in = input_channels(inputs[level]),
                                                     .c_out = outputs,
                                                     .kernel = 1,
                                                     .bias = true},
                                       rng, options.device, options.dtype)));
        node_of_row.push_back(detect_nodes_.front());
        c2 = outputs;
      } else {
        fail_at_row(config, row,
                    "unknown module (supported: Conv, C3, SPPF, nn.Upsample, Concat, Detect)");
      }
      channels.push_back(c2);
      graph_.shapes(probe);
    } catch (const std::invalid_argument& error) {
      const std::string what = error.what();
      if (what.rfind(config.where(row), 0) == 0) throw;  // fail_at_row() already named the row
      fail_at_row(config, row, what);
    }
  }
  if (detect_nodes_.empty())
    throw std::invalid_argument(config.source + ": the model has no Detect row");
  graph_.set_outputs(detect_nodes_);

  // Strides from the Detect inputs' sizes for a 256x256 input, as YOLOv5's probe finds them.
  const std::vector<Shape4> shapes = graph_.shapes(probe);
  for (int node : detect_nodes_) strides_.push_back(256.0 / shapes[size_t(node)].w);

  set_anchors(config.anchors);
}

void DetectionModel::set_anchors(const std::vector<std::vector<double>>& pixels) {
  const size_t levels = strides_.size();
  if (pixels.size() != levels || std::any_of(pixels.begin(), pixels.end(), [&](const auto& l) {
        return l.size() != size_t(2 * na_);
      }))
    throw std::invalid_argument("set_anchors: " + std::to_string(levels) + " levels of " +
                                std::to_string(na_) + " anchors expected");
  auto mean_area = [&](size_t level) {
    double total = 0;
    for (size_t k = 0; k + 1 < pixels[level].size(); k += 2)
      total += pixels[level][k] * pixels[level][k + 1];
    return total / na_;
  };
  // Compared by sign only, as YOLOv5 does: equal areas (placeholders) flip nothing.
  const double area_change = mean_area(levels - 1) - mean_area(0);
  const double stride_change = strides_.back() - strides_.front();
  const bool flip = area_change != 0 && (area_change > 0) != (stride_change > 0);
  std::vector<double> grid_anchors;
  for (size_t level = 0; level < levels; ++level)
    for (double v : pixels[flip ? levels - 1 - level : level])
      grid_anchors.push_back(round_to_half(float(v / strides_[level])));
  anchors_ =
      make_tensor(grid_anchors, {1, 1, 1, int64_t(grid_anchors.size())}, Device::cpu(), DType::f64);
}

std::vector<std::vector<double>> DetectionModel::pixel_anchors() const {
  const std::vector<double> grid = anchors_.to_doubles();
  std::vector<std::vector<double>> pixels(strides_.size());
  for (size_t level = 0; level < pixels.size(); ++level)
    for (size_t k = 0; k < size_t(2 * na_); ++k)
      pixels[level].push_back(grid[level * size_t(2 * na_) + k] * strides_[level]);
  return pixels;
}

void DetectionModel::initialise_like_yolov5() {
  std::vector<StateEntry> entries = state();
  for (const StateEntry& e : entries) {
    if (e.value->dtype() == DType::i64 || e.value == &anchors_) continue;
    std::vector<double> values = e.value->to_doubles();
    const std::string& name = e.name;
    auto ends_with = [&](const char* suffix) {
      return name.size() >= std::strlen(suffix) &&
             name.compare(name.size() - std::strlen(suffix), std::string::npos, suffix) == 0;
    };
    if (ends_with("running_var")) {
      // YOLOv5's stride probe runs one training forward of a zero image with PyTorch's
      // default BN momentum 0.1: every running_var becomes 0.9 (the batch variance is 0).
      for (double& v : values) v = 0.9;
    }
    if (name.rfind(detect_name_, 0) == 0 && ends_with(".bias")) {
      // Detect bias priors: objectness log(8 / cells), classes log(0.6 / (nc - 0.99999)).
      const int level = name[detect_name_.size() + 2] - '0';
      const double cells = std::pow(640.0 / strides_[size_t(level)], 2);
      for (int a = 0; a < na_; ++a) {
        values[size_t(a * (nc_ + 5) + 4)] += std::log(8.0 / cells);
        for (int c = 0; c < nc_; ++c)
          values[size_t(a * (nc_ + 5) + 5 + c)] += std::log(0.6 / (nc_ - 0.99999));
      }
    }
    for (double& v : values) v = round_to_half(static_cast<float>(v));  // train.py's half()
    e.value->copy_from(make_tensor(values, e.value->shape(), e.value->device(), e.value->dtype()));
  }
  for (const StateEntry& e : entries)
    if (e.value->dtype() == DType::i64) e.value->view<int64_t>().data[0] = 1;  // the probe
}

const std::vector<Tensor>& DetectionModel::forward(const Tensor& images, Mode mode) {
  return graph_.forward(images, mode);
}

void DetectionModel::backward(const std::vector<Tensor>& grad_outputs,
                              const std::function<void(int node)>& on_node_done) {
  graph_.backward(grad_outputs, on_node_done);
}

std::vector<StateEntry> DetectionModel::state() {
  std::vector<StateEntry> entries = graph_.state();
  // Detect registers its anchors buffer before its convolutions.
  auto first_detect = std::find_if(entries.begin(), entries.end(), [&](const StateEntry& e) {
    return e.name.rfind(detect_name_, 0) == 0;
  });
  entries.insert(first_detect,
                 StateEntry{detect_name_ + "anchors", &anchors_, nullptr, {num_levels(), na_, 2}});
  return entries;
}

int64_t DetectionModel::parameter_count() {
  int64_t count = 0;
  for (const StateEntry& e : state())
    if (e.trainable()) count += e.value->numel();
  return count;
}

std::array<double, 2> DetectionModel::anchor(int level, int a) const {
  // The anchors stay in host memory whatever the model's device (set_anchors): the loss's
  // matching reads them in place every step, never through a copy that could wait for a GPU.
  const double* grid = anchors_.view<double>().data;
  const size_t k = size_t((level * na_ + a) * 2);
  return {grid[k], grid[k + 1]};
}

int stride_multiple_size(int imgsz, int stride, int floor, std::string* note) {
  const int size = std::max((imgsz + stride - 1) / stride * stride, floor);
  if (size == imgsz || !note) return size;
  // Only the reasons that hold: 32 is a multiple of stride 32, yet below training's floor 64.
  std::string why;
  if (imgsz % stride != 0)
    why = " is not a multiple of the model's stride " + std::to_string(stride);
  if (imgsz < floor)
    why += (why.empty() ? " is" : ", and is") + std::string(" below the minimum of ") +
           std::to_string(floor);
  *note = "--imgsz " + std::to_string(imgsz) + why + ": using " + std::to_string(size);
  return size;
}

}  // namespace bareyolo::models
