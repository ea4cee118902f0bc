// models/train/step.h — one rank's forward and backward of one micro-batch: the part of the
// training step that data parallelism changes. The Solver (solver.h) runs it for every batch;
// AutoBatch's memory probe runs it alone.
//
//   images -> model.forward(train) -> head_targets (this rank's labels matched to the grids,
//             unless the loader's threads matched them already)
//          -> normalisation: this batch's counts on one process; on several ranks the counts
//             summed over all of them, gradient x world (docs/ddp.md, section 5)
//          -> head_loss (this rank's share of the global-batch loss, and its gradient)
//          -> model.backward, whose per-node hook hands finished gradients to the reducer,
//             which all-reduces them in buckets while backward goes on
//             (engine/distributed/ddp/reducer.h)
//
// Whether this micro-batch ends an accumulation (and so communicates) is the reducer's sync
// flag, which the Solver sets; after the backward of a boundary micro-batch it calls
// reducer->finish() before the optimizer step.
#pragma once

#include <vector>

#include "data/batch.h"
#include "engine/distributed/ddp/reducer.h"
#include "models/loss/head_loss.h"

namespace bareyolo::models {

struct DataParallel {
  dist::Communicator* comm = nullptr;  // null: one process
  dist::Reducer* reducer = nullptr;    // null: one process
};

// Returns this rank's loss (its share; the sum over ranks is the global-batch loss) as a loss
// tensor on the model's device (read_loss reads it): nothing here makes the host wait for it.
// `matched`, when given, is `labels` already matched to the input's grids (the loader's
// Batch::matched, made by a TargetMatcher), used as it is; its grids must be the head's.
Tensor forward_backward(DetectionModel& model, const Tensor& images,
                        const std::vector<LabelRow>& labels, const LossOptions& options,
                        const DataParallel& parallel = {},
                        const data::MatchedTargets* matched = nullptr);

// The same with the loss's inputs made before the forward (the Solver's way, so that a step's
// kernels need nothing from the host): `rows` staged for the head's cells (TargetMatcher::
// cells_of), `norm`, the counts the loss divides by, already global when there are several
// ranks, and `into`, where the loss writes (head_loss_buffers for the head's shapes), which the
// caller keeps, or null for new buffers. Returns the loss tensor written.
Tensor forward_backward(DetectionModel& model, const Tensor& images, const LossRows& rows,
                        const LossNormalization& norm, const LossOptions& options,
                        const HeadLoss* into, const DataParallel& parallel = {});

}  // namespace bareyolo::models
