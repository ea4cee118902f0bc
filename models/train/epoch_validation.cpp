// models/train/epoch_validation.cpp — see epoch_validation.h.
#include "models/train/epoch_validation.h"

#include <algorithm>

#include "models/eval/gather_shards.h"
#include "models/loss/head_loss.h"
#include "models/train/step.h"

namespace bareyolo::models {

static_assert(sizeof(ValidationNumbers) == 7 * sizeof(double), "broadcast as 7 doubles");

void ValidationNumbers::from_rank0(dist::Communicator* comm) {
  if (comm) comm->broadcast(dist::CommBuffer::of(&precision, 7), 0, "validation numbers")->wait();
}

std::pair<ValidationResult, ValidationNumbers> validate_with_loss(DetectionModel& model,
                                                                  const data::Dataset& dataset,
                                                                  const ValidationOptions& options,
                                                                  const LossOptions& loss_options,
                                                                  dist::Communicator* comm) {
  // The loss, decode and NMS run where the head is: from a GPU only three sums and the kept
  // detections come back.
  double sums[4] = {0, 0, 0, 0};  // box, obj, cls, batches
  auto predict = [&](const data::Batch& batch) {
    const std::vector<Tensor>& head =
        model.forward(batch.images_tensor(model.device()), Mode::eval);
    const LossValues loss =
        read_loss(head_loss(model, head, batch.labels(), loss_options, batch.size).loss);
    sums[0] += loss.box, sums[1] += loss.obj, sums[2] += loss.cls, sums[3] += 1;
    return detect(head, model, options.nms);
  };
  ValidationResult result = validate(dataset, options, predict, int(model.strides().back()));
  if (options.shards > 1) {
    comm->allreduce(dist::CommBuffer::of(sums, 4), dist::ReduceOp::sum, "validation loss")->wait();
    gather_shards(*comm, result);
  }
  const double batches = std::max(sums[3], 1.0);
  const DetectionMetrics& m = result.metrics;
  const ValidationNumbers numbers{.precision = m.mean_precision,
                                  .recall = m.mean_recall,
                                  .map50 = m.map50,
                                  .map50_95 = m.map50_95,
                                  .box = sums[0] / batches,
                                  .obj = sums[1] / batches,
                                  .cls = sums[2] / batches};
  return {std::move(result), numbers};
}

}  // namespace bareyolo::models
