// models/train/step.cpp — see step.h.
#include "models/train/step.h"

#include "engine/trace.h"

namespace bareyolo::models {

std::vector<LabelRow> batch_labels(const data::Batch& batch) {
  std::vector<LabelRow> labels;
  for (int64_t r = 0; r < batch.num_targets(); ++r) labels.push_back(batch.label(r));
  return labels;
}

Tensor forward_backward(DetectionModel& model, const Tensor& images,
                        const std::vector<LabelRow>& labels, const LossOptions& options,
                        const DataParallel& parallel) {
  const std::vector<Tensor>& head = model.forward(images, Mode::train);
  const HeadLoss loss = [&] {
    const trace::Range traced(trace::Track::compute, "loss");
    const LevelTargets targets = head_targets(model, head, labels, options);
    const int batch = int(images.shape().n);
    const trace::Label counts("loss counts");  // names global_normalization's all-reduce
    const LossNormalization norm =
        parallel.comm ? global_normalization(*parallel.comm, targets, batch, images.device())
                      : local_normalization(targets, batch, images.device());
    return head_loss(head, targets, norm, options);
  }();
  if (parallel.reducer)
    model.backward(loss.gradients, [&](int node) { parallel.reducer->node_done(node); });
  else
    model.backward(loss.gradients);
  return loss.loss;
}

}  // namespace bareyolo::models
