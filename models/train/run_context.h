// models/train/run_context.h — what the launch resolves for one rank (launch.h), apart from
// what the user asked for (TrainOptions, options.h): where the run's outputs go, which rank
// this process is, its device, the job's communicator and the batch each rank trains.
#pragma once

#include <string>

#include "kernels/view.h"

namespace bareyolo::dist {
struct ProcessGroup;
}

namespace bareyolo::models {

// The batch of a run, derived once from the global batch (--batch, AutoBatch's number for
// --batch -1, or on resume the checkpoint's) and the rank count.
struct BatchPlan {
  int global = 0;      // images per micro-batch over all ranks
  int per_rank = 0;    // global / world size: each rank's loader batch
  int accumulate = 1;  // micro-batches per optimizer step after warm-up (nbs / global, rounded)
};

// Throws std::invalid_argument naming the two nearest valid batches when `global_batch` does
// not split evenly over `world_size` ranks.
BatchPlan plan_batch(int global_batch, int world_size, int nbs);

struct RunContext {
  // The run directory, resolved once (by the launcher or rank 0) and shared with every rank:
  // <project>/<name>[N] for a new run, the checkpoint's run for --resume.
  std::string run_dir;
  int rank = 0, world_size = 1;  // rank 0 alone writes files, prints and fires callbacks
  Device device = Device::cpu();
  dist::ProcessGroup* group = nullptr;  // the job's communicator; null: one process
  BatchPlan batch;                      // plan_batch(options.batch, world_size, options.nbs)
};

}  // namespace bareyolo::models
