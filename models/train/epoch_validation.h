// models/train/epoch_validation.h — the validation at the end of a training epoch: YOLOv5's
// validation (models/eval/validate.h) of the EMA model with the val losses of the same forward,
// sharded over the ranks of a data-parallel job.
//
// Sharded: each rank scores a contiguous share of the validation batches (shard_range), so
// validation time falls with the rank count instead of every other rank waiting for rank 0.
// The shares' statistics are joined on rank 0 (gather_shards), which computes the metrics
// exactly as one process would; the val-loss sums and batch counts are summed over the ranks.
// The caller gives every rank the same model (the trainer sends rank 0's BatchNorm buffers
// first when BN was not synchronised) and broadcasts rank 0's numbers.
#pragma once

#include <utility>

#include "engine/distributed/comm/communicator.h"
#include "models/eval/validate.h"
#include "models/loss/loss.h"

namespace bareyolo::models {

// What the validation of an epoch gives every rank: rank 0 computes them and the others take
// its numbers (ValidationNumbers::from_rank0), so that the best epoch, patience and the stop
// decision are the same everywhere.
struct ValidationNumbers {
  double precision = 0, recall = 0, map50 = 0, map50_95 = 0;
  double box = 0, obj = 0, cls = 0;  // val losses: means over batches, as YOLOv5's val

  void from_rank0(dist::Communicator* comm);  // null: one process, nothing to do
};

// Validates `model` (eval mode) on `dataset`: with options.shards > 1 this rank's share, then
// joined over `comm` (every rank calls it). Rank 0's result and numbers are the whole split's.
std::pair<ValidationResult, ValidationNumbers> validate_with_loss(DetectionModel& model,
                                                                  const data::Dataset& dataset,
                                                                  const ValidationOptions& options,
                                                                  const LossOptions& loss_options,
                                                                  dist::Communicator* comm);

}  // namespace bareyolo::models
