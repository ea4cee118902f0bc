// models/head_loss.cpp — see head_loss.h.
#include "models/head_loss.h"

namespace bareyolo::models {

HeadLoss head_loss(const DetectionModel& model, const std::vector<Tensor>& head,
                   const std::vector<LabelRow>& labels, const LossOptions& options, int images) {
  std::vector<LevelGrid> grids;
  HeadLoss result;
  std::vector<View<const float>> outputs;
  std::vector<View<float>> gradients;
  for (int level = 0; level < model.num_levels(); ++level) {
    const Tensor& h = head[size_t(level)];
    LevelGrid grid{int(h.shape().h), int(h.shape().w), {}};
    for (int a = 0; a < model.num_anchors(); ++a) grid.anchors.push_back(model.anchor(level, a));
    grids.push_back(grid);
    result.gradients.push_back(Tensor::zeros(h.shape(), h.device(), h.dtype()));
    outputs.push_back(h.view<float>());
    gradients.push_back(result.gradients.back().view<float>());
  }
  const auto targets = build_targets(labels, grids, options.hyp.anchor_t);
  result.values = yolo_loss<float>(outputs, targets, local_normalization(targets, images), options,
                                   gradients);
  return result;
}

}  // namespace bareyolo::models
