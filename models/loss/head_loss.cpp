// models/loss/head_loss.cpp — see head_loss.h.
#include "models/loss/head_loss.h"

#include <stdexcept>
#include <string>
#include <utility>

#include "engine/distributed/comm/communicator.h"

namespace bareyolo::models {

namespace {

std::vector<Shape4> shapes_of(const std::vector<Tensor>& tensors) {
  std::vector<Shape4> shapes;
  for (const Tensor& t : tensors) shapes.push_back(t.shape());
  return shapes;
}

}  // namespace

TargetMatcher::TargetMatcher(const DetectionModel& model, const LossOptions& options)
    : strides_(model.strides()), anchor_t_(options.hyp.anchor_t), classes_(options.classes) {
  for (int level = 0; level < model.num_levels(); ++level) {
    anchors_.emplace_back();
    for (int a = 0; a < model.num_anchors(); ++a) anchors_.back().push_back(model.anchor(level, a));
  }
}

LevelTargets TargetMatcher::match(const std::vector<LabelRow>& labels, int images,
                                  const std::vector<std::array<int, 2>>& grids) const {
  if (grids.size() != anchors_.size())
    throw std::logic_error("matching targets to " + std::to_string(grids.size()) +
                           " grids for a model of " + std::to_string(anchors_.size()) + " levels");
  check_label_rows(labels, images, classes_);
  std::vector<LevelGrid> levels;
  for (size_t level = 0; level < grids.size(); ++level)
    levels.push_back({grids[level][0], grids[level][1], anchors_[level]});
  return build_targets(labels, levels, anchor_t_);
}

std::vector<std::array<int, 2>> TargetMatcher::grids_of(int height, int width) const {
  std::vector<std::array<int, 2>> grids;
  for (double stride : strides_) {
    const int s = int(stride);
    if (height % s != 0 || width % s != 0)
      throw std::invalid_argument("an input of " + std::to_string(width) + "x" +
                                  std::to_string(height) + " is not a multiple of the stride " +
                                  std::to_string(s) + "; use an image size that is");
    grids.push_back({height / s, width / s});
  }
  return grids;
}

std::vector<LevelCells> TargetMatcher::cells_of(const Shape4& input) const {
  std::vector<LevelCells> cells;
  for (const auto& [ny, nx] : grids_of(int(input.h), int(input.w)))
    cells.push_back({.images = int(input.n),
                     .anchors = int(anchors_.front().size()),
                     .ny = ny,
                     .nx = nx,
                     .classes = classes_});
  return cells;
}

data::MatchedTargets TargetMatcher::operator()(const data::Batch& batch) const {
  data::MatchedTargets matched;
  matched.grids = grids_of(batch.input_height, batch.input_width);
  matched.levels = match(batch.labels(), batch.size, matched.grids);
  return matched;
}

LevelTargets TargetMatcher::targets_of(const Shape4& input, const std::vector<LabelRow>& labels,
                                       const data::MatchedTargets* matched) const {
  const std::vector<std::array<int, 2>> grids = grids_of(int(input.h), int(input.w));
  if (!matched) return match(labels, int(input.n), grids);
  if (matched->grids != grids)
    throw std::logic_error(
        "targets matched to grids of another size than the input's (the loader's input size "
        "must be the model's input's)");
  return matched->levels;
}

std::vector<std::array<int, 2>> head_grids(const std::vector<Tensor>& head) {
  std::vector<std::array<int, 2>> grids;
  for (const Tensor& h : head) grids.push_back({int(h.shape().h), int(h.shape().w)});
  return grids;
}

LevelTargets head_targets(const DetectionModel& model, const std::vector<Tensor>& head,
                          const std::vector<LabelRow>& labels, const LossOptions& options) {
  const int images = head.empty() ? 0 : int(head[0].shape().n);
  return TargetMatcher(model, options).match(labels, images, head_grids(head));
}

LossNormalization global_normalization(dist::Communicator& comm, const LevelTargets& targets,
                                       int images, const Device& device) {
  return global_normalization(comm, local_normalization(targets, images, device));
}

LossNormalization global_normalization(dist::Communicator& comm, LossNormalization local) {
  comm.allreduce(dist::CommBuffer::of(local.counts), dist::ReduceOp::sum, "loss counts")->wait();
  local.gradient_scale = comm.world_size();
  return local;
}

HeadLoss head_loss_buffers(const std::vector<Shape4>& head, const Device& device, DType dtype) {
  HeadLoss buffers{.loss = empty_loss(device), .gradients = {}};
  for (const Shape4& shape : head) buffers.gradients.push_back(Tensor::empty(shape, device, dtype));
  return buffers;
}

HeadLoss head_loss_buffers(const std::vector<Tensor>& head) {
  return head.empty() ? HeadLoss{.loss = empty_loss(Device::cpu()), .gradients = {}}
                      : head_loss_buffers(shapes_of(head), head[0].device(), head[0].dtype());
}

HeadLoss head_loss(const std::vector<Tensor>& head, const LevelTargets& targets,
                   const LossNormalization& norm, const LossOptions& options) {
  HeadLoss buffers = head_loss_buffers(head);
  LossRows rows(buffers.loss.device());
  rows.stage(targets, head_cells(shapes_of(head), options.classes));
  return head_loss(head, rows, norm, options, std::move(buffers));
}

HeadLoss head_loss(const std::vector<Tensor>& head, const LossRows& rows,
                   const LossNormalization& norm, const LossOptions& options, HeadLoss into) {
  if (into.gradients.size() != head.size())
    throw std::invalid_argument("head_loss: " + std::to_string(into.gradients.size()) +
                                " gradient buffers for " + std::to_string(head.size()) + " levels");
  with_float_type(head.empty() ? DType::f32 : head[0].dtype(), [&]<class T>() {
    std::vector<View<const T>> outputs;
    std::vector<View<T>> views;
    for (size_t level = 0; level < head.size(); ++level) {
      Tensor& gradient = into.gradients[level];
      if (!(gradient.shape() == head[level].shape()) || gradient.dtype() != head[level].dtype())
        throw std::invalid_argument("head_loss: level " + std::to_string(level) +
                                    "'s gradient is " + gradient.shape().str() +
                                    "; the head's output is " + head[level].shape().str());
      gradient.zero();  // the loss adds
      outputs.push_back(head[level].view<T>());
      views.push_back(gradient.view<T>());
    }
    yolo_loss<T>(outputs, rows, norm, options, views, into.loss.view<double>());
  });
  return into;
}

HeadLoss head_loss(const DetectionModel& model, const std::vector<Tensor>& head,
                   const std::vector<LabelRow>& labels, const LossOptions& options, int images) {
  const LevelTargets targets = head_targets(model, head, labels, options);
  const Device device = head.empty() ? Device::cpu() : head[0].device();
  return head_loss(head, targets, local_normalization(targets, images, device), options);
}

}  // namespace bareyolo::models
