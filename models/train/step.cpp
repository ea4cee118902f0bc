// models/train/step.cpp — see step.h.
#include "models/train/step.h"

#include <stdexcept>

#include "engine/trace.h"

namespace bareyolo::models {

Tensor forward_backward(DetectionModel& model, const Tensor& images,
                        const std::vector<LabelRow>& labels, const LossOptions& options,
                        const DataParallel& parallel, const data::MatchedTargets* matched) {
  const LevelTargets targets =
      TargetMatcher(model, options).targets_of(images.shape(), labels, matched);
  const int batch = int(images.shape().n);
  const trace::Label counts("loss counts");  // names global_normalization's all-reduce
  const LossNormalization norm =
      parallel.comm ? global_normalization(*parallel.comm, targets, batch, images.device())
                    : local_normalization(targets, batch, images.device());
  return forward_backward(model, images, targets, norm, options, parallel);
}

Tensor forward_backward(DetectionModel& model, const Tensor& images, const LevelTargets& targets,
                        const LossNormalization& norm, const LossOptions& options,
                        const DataParallel& parallel) {
  const std::vector<Tensor>& head = model.forward(images, Mode::train);
  const HeadLoss loss = [&] {
    const trace::Range traced(trace::Track::compute, "loss");
    return head_loss(head, targets, norm, options);
  }();
  if (parallel.reducer)
    model.backward(loss.gradients, [&](int node) { parallel.reducer->node_done(node); });
  else
    model.backward(loss.gradients);
  return loss.loss;
}

}  // namespace bareyolo::models
