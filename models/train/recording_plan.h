// models/train/recording_plan.h — what every rank does with its recorded steps, agreed before
// each step (--cuda-graph on over NCCL: models/train/solver.h).
//
// NCCL's collectives recorded in a CUDA graph are collective to record and to replay: every
// rank records the same ones and replays that recording at the same step. Yet what makes a
// process record again can happen on one rank alone: its loss rows outgrow their buffer, its
// convolution workspace or kernel scratch moves. So before each step every rank proposes {the
// rows' capacity it needs, whether it must record again} and the ranks take the largest of
// each (one all-reduce of two numbers): every rank's rows buffer keeps one size, and all record
// again together. The host reads the result before it launches the step, so the device waits
// between two steps for the all-reduce's round trip and the launch; propose() early and ask
// agreed() late, and the host's own work (packing the rows, uploading the step's numbers) runs
// while the all-reduce waits behind the previous step. A process alone agrees with itself.
#pragma once

#include <cstdint>

#include "engine/distributed/comm/communicator.h"

namespace bareyolo::models {

struct RecordingPlan {
  int64_t rows_capacity = 0;  // the loss rows' buffer holds this many (LossRows::stage)
  bool record_again = false;  // every kind of step records anew
};

class RecordingPlanVote {
 public:
  // This rank's proposal; with `comm` (several ranks recording), all-reduced in the background.
  void propose(dist::Communicator* comm, const RecordingPlan& mine);
  // Every rank's plan: the largest capacity proposed, and whether any rank must record again.
  // Waits for the all-reduce.
  RecordingPlan agreed();

 private:
  int64_t words_[2] = {0, 0};  // the all-reduce's buffer: {capacity, record again}
  dist::WorkHandle work_;
};

}  // namespace bareyolo::models
