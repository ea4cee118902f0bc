// models/yolo/yolo_model.h — DetectionModel: a YOLOv5 model built from a model yaml.
//
// The yaml rows become graph nodes in order (YOLOv5's parse_model rules: depth and width
// multiples, channel rounding, `from` indices); the Detect row becomes one 1x1 convolution
// with bias per level. forward() returns the raw head outputs, one NCHW tensor per level of
// shape (batch, na * (nc + 5), ny, nx): channel a * (nc + 5) + k is anchor a, field k, with
// fields [tx, ty, tw, th, obj, cls_0 ...] — YOLOv5's (batch, na, ny, nx, no) layout before
// its permute, which the loss indexes directly.
//
// A fresh model holds YOLOv5's from-scratch state (see yolo_model.cpp): uniform conv init,
// Detect bias priors, BN eps 1e-3 / momentum 0.03, the stride probe's side effect on BN
// buffers, and every value rounded to fp16 precision.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "engine/graph.h"
#include "models/yolo/model_config.h"

namespace bareyolo::models {

// YOLOv5's BatchNorm2d eps in every Conv block (its momentum, 0.03, matters to training only).
inline constexpr double kBatchNormEps = 1e-3;

// The most classes a model takes. Detect has anchors x (nc + 5) outputs per cell: beyond a few
// hundred thousand classes its weights alone outgrow a GPU, and na * (nc + 5) an int soon after.
inline constexpr int kMaxClasses = 200'000;

struct ModelOptions {
  int nc = 0;         // number of classes (1..kMaxClasses); 0 keeps the yaml's nc
  uint64_t seed = 0;  // weight initialisation
  Device device = Device::cpu();
  DType dtype = DType::f32;
};

class DetectionModel {
 public:
  explicit DetectionModel(const ModelConfig& config, const ModelOptions& options = {});

  const std::vector<Tensor>& forward(const Tensor& images, Mode mode);
  // After forward(Mode::train): adds parameter gradients; on_node_done as Graph::backward.
  void backward(const std::vector<Tensor>& grad_outputs,
                const std::function<void(int node)>& on_node_done = {});

  // YOLOv5's state_dict: every parameter and buffer, in its order and with its names.
  std::vector<StateEntry> state();
  int64_t parameter_count();  // trainable values

  int num_classes() const { return nc_; }
  int num_anchors() const { return na_; }
  int num_levels() const { return static_cast<int>(strides_.size()); }
  int outputs_per_anchor() const { return nc_ + 5; }
  const std::vector<double>& strides() const { return strides_; }  // 8, 16, 32
  // Anchor a of level l as (width, height) in grid cells of that level.
  std::array<double, 2> anchor(int level, int a) const;
  // The anchors in input pixels, per level [w0,h0, w1,h1, ...], as a model yaml lists them.
  std::vector<std::vector<double>> pixel_anchors() const;
  // Sets the anchors from pixels as YOLOv5 keeps them: levels reversed when their mean area
  // falls as the stride rises (check_anchor_order), divided by each level's stride, rounded to
  // fp16 precision (train.py's half()). `pixels` has num_levels() levels of 2 x na values.
  void set_anchors(const std::vector<std::vector<double>>& pixels);
  Graph& graph() { return graph_; }
  Device device() const { return device_; }  // where every parameter and activation lives

 private:
  void build(const ModelConfig& config, const ModelOptions& options);
  void initialise_like_yolov5();

  Device device_;
  Graph graph_;
  int nc_ = 0, na_ = 0;
  std::vector<double> strides_;
  Tensor anchors_;  // (nl * na * 2) grid units, saved as [nl, na, 2]; in host memory always
  std::vector<int> detect_nodes_;
  std::string detect_name_;  // "model.24."
};

// YOLOv5's check_img_size: `imgsz` rounded up to a multiple of `stride` (the model's largest,
// or train's max(stride, 32)), and at least `floor`. When that changes the size, `note` gets a
// sentence saying so, for the command to print: the run then uses another size than asked.
int stride_multiple_size(int imgsz, int stride, int floor, std::string* note);

}  // namespace bareyolo::models
