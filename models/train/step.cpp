// models/train/step.cpp — see step.h.
#include "models/train/step.h"

#include <stdexcept>

#include "engine/trace.h"

namespace bareyolo::models {

Tensor forward_backward(DetectionModel& model, const Tensor& images,
                        const std::vector<LabelRow>& labels, const LossOptions& options,
                        const DataParallel& parallel, const data::MatchedTargets* matched) {
  const TargetMatcher matcher(model, options);
  const LevelTargets targets = matcher.targets_of(images.shape(), labels, matched);
  const int batch = int(images.shape().n);
  const Device device = images.device();
  const trace::Label counts("loss counts");  // names global_normalization's all-reduce
  const LossNormalization norm = parallel.comm
                                     ? global_normalization(*parallel.comm, targets, batch, device)
                                     : local_normalization(targets, batch, device);
  LossRows rows(device);
  rows.stage(targets, matcher.cells_of(images.shape()));
  return forward_backward(model, images, rows, norm, options, nullptr, parallel);
}

Tensor forward_backward(DetectionModel& model, const Tensor& images, const LossRows& rows,
                        const LossNormalization& norm, const LossOptions& options,
                        const HeadLoss* into, const DataParallel& parallel) {
  const std::vector<Tensor>& head = model.forward(images, Mode::train);
  const HeadLoss loss = [&] {
    const trace::Range traced(trace::Track::compute, "loss");
    return head_loss(head, rows, norm, options, into ? *into : head_loss_buffers(head));
  }();
  if (parallel.reducer)
    model.backward(loss.gradients, [&](int node) { parallel.reducer->node_done(node); });
  else
    model.backward(loss.gradients);
  return loss.loss;
}

}  // namespace bareyolo::models
