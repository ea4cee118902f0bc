// models/loss/head_loss.cpp — see head_loss.h.
#include "models/loss/head_loss.h"

#include <stdexcept>

#include "engine/distributed/comm/communicator.h"

namespace bareyolo::models {

LevelTargets head_targets(const DetectionModel& model, const std::vector<Tensor>& head,
                          const std::vector<LabelRow>& labels, const LossOptions& options) {
  if (!head.empty()) check_label_rows(labels, int(head[0].shape().n), options.classes);
  std::vector<LevelGrid> grids;
  for (int level = 0; level < model.num_levels(); ++level) {
    const Tensor& h = head[size_t(level)];
    LevelGrid grid{int(h.shape().h), int(h.shape().w), {}};
    for (int a = 0; a < model.num_anchors(); ++a) grid.anchors.push_back(model.anchor(level, a));
    grids.push_back(grid);
  }
  return build_targets(labels, grids, options.hyp.anchor_t);
}

LossNormalization global_normalization(dist::Communicator& comm, const LevelTargets& targets,
                                       int images, const Device& device) {
  LossNormalization norm = local_normalization(targets, images, device);
  comm.allreduce(dist::CommBuffer::of(norm.counts), dist::ReduceOp::sum, "loss counts")->wait();
  norm.gradient_scale = comm.world_size();
  return norm;
}

HeadLoss head_loss(const std::vector<Tensor>& head, const LevelTargets& targets,
                   const LossNormalization& norm, const LossOptions& options) {
  HeadLoss result;
  with_float_type(head.empty() ? DType::f32 : head[0].dtype(), [&]<class T>() {
    std::vector<View<const T>> outputs;
    std::vector<View<T>> gradients;
    for (const Tensor& h : head) {
      result.gradients.push_back(Tensor::zeros(h.shape(), h.device(), h.dtype()));  // loss adds
      outputs.push_back(h.view<T>());
      gradients.push_back(result.gradients.back().view<T>());
    }
    result.loss = yolo_loss<T>(outputs, targets, norm, options, gradients);
  });
  return result;
}

HeadLoss head_loss(const DetectionModel& model, const std::vector<Tensor>& head,
                   const std::vector<LabelRow>& labels, const LossOptions& options, int images) {
  const LevelTargets targets = head_targets(model, head, labels, options);
  const Device device = head.empty() ? Device::cpu() : head[0].device();
  return head_loss(head, targets, local_normalization(targets, images, device), options);
}

}  // namespace bareyolo::models
